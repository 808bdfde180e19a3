"""Fill topics with the real seeded producer, and name what it committed."""

from __future__ import annotations

import io
from collections import Counter

from conf.produce_settings import ProduceSettings
from producers.perf import ProduceSummary, ProducerPerformance


def produce(bootstrap: str, topic: str, num_records: int, records_per_transaction: int,
            abort_ratio: float = 0.0, seed: int = 0, **extra) -> ProduceSummary:
    """Run `eosbench produce` in-process with deterministic commit points; quiet output."""
    fields = dict(topic=topic, bootstrap_server=bootstrap, num_records=num_records, record_size=100, throughput=-1,
                  records_per_transaction=records_per_transaction, transaction_abort_ratio=abort_ratio, seed=seed,
                  transactional_id=f"{topic}.fill", producer_props=("acks=all",))
    settings = ProduceSettings(**{**fields, **extra})
    return ProducerPerformance(settings, out=io.StringIO()).run()


def committed_ids(transactions) -> Counter:
    """The sequence numbers of every transaction logged as committed."""
    return Counter(seq for first, n, outcome in transactions if outcome == "committed"
                   for seq in range(first, first + n))


def aborted_ids(transactions) -> Counter:
    """The sequence numbers of every transaction logged as aborted."""
    return Counter(seq for first, n, outcome in transactions if outcome == "aborted"
                   for seq in range(first, first + n))


def commit_records(bootstrap: str, transactional_id: str, records: list[tuple]) -> None:
    """Commit (topic, key, value, headers[, partition]) records in one transaction; return once read_committed sees
    them (its commit markers are written). The partition is 0 where none is given."""
    from confluent_kafka import Producer

    from streaming.verify.verifier import wait_until_stable

    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id})
    producer.init_transactions(30)
    producer.begin_transaction()
    for topic, key, value, headers, *partition in records:
        producer.produce(topic, value, key, partition=partition[0] if partition else 0, headers=headers)
    producer.commit_transaction(30)
    assert wait_until_stable(bootstrap, sorted({topic for topic, *_ in records}), timeout_s=30) == []


def commit_keys(bootstrap: str, topic: str, keys, partition: int = 0, value: bytes = b"value") -> None:
    """Commit one transaction of records with these keys, in order, to one partition; return once
    its commit markers are written (only then does read_committed see the records)."""
    commit_records(bootstrap, f"{topic}.keys", [(topic, str(key).encode(), value, [], partition) for key in keys])
