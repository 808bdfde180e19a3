"""A real local HDFS: one NameNode and one DataNode JVM on loopback, run from Maven Central jars.

The daemons are separate processes (not hadoop-client-minicluster's single JVM) so that the
soak's `restart-hdfs` fault can SIGKILL the NameNode alone while the DataNode keeps its blocks,
as a NameNode failure on a real cluster does. Their rendered configuration, pid files, logs and
storage live under `<state_dir>`; the shape (ports, heap) is kept in `<state_dir>/hdfs.json`, so
`status` and `stop` need no flags.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.request
from dataclasses import dataclass

from conf.local_servers import HDFS_DAEMONS, HdfsSettings, hdfs_log4j_config
from eosbench.console.errors import BadInput, EnvironmentProblem
from eosbench.local.environment import check_java, check_ports_free, port_accepts_connections
from eosbench.local.jars import resolve_bundle
from eosbench.local.hadoop_daemons import HadoopDaemons

READY_TIMEOUT_S = 120.0
MAIN_CLASSES = {
    "namenode": "org.apache.hadoop.hdfs.server.namenode.NameNode",
    "datanode": "org.apache.hadoop.hdfs.server.datanode.DataNode",
}


@dataclass(frozen=True)
class HdfsDaemonStatus:
    """What is true of one daemon right now."""

    name: str
    pid: int | None
    port: int
    listening: bool


@dataclass(frozen=True)
class NameNodeView:
    """What the NameNode says of itself (from its /jmx page)."""

    live_datanodes: int
    safe_mode: bool
    files_and_dirs: int
    missing_blocks: int  # blocks no live DataNode has reported (yet, after a restart)


class LocalHdfs(HadoopDaemons):
    """Start, stop, inspect and break the local HDFS described by an HdfsSettings."""

    NAME, SHAPE_FILE, SETTINGS = "HDFS", "hdfs.json", HdfsSettings
    DAEMONS, MAIN_CLASSES, STOP_GRACE_S = HDFS_DAEMONS, MAIN_CLASSES, 20.0

    @property
    def uri(self) -> str:
        """The file system's root, hdfs://127.0.0.1:<port>."""
        return self.settings.uri

    # ------------------------------------------------------------------ status

    def status(self) -> list[HdfsDaemonStatus]:
        """Every daemon, with its pid when running and whether its main port accepts connections."""
        ports = self.settings.ports
        main_port = {"namenode": ports.namenode, "datanode": ports.datanode}
        return [HdfsDaemonStatus(daemon, self.pid(daemon), main_port[daemon],
                                 port_accepts_connections(main_port[daemon])) for daemon in HDFS_DAEMONS]

    def namenode_view(self) -> NameNodeView | None:
        """The NameNode's own account of its DataNodes, safe mode and namespace; None while it does not answer."""
        # Both are live MBeans; the FSNamesystem metrics bean is a snapshot up to 10 s old.
        state = self._jmx("Hadoop:service=NameNode,name=FSNamesystemState") or []
        info = self._jmx("Hadoop:service=NameNode,name=NameNodeInfo") or []
        if not state or not info:
            return None
        return NameNodeView(live_datanodes=int(state[0].get("NumLiveDataNodes", 0)),
                            safe_mode=bool(info[0].get("Safemode")),
                            files_and_dirs=int(state[0].get("FilesTotal", 0)),
                            missing_blocks=int(info[0].get("NumberOfMissingBlocks", 0)))

    def _jmx(self, query: str) -> list[dict] | None:
        url = f"http://127.0.0.1:{self.settings.ports.namenode_http}/jmx?qry={query}"
        try:
            with urllib.request.urlopen(url, timeout=2) as reply:
                return json.load(reply).get("beans")
        except (OSError, ValueError):
            return None

    def ready(self) -> bool:
        """Whether clients can read and write: the NameNode answers, out of safe mode, its DataNode has reported every block.

        Safe mode alone says little here: its threshold is a share of the blocks rounded down, zero
        below a thousand blocks, so a restarted NameNode leaves it before the DataNode reports any.
        """
        view = self.namenode_view()
        return view is not None and view.live_datanodes >= 1 and not view.safe_mode and view.missing_blocks == 0

    # ------------------------------------------------------------------ start

    def start(self, fresh: bool = False) -> float:
        """Start whichever daemon is not running (formatting on first start) and wait until writable; return seconds."""
        started = time.monotonic()
        if fresh:
            self.stop()
            shutil.rmtree(self.settings.state_dir, ignore_errors=True)
        self._check_shape()
        to_start = [daemon for daemon in HDFS_DAEMONS if self.pid(daemon) is None]
        if to_start:
            java = check_java()
            check_ports_free([port for daemon in to_start for port in self.settings.ports.of_daemon(daemon).values()],
                             "HDFS")
            classpath = f"{self.settings.conf_dir}:{resolve_bundle('hdfs')[0].parent / '*'}"
            self._write_config()
            # The DataNode retries until the NameNode answers, so it starts first and its JVM
            # warms up while the NameNode is formatted (a first start's longest step).
            for daemon in reversed(to_start):
                if daemon == "namenode" and not (self.settings.state_dir / "namenode" / "current" / "VERSION").exists():
                    self._format(java, classpath)
                self._launch(java, classpath, daemon)
        self._wait_ready()
        return time.monotonic() - started

    def _check_shape(self) -> None:
        if not self._state_file.exists():
            return
        recorded = json.loads(self._state_file.read_text())
        if recorded != self.settings.model_dump(mode="json", exclude={"state_dir"}) and any(map(self.pid, HDFS_DAEMONS)):
            raise BadInput(f"an HDFS with NameNode port {recorded['port']} and heap {recorded['heap_mb']} MB is"
                           f" running from {self.settings.state_dir}; run `eosbench hdfs stop` first")

    def _write_config(self) -> None:
        super()._write_config()
        # The daemons' HTTP servers look their web apps up on the classpath, and Maven Central's
        # hadoop-hdfs jar ships none (the distribution's share/ folder does): empty ones serve /jmx.
        for webapp in ("hdfs", "datanode", "static"):
            (self.settings.conf_dir / "webapps" / webapp).mkdir(parents=True, exist_ok=True)

    def _jvm_options(self, daemon: str, heap_mb: int | None = None) -> list[str]:
        heap_mb = heap_mb or self.settings.heap_mb
        return [f"-Xms{min(64, heap_mb)}m", f"-Xmx{heap_mb}m", "-XX:+UseSerialGC",
                # C1 only: the daemons serve a few small files, and the JIT's second tier would
                # spend start-up CPU that the two-core machine does not have.
                "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true",
                f"-Dlog4j.configuration=file:{hdfs_log4j_config()}",
                f"-Dhdfs.log.dir={self.settings.state_dir / 'logs'}", f"-Dhdfs.log.file={daemon}.log",
                f"-Dhadoop.log.dir={self.settings.state_dir / 'logs'}"]

    def _format(self, java: str, classpath: str) -> None:
        """Format the NameNode's storage (a new cluster id; the DataNode takes it on first registering)."""
        completed = subprocess.run(
            [java, *self._jvm_options("format", 256), "-cp", classpath, MAIN_CLASSES["namenode"],
             "-format", "-nonInteractive", "-force"],
            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
        if completed.returncode != 0:
            output = (completed.stdout + completed.stderr).strip()
            raise EnvironmentProblem(f"formatting the NameNode failed: {output.splitlines()[-1][:300] if output else 'no output'};"
                                     f" see {self.log_file('format')}")

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not self.ready():
            for daemon in HDFS_DAEMONS:
                if self.pid(daemon) is None:
                    raise EnvironmentProblem(f"the HDFS {daemon} exited during start-up: {self.last_log_line(daemon)}")
            if time.monotonic() > deadline:
                raise EnvironmentProblem(f"HDFS is not writable after {READY_TIMEOUT_S:g} s"
                                         f" (NameNode: {self.namenode_view()}); see {self.log_file('namenode')}")
            time.sleep(0.2)

    # ------------------------------------------------------------------ faults and stop

    def restart_namenode(self, pause_s: float = 0.0) -> int:
        """SIGKILL the NameNode, wait `pause_s`, start it again and wait until writable; return the killed pid.

        The DataNode keeps running and re-registers within a heartbeat; the restarted NameNode
        replays its edit log and leaves safe mode once the DataNode has reported its blocks.
        """
        pid = self.kill("namenode")
        time.sleep(pause_s)
        self.start()
        return pid

    def stop(self) -> int:
        """Stop both daemons (SIGTERM, then SIGKILL after a grace period); return how many were running."""
        return self._stop_daemons()
