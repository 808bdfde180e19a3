"""The face's entry to Spark: the session factory with the cached connector and Delta jars."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from pyspark.sql import SparkSession

from eosbench.local.environment import check_java
from eosbench.local.jars import resolve_bundle
from streaming.session import build_spark_session


def spark_session(app_name: str = "eosbench", master: str | None = None,
                  conf: Mapping[str, str] | None = None, monitoring: bool = False,
                  defaults: Mapping[str, str] | None = None, extra_jars: Sequence[Path] = ()) -> SparkSession:
    """Return a SparkSession carrying spark-sql-kafka and Delta from the jar cache, and `extra_jars` (e.g. S3A's)."""
    check_java()
    return build_spark_session(app_name=app_name, master=master, jars=[*resolve_bundle("spark"), *extra_jars], conf=conf,
                               monitoring=monitoring, defaults=defaults)
