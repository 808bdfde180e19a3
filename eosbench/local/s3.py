"""A real S3 API on loopback: S3Proxy (one JVM, from Maven Central) over a local folder.

S3Proxy speaks the S3 REST API with AWS v2 and v4 signatures over jclouds' on-disk backend
(`<state_dir>/objects`, a file per object), so Hadoop's S3A connector writes a checkpoint to it
as it would to a bucket on AWS: PUTs of whole objects, folders as marker objects and listings.
A SIGKILLed and restarted server (`restart`, the soak's restart-s3 fault) still holds every
object whose upload completed. The access key and secret are generated on first start and kept
in 0600 files under the state dir (`s3proxy.properties`, the server's, and `s3a.properties`,
the Hadoop settings a client reads), so a restart keeps every client's credentials valid and no
secret ever appears on a command line or in what eosbench prints. The shape (port, heap,
bucket) is kept in `<state_dir>/s3.json`, so `status` and `stop` need no flags.
"""

from __future__ import annotations

import base64
import email.utils
import hashlib
import hmac
import os
import secrets
import shutil
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from conf.local_servers import S3Settings, s3proxy_log_config
from conf.settings import SettingsError, load_properties
from eosbench.console.errors import BadInput, EnvironmentProblem
from eosbench.local.daemons import LocalDaemons
from eosbench.local.jars import resolve_bundle

MAIN_CLASS = "org.gaul.s3proxy.Main"
CHECKPOINT_FILE_MANAGER = "spark.sql.streaming.checkpointFileManagerClass"
# Writes each log entry in place and aborts the upload on cancel, as Spark's documented manager for
# object stores does (streaming/source/jvm/ObjectStoreCheckpointFileManager.java says why ours).
OBJECT_STORE_CHECKPOINT_FILE_MANAGER = "eosbench.spark.ObjectStoreCheckpointFileManager"


@dataclass(frozen=True)
class S3Status:
    """What is true of the server right now."""

    pid: int | None
    listening: bool
    bucket_answers: bool  # a signed HEAD of the bucket returned 200


def write_private(path: Path, text: str) -> None:
    """Write a file that only its owner may read, created so (never briefly readable by others)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        handle.write(text)
    os.chmod(path, 0o600)  # an older file keeps its mode through O_CREAT


def render_properties(values: dict[str, str]) -> str:
    """Java properties text, one `key=value` a line (values here hold no characters that need escaping)."""
    return "".join(f"{key}={value}\n" for key, value in values.items())


def sign_v2(secret_key: str, method: str, resource: str, date: str) -> str:
    """AWS signature version 2 of a request with no body, content type or x-amz headers."""
    to_sign = f"{method}\n\n\n{date}\n{resource}"  # verb, Content-MD5, Content-Type, Date, resource
    return base64.b64encode(hmac.new(secret_key.encode(), to_sign.encode(), hashlib.sha1).digest()).decode()


class LocalS3(LocalDaemons):
    """Start, stop, inspect and break the local S3 server described by an S3Settings."""

    NAME, SHAPE_FILE, SETTINGS, BUNDLE = "S3", "s3.json", S3Settings, "s3proxy"
    DAEMONS, MAIN_CLASSES, STOP_GRACE_S, READY_TIMEOUT_S = ("s3proxy",), {"s3proxy": MAIN_CLASS}, 15.0, 90.0
    SHAPE_IN_USE = ("an S3 server on port {port} with bucket {bucket!r} is running from {state_dir};"
                    " run `eosbench s3 stop` first")
    EXITED, NOT_RUNNING = "S3Proxy exited during start-up: {last}", "the S3 server is not running"
    LOG_SUFFIX = ".out"  # logback writes to the console only

    @property
    def _server_properties(self) -> Path:
        return self.settings.state_dir / "s3proxy.properties"

    def credentials(self) -> tuple[str, str]:
        """(access key, secret key) from the credentials file; EnvironmentProblem if it was never written."""
        try:
            values = load_properties(self.settings.credentials_file)
            return values["fs.s3a.access.key"], values["fs.s3a.secret.key"]
        except (SettingsError, KeyError):
            raise EnvironmentProblem(f"no S3 credentials in {self.settings.credentials_file};"
                                     " run `eosbench s3 start` first") from None

    # ------------------------------------------------------------------ status

    def _bucket_request(self, method: str) -> int | None:
        """The HTTP status of a bodiless request on the bucket, signed with the kept keys; None if nothing answers."""
        try:
            access_key, secret_key = self.credentials()
        except EnvironmentProblem:
            return None
        date = email.utils.formatdate(usegmt=True)
        resource = f"/{self.settings.bucket}"
        request = urllib.request.Request(f"{self.settings.endpoint}{resource}", method=method, headers={
            "Date": date, "Authorization": f"AWS {access_key}:{sign_v2(secret_key, method, resource, date)}"})
        try:
            with urllib.request.urlopen(request, timeout=2) as reply:
                return reply.status
        except urllib.error.HTTPError as exc:
            return exc.code
        except OSError:
            return None

    def bucket_answers(self) -> bool:
        """Whether a HEAD of the bucket, signed with the kept keys, returns 200 (the server is up and usable)."""
        return self._bucket_request("HEAD") == 200

    def ready(self) -> bool:
        """Whether clients can use it: its bucket answers."""
        return self.bucket_answers()

    def status(self) -> S3Status:
        """The server's pid when running, whether its port accepts connections and whether its bucket answers."""
        (server,) = super().status()
        return S3Status(server.pid, server.listening, server.listening and self.bucket_answers())

    def _ports(self, daemon: str) -> list[int]:
        return [self.settings.port]

    def _main_port(self, daemon: str) -> int:
        return self.settings.port

    def _not_ready_problem(self) -> str:
        return (f"the S3 bucket {self.settings.bucket!r} does not answer after {self.READY_TIMEOUT_S:g} s;"
                f" see {self.log_file()}")

    # ------------------------------------------------------------------ start

    def _write_files(self) -> None:
        state = self.settings.state_dir
        self.settings.objects_dir.mkdir(exist_ok=True)  # jclouds' on-disk backend needs its folder
        os.chmod(state, 0o700)  # the data and both key files live here
        try:
            access_key, secret_key = self.credentials()
        except EnvironmentProblem:
            # Generated once: a restarted server keeps the keys its clients already hold.
            access_key, secret_key = "EOSB" + secrets.token_hex(8).upper(), secrets.token_urlsafe(30)
        write_private(self._server_properties, self.settings.render_server_properties(access_key, secret_key))
        write_private(self.settings.credentials_file,
                      "# S3A's settings for the local S3 (eosbench s3); secret: readable by its owner only.\n"
                      + render_properties(self.settings.s3a_properties(access_key, secret_key)))

    def _logging_options(self, daemon: str) -> list[str]:
        return [f"-Dlogback.configurationFile={s3proxy_log_config()}"]

    def _main_arguments(self, daemon: str) -> list[str]:
        return ["--properties", str(self._server_properties)]

    def _while_waiting(self) -> None:
        # A new server holds no bucket: create it (409 says it is there already).
        if self._bucket_request("HEAD") == 404:
            self._bucket_request("PUT")

    # ------------------------------------------------------------------ faults and stop

    def restart(self, pause_s: float = 0.0, wipe: bool = False) -> int:
        """SIGKILL the server, wait `pause_s`, start it again and wait until its bucket answers; return the killed pid.

        The objects are files, so the restarted server holds every one whose upload had completed;
        `wipe=True` empties the bucket as well, which is a lost checkpoint.
        """
        pid = self.kill()
        if wipe:
            shutil.rmtree(self.settings.objects_dir, ignore_errors=True)
        time.sleep(pause_s)
        self.start()
        return pid


def s3a_session_conf(config_file: Path) -> dict[str, str]:
    """Spark settings (`spark.hadoop.fs.s3a.*`) from a file of S3A's Hadoop properties, as `eosbench s3` writes one.

    Read from a file, as Kafka's --command-config is, so that the keys are on no command line;
    Spark hides the values of `…secret…` and `…access.key` settings wherever it shows them
    (streaming/session.py's redaction). A key that is not S3A's is refused, by name only.
    """
    try:
        values = load_properties(config_file)
    except SettingsError as exc:
        raise BadInput(f"--s3a-config: {exc}") from None
    foreign = sorted(key for key in values if not key.startswith("fs.s3a."))
    if foreign:
        raise BadInput(f"--s3a-config {config_file}: only fs.s3a.* settings belong here, not {', '.join(foreign)}")
    return {f"spark.hadoop.{key}": value for key, value in values.items()}


def s3a_checkpoint_session(checkpoint_uri: str, config_file: Path | None) -> tuple[list[Path], dict[str, str]]:
    """The extra jars and Spark settings a checkpoint needs: hadoop-aws, the SDK and S3A's settings for s3a://, else none.

    Without --s3a-config, the settings file of the local `eosbench s3` (default state folder) is
    used if there is one, else the checkpoint is refused: S3A's own defaults would reach for AWS.
    """
    if not checkpoint_uri.startswith("s3a://"):
        if config_file is not None:
            raise BadInput(f"--s3a-config is for an s3a:// checkpoint; --checkpoint is {checkpoint_uri}")
        return [], {}
    if config_file is None:
        config_file = S3Settings().credentials_file
        if not config_file.exists():
            raise BadInput(f"--checkpoint {checkpoint_uri} needs --s3a-config FILE (S3A's fs.s3a.* settings: endpoint,"
                           " keys), or a local `eosbench s3 start`, whose file is then used")
    return resolve_bundle("s3a"), {CHECKPOINT_FILE_MANAGER: OBJECT_STORE_CHECKPOINT_FILE_MANAGER,
                                   **s3a_session_conf(config_file)}
