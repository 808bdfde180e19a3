"""The shapes of the local servers on loopback: the KRaft broker, Spark standalone, HDFS, YARN and S3Proxy.

Each `eosbench <server> start` builds one of these from its flags and records it in its state
folder; the broker's, HDFS's and YARN's config files are rendered from the templates beside this
module. What every command shares (client settings, the files the user names, jar bundles) stays
in conf/settings.py.
"""

from __future__ import annotations

import string
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_serializer

from conf.settings import CONF_DIR, SettingsError, eosbench_home

DEFAULT_CLIENT_PORT = 9092
# Per-node port families sit 100 apart so that nodes 0..2 never collide across families.
CONTROLLER_PORT_OFFSET = 100
JMX_EXPORTER_PORT_OFFSET = 200
# 512 MB is the default; a broker holding several 1,000-partition topics needs more (one at 424 of
# 512 MB stopped answering metadata requests in a 1,000-partition bench).
MAX_BROKER_HEAP_MB = 4096

# --------------------------------------------------------------------------- local cluster


class NodePorts(BaseModel):
    """The loopback ports of one broker node."""

    model_config = ConfigDict(frozen=True)

    node_id: int
    client: int
    controller: int
    jmx_exporter: int

    def by_role(self) -> dict[str, int]:
        """Every port this node listens on, by what it serves."""
        return {"client port": self.client, "controller port": self.controller, "JMX exporter": self.jmx_exporter}


class ClusterSettings(BaseModel):
    """Shape of the local KRaft cluster that `eosbench broker start` runs."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    brokers: Literal[1, 3] = 1
    port: int = Field(DEFAULT_CLIENT_PORT, ge=1024, le=65535 - JMX_EXPORTER_PORT_OFFSET - 3)
    state_dir: Path = Field(default_factory=lambda: eosbench_home() / "cluster")
    heap_mb: int = Field(512, ge=128, le=MAX_BROKER_HEAP_MB)
    offsets_partitions: int = Field(8, ge=1)
    transaction_state_partitions: int = Field(8, ge=1)
    # Broker settings added after the template's (a later line wins in a .properties file), such as
    # a short offsets.retention.minutes for a cluster that shows offsets expiring.
    server_properties: dict[str, str] = Field(default_factory=dict)
    # "sasl-ssl": the client listener is SASL_SSL (SCRAM-SHA-512) with StandardAuthorizer.
    security: Literal["plaintext", "sasl-ssl"] = "plaintext"

    @field_validator("server_properties")
    @classmethod
    def _one_line_each(cls, properties: dict[str, str]) -> dict[str, str]:
        for key, value in properties.items():
            if not key.strip() or any(c in key + value for c in "\r\n") or "=" in key:
                raise ValueError(f"not a one-line broker property: {key!r}={value!r}")
        return properties

    @model_serializer(mode="wrap")
    def _without_empty_extras(self, handler) -> dict:
        # A cluster recorded before server_properties existed keeps the same shape (broker.py compares them).
        shape = handler(self)
        if not shape.get("server_properties", True):
            del shape["server_properties"]
        if shape.get("security") == "plaintext":
            del shape["security"]
        return shape

    @property
    def replication_factor(self) -> int:
        """Internal topics are replicated to every node."""
        return self.brokers

    @property
    def min_insync_replicas(self) -> int:
        """Two of three acknowledgements on a cluster; one on a single node."""
        return 2 if self.brokers == 3 else 1

    @property
    def broker_session_timeout_ms(self) -> int:
        """Kafka's 9 s on a cluster, where fencing a silent broker moves its leaders; 30 s on one node.

        A single node has nobody to hand its leaders to, so fencing itself only does harm: when a
        loaded two-core machine stalled the JVM for 12 s, the node fenced itself, and Kafka 4.3.1's
        marker channel skipped the commit markers of a transaction whose partitions had no leader
        for that moment ("likely deleted already"), which left it hanging on the output and on
        __consumer_offsets for good.
        """
        return 9_000 if self.brokers > 1 else 30_000

    def nodes(self) -> list[NodePorts]:
        """Return every node's ports, node ids counting from 1."""
        return [
            NodePorts(
                node_id=index + 1,
                client=self.port + index,
                controller=self.port + CONTROLLER_PORT_OFFSET + index,
                jmx_exporter=self.port + JMX_EXPORTER_PORT_OFFSET + index,
            )
            for index in range(self.brokers)
        ]

    @property
    def bootstrap_servers(self) -> str:
        """The comma-separated client listeners of every node."""
        return ",".join(f"127.0.0.1:{node.client}" for node in self.nodes())

    def node_dir(self, node_id: int) -> Path:
        """Return the folder holding one node's data, logs, config and pid file."""
        return self.state_dir / f"node-{node_id}"

    @property
    def secured(self) -> bool:
        """Whether clients must speak SASL_SSL."""
        return self.security == "sasl-ssl"

    def render_server_properties(self, node: NodePorts, security_values: dict[str, str] | None = None) -> str:
        """Fill conf/broker/server.properties for one node; a secured cluster appends conf/broker/sasl-ssl.properties.

        `security_values` fills the latter's placeholders (keystore, truststore, admin_user,
        admin_password, broker_cn): they come from the cluster's material, which this floor does not make.
        """
        template = string.Template((CONF_DIR / "broker" / "server.properties").read_text())
        voters = ",".join(f"{n.node_id}@127.0.0.1:{n.controller}" for n in self.nodes())
        extra = "".join(f"{key}={value}\n" for key, value in self.server_properties.items())
        secured = ""
        if self.secured:
            if security_values is None:
                raise SettingsError("a sasl-ssl cluster's server.properties needs its security material")
            secured = string.Template((CONF_DIR / "broker" / "sasl-ssl.properties").read_text()).substitute(
                security_values)
        return template.substitute(
            client_listener="SASL_SSL" if self.secured else "PLAINTEXT",
            controller_protocol="SSL" if self.secured else "PLAINTEXT",
            node_id=node.node_id,
            quorum_voters=voters,
            client_port=node.client,
            controller_port=node.controller,
            data_dir=self.node_dir(node.node_id) / "data",
            replication_factor=self.replication_factor,
            min_insync_replicas=self.min_insync_replicas,
            offsets_partitions=self.offsets_partitions,
            transaction_state_partitions=self.transaction_state_partitions,
            broker_session_timeout_ms=self.broker_session_timeout_ms,
        ) + secured + extra


def broker_log4j_config() -> Path:
    """Return the log4j2 configuration every broker JVM starts with."""
    return CONF_DIR / "broker" / "log4j2.properties"


def jmx_exporter_config() -> Path:
    """Return the JMX exporter rules attached to every broker."""
    return CONF_DIR / "broker" / "jmx-exporter.yaml"


# --------------------------------------------------------------------------- Spark standalone


class SparkClusterSettings(BaseModel):
    """Shape of the Spark standalone cluster that `eosbench cluster start` runs on loopback."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    workers: int = Field(2, ge=1, le=4)
    worker_cores: int = Field(1, ge=1)
    worker_memory_mb: int = Field(1024, ge=512)
    master_port: int = Field(7077, ge=1024, le=65000)
    master_ui_port: int = Field(8080, ge=1024, le=65000)
    state_dir: Path = Field(default_factory=lambda: eosbench_home() / "spark-cluster")

    @property
    def master_url(self) -> str:
        """The spark:// URL that spark-submit --master takes."""
        return f"spark://127.0.0.1:{self.master_port}"

    def worker_ui_port(self, index: int) -> int:
        """Each worker's web UI port, counting from the master's plus one."""
        return self.master_ui_port + 1 + index


# --------------------------------------------------------------------------- local HDFS

DEFAULT_NAMENODE_PORT = 8020
HDFS_DAEMONS = ("namenode", "datanode")


class HdfsPorts(BaseModel):
    """The loopback ports of the local HDFS, five in a row from the NameNode's RPC port."""

    model_config = ConfigDict(frozen=True)

    namenode: int
    namenode_http: int
    datanode: int
    datanode_http: int
    datanode_ipc: int

    def of_daemon(self, daemon: str) -> dict[str, int]:
        """Every port one daemon listens on, by what it serves."""
        if daemon == "namenode":
            return {"NameNode RPC port": self.namenode, "NameNode HTTP port": self.namenode_http}
        return {"DataNode data port": self.datanode, "DataNode HTTP port": self.datanode_http,
                "DataNode IPC port": self.datanode_ipc}


class HdfsSettings(BaseModel):
    """Shape of the local HDFS (one NameNode, one DataNode) that `eosbench hdfs start` runs."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    port: int = Field(DEFAULT_NAMENODE_PORT, ge=1024, le=65535 - 4)
    heap_mb: int = Field(256, ge=128, le=1024)
    state_dir: Path = Field(default_factory=lambda: eosbench_home() / "hdfs")

    @property
    def ports(self) -> HdfsPorts:
        """NameNode RPC on `port`, its HTTP on +1, the DataNode's data, HTTP and IPC on +2, +3, +4."""
        return HdfsPorts(namenode=self.port, namenode_http=self.port + 1, datanode=self.port + 2,
                         datanode_http=self.port + 3, datanode_ipc=self.port + 4)

    @property
    def uri(self) -> str:
        """The file system's root URI, for fs.defaultFS and for hdfs:// checkpoint paths."""
        return f"hdfs://127.0.0.1:{self.port}"

    @property
    def conf_dir(self) -> Path:
        """The folder of the rendered core-site.xml and hdfs-site.xml (first on each daemon's classpath)."""
        return self.state_dir / "conf"

    def render_site_files(self) -> dict[str, str]:
        """Fill conf/hdfs/core-site.xml and hdfs-site.xml for this shape, by file name."""
        ports = self.ports
        values = {"state_dir": self.state_dir, "namenode_port": ports.namenode,
                  "namenode_http_port": ports.namenode_http, "datanode_port": ports.datanode,
                  "datanode_http_port": ports.datanode_http, "datanode_ipc_port": ports.datanode_ipc}
        return {name: string.Template((CONF_DIR / "hdfs" / name).read_text()).substitute(values)
                for name in ("core-site.xml", "hdfs-site.xml")}


def hdfs_log4j_config() -> Path:
    """Return the log4j (reload4j) configuration both HDFS daemons start with."""
    return CONF_DIR / "hdfs" / "log4j.properties"


# --------------------------------------------------------------------------- local YARN

# Hadoop's own defaults (8030-8033, 8088, 8040, 8042) moved up by 10,000, so that a YARN of
# the machine's own, if any, keeps its ports.
DEFAULT_RESOURCEMANAGER_PORT = 18032
YARN_DAEMONS = ("resourcemanager", "nodemanager")
# The local disk under a second name, which the local YARN's core-site.xml mounts (viewfs, every
# path as on file:///): Spark's YARN client takes a resource of another scheme than file: where it
# is, on the staging folder's file system, instead of copying it into each application's own.
YARN_LOCAL_DISK = "viewfs://eosbench-local"


class YarnPorts(BaseModel):
    """The loopback ports of the local YARN, eight in a row from the ResourceManager's client port."""

    model_config = ConfigDict(frozen=True)

    resourcemanager: int  # the client (application submission) port, yarn.resourcemanager.address
    scheduler: int
    resource_tracker: int
    admin: int
    resourcemanager_web: int
    nodemanager: int  # the container manager, which the application master asks to launch containers
    localizer: int
    nodemanager_web: int

    def of_daemon(self, daemon: str) -> dict[str, int]:
        """Every port one daemon listens on, by what it serves."""
        if daemon == "resourcemanager":
            return {"ResourceManager client port": self.resourcemanager, "ResourceManager scheduler port": self.scheduler,
                    "ResourceManager resource tracker port": self.resource_tracker,
                    "ResourceManager admin port": self.admin, "ResourceManager web port": self.resourcemanager_web}
        return {"NodeManager container manager port": self.nodemanager, "NodeManager localizer port": self.localizer,
                "NodeManager web port": self.nodemanager_web}


class YarnSettings(BaseModel):
    """Shape of the local YARN (one ResourceManager, one NodeManager) that `eosbench yarn start` runs."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    port: int = Field(DEFAULT_RESOURCEMANAGER_PORT, ge=1024, le=65535 - 7)
    heap_mb: int = Field(384, ge=128, le=1024)
    # What the NodeManager offers its containers. The machine has 2 cores; YARN only books vcores
    # (no cgroups here), so 4 lets a driver's AM and three 1-core executors share them as Spark
    # standalone's workers would.
    node_memory_mb: int = Field(6144, ge=1024, le=65536)
    node_vcores: int = Field(4, ge=1, le=64)
    # file:/// works on one host: the staging dir and every localized file are local paths that
    # the NodeManager reads directly. An hdfs:// URI (`eosbench hdfs start`) works as well.
    default_fs: str = "file:///"
    state_dir: Path = Field(default_factory=lambda: eosbench_home() / "yarn")

    @property
    def ports(self) -> YarnPorts:
        """The ResourceManager's client, scheduler, tracker, admin and web ports on `port`..+4; the NodeManager's on +5..+7."""
        return YarnPorts(resourcemanager=self.port, scheduler=self.port + 1, resource_tracker=self.port + 2,
                         admin=self.port + 3, resourcemanager_web=self.port + 4, nodemanager=self.port + 5,
                         localizer=self.port + 6, nodemanager_web=self.port + 7)

    @property
    def conf_dir(self) -> Path:
        """The HADOOP_CONF_DIR: rendered core-site.xml and yarn-site.xml, for the daemons and for spark-submit."""
        return self.state_dir / "conf"

    @property
    def local_dirs(self) -> Path:
        """yarn.nodemanager.local-dirs: where containers' working folders and localized files live."""
        return self.state_dir / "nm-local"

    def render_site_files(self) -> dict[str, str]:
        """Fill conf/yarn/core-site.xml and yarn-site.xml for this shape, by file name."""
        ports = self.ports
        values = {"state_dir": self.state_dir, "default_fs": self.default_fs, "local_dirs": self.local_dirs,
                  "local_disk_table": YARN_LOCAL_DISK.removeprefix("viewfs://"),
                  "node_memory_mb": self.node_memory_mb, "node_vcores": self.node_vcores,
                  **{f"{name}_port": port for name, port in ports.model_dump().items()}}
        return {name: string.Template((CONF_DIR / "yarn" / name).read_text()).substitute(values)
                for name in ("core-site.xml", "yarn-site.xml")}


def yarn_log4j_config() -> Path:
    """Return the log4j (reload4j) configuration both YARN daemons start with."""
    return CONF_DIR / "yarn" / "log4j.properties"


# --------------------------------------------------------------------------- local S3 (S3Proxy)

DEFAULT_S3_PORT = 9333
# What S3A must be told to speak to a plain-HTTP, path-style S3 on loopback with fixed keys.
S3A_PROVIDER = "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"


class S3Settings(BaseModel):
    """Shape of the local S3 API server (S3Proxy over a local folder) that `eosbench s3 start` runs."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    port: int = Field(DEFAULT_S3_PORT, ge=1024, le=65535)
    heap_mb: int = Field(256, ge=128, le=1024)
    bucket: str = Field("eosbench", pattern=r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")  # S3's bucket naming rules
    state_dir: Path = Field(default_factory=lambda: eosbench_home() / "s3")

    @property
    def endpoint(self) -> str:
        """The server's HTTP endpoint on loopback."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def bucket_uri(self) -> str:
        """The bucket's root as an S3A URI, for s3a:// checkpoint paths."""
        return f"s3a://{self.bucket}"

    @property
    def credentials_file(self) -> Path:
        """The 0600 file of Hadoop properties (endpoint, keys) that S3A clients read: `eosbench stream --s3a-config`."""
        return self.state_dir / "s3a.properties"

    @property
    def objects_dir(self) -> Path:
        """Where the server keeps the bucket's objects, one file each, so that a restart keeps them."""
        return self.state_dir / "objects"

    def render_server_properties(self, access_key: str, secret_key: str) -> str:
        """S3Proxy's --properties file: loopback, jclouds' on-disk backend, AWS v2 or v4 signatures with these keys.

        On disk (`filesystem`), so that a SIGKILLed and restarted server (the soak's restart-s3)
        still holds the checkpoint, as S3 would. That backend lists no marker object of an empty
        folder, which Spark's default checkpoint file manager trips on (FileContext refuses to
        create `offsets/.0.tmp` under a parent it cannot see); the s3a checkpoint's own manager,
        streaming/source/jvm/ObjectStoreCheckpointFileManager.java, writes through the FileSystem API,
        which does not ask, as S3 itself does not.
        """
        return "\n".join([
            f"s3proxy.endpoint={self.endpoint}",
            "s3proxy.authorization=aws-v2-or-v4",
            f"s3proxy.identity={access_key}",
            f"s3proxy.credential={secret_key}",
            "jclouds.provider=filesystem",
            f"jclouds.filesystem.basedir={self.objects_dir}",
            # The on-disk provider ignores them, yet jclouds refuses to build a context without.
            "jclouds.identity=local",
            "jclouds.credential=local",
            "",
        ])

    def s3a_properties(self, access_key: str, secret_key: str) -> dict[str, str]:
        """The Hadoop settings with which S3A reaches this server: endpoint, path-style, plain HTTP, fixed keys."""
        return {
            "fs.s3a.endpoint": self.endpoint,
            # S3Proxy answers on one host name, not <bucket>.<host>.
            "fs.s3a.path.style.access": "true",
            "fs.s3a.connection.ssl.enabled": "false",
            # Any region: S3Proxy checks v4 signatures whatever region they name, and a set one keeps
            # the SDK from probing EC2's metadata service for it.
            "fs.s3a.endpoint.region": "us-east-1",
            "fs.s3a.aws.credentials.provider": S3A_PROVIDER,
            "fs.s3a.access.key": access_key,
            "fs.s3a.secret.key": secret_key,
            # The SDK signs a bulk delete with x-amz-checksum-crc32, which S3Proxy 2.6.0 refused (501):
            # S3A then deletes object by object, as Hadoop's advice for such stores says.
            "fs.s3a.multiobjectdelete.enable": "false",
        }


def s3proxy_log_config() -> Path:
    """Return the logback configuration S3Proxy starts with (console output at INFO, no request bodies)."""
    return CONF_DIR / "s3" / "logback.xml"
