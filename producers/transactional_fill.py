"""A plain transactional fill: numbered records written in committed and aborted transactions.

It is the smallest producer that exercises read_committed end to end (the demo and the oracle
tests use it). Each record's key is its sequence number in ASCII, so every later check is a
multiset comparison of integers.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Iterable
from dataclasses import dataclass, field

from confluent_kafka import Producer

RUN_ID_HEADER = "eos.run_id"

_CLIENT_LOG = logging.getLogger("producers.kafka_client")
_CLIENT_LOG.addHandler(logging.NullHandler())
_CLIENT_LOG.propagate = False


class DeliveryFailed(RuntimeError):
    """A record of a transaction was not acknowledged, so the transaction was aborted."""


@dataclass(frozen=True)
class TransactionSpec:
    """One transaction: `count` records from sequence number `first_seq`, committed or aborted."""

    first_seq: int
    count: int
    commit: bool

    @property
    def sequence_numbers(self) -> range:
        """The sequence numbers this transaction writes."""
        return range(self.first_seq, self.first_seq + self.count)


@dataclass
class FillResult:
    """What a fill wrote, by outcome."""

    committed: list[int] = field(default_factory=list)
    aborted: list[int] = field(default_factory=list)
    transactions_committed: int = 0
    transactions_aborted: int = 0


def plan_transactions(
    num_records: int, records_per_transaction: int, abort_ratio: float, seed: int
) -> list[TransactionSpec]:
    """Split sequence numbers 0..num_records-1 into transactions, aborting a seeded share of them."""
    if not 0.0 <= abort_ratio <= 1.0:
        raise ValueError(f"abort ratio must lie in [0.0, 1.0], got {abort_ratio}")
    decide = random.Random(seed)
    return [
        TransactionSpec(first, min(records_per_transaction, num_records - first), decide.random() >= abort_ratio)
        for first in range(0, num_records, records_per_transaction)
    ]


def payload(seq: int, record_size: int, seed: int) -> bytes:
    """Return the deterministic payload of one record for a seed."""
    return random.Random(seed * 1_000_003 + seq).randbytes(record_size)


def write_transactions(
    bootstrap: str,
    topic: str,
    plan: Iterable[TransactionSpec],
    transactional_id: str,
    run_id: str,
    record_size: int = 100,
    seed: int = 0,
    timeout_s: float = 60.0,
) -> FillResult:
    """Write every planned transaction, committing or aborting each as planned."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": transactional_id, "linger.ms": 5},
        logger=_CLIENT_LOG,
    )
    failures: list[str] = []

    def on_delivery(error, _message) -> None:
        if error is not None:
            failures.append(error.str())

    producer.init_transactions(timeout_s)
    result = FillResult()
    headers = [(RUN_ID_HEADER, run_id.encode())]
    for spec in plan:
        producer.begin_transaction()
        for seq in spec.sequence_numbers:
            producer.produce(
                topic, key=str(seq).encode(), value=payload(seq, record_size, seed),
                headers=headers, on_delivery=on_delivery,
            )
            producer.poll(0)
        producer.flush(timeout_s)
        if failures:
            producer.abort_transaction(timeout_s)
            raise DeliveryFailed(f"{len(failures)} record(s) not delivered to {topic}: {failures[0]}")
        if spec.commit:
            producer.commit_transaction(timeout_s)
            result.committed.extend(spec.sequence_numbers)
            result.transactions_committed += 1
        else:
            producer.abort_transaction(timeout_s)
            result.aborted.extend(spec.sequence_numbers)
            result.transactions_aborted += 1
    return result
