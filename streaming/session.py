"""The one SparkSession factory, used by the streaming job, the face and the tests.

Under `spark-submit` the master and jars come from the command line and this factory only adds
eosbench's defaults; launched from plain Python it also sets `local[2]` and the given jars.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Mapping

from pyspark.sql import SparkSession

from conf.settings import console_log4j_config

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
}


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
) -> SparkSession:
    """Return a SparkSession with eosbench's defaults, the given jars and any overrides."""
    # Executors start `python3` from PATH unless told otherwise, and that interpreter does not
    # have eosbench's packages; point them (and the driver) at the one running now.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    # Everything eosbench runs is on loopback; this also silences Spark's hostname warning.
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = SparkSession.builder.appName(app_name)
    if master:
        builder = builder.master(master)
    elif not _launched_by_spark_submit():
        builder = builder.master(DEFAULT_MASTER)
    settings = dict(DEFAULT_CONF)
    jar_list = ",".join(str(jar) for jar in jars)
    if jar_list:
        settings["spark.jars"] = jar_list
    if monitoring:
        settings.update(MONITORING_CONF)
    settings.update(conf or {})
    for key, value in settings.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    return session


def _launched_by_spark_submit() -> bool:
    """Tell whether this Python process is the driver of a spark-submit launch."""
    # spark-submit starts the Python driver through py4j's gateway, and says so in the env.
    return "PYSPARK_GATEWAY_PORT" in os.environ
