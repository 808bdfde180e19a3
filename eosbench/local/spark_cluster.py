"""A Spark standalone cluster on loopback: one master and N workers from the installed PySpark.

`eosbench cluster start|stop|status` manages it; the job then runs with
`spark-submit --master spark://127.0.0.1:7077 …`, its executors on the workers, as it would on a
real cluster. Each daemon's pid file, log and work folder live under `<state_dir>`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pyspark

from conf.local_servers import SparkClusterSettings
from eosbench.local.environment import check_java, check_ports_free, port_accepts_connections
from eosbench.console.errors import EnvironmentProblem
from eosbench.local.processes import command_line, descendants, read_pid_file, send_signal, wait_gone, write_pid_file

READY_TIMEOUT_S = 90.0
EXECUTOR_CLASS = "CoarseGrainedExecutorBackend"
# A worker keeps every application's folder (the executors' logs and the unpacked 320 MB archive)
# for 7 days unless told otherwise, and a soak starts an application at every driver restart: 50 GB
# in a 3-hour cluster soak. Finished applications' folders go once nothing in them is 5 minutes new.
WORKER_CLEANUP = ("-Dspark.worker.cleanup.enabled=true -Dspark.worker.cleanup.interval=60"
                  " -Dspark.worker.cleanup.appDataTtl=300")


def spark_home() -> Path:
    """The Spark distribution that ships inside the PySpark wheel."""
    return Path(pyspark.__file__).parent


@dataclass(frozen=True)
class DaemonStatus:
    """One daemon's state: `name` is "master" or "worker-<i>"."""

    name: str
    pid: int | None
    port: int


class StandaloneCluster:
    """Start, stop, inspect and break the loopback Spark standalone cluster."""

    def __init__(self, settings: SparkClusterSettings | None = None):
        self.settings = settings or SparkClusterSettings()

    @classmethod
    def from_state_dir(cls, state_dir: Path) -> StandaloneCluster:
        """The cluster last started from this folder (its recorded shape), else the default shape there."""
        recorded = state_dir / "cluster.json"
        if recorded.exists():
            return cls(SparkClusterSettings(**{**json.loads(recorded.read_text()), "state_dir": state_dir}))
        return cls(SparkClusterSettings(state_dir=state_dir))

    def _env(self) -> dict[str, str]:
        # Nothing of the submitting machine's Python: an application names its executors' Python
        # (spark.pyspark.python, or the driver's PYSPARK_PYTHON), and a PYTHONPATH, a venv or the
        # venv's bin/ on PATH inherited here would reach every Python worker and hide what the
        # application shipped.
        inherited = {name: value for name, value in os.environ.items()
                     if name not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "PYTHONPATH", "VIRTUAL_ENV")}
        path = os.pathsep.join(entry for entry in os.environ.get("PATH", "").split(os.pathsep)
                               if not entry.startswith(sys.prefix))
        return {**inherited, "PATH": path, "SPARK_HOME": str(spark_home()), "SPARK_LOCAL_IP": "127.0.0.1",
                "SPARK_DAEMON_MEMORY": "256m", "SPARK_LOG_DIR": str(self.settings.state_dir / "logs"),
                "SPARK_WORKER_OPTS": WORKER_CLEANUP}

    def _pid_file(self, name: str) -> Path:
        return self.settings.state_dir / f"{name}.pid"

    def pid(self, name: str) -> int | None:
        """A daemon's pid, if the process it names is the one this cluster launched and alive."""
        return read_pid_file(self._pid_file(name))

    def _daemons(self) -> list[tuple[str, int, list[str]]]:
        s = self.settings
        master = ("master", s.master_port,
                  ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(s.master_port),
                   "--webui-port", str(s.master_ui_port)])
        workers = [(f"worker-{i}", s.worker_ui_port(i),
                    ["org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--cores", str(s.worker_cores),
                     "--memory", f"{s.worker_memory_mb}m", "--webui-port", str(s.worker_ui_port(i)),
                     "--work-dir", str(s.state_dir / f"worker-{i}"), s.master_url])
                   for i in range(s.workers)]
        return [master, *workers]

    def status(self) -> list[DaemonStatus]:
        """Every daemon, with its pid when running."""
        return [DaemonStatus(name, self.pid(name), port) for name, port, _ in self._daemons()]

    def start(self) -> float:
        """Start whatever is not running and wait until every worker has registered; return seconds."""
        started = time.monotonic()
        check_java()
        self.settings.state_dir.mkdir(parents=True, exist_ok=True)
        (self.settings.state_dir / "cluster.json").write_text(
            self.settings.model_dump_json(exclude={"state_dir"}, indent=2))
        for name, port, arguments in self._daemons():
            if self.pid(name) is not None:
                continue
            # The master's entry carries its RPC port; its web UI port must be free as well.
            check_ports_free([port] + ([self.settings.master_ui_port] if name == "master" else []), f"the Spark {name}")
            with open(self.settings.state_dir / f"{name}.log", "ab") as log:
                process = subprocess.Popen([str(spark_home() / "bin" / "spark-class"), *arguments],
                                           stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                           env=self._env(), cwd=self.settings.state_dir, start_new_session=True)
            write_pid_file(self._pid_file(name), process.pid)
            if name == "master":
                self._wait(lambda: port_accepts_connections(self.settings.master_port), "the master to listen", name)
        self._wait(lambda: self.alive_workers() >= self.settings.workers, "every worker to register", "master")
        return time.monotonic() - started

    def _wait(self, ready, what: str, daemon: str) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not ready():
            if self.pid(daemon) is None:
                raise EnvironmentProblem(f"the Spark {daemon} exited during start-up; see"
                                         f" {self.settings.state_dir / (daemon + '.log')}")
            if time.monotonic() > deadline:
                raise EnvironmentProblem(f"timed out after {READY_TIMEOUT_S:g} s waiting for {what}")
            time.sleep(0.25)

    def master_state(self) -> dict:
        """The master's JSON view (workers, applications), {} when it does not answer it yet."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.settings.master_ui_port}/json/", timeout=2) as reply:
                return json.load(reply)
        # While the master's web UI starts, its root page can answer /json/ with HTML before the
        # JSON handler is live (seen in CI): that is "not ready", like a refused connection.
        except (OSError, ValueError):
            return {}

    def alive_workers(self) -> int:
        """How many workers the master counts as alive."""
        return int(self.master_state().get("aliveworkers", 0))

    def kill_worker(self, index: int) -> int:
        """SIGKILL one worker JVM (its executors notice and exit); return its pid."""
        pid = self.pid(f"worker-{index}")
        if pid is None:
            raise EnvironmentProblem(f"Spark worker-{index} is not running")
        send_signal(pid, signal.SIGKILL)
        wait_gone(pid)
        return pid

    def executor_pids(self) -> list[int]:
        """The executor JVMs the workers have launched."""
        pids = []
        for i in range(self.settings.workers):
            worker = self.pid(f"worker-{i}")
            if worker is not None:
                pids += [pid for pid in descendants(worker) if EXECUTOR_CLASS in command_line(pid)]
        return pids

    def stop(self) -> int:
        """Stop every daemon and its executors (SIGTERM, then SIGKILL); return how many were running."""
        running = {name: pid for name in [d[0] for d in self._daemons()] if (pid := self.pid(name)) is not None}
        executors = self.executor_pids()
        for pid in [*running.values(), *executors]:
            send_signal(pid, signal.SIGTERM)
        for pid in [*running.values(), *executors]:
            wait_gone(pid, timeout_s=15)
            send_signal(pid, signal.SIGKILL)
            wait_gone(pid)
        for name in running:
            self._pid_file(name).unlink(missing_ok=True)
        return len(running)
