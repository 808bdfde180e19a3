"""The face's entry to Spark: the session factory with the cached connector and Delta jars, and a cluster master's settings."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from pyspark.sql import SparkSession

from eosbench.local.environment import check_java
from eosbench.local.executor_env import executor_conf, executor_environment, ships_environment
from eosbench.local.jars import resolve_bundle
from eosbench.local.yarn import yarn_target
from streaming.session import build_spark_session


def spark_session(app_name: str = "eosbench", master: str | None = None,
                  conf: Mapping[str, str] | None = None, monitoring: bool = False,
                  defaults: Mapping[str, str] | None = None, extra_jars: Sequence[Path] = ()) -> SparkSession:
    """Return a SparkSession carrying spark-sql-kafka and Delta from the jar cache, and `extra_jars` (e.g. S3A's)."""
    check_java()
    return build_spark_session(app_name=app_name, master=master, jars=[*resolve_bundle("spark"), *extra_jars], conf=conf,
                               monitoring=monitoring, defaults=defaults)


def cluster_spark_conf(master: str | None, conf: dict[str, str], yarn_state_dir: Path | None = None) -> dict[str, str]:
    """`conf` plus, for a cluster's master, the settings that run the executors from the archive (built if need be).

    PySpark names the executors' Python from the driver's PYSPARK_PYTHON alone, so that is set too;
    on YARN so is HADOOP_CONF_DIR (yarn_target's), the only way Spark finds the ResourceManager.
    """
    if not ships_environment(master):
        return conf
    if master == "yarn":
        target = yarn_target(yarn_state_dir)  # before the archive: a missing YARN fails in a second
        merged = {**target.spark_conf(executor_environment().archive), **conf}
        os.environ.update(target.environment())
        # Spark's YARN client hands its own PYTHONPATH to the AM and every executor, ahead of the
        # archive's site-packages: a source tree there would shadow the packed code (and on another
        # node names nothing). This process has already read it.
        os.environ.pop("PYTHONPATH", None)
    else:
        merged = {**executor_conf(executor_environment()), **conf}
    os.environ["PYSPARK_PYTHON"] = merged["spark.pyspark.python"]
    return merged
