"""What the local HDFS, YARN and S3 share: servers of one or more JVM daemons run from Maven Central jars.

Each server keeps everything in one state folder: its rendered configuration, a pid file and a
log per daemon, and the recorded shape (`<name>.json`) from which `status` and `stop` rebuild it
without flags. A subclass names its daemons, main classes and messages, and says what to write,
how to start each daemon and when the server is ready; HadoopDaemons adds what the two Hadoop
servers have in common (site files, their folder first on the classpath, log4j).
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from eosbench.console.errors import BadInput, EnvironmentProblem
from eosbench.local.environment import check_java, check_ports_free, port_accepts_connections
from eosbench.local.jars import resolve_bundle
from eosbench.local.processes import read_pid_file, send_signal, wait_gone, write_pid_file


@dataclass(frozen=True)
class DaemonStatus:
    """What is true of one daemon right now."""

    name: str
    pid: int | None
    port: int
    listening: bool


class LocalDaemons:
    """Start, stop and inspect JVM daemons whose state lives under `settings.state_dir`."""

    NAME: ClassVar[str]  # as messages name the server: "HDFS", "YARN", "S3"
    SHAPE_FILE: ClassVar[str]  # the recorded shape, in the state folder
    SETTINGS: ClassVar[type]  # the pydantic settings class of the shape
    BUNDLE: ClassVar[str]  # the jar bundle (conf/jars.yaml) the daemons run from
    DAEMONS: ClassVar[tuple[str, ...]]
    MAIN_CLASSES: ClassVar[dict[str, str]]
    STOP_GRACE_S: ClassVar[float]
    READY_TIMEOUT_S: ClassVar[float]
    # What start and kill say. SHAPE_IN_USE is filled from the recorded shape and {state_dir},
    # EXITED from {name}, {daemon} and {last} (the daemon's last log line), NOT_RUNNING from the first two.
    SHAPE_IN_USE: ClassVar[str]
    EXITED: ClassVar[str] = "the {name} {daemon} exited during start-up: {last}"
    NOT_RUNNING: ClassVar[str] = "the {name} {daemon} is not running"
    LOG_SUFFIX: ClassVar[str] = ".log"  # a daemon's own log, beside its JVM's output (<daemon>.out)

    def __init__(self, settings=None):
        self.settings = settings or self.SETTINGS()

    @classmethod
    def from_state_dir(cls, state_dir: Path):
        """The server last started from this folder (its recorded shape), or None if none was."""
        recorded = state_dir / cls.SHAPE_FILE
        if not recorded.exists():
            return None
        return cls(cls.SETTINGS(**{**json.loads(recorded.read_text()), "state_dir": state_dir}))

    @property
    def _state_file(self) -> Path:
        return self.settings.state_dir / self.SHAPE_FILE

    def _daemon(self, daemon: str | None) -> str:
        if daemon is not None:
            return daemon
        (only,) = self.DAEMONS  # only a server of one daemon may leave it unnamed
        return only

    def _pid_file(self, daemon: str) -> Path:
        return self.settings.state_dir / f"{daemon}.pid"

    def _output_file(self, daemon: str) -> Path:
        return self.settings.state_dir / "logs" / f"{daemon}.out"

    def log_file(self, daemon: str | None = None) -> Path:
        """A daemon's log (the only one's if none is named; for one that logs to its console only, its JVM output)."""
        return self.settings.state_dir / "logs" / f"{self._daemon(daemon)}{self.LOG_SUFFIX}"

    def pid(self, daemon: str | None = None) -> int | None:
        """A daemon's pid (the only one's if none is named), if the process it names is the one this launched and alive."""
        return read_pid_file(self._pid_file(self._daemon(daemon)))

    def last_log_line(self, daemon: str | None = None) -> str:
        """The last line a daemon logged (its log, else its JVM output; the only one's if none is named), for error messages."""
        daemon = self._daemon(daemon)
        for path in dict.fromkeys((self.log_file(daemon), self._output_file(daemon))):
            try:
                lines = path.read_text(errors="replace").strip().splitlines()
            except OSError:
                continue
            if lines:
                return lines[-1][:300]
        return "no output"

    # ------------------------------------------------------------------ status

    def _ports(self, daemon: str) -> list[int]:
        """Every port a daemon listens on (checked free before it starts)."""
        raise NotImplementedError

    def _main_port(self, daemon: str) -> int:
        """The port whose answer says a daemon is up."""
        raise NotImplementedError

    def status(self) -> list[DaemonStatus]:
        """Every daemon, with its pid when running and whether its main port accepts connections."""
        return [DaemonStatus(daemon, self.pid(daemon), self._main_port(daemon),
                             port_accepts_connections(self._main_port(daemon))) for daemon in self.DAEMONS]

    def ready(self) -> bool:
        """Whether clients can use the server (what `start` waits for)."""
        raise NotImplementedError

    def _not_ready_problem(self) -> str:
        """What `start` says when the server is not ready in time."""
        raise NotImplementedError

    # ------------------------------------------------------------------ start

    def start(self, fresh: bool = False) -> float:
        """Start whichever daemon is not running and wait until the server is ready; return seconds."""
        started = time.monotonic()
        if fresh:
            self.stop()
            shutil.rmtree(self.settings.state_dir, ignore_errors=True)
        self._check_shape()
        to_start = [daemon for daemon in self.DAEMONS if self.pid(daemon) is None]
        if to_start:
            java = check_java()
            check_ports_free([port for daemon in to_start for port in self._ports(daemon)], self.NAME)
            classpath = self._classpath()
            self._write_config()
            self._launch_all(java, classpath, to_start)
        self._wait_ready()
        return time.monotonic() - started

    def _check_shape(self) -> None:
        """Refuse to start another shape over daemons still running from this folder."""
        if not self._state_file.exists():
            return
        recorded = json.loads(self._state_file.read_text())
        if recorded != self.settings.model_dump(mode="json", exclude={"state_dir"}) and any(map(self.pid, self.DAEMONS)):
            raise BadInput(self.SHAPE_IN_USE.format(**recorded, state_dir=self.settings.state_dir))

    def _classpath(self) -> str:
        return str(resolve_bundle(self.BUNDLE)[0].parent / "*")

    def _write_config(self) -> None:
        """The logs folder, the server's own files, then the shape they were written for."""
        (self.settings.state_dir / "logs").mkdir(parents=True, exist_ok=True)
        self._write_files()
        self._state_file.write_text(self.settings.model_dump_json(exclude={"state_dir"}, indent=2))

    def _write_files(self) -> None:
        """What the daemons read besides their command line, rendered into the state folder."""

    def _jvm_options(self, daemon: str, heap_mb: int | None = None) -> list[str]:
        heap_mb = heap_mb or self.settings.heap_mb
        return [f"-Xms{min(64, heap_mb)}m", f"-Xmx{heap_mb}m", "-XX:+UseSerialGC",
                # C1 only: these servers move a checkpoint's few small files a batch or wait on heartbeats,
                # and the JIT's second tier would spend start-up CPU that the two-core machine does not have.
                "-XX:TieredStopAtLevel=1", *self._logging_options(daemon)]

    def _logging_options(self, daemon: str) -> list[str]:
        """The JVM options that set where and how a daemon logs."""
        raise NotImplementedError

    def _main_arguments(self, daemon: str) -> list[str]:
        return []

    def _daemon_environment(self, java: str) -> dict[str, str] | None:
        return None  # the caller's

    def _launch_all(self, java: str, classpath: str, daemons: list[str]) -> None:
        for daemon in daemons:
            self._launch(java, classpath, daemon)

    def _launch(self, java: str, classpath: str, daemon: str) -> None:
        with open(self._output_file(daemon), "ab") as output:
            process = subprocess.Popen(
                [java, *self._jvm_options(daemon), "-cp", classpath, self.MAIN_CLASSES[daemon],
                 *self._main_arguments(daemon)],
                stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT, env=self._daemon_environment(java),
                start_new_session=True,  # the daemon outlives the command that started it
            )
        write_pid_file(self._pid_file(daemon), process.pid)

    def _while_waiting(self) -> None:
        """What `start` does between two looks at `ready` (nothing, unless the server needs a push)."""

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.READY_TIMEOUT_S
        while not self.ready():
            self._while_waiting()
            for daemon in self.DAEMONS:
                if self.pid(daemon) is None:
                    raise EnvironmentProblem(self.EXITED.format(name=self.NAME, daemon=daemon,
                                                                last=self.last_log_line(daemon)))
            if time.monotonic() > deadline:
                raise EnvironmentProblem(self._not_ready_problem())
            time.sleep(0.2)

    # ------------------------------------------------------------------ faults and stop

    def kill(self, daemon: str | None = None) -> int:
        """SIGKILL one daemon (the only one if none is named; a soak fault's first step); return its pid."""
        daemon = self._daemon(daemon)
        pid = self.pid(daemon)
        if pid is None:
            raise EnvironmentProblem(self.NOT_RUNNING.format(name=self.NAME, daemon=daemon))
        send_signal(pid, signal.SIGKILL)
        wait_gone(pid)
        self._pid_file(daemon).unlink(missing_ok=True)
        return pid

    def stop(self) -> int:
        """SIGTERM every daemon, SIGKILL what outlives STOP_GRACE_S, drop the pid files; return how many were running."""
        running = {daemon: pid for daemon in self.DAEMONS if (pid := self.pid(daemon)) is not None}
        for pid in running.values():
            send_signal(pid, signal.SIGTERM)
        for pid in running.values():
            wait_gone(pid, timeout_s=self.STOP_GRACE_S)
            send_signal(pid, signal.SIGKILL)
            wait_gone(pid)
        for daemon in self.DAEMONS:
            self._pid_file(daemon).unlink(missing_ok=True)
        return len(running)


class HadoopDaemons(LocalDaemons):
    """The local HDFS's and YARN's common ground: site files in `settings.conf_dir`, read first, and log4j."""

    LOG4J_PREFIX: ClassVar[str]  # the log4j configuration's own properties: <prefix>.log.dir, <prefix>.log.file

    def _ports(self, daemon: str) -> list[int]:
        return list(self.settings.ports.of_daemon(daemon).values())

    def _main_port(self, daemon: str) -> int:
        return getattr(self.settings.ports, daemon)  # each Ports class names a daemon's main port after it

    def _classpath(self) -> str:
        return f"{self.settings.conf_dir}:{super()._classpath()}"

    def _write_files(self) -> None:
        self.settings.conf_dir.mkdir(parents=True, exist_ok=True)
        for name, text in self.settings.render_site_files().items():
            (self.settings.conf_dir / name).write_text(text)

    def _log4j_config(self) -> Path:
        raise NotImplementedError

    def _logging_options(self, daemon: str) -> list[str]:
        logs = self.settings.state_dir / "logs"
        return ["-Djava.awt.headless=true", f"-Dlog4j.configuration=file:{self._log4j_config()}",
                f"-D{self.LOG4J_PREFIX}.log.dir={logs}", f"-D{self.LOG4J_PREFIX}.log.file={daemon}.log",
                f"-Dhadoop.log.dir={logs}"]
