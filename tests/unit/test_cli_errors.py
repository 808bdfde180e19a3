"""Bad input and a bad environment end in one line on stderr and a non-zero exit, never a traceback.

These run the real `eosbench` command in a subprocess, with no broker anywhere.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from eosbench.console.errors import EXIT_BAD_INPUT, EXIT_ENVIRONMENT
from tests.unit.fake_maven import fake_maven


def free_port() -> int:
    """Return a loopback port nobody listens on right now (with its +100/+200 siblings free)."""
    while True:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        if port < 60000:
            return port


def run_eosbench(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run `python -m eosbench.cli ARGS` and capture its output."""
    return subprocess.run(
        [sys.executable, "-m", "eosbench.cli", *args],
        capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})},
    )


def assert_one_line_error(completed: subprocess.CompletedProcess, exit_code: int, *fragments: str) -> None:
    """The run failed with `exit_code`; stderr ends with its only error line, naming every fragment.

    Progress lines ("starting 1 broker(s)...") may come before it; a traceback may not.
    """
    assert completed.returncode == exit_code, completed.stderr
    assert "Traceback" not in completed.stderr
    lines = [line for line in completed.stderr.splitlines() if line.strip()]
    errors = [line for line in lines if ": error: " in line]
    assert errors == lines[-1:], completed.stderr
    for fragment in fragments:
        assert fragment in errors[0]


def test_java_missing(tmp_path: Path):
    env = {"PATH": str(tmp_path), "JAVA_HOME": ""}
    completed = run_eosbench("broker", "start", "--state-dir", str(tmp_path / "c"), "--port", str(free_port()), env=env)
    assert_one_line_error(completed, EXIT_ENVIRONMENT, "java not found", "Java 17+")


def test_java_too_old(tmp_path: Path):
    fake_java = tmp_path / "java"
    fake_java.write_text('#!/bin/sh\necho \'openjdk version "11.0.2" 2019-01-15\' >&2\n')
    fake_java.chmod(0o755)
    env = {"PATH": f"{tmp_path}:{os.environ['PATH']}", "JAVA_HOME": ""}
    completed = run_eosbench("broker", "start", "--state-dir", str(tmp_path / "c"), "--port", str(free_port()), env=env)
    assert_one_line_error(completed, EXIT_ENVIRONMENT, "is Java 11", "needs Java 17+")


def test_jars_unresolvable_when_maven_is_offline_with_an_empty_cache(tmp_path: Path):
    env = {
        "EOSBENCH_HOME": str(tmp_path / "home"),
        "EOSBENCH_MAVEN_REPO": str(tmp_path / "empty-m2"),
        "EOSBENCH_MAVEN_OFFLINE": "1",
    }
    completed = run_eosbench("broker", "start", "--state-dir", str(tmp_path / "c"), "--port", str(free_port()), env=env)
    assert_one_line_error(completed, EXIT_ENVIRONMENT, "eosbench: error: could not resolve the kafka jars with Maven:")
    assert "offline" in completed.stderr.strip().splitlines()[-1].lower()
    assert not list((tmp_path / "home" / "jars").glob("kafka-*/*.jar")), "a failed resolution must not look cached"


def test_a_lazy_bundle_that_maven_cannot_resolve_is_one_line_after_its_progress_line(tmp_path: Path):
    bin_dir, calls = fake_maven(tmp_path / "bin")
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "FAKE_MAVEN_LOG": str(calls), "FAKE_MAVEN_FAIL": "1",
           "EOSBENCH_HOME": str(tmp_path / "home"), "EOSBENCH_MAVEN_OFFLINE": ""}
    completed = run_eosbench("s3", "start", "--s3-state-dir", str(tmp_path / "s3"), "--port", str(free_port()), env=env)
    assert_one_line_error(completed, EXIT_ENVIRONMENT, "eosbench: error: could not resolve the s3proxy jars with Maven:",
                          "Temporary failure in name resolution")
    progress = completed.stderr.strip().splitlines()[-2]
    assert progress.startswith("eosbench: fetching the s3proxy bundle from Maven Central (once)… failed after ")
    assert "<artifactId>s3proxy</artifactId>" in calls.read_text()


def test_port_already_in_use(tmp_path: Path):
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        completed = run_eosbench("broker", "start", "--state-dir", str(tmp_path / "c"), "--port", str(port))
    assert_one_line_error(completed, EXIT_ENVIRONMENT, f"port {port} on 127.0.0.1 is already in use")


UNREACHABLE = {"topics-describe": ["topics", "describe", "t"], "topics-create": ["topics", "create", "t"],
               "demo": ["demo"]}


@pytest.fixture(scope="module")
def unreachable_runs() -> dict[str, subprocess.CompletedProcess]:
    """Each command of UNREACHABLE against a port nobody listens on, all at once: each spends the
    command line's whole reachability timeout waiting, and they need not wait in turn."""
    with ThreadPoolExecutor(len(UNREACHABLE)) as pool:
        runs = {name: pool.submit(run_eosbench, *command, "--bootstrap-server", f"127.0.0.1:{free_port()}")
                for name, command in UNREACHABLE.items()}
        return {name: run.result() for name, run in runs.items()}


@pytest.mark.parametrize("command", UNREACHABLE)
def test_broker_unreachable(unreachable_runs, command):
    assert_one_line_error(unreachable_runs[command], EXIT_ENVIRONMENT, "cannot reach Kafka at 127.0.0.1:",
                          "eosbench broker start")


@pytest.mark.parametrize(
    "args,fragment",
    [
        (["broker", "start", "--brokers", "2"], "invalid choice: 2"),
        (["broker", "start", "--heap-mb", "8192"], "--heap-mb"),
        (["broker", "frobnicate"], "invalid choice: 'frobnicate'"),
        (["topics", "create", "t", "--partitions", "0"], "must be at least 1"),
        (["demo", "--abort-ratio", "1.5"], "--transaction-abort-ratio must lie in [0.0, 1.0]"),
        (["soak", "--duration", "0"], "a duration must be positive"),
        (["soak", "--duration", "ten"], "not a duration: 'ten'"),
        (["soak", "--duration", "1m", "--faults", "kill-driver,unplug"], "--faults: unknown fault 'unplug'"),
        (["soak", "--duration", "1m", "--faults", "kill-worker"], "kill-worker needs a standalone master"),
        (["soak", "--duration", "1m", "--faults", "add-partitions", "--trigger", "realtime:5 seconds"],
         "--faults add-partitions is tried in micro-batch mode only"),
        (["soak", "--duration", "1m", "--faults", "add-partitions", "--pipeline", "flink"],
         "--faults add-partitions: a Spark-only fault, and --pipeline flink runs no Spark"),
        (["soak", "--duration", "1m", "--faults", "zombie-executor"],
         "--faults zombie-executor needs a standalone master (--master spark://…): on --master local[2,4] the tasks"
         " run in the driver's own JVM, which the restart kills"),
        (["soak", "--duration", "1m", "--faults", "zombie-executor", "--master", "yarn"],
         "--faults zombie-executor: YARN kills a dead application's containers, paused or not"),
        (["soak", "--duration", "1m", "--faults", "zombie-executor", "--master", "spark://127.0.0.1:7077", "--trigger",
          "realtime:5 seconds"], "--faults zombie-executor: with --trigger realtime:5 seconds the tasks run in the"
                                 " executor's JVM"),
        (["soak", "--duration", "1m", "--faults", "restart-hdfs"],
         "--faults restart-hdfs needs the checkpoint on the soak's own HDFS: add --hdfs (it runs hdfs://127.0.0.1:8020)"),
        (["soak", "--duration", "1m", "--faults", "restart-hdfs", "--hdfs", "--hdfs-port", "18020", "--checkpoint",
          "hdfs://127.0.0.1:8020/soak"], "--faults restart-hdfs needs the checkpoint on the soak's own HDFS"
                                         " (hdfs://127.0.0.1:18020), not --checkpoint hdfs://127.0.0.1:8020/soak"),
        (["soak", "--duration", "1m", "--faults", "kill-driver,kill-container"],
         "--faults kill-container needs --master yarn (see `eosbench yarn start`), and this soak runs --master local[2,4]"),
        (["soak", "--duration", "1m", "--faults", "restart-nodemanager", "--master", "spark://127.0.0.1:7077"],
         "--faults restart-nodemanager needs --master yarn (see `eosbench yarn start`), and this soak runs"
         " --master spark://127.0.0.1:7077"),
        (["soak", "--duration", "1m", "--yarn-state-dir", "/tmp/no-yarn"],
         "--yarn-state-dir names the YARN of --master yarn, and this soak runs --master local[2,4]"),
        (["soak", "--duration", "1m", "--txn-scope", "batch", "--txn-slots", "2,3"],
         "--txn-slots is slot scope's slot count, and this soak runs --txn-scope batch: use --txn-scope slot"),
        (["soak", "--duration", "1m", "--txn-scope", "slot", "--txn-slots", "2,0"], "must be at least 1, got 0"),
        (["soak", "--duration", "1m", "--checkpoint", "ftp://host/ckpt"], "--checkpoint ftp://host/ckpt: unsupported scheme 'ftp'"),
        (["soak", "--duration", "1m", "--faults", "restart-s3"],
         "--faults restart-s3 needs the checkpoint on the local S3: --checkpoint s3a://<bucket>/… (see `eosbench s3 start`)"),
        (["soak", "--duration", "1m", "--faults", "restart-s3", "--checkpoint", "s3a://b/soak", "--s3a-config",
          "/etc/hostname"], "--faults restart-s3 restarts the local `eosbench s3` (--s3-state-dir), not the store"
                            " --s3a-config /etc/hostname names"),
        (["soak", "--duration", "1m", "--s3-state-dir", "/tmp/s3"],
         "--s3-state-dir is for an s3a:// checkpoint; --checkpoint is the run folder"),
        (["soak", "--duration", "1m", "--checkpoint", "s3a://b/soak", "--s3a-config", "/no/such/s3a.properties"],
         "--s3a-config /no/such/s3a.properties: no such file"),
        (["bench", "checkpoint", "--s3-bucket", "eosbench"], "--s3-bucket must be an s3a:// URI, got 'eosbench'"),
        (["soak", "--duration", "1m", "--max-faults", "0"], "--max-faults: must be at least 1"),
        (["soak", "--duration", "1m", "--pipeline", "java-copier", "--faults", "kill-driver,delete-checkpoint"],
         "--faults delete-checkpoint: a Spark-only fault, and --pipeline java-copier runs no Spark"),
        (["soak", "--duration", "1m", "--pipeline", "flink", "--faults", "kill-driver,kill-executor"],
         "--faults kill-executor: a Spark-only fault, and --pipeline flink runs no Spark (Flink's TaskManagers run"
         " inside the job's own JVM on its local MiniCluster: kill-driver kills them)"),
        (["soak", "--duration", "1m", "--pipeline", "kafka-streams", "--source", "grouped", "--faults", "kill-driver"],
         "--source grouped is the Spark job's; --pipeline kafka-streams runs no Spark"),
        (["soak", "--duration", "1m", "--pipeline", "java-copier", "--faults", "kill-driver", "--security", "sasl-ssl"],
         "--pipeline java-copier: Kafka's TransactionalMessageCopier takes no client settings; run it on a plaintext"
         " cluster (no --security sasl-ssl, no --command-config)"),
        (["soak", "--duration", "1m", "--brokers", "3", "--port", "9800", "--metrics-port", "9900"],
         "--metrics-port 9900: the soak serves /metrics on 9900-9902, and 9900 is the cluster's controller port of node 1"),
        (["bench", "sweep", "--workload", "no/such/workload.yaml"], "cannot read workload no/such/workload.yaml"),
        (["bench", "streaming", "--poll-timeout", "0"], "must be at least 1"),
        (["bench", "writes", "--iterations", "1.5"], "--iterations: must be a whole number, got '1.5'"),
        (["bench", "spark", "--trigger-seconds", "-1"], "--trigger-seconds: must be at least 0, got -1"),
        (["bench", "spark", "--master", "yarn-cluster"],
         "argument --master: must be local[N], spark://HOST:PORT or yarn, got 'yarn-cluster'"),
        (["bench", "spark", "--master", "spark://127.0.0.1"],
         "argument --master: must be local[N], spark://HOST:PORT or yarn, got 'spark://127.0.0.1'"),
        (["bench", "latency", "--master", "yarn"],
         "bench latency runs on local[N] or spark://HOST:PORT; --master yarn is for bench spark and stream"),
        (["report", "--results-dir", "no/such/results"], "no results table in no/such/results"),
        (["acls", "--app-id", "a", "--principal", "alice", "--input-topic", "i", "--output-topic", "o"],
         "--principal must look like User:NAME, got 'alice'"),
        (["stream", "--input-topic", "i", "--output-topic", "o", "--source-options", "startingOffsets=latest"],
         "--source-options startingOffsets: set by the job (--starting-offsets)"),
        (["stream", "--input-topic", "i", "--output-topic", "o", "--offsets-retention-minutes", "0"],
         "--offsets-retention-minutes must be at least 1"),
        (["stream", "--input-topic", "i", "--output-topic", "o", "--pre-register-partitions", "--sink-client",
          "librdkafka"], "--pre-register-partitions needs --sink-client kafka-python: librdkafka has no call to register"
                         " partitions before the first send"),
        (["stream", "--input-topic", "i", "--output-topic", "o", "--sink", "kafka-alo", "--sink-client", "kafka-python"],
         "--sink-client applies to --sink kafka-eos only"),
        (["stream", "--input-topic", "i", "--output-topic", "o", "--checkpoint", "gs://bucket/ck"],
         "--checkpoint gs://bucket/ck: unsupported scheme 'gs' (use a local path or a file://, hdfs://, s3a://,"
         " abfs://, abfss:// URI)"),
        (["stream", "--input-topic", "i", "--output-topic", "o", "--checkpoint", "hdfs://nn:port/ck"],
         "--checkpoint hdfs://nn:port/ck: the port of 'nn:port' is not a number"),
        (["bench", "protocol", "--engines", "java-tv3"], "argument --engines: invalid choice: 'java-tv3'"),
        (["bench", "protocol", "--sizes", "0"], "--sizes: must be at least 1"),
    ],
)
def test_bad_input_exits_2(tmp_path: Path, args, fragment):
    completed = run_eosbench(*args, "--state-dir", str(tmp_path)) if args[0] == "broker" else run_eosbench(*args)
    assert_one_line_error(completed, EXIT_BAD_INPUT, fragment)


def test_a_yarn_soak_without_a_running_yarn_ends_in_one_line_before_any_broker_starts(tmp_path: Path):
    # No `eosbench yarn start` ran in the folder: found as `stream --master yarn` finds YARN, and refused as it is.
    completed = run_eosbench("soak", "--duration", "1m", "--master", "yarn", "--yarn-state-dir", str(tmp_path / "yarn"),
                             "--faults", "kill-container", "--state-dir", str(tmp_path / "kafka"),
                             env={"HADOOP_CONF_DIR": ""})
    assert_one_line_error(completed, EXIT_ENVIRONMENT, "--master yarn needs HADOOP_CONF_DIR or a local YARN",
                          f"no `eosbench yarn start` ran in {tmp_path / 'yarn'}")
    assert not (tmp_path / "kafka").exists()


def test_status_of_a_cluster_never_started_is_stopped_with_exit_1(tmp_path: Path):
    completed = run_eosbench("broker", "status", "--state-dir", str(tmp_path))
    assert completed.returncode == 1
    assert completed.stdout.startswith("stopped")


def test_stop_is_idempotent_when_nothing_runs(tmp_path: Path):
    for _ in range(2):
        completed = run_eosbench("broker", "stop", "--state-dir", str(tmp_path))
        assert completed.returncode == 0
        assert completed.stdout.strip() == "no broker running"


def test_a_stop_signal_that_surfaces_as_a_library_error_still_exits_as_interrupted(monkeypatch):
    from eosbench import cli
    from eosbench.console import errors

    def stopped_inside_a_client(_args):
        os.kill(os.getpid(), signal.SIGTERM)  # the handler raises KeyboardInterrupt here...
        raise AssertionError("unreachable")

    def converted_by_the_client(_args):
        try:
            stopped_inside_a_client(_args)
        except KeyboardInterrupt:  # ...which a C extension may turn into an error of its own
            raise TypeError("expected configuration property name as type unicode string") from None

    saved = {signum: signal.getsignal(signum) for signum in (signal.SIGTERM, signal.SIGINT)}
    try:
        errors.interrupt_on_stop_signals()
        monkeypatch.setitem(cli.HANDLERS, "demo", stopped_inside_a_client)
        assert cli.main(["demo"]) == errors.EXIT_INTERRUPTED
        monkeypatch.setitem(cli.HANDLERS, "demo", converted_by_the_client)
        assert cli.main(["demo"]) == errors.EXIT_INTERRUPTED
        errors.STOP_REQUESTED.clear()
        monkeypatch.setitem(cli.HANDLERS, "demo", lambda _args: {}["no stop was asked for"])
        assert cli.main(["demo"]) == EXIT_ENVIRONMENT
    finally:
        errors.STOP_REQUESTED.clear()
        for signum, handler in saved.items():
            signal.signal(signum, handler)
