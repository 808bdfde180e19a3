"""Batch reads of a Kafka topic through Spark, with an explicit isolation level."""

from __future__ import annotations

from collections import Counter
from typing import Literal

from pyspark.sql import DataFrame, SparkSession

from conf.client_config import Connection, connection
from conf.stream_settings import SOURCE_OPTION_DEFAULTS

Isolation = Literal["read_committed", "read_uncommitted"]


def read_topic(spark: SparkSession, bootstrap: str | Connection, topic: str,
               isolation: Isolation = "read_committed") -> DataFrame:
    """Return every record of a topic, earliest to latest, as Spark's Kafka source sees it.

    Every task reads its partition to the end, so it takes the streaming job's short fetch wait
    (conf/stream_settings.py says why): with Kafka's 500 ms, each partition would add half a second.
    """
    return (
        spark.read.format("kafka")
        .options(**SOURCE_OPTION_DEFAULTS)
        .options(**connection(bootstrap).client_config.spark_kafka_options())
        .option("kafka.bootstrap.servers", str(bootstrap))
        .option("subscribe", topic)
        .option("kafka.isolation.level", isolation)
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .option("includeHeaders", "true")
        .load()
    )


def sequence_number_counts(records: DataFrame) -> Counter[int]:
    """Count each sequence number (the record key) in a Kafka DataFrame; small topics only."""
    return Counter(
        int(row.seq) for row in records.selectExpr("cast(cast(key as string) as bigint) as seq").collect()
    )
