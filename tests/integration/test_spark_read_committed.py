"""Spark's Kafka source with read_committed returns exactly the committed ids."""

from __future__ import annotations

from collections import Counter

from streaming.reader import read_topic, sequence_number_counts
from tests.integration.kafka_reads import read_all, sequence_numbers
from tests.integration.produce_helpers import aborted_ids, committed_ids, produce


def test_spark_batch_read_committed_returns_exactly_the_committed_ids(bootstrap, spark, new_topic):
    topic = new_topic(partitions=3)
    summary = produce(bootstrap, topic, 6_000, records_per_transaction=500, abort_ratio=0.4, seed=11)
    assert summary.transactions_committed and summary.transactions_aborted

    seen = sequence_number_counts(read_topic(spark, bootstrap, topic, "read_committed"))
    assert seen == committed_ids(summary.transactions)
    assert not set(seen) & set(aborted_ids(summary.transactions))
    assert read_topic(spark, bootstrap, topic, "read_uncommitted").count() == 6_000


def test_spark_agrees_with_a_plain_read_committed_consumer(bootstrap, spark, new_topic):
    topic = new_topic(partitions=2)
    summary = produce(bootstrap, topic, 900, records_per_transaction=100, abort_ratio=0.5, seed=2)
    oracle = Counter(sequence_numbers(read_all(bootstrap, topic)))
    assert oracle == committed_ids(summary.transactions)
    assert sequence_number_counts(read_topic(spark, bootstrap, topic)) == oracle
