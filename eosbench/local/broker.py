"""A real local Apache Kafka cluster in KRaft mode, run from Maven Central jars.

Each node is a combined broker+controller JVM on loopback, with its data, logs, rendered
configuration and pid file in `<state_dir>/node-<id>/`. The cluster's shape (node count, ports,
cluster id) is kept in `<state_dir>/cluster.json`, so `status`, `stop` and `logs` need no flags.
"""

from __future__ import annotations

import base64
import json
import shutil
import signal
import subprocess
import time
import uuid
from collections import deque
from dataclasses import dataclass
from pathlib import Path

from conf.client_config import ClientConfig, Connection
from conf.local_servers import ClusterSettings, NodePorts, broker_log4j_config, jmx_exporter_config
from eosbench.local.environment import check_java, check_ports_free, port_accepts_connections
from eosbench.console.errors import BadInput, EnvironmentProblem
from eosbench.local.jars import resolve_bundle
from eosbench.local.kafka_admin import wait_transactions_ready
from eosbench.local.processes import read_pid_file, send_signal, wait_gone, write_pid_file
from eosbench.local.security import ADMIN_USER, BROKER_CERT_CN, SCRAM_MECHANISM, security_material

STOP_GRACE_S = 30.0
READY_TIMEOUT_S = 120.0


def new_cluster_id() -> str:
    """Return a KRaft cluster id: 16 random bytes, URL-safe base64 without padding."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):  # Kafka's own Uuid avoids ids that look like flags
            return cluster_id


@dataclass(frozen=True)
class NodeStatus:
    """What is true of one node right now."""

    node_id: int
    pid: int | None
    process_alive: bool
    client_port: int
    listening: bool
    jmx_exporter_port: int


class LocalCluster:
    """Start, stop and inspect the local KRaft cluster described by a ClusterSettings."""

    def __init__(self, settings: ClusterSettings):
        self.settings = settings

    # ------------------------------------------------------------------ loading

    @classmethod
    def from_state_dir(cls, state_dir: Path) -> LocalCluster | None:
        """Return the cluster recorded in a state folder, or None if none was ever started there."""
        state_file = state_dir / "cluster.json"
        if not state_file.exists():
            return None
        recorded = json.loads(state_file.read_text())
        return cls(ClusterSettings(state_dir=state_dir, **recorded["settings"]))

    @property
    def connection(self) -> Connection:
        """How clients reach this cluster: PLAINTEXT, or as the admin user of a secured cluster."""
        if not self.settings.secured:
            return Connection(self.settings.bootstrap_servers)
        return ClientConfig.load(self.client_properties).connection(self.settings.bootstrap_servers)

    @property
    def client_properties(self) -> Path | None:
        """The admin user's client.properties of a secured cluster (None for PLAINTEXT)."""
        return security_material(self.settings.state_dir).client_properties if self.settings.secured else None

    def add_scram_user(self, user: str, password: str) -> Path:
        """Create a SCRAM user on this secured cluster (as the admin) and write its client.properties; return that path.

        The user holds no ACL yet, so it can do nothing until it is granted some (least privilege).
        """
        from eosbench.local.kafka_admin import create_scram_user

        if not self.settings.secured:
            raise BadInput("SCRAM users need a cluster started with --security sasl-ssl")
        create_scram_user(self.connection, user, password, SCRAM_MECHANISM)
        material = security_material(self.settings.state_dir)
        path = material.folder / f"{user}.properties"
        path.write_text(material.client_properties_text(self.settings.bootstrap_servers, user, password))
        path.chmod(0o600)
        return path

    @property
    def _state_file(self) -> Path:
        return self.settings.state_dir / "cluster.json"

    def _recorded_state(self) -> dict | None:
        return json.loads(self._state_file.read_text()) if self._state_file.exists() else None

    def _record_state(self, cluster_id: str) -> None:
        self.settings.state_dir.mkdir(parents=True, exist_ok=True)
        shape = self.settings.model_dump(mode="json", exclude={"state_dir"})
        self._state_file.write_text(json.dumps({"cluster_id": cluster_id, "settings": shape}, indent=2))

    # ------------------------------------------------------------------ processes

    def _pid_file(self, node_id: int) -> Path:
        return self.settings.node_dir(node_id) / "broker.pid"

    def _pid(self, node_id: int) -> int | None:
        """Return the node's pid if that process is alive and is the one this cluster launched."""
        return read_pid_file(self._pid_file(node_id))

    def status(self) -> list[NodeStatus]:
        """Return the truth about every node: its process, and whether its port accepts clients."""
        result = []
        for node in self.settings.nodes():
            pid = self._pid(node.node_id)
            result.append(
                NodeStatus(
                    node_id=node.node_id,
                    pid=pid,
                    process_alive=pid is not None,
                    client_port=node.client,
                    listening=port_accepts_connections(node.client),
                    jmx_exporter_port=node.jmx_exporter,
                )
            )
        return result

    def signal_node(self, node_id: int, sig: int) -> int:
        """Send a signal to one node's JVM (the soak's broker faults); return its pid."""
        pid = self._pid(node_id)
        if pid is None:
            raise EnvironmentProblem(f"broker node {node_id} is not running")
        send_signal(pid, sig)
        if sig == signal.SIGKILL:
            wait_gone(pid)
        return pid

    def running_nodes(self) -> list[int]:
        """Return the ids of the nodes whose JVM is alive."""
        return [status.node_id for status in self.status() if status.process_alive]

    # ------------------------------------------------------------------ start

    def start(self, fresh: bool = False) -> float:
        """Start every node that is not running and wait until transactions work; return seconds."""
        started = time.monotonic()
        if fresh:
            self.stop()
            self._wipe()
        recorded = self._recorded_state()
        shape = self.settings.model_dump(mode="json", exclude={"state_dir"})
        if recorded and recorded["settings"] != shape:
            held = (f"{recorded['settings']['brokers']} {recorded['settings'].get('security', 'plaintext')}"
                    f" broker(s) on port {recorded['settings']['port']}")
            if self.running_nodes():
                raise BadInput(f"a cluster of another shape is running from {self.settings.state_dir}"
                               f" ({held}); run `eosbench broker stop` first")
            raise BadInput(f"{self.settings.state_dir} holds a cluster of {held}; pass --fresh to wipe it")
        to_start = [node for node in self.settings.nodes() if self._pid(node.node_id) is None]
        if to_start:
            java = check_java()
            check_ports_free(
                [port for node in to_start for port in node.by_role().values()],
                "the broker",
            )
            kafka_classpath = str(resolve_bundle("kafka")[0].parent / "*")
            jmx_agent = resolve_bundle("jmx-exporter")[0]
            cluster_id = recorded["cluster_id"] if recorded else new_cluster_id()
            self._record_state(cluster_id)
            self._write_client_properties()
            self._format(java, kafka_classpath, cluster_id, to_start)
            for node in to_start:
                self._launch(java, kafka_classpath, jmx_agent, node)
        self._wait_ready(to_start)
        return time.monotonic() - started

    def _write_client_properties(self) -> None:
        if self.settings.secured:
            material = security_material(self.settings.state_dir)
            material.client_properties.write_text(material.client_properties_text(self.settings.bootstrap_servers))
            material.client_properties.chmod(0o600)

    def _security_values(self) -> tuple[dict[str, str] | None, list[str]]:
        """The secured template's values and the format flags that create the admin's SCRAM credential."""
        if not self.settings.secured:
            return None, []
        material = security_material(self.settings.state_dir)
        values = {"keystore": str(material.broker_keystore), "truststore": str(material.ca_file),
                  "admin_user": ADMIN_USER, "admin_password": material.admin_password, "broker_cn": BROKER_CERT_CN}
        return values, ["--add-scram", f"{SCRAM_MECHANISM}=[name={ADMIN_USER},password={material.admin_password}]"]

    def _format(self, java: str, classpath: str, cluster_id: str, nodes: list[NodePorts]) -> None:
        """Write each node's config and format its storage if it has none yet, all in parallel."""
        security_values, scram_flags = self._security_values()
        formatting = []
        for node in nodes:
            node_dir = self.settings.node_dir(node.node_id)
            (node_dir / "logs").mkdir(parents=True, exist_ok=True)
            config = node_dir / "server.properties"
            config.write_text(self.settings.render_server_properties(node, security_values))
            config.chmod(0o600)  # a secured node's config holds the inter-broker password
            if (node_dir / "data" / "meta.properties").exists():
                continue
            formatting.append(
                (
                    node,
                    subprocess.Popen(
                        [java, "-Xmx256m", "-cp", classpath, "kafka.tools.StorageTool", "format",
                         "--ignore-formatted", "-t", cluster_id, "-c", str(config), *scram_flags],
                        stdout=subprocess.PIPE,
                        stderr=subprocess.STDOUT,
                        text=True,
                    ),
                )
            )
        for node, process in formatting:
            output, _ = process.communicate(timeout=120)
            if process.returncode != 0:
                last = output.strip().splitlines()[-1] if output.strip() else "no output"
                raise EnvironmentProblem(f"formatting node {node.node_id} failed: {last[:300]}")

    def _launch(self, java: str, classpath: str, jmx_agent: Path, node: NodePorts) -> None:
        node_dir = self.settings.node_dir(node.node_id)
        heap = self.settings.heap_mb
        command = [
            java,
            f"-Xms{min(128, heap)}m",
            f"-Xmx{heap}m",
            "-XX:+UseG1GC",
            "-XX:MaxGCPauseMillis=20",
            "-Djava.awt.headless=true",
            f"-Dkafka.logs.dir={node_dir / 'logs'}",
            f"-Dlog4j2.configurationFile={broker_log4j_config()}",
            f"-javaagent:{jmx_agent}=127.0.0.1:{node.jmx_exporter}:{jmx_exporter_config()}",
            "-cp",
            classpath,
            "kafka.Kafka",
            str(node_dir / "server.properties"),
        ]
        with open(node_dir / "logs" / "stdout.log", "ab") as stdout:
            process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=stdout,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # the broker outlives the command that started it
            )
        write_pid_file(self._pid_file(node.node_id), process.pid)

    def _wait_ready(self, launched: list[NodePorts]) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        for node in launched:
            while not port_accepts_connections(node.client):
                if self._pid(node.node_id) is None:
                    raise EnvironmentProblem(
                        f"broker node {node.node_id} exited during start-up: {self.last_log_line(node.node_id)}"
                    )
                if time.monotonic() > deadline:
                    raise EnvironmentProblem(
                        f"broker node {node.node_id} is not listening after {READY_TIMEOUT_S:g} s;"
                        " see `eosbench broker logs`"
                    )
                time.sleep(0.1)
        wait_transactions_ready(self.connection, self.settings.brokers, max(5.0, deadline - time.monotonic()))

    # ------------------------------------------------------------------ stop

    def stop(self) -> int:
        """Stop every running node (SIGTERM, then SIGKILL after a grace period); return how many."""
        running = {node_id: self._pid(node_id) for node_id in self._node_ids()}
        running = {node_id: pid for node_id, pid in running.items() if pid is not None}
        for pid in running.values():
            send_signal(pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_S
        while any(self._pid(node_id) for node_id in running) and time.monotonic() < deadline:
            time.sleep(0.1)
        for node_id in running:
            pid = self._pid(node_id)
            if pid is not None:
                send_signal(pid, signal.SIGKILL)
                wait_gone(pid)
        for node_id in self._node_ids():
            self._pid_file(node_id).unlink(missing_ok=True)
        return len(running)

    def _node_ids(self) -> list[int]:
        return [node.node_id for node in self.settings.nodes()]

    def _wipe(self) -> None:
        for node_id in range(1, 4):
            shutil.rmtree(self.settings.node_dir(node_id), ignore_errors=True)
        # New SCRAM credentials go with new storage: the old ones were in the wiped metadata log.
        shutil.rmtree(self.settings.state_dir / "security", ignore_errors=True)
        self._state_file.unlink(missing_ok=True)

    # ------------------------------------------------------------------ logs

    def log_file(self, node_id: int) -> Path:
        """Return a node's server.log."""
        if node_id not in self._node_ids():
            raise BadInput(f"no node {node_id}; this cluster has nodes {self._node_ids()}")
        return self.settings.node_dir(node_id) / "logs" / "server.log"

    def tail_log(self, node_id: int, lines: int) -> list[str]:
        """Return the last lines of a node's server.log."""
        path = self.log_file(node_id)
        if not path.exists():
            return []
        with open(path, errors="replace") as log:
            return [line.rstrip("\n") for line in deque(log, maxlen=lines)]

    def last_log_line(self, node_id: int) -> str:
        """Return the most telling recent line of a node's logs, for one-line errors."""
        for name in ("server.log", "stdout.log"):
            path = self.settings.node_dir(node_id) / "logs" / name
            if path.exists():
                lines = [line for line in path.read_text(errors="replace").splitlines() if line.strip()]
                errors = [line for line in lines if "ERROR" in line or "Exception" in line]
                if errors or lines:
                    return (errors or lines)[-1][:300]
        return "no log output"
