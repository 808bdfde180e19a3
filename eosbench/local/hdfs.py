"""A real local HDFS: one NameNode and one DataNode JVM on loopback, run from Maven Central jars.

The daemons are separate processes (not hadoop-client-minicluster's single JVM) so that the
soak's `restart-hdfs` fault can SIGKILL the NameNode alone while the DataNode keeps its blocks,
as a NameNode failure on a real cluster does. Their rendered configuration, pid files, logs and
storage live under `<state_dir>`; the shape (ports, heap) is kept in `<state_dir>/hdfs.json`, so
`status` and `stop` need no flags.
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from conf.local_servers import HDFS_DAEMONS, HdfsSettings, hdfs_log4j_config
from eosbench.console.errors import EnvironmentProblem
from eosbench.local.daemons import HadoopDaemons

MAIN_CLASSES = {
    "namenode": "org.apache.hadoop.hdfs.server.namenode.NameNode",
    "datanode": "org.apache.hadoop.hdfs.server.datanode.DataNode",
}


@dataclass(frozen=True)
class NameNodeView:
    """What the NameNode says of itself (from its /jmx page)."""

    live_datanodes: int
    safe_mode: bool
    files_and_dirs: int
    missing_blocks: int  # blocks no live DataNode has reported (yet, after a restart)


class LocalHdfs(HadoopDaemons):
    """Start, stop, inspect and break the local HDFS described by an HdfsSettings."""

    NAME, SHAPE_FILE, SETTINGS, BUNDLE, LOG4J_PREFIX = "HDFS", "hdfs.json", HdfsSettings, "hdfs", "hdfs"
    DAEMONS, MAIN_CLASSES, STOP_GRACE_S, READY_TIMEOUT_S = HDFS_DAEMONS, MAIN_CLASSES, 20.0, 120.0
    SHAPE_IN_USE = ("an HDFS with NameNode port {port} and heap {heap_mb} MB is running from {state_dir};"
                    " run `eosbench hdfs stop` first")

    @property
    def uri(self) -> str:
        """The file system's root, hdfs://127.0.0.1:<port>."""
        return self.settings.uri

    # ------------------------------------------------------------------ status

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

    def _launch_all(self, java: str, classpath: str, daemons: list[str]) -> None:
        # The DataNode retries until the NameNode answers, so it starts first and its JVM
        # warms up while the NameNode is formatted (a first start's longest step).
        for daemon in reversed(daemons):
            if daemon == "namenode" and not (self.settings.state_dir / "namenode" / "current" / "VERSION").exists():
                self._format(java, classpath)
            self._launch(java, classpath, daemon)

    def _write_files(self) -> None:
        super()._write_files()
        # The daemons' HTTP servers look their web apps up on the classpath, and Maven Central's
        # hadoop-hdfs jar ships none (the distribution's share/ folder does): empty ones serve /jmx.
        for webapp in ("hdfs", "datanode", "static"):
            (self.settings.conf_dir / "webapps" / webapp).mkdir(parents=True, exist_ok=True)

    def _log4j_config(self) -> Path:
        return hdfs_log4j_config()

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

    def _not_ready_problem(self) -> str:
        return (f"HDFS is not writable after {self.READY_TIMEOUT_S:g} s (NameNode: {self.namenode_view()});"
                f" see {self.log_file('namenode')}")

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
