"""The one SparkSession factory, used by the streaming job, the face and the tests.

eosbench's settings are defaults: each is applied only where the user has not set that key
(SparkConf's setIfMissing), so `spark-submit --conf spark.ui.enabled=true`, its `--master` and
`spark-defaults.conf` win. Only the caller's `conf` (e.g. `eosbench stream --conf k=v`) and jars
are applied as given. Launched from plain Python, the master defaults to `local[2,4]`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from pyspark import SparkConf, SparkContext
from pyspark.sql import SparkSession

from conf.secrets import SECRET_KEY_PATTERN, SECRET_VALUE_PATTERN
from conf.settings import console_log4j_config

if TYPE_CHECKING:
    from conf.stream_settings import StreamSettings

# Two threads, and up to four attempts per task: local mode otherwise never retries a failed
# task, and task retry is part of the exactly-once protocol being measured.
DEFAULT_MASTER = "local[2,4]"

# Modest on purpose: the brokers, the Python workers and Spark share two cores and the tests
# run all of them at once.
DEFAULT_CONF: dict[str, str] = {
    "spark.driver.memory": "1g",
    "spark.sql.shuffle.partitions": "2",
    "spark.ui.showConsoleProgress": "false",
    "spark.ui.enabled": "false",
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    "spark.speculation": "false",
    "spark.sql.streaming.stopGracefullyOnShutdown": "true",
    # The job sums numInputRows over a run's progress reports; keep all of a long run's.
    "spark.sql.streaming.numRecentProgressUpdates": "100000",
    "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile={console_log4j_config()}",
    # Passwords and keys of --command-config reach Spark as `kafka.`-prefixed source and writer
    # options: hidden on the UI's environment page, in the event log and in the plans it shows.
    "spark.redaction.regex": SECRET_KEY_PATTERN,
    "spark.sql.redaction.string.regex": SECRET_VALUE_PATTERN,
}


# Spark's Kafka source keeps one consumer per input partition in a pool on each executor. Once the
# pool holds spark.kafka.consumer.cache.capacity consumers (64 by default), every borrow logs "Pool
# exceeds its soft max size" and closes the oldest 15 % of the idle ones (commons-pool's
# clearOldest), so with more partitions than that each batch opens consumers again.
KAFKA_CONSUMER_CACHE_CAPACITY = "spark.kafka.consumer.cache.capacity"


def consumer_cache_defaults(input_partitions: int) -> dict[str, str]:
    """A Kafka consumer pool that holds every input partition's consumer with a quarter to spare, never fewer than 64.

    The pool clears its oldest idle consumers on every borrow once it is full, so it needs room
    beyond the query's own; but each consumer holds the topic's metadata, and a local driver
    holding 1,326 consumers of a 1,000-partition topic (a previous query's still idle in a pool
    of twice the partitions) ran out of its 1 GB heap.
    """
    return {KAFKA_CONSUMER_CACHE_CAPACITY: str(max(64, input_partitions + input_partitions // 4 + 16))}


# Spark's own metrics for Prometheus: the UI's executor endpoint and the driver's servlet sink.
MONITORING_CONF: dict[str, str] = {
    "spark.ui.enabled": "true",
    "spark.ui.port": "4040",
    "spark.ui.prometheus.enabled": "true",
    "spark.metrics.conf.*.sink.prometheusServlet.class": "org.apache.spark.metrics.sink.PrometheusServlet",
    "spark.metrics.conf.*.sink.prometheusServlet.path": "/metrics/prometheus",
    "spark.sql.streaming.metricsEnabled": "true",
}


def build_spark_session(
    app_name: str = "eosbench",
    master: str | None = None,
    jars: Iterable[str] = (),
    conf: Mapping[str, str] | None = None,
    monitoring: bool = False,
    defaults: Mapping[str, str] | None = None,
) -> SparkSession:
    """Return a SparkSession: eosbench's defaults (and `defaults`) where the user set nothing, then the given
    master, jars and conf."""
    # Executors start `python3` from PATH unless told otherwise, and that interpreter does not
    # have eosbench's packages; point them (and the driver) at the one running now.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    # Everything eosbench runs is on loopback; this also silences Spark's hostname warning.
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    settings = session_settings(user_settings(), master, jars, conf, monitoring, defaults)
    builder = SparkSession.builder.appName(app_name)
    for key, value in settings.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    return session


def session_settings(existing: Mapping[str, str], master: str | None = None, jars: Iterable[str] = (),
                     conf: Mapping[str, str] | None = None, monitoring: bool = False,
                     more_defaults: Mapping[str, str] | None = None) -> dict[str, str]:
    """The settings to give the builder: defaults for the keys `existing` lacks, then the explicit ones."""
    defaults = {"spark.master": DEFAULT_MASTER, **DEFAULT_CONF, **(MONITORING_CONF if monitoring else {}),
                **(more_defaults or {})}
    settings = {key: value for key, value in defaults.items() if key not in existing}
    if master:
        settings["spark.master"] = master
    jar_list = ",".join(str(jar) for jar in jars)
    if jar_list:
        settings["spark.jars"] = jar_list
    settings.update(conf or {})
    return settings


def user_settings() -> dict[str, str]:
    """What is already set for the SparkContext about to start: spark-submit's flags and spark-defaults.conf.

    Under spark-submit they are system properties of the JVM that launched this driver; a new
    SparkConf reads them once the gateway is up. Launched from plain Python, no JVM exists yet
    and the builder's settings are what it will start with. A running context's settings are
    its own.
    """
    active = SparkContext._active_spark_context
    if active is not None:
        return dict(active.getConf().getAll())
    if not _launched_by_spark_submit():
        return {}
    SparkContext._ensure_initialized()  # connects to spark-submit's gateway; starts no JVM
    return dict(SparkConf().getAll())


def _launched_by_spark_submit() -> bool:
    """Tell whether this Python process is the driver of a spark-submit launch."""
    # spark-submit starts the Python driver through py4j's gateway, and says so in the env.
    return "PYSPARK_GATEWAY_PORT" in os.environ


def session_defaults(settings: StreamSettings) -> dict[str, str]:
    """The job's Spark defaults that depend on its input: a Kafka consumer pool that holds every partition's consumer.

    Read before the session starts (the pool's capacity is fixed then); a broker that does not
    answer leaves Spark's own default, and the sink's first check says what is wrong.
    """
    from confluent_kafka import Consumer, KafkaException

    from conf.client_log import CLIENT_LOG

    reader = Consumer(settings.connection.librdkafka(**{"group.id": f"{settings.app_id}.metadata"}), logger=CLIENT_LOG)
    try:
        found = reader.list_topics(settings.input_topic, timeout=10).topics.get(settings.input_topic)
    except KafkaException:
        return {}
    finally:
        reader.close()
    return consumer_cache_defaults(len(found.partitions)) if found is not None and found.error is None else {}
