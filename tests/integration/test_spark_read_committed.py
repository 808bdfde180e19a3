"""Spark's Kafka source with read_committed returns exactly the committed ids."""

from __future__ import annotations

from collections import Counter

from producers.transactional_fill import TransactionSpec, plan_transactions, write_transactions
from streaming.reader import read_topic, sequence_number_counts
from tests.integration.kafka_reads import read_all, sequence_numbers


def test_spark_batch_read_committed_returns_exactly_the_committed_ids(bootstrap, spark, new_topic):
    topic = new_topic(partitions=3)
    plan = plan_transactions(6_000, 500, abort_ratio=0.4, seed=11)
    assert any(not spec.commit for spec in plan) and any(spec.commit for spec in plan)
    filled = write_transactions(bootstrap, topic, plan, f"{topic}.tx", run_id="test")

    seen = sequence_number_counts(read_topic(spark, bootstrap, topic, "read_committed"))
    assert seen == Counter(filled.committed)
    assert set(seen).isdisjoint(filled.aborted)
    assert read_topic(spark, bootstrap, topic, "read_uncommitted").count() == 6_000


def test_spark_agrees_with_a_plain_read_committed_consumer(bootstrap, spark, new_topic):
    topic = new_topic(partitions=2)
    plan = [TransactionSpec(0, 40, True), TransactionSpec(40, 40, False), TransactionSpec(80, 10, True)]
    write_transactions(bootstrap, topic, plan, f"{topic}.tx", run_id="test")
    oracle = Counter(sequence_numbers(read_all(bootstrap, topic)))
    assert oracle == Counter([*range(0, 40), *range(80, 90)])
    assert sequence_number_counts(read_topic(spark, bootstrap, topic)) == oracle
