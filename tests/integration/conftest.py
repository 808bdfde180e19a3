"""Session-scoped real infrastructure: one KRaft broker and one SparkSession for the whole run.

The test broker listens on 19092 (controller 19192, JMX exporter 19292) with its state in a
pytest temp folder, so a user's own `eosbench broker start` on 9092 is left alone. The secured
broker (SASL_SSL, SCRAM-SHA-512, ACLs) listens on 19492 (19592, 19692), the Spark standalone
cluster on 17177 (UI 18180), the HDFS on 18020 (NameNode RPC; its HTTP and the DataNode's ports
on 18021-18024), the YARN on 28032-28039 (apart from `eosbench yarn start`'s default 18032) and
the S3 server on 18333; each starts only when a test asks for it. The short-retention broker of
tests/integration/idle_retention.py listens on 19700 (19800, 19900).
EOSBENCH_TEST_BROKER_PORT moves the test broker, so that two runs on one machine do not collide.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from conf.local_servers import ClusterSettings, HdfsSettings, S3Settings, SparkClusterSettings, YarnSettings
from conf.stream_settings import StreamSettings
from eosbench.local.broker import LocalCluster
from eosbench.local.executor_env import ExecutorEnvironment, executor_environment
from eosbench.local.hdfs import LocalHdfs
from eosbench.local.kafka_admin import create_topic
from eosbench.local.s3 import LocalS3
from eosbench.local.spark import spark_session
from eosbench.local.spark_cluster import StandaloneCluster
from eosbench.local.yarn import LocalYarn
from tests.integration.idle_retention import IdleRetentionRun
from tests.integration.produce_helpers import produce

TEST_BROKER_PORT = int(os.environ.get("EOSBENCH_TEST_BROKER_PORT", "19092"))
SECURED_TEST_BROKER_PORT = 19492
# The soak's own standalone cluster (test_soak.py) uses 17077/18080: a worker fault there must
# not touch this one.
STANDALONE_MASTER_PORT, STANDALONE_UI_PORT = 17177, 18180
TEST_HDFS_PORT = 18020
TEST_YARN_PORT = 28032
TEST_S3_PORT = 18333


def pytest_collection_modifyitems(items):
    """Mark everything under tests/integration as integration, and put the overlapped tests last."""
    for item in items:
        if "/integration/" in str(item.fspath):
            item.add_marker(pytest.mark.integration)
    # An overlapped test's scenario runs in the background from the soaks' start (below), so the
    # later its judging comes, the more of its wait the other tests cover. The sort is stable.
    items.sort(key=lambda item: item.get_closest_marker("overlapped") is not None)


@pytest.fixture(scope="session")
def overlapped_scenarios(request) -> None:
    """Start the background scenario of every collected overlapped test (test_soak.py asks for this first).

    Not from the session's first test: some tests must see work done within a few seconds (a
    real-time epoch's backlog committed inside 8 s missed it with the scenario's two Spark JVMs
    beside it), while the soaks wait on progress, not time.
    """
    wanted = {name for item in request.session.items if item.get_closest_marker("overlapped")
              for name in item.fixturenames if name in OVERLAPPED_SCENARIOS}
    for name in sorted(wanted):
        request.getfixturevalue(name)


@pytest.fixture(scope="session")
def kafka_cluster(tmp_path_factory) -> Iterator[LocalCluster]:
    """A real single-node KRaft cluster, started once and stopped at the end of the session."""
    yield from _session_cluster(ClusterSettings(brokers=1, port=TEST_BROKER_PORT,
                                                state_dir=tmp_path_factory.mktemp("cluster")))


def _session_cluster(settings: ClusterSettings) -> Iterator[LocalCluster]:
    """Start a fresh cluster, hand it over, stop it when the session ends."""
    cluster = LocalCluster(settings)
    cluster.start(fresh=True)
    yield cluster
    cluster.stop()


@pytest.fixture(scope="session")
def idle_retention_run(tmp_path_factory) -> Iterator[IdleRetentionRun]:
    """Two streams idle past the offsets' retention on a broker of their own, the scenario run in the background."""
    run = IdleRetentionRun(tmp_path_factory.mktemp("idle-retention"))
    try:
        run.start()
        yield run
    finally:
        run.stop()


OVERLAPPED_SCENARIOS = ("idle_retention_run",)


@pytest.fixture(scope="session")
def bootstrap(kafka_cluster: LocalCluster) -> str:
    """The test cluster's bootstrap servers."""
    return kafka_cluster.settings.bootstrap_servers


@pytest.fixture(scope="session")
def secured_cluster(tmp_path_factory) -> Iterator[LocalCluster]:
    """A real single-node KRaft cluster with a SASL_SSL (SCRAM-SHA-512) listener and StandardAuthorizer."""
    yield from _session_cluster(ClusterSettings(brokers=1, port=SECURED_TEST_BROKER_PORT, heap_mb=256,
                                                security="sasl-ssl",
                                                state_dir=tmp_path_factory.mktemp("secured-cluster")))


@pytest.fixture(scope="session")
def secured_bootstrap(secured_cluster: LocalCluster) -> str:
    """The secured cluster's bootstrap servers."""
    return secured_cluster.settings.bootstrap_servers


@pytest.fixture(scope="session")
def admin_properties(secured_cluster: LocalCluster) -> Path:
    """The secured cluster's admin (super user) client.properties, for --command-config."""
    return secured_cluster.client_properties


@pytest.fixture
def secured_topic(secured_cluster: LocalCluster) -> Callable[..., str]:
    """Create a uniquely named topic on the secured cluster (as the admin); returns its name."""

    def create(partitions: int = 1, prefix: str = "s") -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:10]}"
        create_topic(secured_cluster.connection, name, partitions, 1)
        return name

    return create


@pytest.fixture(scope="session")
def hdfs_cluster(tmp_path_factory) -> Iterator[LocalHdfs]:
    """A real HDFS (one NameNode, one DataNode, 256 MB heaps), started once and stopped at the end of the session.

    `hdfs_cluster.uri` is hdfs://127.0.0.1:18020; `hdfs_cluster.restart_namenode()` SIGKILLs the
    NameNode and brings it back. A test that breaks it leaves it writable again.
    """
    hdfs = LocalHdfs(HdfsSettings(port=TEST_HDFS_PORT, state_dir=tmp_path_factory.mktemp("hdfs")))
    hdfs.start(fresh=True)
    yield hdfs
    hdfs.stop()


@pytest.fixture(scope="session")
def yarn_cluster(tmp_path_factory) -> Iterator[LocalYarn]:
    """A real YARN (one ResourceManager, one NodeManager of 6 GB and 4 vcores), started once and stopped at the end of the session.

    `yarn_cluster.conf_dir` is the HADOOP_CONF_DIR a driver needs; `eosbench.local.yarn.spark_yarn_conf`
    the Spark settings. Stopping it also kills any container a test left running.
    """
    yarn = LocalYarn(YarnSettings(port=TEST_YARN_PORT, state_dir=tmp_path_factory.mktemp("yarn")))
    yarn.start(fresh=True)
    yield yarn
    yarn.stop()


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory) -> Iterator[LocalS3]:
    """A real S3 API (S3Proxy, objects on disk, 256 MB heap) on 18333 with the bucket `eosbench`, started once.

    Its S3A settings (endpoint, keys) are in `s3_server.settings.credentials_file`, for `eosbench
    stream --s3a-config`; `s3_server.restart()` SIGKILLs it and starts it again with what it held,
    `restart(wipe=True)` with an empty bucket.
    """
    s3 = LocalS3(S3Settings(port=TEST_S3_PORT, state_dir=tmp_path_factory.mktemp("s3")))
    s3.start(fresh=True)
    yield s3
    s3.stop()


@pytest.fixture(scope="session")
def spark(kafka_cluster):
    """One local[2] SparkSession with the cached Kafka and Delta jars."""
    session = spark_session("eosbench-tests")
    yield session
    session.stop()


@pytest.fixture
def new_topic(bootstrap: str) -> Callable[..., str]:
    """Create a uniquely named topic; returns its name."""

    def create(partitions: int = 1, prefix: str = "t") -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:10]}"
        create_topic(bootstrap, name, partitions, replication_factor=1)
        return name

    return create


@pytest.fixture(scope="session")
def spark_standalone(tmp_path_factory) -> Iterator[StandaloneCluster]:
    """A Spark standalone master and one two-core worker on loopback, started once; the worker inherits no
    project Python (StandaloneCluster starts it without PYSPARK_PYTHON, PYTHONPATH or the venv on PATH)."""
    cluster = StandaloneCluster(SparkClusterSettings(workers=1, worker_cores=2, master_port=STANDALONE_MASTER_PORT,
                                                     master_ui_port=STANDALONE_UI_PORT,
                                                     state_dir=tmp_path_factory.mktemp("spark-standalone")))
    cluster.start()
    yield cluster
    cluster.stop()


@pytest.fixture(scope="session")
def packed_environment() -> ExecutorEnvironment:
    """The executors' Python environment of the code under test (`eosbench package`), built at most once."""
    return executor_environment()


@pytest.fixture
def checkpoint(request, tmp_path) -> str:
    """The pipeline's --checkpoint: a bare local path, unless a test asks (indirect) for a file:// URI, HDFS or S3."""
    kind = getattr(request, "param", "path")
    if kind == "hdfs":
        return f"{request.getfixturevalue('hdfs_cluster').uri}/checkpoints/{tmp_path.name}"
    if kind == "s3a":
        return f"{request.getfixturevalue('s3_server').settings.bucket_uri}/checkpoints/{tmp_path.name}"
    return {"path": str(tmp_path / "checkpoint"), "file-uri": f"file://{tmp_path}/checkpoint"}[kind]


@pytest.fixture
def pipeline(bootstrap, new_topic, checkpoint):
    """A filled input (abort ratio 0.3), an empty output and its dead-letter topic, and settings."""
    source, sink = new_topic(partitions=3, prefix="in"), new_topic(partitions=3, prefix="out")
    create_topic(bootstrap, f"{sink}.dlq", 1, 1)
    produce(bootstrap, source, 12_000, records_per_transaction=500, abort_ratio=0.3, seed=4)

    def settings(**overrides) -> StreamSettings:
        # Partition scope and Spark's source by name, as the tests of their behaviour need; the defaults
        # (auto) have tests of their own.
        fields = dict(input_topic=source, output_topic=sink, bootstrap_server=bootstrap, app_id=f"app-{sink}",
                      checkpoint=checkpoint, max_offsets_per_trigger=3_000, txn_scope="partition", source="spark")
        return StreamSettings(**{**fields, **overrides})

    return settings
