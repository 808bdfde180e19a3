"""What the local HDFS and the local YARN share: Hadoop daemons run from Maven Central jars, each a JVM of its own.

Each pair keeps everything in one state folder: the rendered configuration, a pid file and a log
per daemon, and the recorded shape (`<name>.json`) from which `status` and `stop` rebuild it
without flags. A subclass names its daemons and main classes and says how to start and check them.
"""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path
from typing import ClassVar

from eosbench.console.errors import EnvironmentProblem
from eosbench.local.processes import read_pid_file, send_signal, wait_gone, write_pid_file


class HadoopDaemons:
    """Start, stop and inspect Hadoop daemons whose state lives under `settings.state_dir`."""

    NAME: ClassVar[str]  # as messages name it: "HDFS", "YARN"
    SHAPE_FILE: ClassVar[str]  # the recorded shape, in the state folder
    SETTINGS: ClassVar[type]  # the pydantic settings class of the shape
    DAEMONS: ClassVar[tuple[str, ...]]
    MAIN_CLASSES: ClassVar[dict[str, str]]
    STOP_GRACE_S: ClassVar[float]

    def __init__(self, settings=None):
        self.settings = settings or self.SETTINGS()

    @classmethod
    def from_state_dir(cls, state_dir: Path):
        """The daemons last started from this folder (their recorded shape), or None if none were."""
        recorded = state_dir / cls.SHAPE_FILE
        if not recorded.exists():
            return None
        return cls(cls.SETTINGS(**{**json.loads(recorded.read_text()), "state_dir": state_dir}))

    @property
    def _state_file(self) -> Path:
        return self.settings.state_dir / self.SHAPE_FILE

    def _pid_file(self, daemon: str) -> Path:
        return self.settings.state_dir / f"{daemon}.pid"

    def log_file(self, daemon: str) -> Path:
        """A daemon's log (log4j's; its JVM's own output goes to <daemon>.out beside it)."""
        return self.settings.state_dir / "logs" / f"{daemon}.log"

    def pid(self, daemon: str) -> int | None:
        """A daemon's pid, if the process it names is the one this launched and alive."""
        return read_pid_file(self._pid_file(daemon))

    def last_log_line(self, daemon: str) -> str:
        """The last line a daemon logged (its log4j log, else its JVM output), for error messages."""
        for path in (self.log_file(daemon), self.log_file(daemon).with_suffix(".out")):
            try:
                lines = path.read_text(errors="replace").strip().splitlines()
            except OSError:
                continue
            if lines:
                return lines[-1][:300]
        return "no output"

    # ------------------------------------------------------------------ start

    def _write_config(self) -> None:
        """The shape and the site files, rendered into the state folder."""
        self.settings.conf_dir.mkdir(parents=True, exist_ok=True)
        (self.settings.state_dir / "logs").mkdir(exist_ok=True)
        self._state_file.write_text(self.settings.model_dump_json(exclude={"state_dir"}, indent=2))
        for name, text in self.settings.render_site_files().items():
            (self.settings.conf_dir / name).write_text(text)

    def _jvm_options(self, daemon: str) -> list[str]:
        raise NotImplementedError

    def _daemon_environment(self, java: str) -> dict[str, str] | None:
        return None  # the caller's

    def _launch(self, java: str, classpath: str, daemon: str) -> None:
        with open(self.settings.state_dir / "logs" / f"{daemon}.out", "ab") as output:
            process = subprocess.Popen(
                [java, *self._jvm_options(daemon), "-cp", classpath, self.MAIN_CLASSES[daemon]],
                stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT, env=self._daemon_environment(java),
                start_new_session=True,  # the daemon outlives the command that started it
            )
        write_pid_file(self._pid_file(daemon), process.pid)

    # ------------------------------------------------------------------ faults and stop

    def kill(self, daemon: str) -> int:
        """SIGKILL one daemon (a soak fault's first step); return its pid."""
        pid = self.pid(daemon)
        if pid is None:
            raise EnvironmentProblem(f"the {self.NAME} {daemon} is not running")
        send_signal(pid, signal.SIGKILL)
        wait_gone(pid)
        self._pid_file(daemon).unlink(missing_ok=True)
        return pid

    def _stop_daemons(self) -> int:
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
