"""A real local YARN: one ResourceManager and one NodeManager JVM on loopback, run from Maven Central jars.

The daemons are separate processes (not hadoop-yarn-server-tests' MiniYARNCluster in one JVM) so
that the soak's `restart-nodemanager` fault can SIGKILL the NodeManager alone while the
ResourceManager, and with it the application's record, lives on. Their rendered configuration
(the HADOOP_CONF_DIR that spark-submit is handed), pid files, logs and the containers' working
folders live under `<state_dir>`; the shape (ports, heap, node budget) is kept in
`<state_dir>/yarn.json`, so `status` and `stop` need no flags.
"""

from __future__ import annotations

import json
import os
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from conf.local_servers import YARN_DAEMONS, YARN_LOCAL_DISK, YarnSettings, yarn_log4j_config
from eosbench.console.errors import BadInput, EnvironmentProblem
from eosbench.local.daemons import HadoopDaemons
from eosbench.local.processes import kill_all

MAIN_CLASSES = {
    "resourcemanager": "org.apache.hadoop.yarn.server.resourcemanager.ResourceManager",
    "nodemanager": "org.apache.hadoop.yarn.server.nodemanager.NodeManager",
}


@dataclass(frozen=True)
class ClusterView:
    """What the ResourceManager says of its cluster (from /ws/v1/cluster/metrics)."""

    active_nodes: int
    lost_nodes: int
    unhealthy_nodes: int
    apps_running: int
    containers_allocated: int
    available_mb: int
    available_vcores: int


@dataclass(frozen=True)
class Container:
    """One container the NodeManager runs (from /ws/v1/node/containers)."""

    id: str
    application_id: str
    state: str
    memory_mb: int
    vcores: int


def parse_cluster_metrics(reply: dict) -> ClusterView:
    """The ClusterView in the ResourceManager's /ws/v1/cluster/metrics reply."""
    metrics = reply["clusterMetrics"]
    return ClusterView(active_nodes=int(metrics.get("activeNodes", 0)), lost_nodes=int(metrics.get("lostNodes", 0)),
                       unhealthy_nodes=int(metrics.get("unhealthyNodes", 0)),
                       apps_running=int(metrics.get("appsRunning", 0)),
                       containers_allocated=int(metrics.get("containersAllocated", 0)),
                       available_mb=int(metrics.get("availableMB", 0)),
                       available_vcores=int(metrics.get("availableVirtualCores", 0)))


def parse_containers(reply: dict) -> list[Container]:
    """The containers in the NodeManager's /ws/v1/node/containers reply."""
    # Jersey's JSON writes {"containers": null} for none and an object, not a list, for exactly one.
    listed = (reply.get("containers") or {}).get("container") or []
    if isinstance(listed, dict):
        listed = [listed]
    return [Container(id=entry["id"], application_id=application_of(entry["id"]), state=entry.get("state", ""),
                      memory_mb=int(entry.get("totalMemoryNeededMB", 0)), vcores=int(entry.get("totalVCoresNeeded", 0)))
            for entry in listed]


def node_reported_since_start(nodes_reply: dict, node_info_reply: dict) -> bool:
    """Whether the RM (/ws/v1/cluster/nodes) has a RUNNING node with a health report newer than the NM's start (/ws/v1/node/info)."""
    try:
        info = node_info_reply["nodeInfo"]
        listed = (nodes_reply.get("nodes") or {}).get("node") or []
        node = next((n for n in ([listed] if isinstance(listed, dict) else listed) if n.get("id") == info["id"]), None)
        return node is not None and node.get("state") == "RUNNING" and int(node["lastHealthUpdate"]) >= int(info["nmStartupTime"])
    except (KeyError, TypeError, ValueError):
        return False


def application_of(container_id: str) -> str:
    """The application id a container id belongs to (container_<ts>_<app>_<attempt>_<n> -> application_<ts>_<app>)."""
    parts = container_id.split("_")
    # Container ids of a restarted RM carry an epoch: container_e<epoch>_<ts>_<app>_<attempt>_<n>.
    if len(parts) > 1 and parts[1].startswith("e"):
        parts = [parts[0], *parts[2:]]
    if len(parts) < 5 or parts[0] != "container":
        raise BadInput(f"{container_id!r} is not a YARN container id")
    return f"application_{parts[1]}_{parts[2]}"


def spark_yarn_environment(settings: YarnSettings) -> dict[str, str]:
    """The environment variables a driver for this YARN needs, beside spark_yarn_conf's settings."""
    from eosbench.local.executor_env import EXECUTOR_PYTHON

    # Spark finds the ResourceManager only through HADOOP_CONF_DIR (or YARN_CONF_DIR), and a
    # PySpark driver names its executors' Python only from PYSPARK_PYTHON (otherwise "python3"
    # on the container's PATH: the node's own Python, not the archive's).
    return {"HADOOP_CONF_DIR": str(settings.conf_dir), "PYSPARK_PYTHON": EXECUTOR_PYTHON}


def yarn_client_conf(archive: Path) -> dict[str, str]:
    """The Spark settings that run a client-mode driver on any YARN, its executors' Python from the packed `archive`."""
    from eosbench.local.executor_env import ARCHIVE_ALIAS, EXECUTOR_PYTHON

    return {
        "spark.master": "yarn",
        "spark.submit.deployMode": "client",
        # What spark-submit's --archives sets on YARN: the NodeManager localizes and unpacks it once
        # and links it into each container's folder as ./environment. (spark.archives would also
        # make every executor fetch the archive from the driver and unpack it again over that link.)
        "spark.yarn.dist.archives": f"{archive}#{ARCHIVE_ALIAS}",
        # The executors' Python; PySpark on the driver reads only PYSPARK_PYTHON (spark_yarn_environment),
        # the AM's and the executors' variables matter to a driver in cluster mode and to code that looks.
        "spark.pyspark.python": EXECUTOR_PYTHON,
        "spark.executorEnv.PYSPARK_PYTHON": EXECUTOR_PYTHON,
        "spark.yarn.appMasterEnv.PYSPARK_PYTHON": EXECUTOR_PYTHON,
    }


def spark_yarn_conf(settings: YarnSettings, archive: Path) -> dict[str, str]:
    """The Spark settings that run a client-mode driver on this local YARN, its executors' Python from the packed `archive`.

    The driver also needs spark_yarn_environment's variables, which no spark.* setting replaces.
    """
    from eosbench.local.executor_env import ARCHIVE_ALIAS
    from eosbench.local.jars import pyspark_jars_dir

    conf = {
        **yarn_client_conf(archive),
        # local: names jars every node already has at that path (true on one host): without it
        # Spark zips PySpark's ~400 MB of jars into the staging folder for every application.
        "spark.yarn.jars": f"local:{pyspark_jars_dir()}/*",
        # The machine's name resolves to a non-loopback address; the AM and executors call back
        # to the driver on loopback like every other daemon here.
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
    }
    if settings.default_fs.startswith("file:"):
        # Spark's default is ~/.sparkStaging on the default file system; keep it with the YARN's state.
        conf["spark.yarn.stagingDir"] = f"file://{settings.state_dir / 'staging'}"
        if mounts_local_disk(settings):
            # Spark copies a file: archive into each application's staging folder, a new path that
            # the NodeManager localizes and unpacks anew (25-30 s); under the viewfs name of the
            # same disk, staging folder and archive share a file system that is not file:, so the
            # archive is taken where it lies, and its path and time stay those the NodeManager cached.
            conf["spark.yarn.stagingDir"] = f"{YARN_LOCAL_DISK}{settings.state_dir / 'staging'}"
            conf["spark.yarn.dist.archives"] = f"{YARN_LOCAL_DISK}{archive}#{ARCHIVE_ALIAS}"
    return conf


def mounts_local_disk(settings: YarnSettings) -> bool:
    """Whether the local YARN's rendered core-site.xml names the local disk YARN_LOCAL_DISK (one started before it did not)."""
    core_site = settings.conf_dir / "core-site.xml"
    # The daemons and the driver read the configuration of the YARN's start; a newer template is not theirs.
    table = YARN_LOCAL_DISK.removeprefix("viewfs://")
    return core_site.is_file() and f"fs.viewfs.mounttable.{table}.linkMergeSlash" in core_site.read_text()


@dataclass(frozen=True)
class YarnTarget:
    """The YARN a client-mode driver submits to: its HADOOP_CONF_DIR, and the local one's settings if it is ours."""

    conf_dir: Path
    local: YarnSettings | None

    def spark_conf(self, archive: Path) -> dict[str, str]:
        """The Spark settings for a driver on this YARN (the local one's extras only for the local one)."""
        return spark_yarn_conf(self.local, archive) if self.local else yarn_client_conf(archive)

    def environment(self) -> dict[str, str]:
        """The driver's environment variables for this YARN."""
        from eosbench.local.executor_env import EXECUTOR_PYTHON

        return {"HADOOP_CONF_DIR": str(self.conf_dir), "PYSPARK_PYTHON": EXECUTOR_PYTHON}


def yarn_target(state_dir: Path | None = None, environ=os.environ) -> YarnTarget:
    """The YARN `--master yarn` means: `state_dir`'s local one if given, else $HADOOP_CONF_DIR's, else the default local one."""
    given = environ.get("HADOOP_CONF_DIR")
    if state_dir is None and given:
        if not (Path(given) / "yarn-site.xml").is_file():
            raise EnvironmentProblem(f"HADOOP_CONF_DIR={given} holds no yarn-site.xml, so Spark cannot find a"
                                     " ResourceManager; point it at a YARN's configuration or unset it for"
                                     " `eosbench yarn`'s")
        return YarnTarget(Path(given), None)
    folder = state_dir or YarnSettings().state_dir
    yarn = LocalYarn.from_state_dir(folder)
    if yarn is None:
        raise EnvironmentProblem(f"--master yarn needs HADOOP_CONF_DIR or a local YARN, and no `eosbench yarn start`"
                                 f" ran in {folder}: run it, or set HADOOP_CONF_DIR")
    # Without a ResourceManager Spark's client retries for minutes before it fails.
    if not yarn.ready():
        raise EnvironmentProblem(f"the local YARN in {folder} is not running (or has no NodeManager):"
                                 f" `eosbench yarn start --yarn-state-dir {folder}`")
    return YarnTarget(yarn.conf_dir, yarn.settings)


class LocalYarn(HadoopDaemons):
    """Start, stop, inspect and break the local YARN described by a YarnSettings."""

    NAME, SHAPE_FILE, SETTINGS, BUNDLE, LOG4J_PREFIX = "YARN", "yarn.json", YarnSettings, "yarn", "yarn"
    # The NodeManager's orderly stop waits about 17 s for applications the RM has not yet released,
    # and neither daemon keeps state worth a wait (no recovery, an in-memory RM store): 5 s, then SIGKILL.
    DAEMONS, MAIN_CLASSES, STOP_GRACE_S, READY_TIMEOUT_S = YARN_DAEMONS, MAIN_CLASSES, 5.0, 120.0
    SHAPE_IN_USE = ("a YARN with ResourceManager port {port}, heap {heap_mb} MB and a {node_memory_mb} MB,"
                    " {node_vcores}-vcore node is running from {state_dir}; run `eosbench yarn stop` first")

    @property
    def conf_dir(self) -> Path:
        """The HADOOP_CONF_DIR that spark-submit --master yarn needs."""
        return self.settings.conf_dir

    # ------------------------------------------------------------------ status

    def cluster_view(self) -> ClusterView | None:
        """The ResourceManager's account of its nodes, applications and free resources; None while it does not answer."""
        reply = self._rest(self.settings.ports.resourcemanager_web, "/ws/v1/cluster/metrics")
        try:
            return parse_cluster_metrics(reply) if reply else None
        except (KeyError, TypeError, ValueError):
            return None

    def containers(self) -> list[Container]:
        """The containers the NodeManager runs now (empty while it does not answer)."""
        reply = self._rest(self.settings.ports.nodemanager_web, "/ws/v1/node/containers")
        return parse_containers(reply) if reply else []

    @staticmethod
    def _rest(port: int, path: str) -> dict | None:
        request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers={"Accept": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=2) as reply:
                return json.load(reply)
        except (OSError, ValueError):
            return None

    def ready(self) -> bool:
        """Whether applications can run: the ResourceManager counts the running NodeManager active."""
        view = self.cluster_view()
        if view is None or view.active_nodes < 1:
            return False
        # The RM keeps a killed NodeManager active until its liveness expiry (20 s), so after a
        # restart its count alone says nothing: wait for a report from the new process too.
        info = self._rest(self.settings.ports.nodemanager_web, "/ws/v1/node/info")
        nodes = self._rest(self.settings.ports.resourcemanager_web, "/ws/v1/cluster/nodes")
        return bool(info and nodes) and node_reported_since_start(nodes, info)

    # ------------------------------------------------------------------ start

    # Both daemons launch at once, in DAEMONS' order: the NodeManager retries until the ResourceManager
    # answers, so both JVMs warm up together.

    def _log4j_config(self) -> Path:
        return yarn_log4j_config()

    def _daemon_environment(self, java: str) -> dict[str, str]:
        # Containers get JAVA_HOME and HADOOP_CONF_DIR from the NodeManager's own environment
        # (yarn.nodemanager.env-whitelist); Spark's launch command runs $JAVA_HOME/bin/java.
        java_home = Path(os.path.realpath(java)).parent.parent
        return {**os.environ, "JAVA_HOME": str(java_home), "HADOOP_CONF_DIR": str(self.settings.conf_dir)}

    def _not_ready_problem(self) -> str:
        return (f"no active NodeManager after {self.READY_TIMEOUT_S:g} s (ResourceManager: {self.cluster_view()});"
                f" see {self.log_file('nodemanager')}")

    # ------------------------------------------------------------------ containers

    def container_dir(self, container_id: str) -> Path | None:
        """A container's working folder under the NodeManager's local dirs (usercache/<user>/appcache/<app>/<id>), if any."""
        found = sorted(self.settings.local_dirs.glob(f"usercache/*/appcache/{application_of(container_id)}/{container_id}"))
        return found[0] if found else None

    def container_pids(self, container_id: str) -> list[int]:
        """The pids of the JVMs a container runs: java processes whose working folder is the container's."""
        folder = self.container_dir(container_id)
        return [] if folder is None else [pid for pid, cwd, exe in _processes() if cwd == folder and exe.name == "java"]

    def kill_container(self, container_id: str) -> list[int]:
        """SIGKILL a container's JVM (an executor or the AM dying, not YARN stopping it); return the pids killed."""
        pids = self.container_pids(container_id)
        if not pids:
            raise EnvironmentProblem(f"no running JVM of container {container_id} under {self.settings.local_dirs}")
        kill_all(pids)
        return pids

    def _container_processes(self) -> list[int]:
        """Every process running inside some container's folder (JVMs, Python workers, their shells)."""
        root = self.settings.local_dirs.resolve()
        return [pid for pid, cwd, _ in _processes() if cwd.is_relative_to(root)]

    # ------------------------------------------------------------------ faults and stop

    def kill_nodemanager(self) -> tuple[int, list[int]]:
        """SIGKILL the NodeManager and every process of its containers, as a node failure would; return (NM pid, container pids).

        Containers run in sessions of their own and would outlive the NodeManager's SIGKILL as
        orphans, still doing work that YARN has written off; on a failed node they die with it.
        """
        pid = self.kill("nodemanager")
        orphans = self._container_processes()
        kill_all(orphans)
        return pid, orphans

    def restart_nodemanager(self, pause_s: float = 0.0) -> int:
        """SIGKILL the NodeManager (and its containers), wait `pause_s`, start it again and wait until registered; return the killed pid.

        The ResourceManager keeps running; the new NodeManager registers afresh (no recovery), so
        the RM reports the old containers lost to their application masters.
        """
        pid, _ = self.kill_nodemanager()
        time.sleep(pause_s)
        self.start()
        return pid

    def stop(self) -> int:
        """Stop both daemons (SIGTERM, then SIGKILL after a grace period) and any container left; return how many daemons ran."""
        running = super().stop()
        # A NodeManager killed before it stopped its containers leaves them running in their own sessions.
        kill_all(self._container_processes())
        return running

def _processes() -> list[tuple[int, Path, Path]]:
    """(pid, working folder, executable) of every process this user may inspect."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            found.append((int(entry.name), Path(os.readlink(f"/proc/{entry.name}/cwd")),
                          Path(os.readlink(f"/proc/{entry.name}/exe"))))
        except OSError:
            continue  # gone meanwhile, or another user's
    return found
