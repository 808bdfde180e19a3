"""Streaming benches with the plain client: poll, process, produce (EOSPerformance, kafka-tx-performance).

A unit is `records_per_transaction` records taken from the read_committed consumer. Base mode
sends them with an idempotent producer, waits for every acknowledgement and commits the offsets
with `commitSync`
(BaseStreamingBench). Tx mode wraps the same unit in begin, send, `send_offsets_to_transaction`
and commit (TxStreamingBench; with one record per unit, exactly the seed's benchmark). As in the
seed, each unit's latency covers the write path only (sends and the offset commit), while the
throughput covers everything, polls included. This is the ceiling the Spark sink is held to.

With `mark_transactions`, tx mode stamps each record with its transaction's `eos.txn` header
(conf/headers.py: input partition `*`, the unit's number as the batch) and notes the wall-clock
moment each `commit_transaction` returned, so that a visibility observer (streaming/verify/visibility.py,
run by the caller) can time the LSO's advance. Off, the loop pays for neither.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from conf.client_config import Connection, connection
from conf.client_log import CLIENT_LOG
from conf.failures import kafka_failure, kafka_reason
from conf.headers import transaction_identity, txn_header
from producers.write_bench import latency_percentiles_ms

Mode = Literal["base", "tx"]


@dataclass
class StreamingBenchResult:
    """One mode's measured units: per-unit write-path latency and the overall rate."""

    mode: Mode
    latencies_s: np.ndarray
    records: int
    seconds: float
    register_round_trips: int = 0

    @property
    def records_per_sec(self) -> float:
        """Records processed per second over the measured units, polls included."""
        return self.records / self.seconds if self.seconds > 0 else 0.0

    def percentiles_ms(self) -> dict[str, float]:
        """The unit latency percentiles, plus the throughput."""
        return {**latency_percentiles_ms(self.latencies_s), "records_per_sec": self.records_per_sec}


class StreamingBench:
    """One consumer and one producer copying `input_topic` to `output_topic` unit by unit."""

    def __init__(self, bootstrap: str | Connection, input_topic: str, output_topic: str, mode: Mode, group_id: str,
                 records_per_transaction: int = 1, poll_timeout_s: float = 0.1,
                 consumer_config: dict[str, str] | None = None, producer_config: dict[str, str] | None = None,
                 transactional_id: str | None = None,
                 producer_factory: Callable[[dict, str, str], object] | None = None, pre_register: bool = False,
                 mark_transactions: bool = False):
        self.mode, self.input_topic, self.output_topic = mode, input_topic, output_topic
        self.group_id, self.per_unit, self.poll_timeout_s = group_id, records_per_transaction, poll_timeout_s
        cluster = connection(bootstrap)
        self.consumer = Consumer(cluster.librdkafka(**{
            "group.id": group_id, "enable.auto.commit": False, "isolation.level": "read_committed",
            "auto.offset.reset": "earliest", "enable.partition.eof": True, **(consumer_config or {})}), logger=CLIENT_LOG)
        self.consumer.subscribe([input_topic])
        # Idempotent in both modes, as the Java producer is by default (Kafka 3.0+) and so the seed's
        # BaseStreamingBench: librdkafka's non-idempotent default sends unboundedly many tiny requests,
        # each waiting for replication, and made base mode 9x slower than tx on three brokers.
        config = cluster.librdkafka(**{"acks": "all", "linger.ms": "0", "enable.idempotence": "true",
                                       **(producer_config or {})})
        tid = transactional_id or f"eosbench.bench.streaming.{group_id}"
        # Another client (kafka-python's, which can pre-register) in place of librdkafka's.
        self.other_client = producer_factory is not None
        if self.other_client:
            self.producer = producer_factory(config, tid, group_id)
        else:
            self.producer = Producer({**config, **({"transactional.id": tid} if mode == "tx" else {})},
                                     logger=CLIENT_LOG)
        self.pre_registering = pre_register
        self.register_round_trips = 0
        self.first_send_after_begin_s: list[float] = []  # per measured or warmup transaction
        self.marking = mark_transactions and mode == "tx"
        self._units_begun = 0
        self._commits: list[tuple[str, float]] = []  # (identity, wall clock when commit returned) not yet taken
        self._buffer: list = []
        self._partitions_at_end: set[int] = set()
        self._failures = 0
        self.first_error = None  # the first failed record's KafkaError, which says whose fault it was
        if mode == "tx":
            self.producer.init_transactions(60)

    def _on_delivery(self, error, _message) -> None:
        if error is not None:
            self._failures += 1
            self.first_error = self.first_error or error

    def _next_unit(self) -> list:
        """Take the next unit's records, polling as needed; fewer at the end of the input."""
        while len(self._buffer) < self.per_unit:
            messages = self.consumer.consume(max(self.per_unit, 500), timeout=self.poll_timeout_s)
            if not messages and self._partitions_at_end and len(self._partitions_at_end) >= self._assigned():
                break
            for message in messages:
                error = message.error()
                if error is None:
                    self._buffer.append(message)
                    self._partitions_at_end.discard(message.partition())
                elif error.code() == KafkaError._PARTITION_EOF:
                    self._partitions_at_end.add(message.partition())
                else:
                    raise kafka_failure(error, f"consuming {self.input_topic}: {error.str()}")
        unit, self._buffer = self._buffer[: self.per_unit], self._buffer[self.per_unit:]
        return unit

    def _assigned(self) -> int:
        return len(self.consumer.assignment()) or 1

    def unit(self, records: list) -> float:
        """Process and write one unit; return its write-path latency in seconds."""
        ends: dict[int, int] = {}
        for message in records:
            ends[message.partition()] = message.offset() + 1
        offsets = [TopicPartition(self.input_topic, p, end) for p, end in sorted(ends.items())]
        headers = None
        if self.marking:
            identity = transaction_identity(self.group_id, None, self._units_begun)
            headers = [txn_header(identity, len(records))]
        self._units_begun += 1
        started = time.perf_counter_ns()
        if self.mode == "tx":
            self.producer.begin_transaction()
            if self.pre_registering:
                self.register_round_trips += self.producer.pre_register(
                    self.output_topic, {(self.input_topic, p): end for p, end in ends.items()}, "")
            self.first_send_after_begin_s.append((time.perf_counter_ns() - started) / 1e9)
        for message in records:
            if self.other_client:  # kafka-python reports a failed send at commit_transaction
                self.producer.produce(self.output_topic, message.value(), message.key(), headers=headers)
            else:
                self.producer.produce(self.output_topic, message.value(), message.key(), headers=headers,
                                      on_delivery=self._on_delivery)
        if self.mode == "tx":
            self.producer.send_offsets_to_transaction(offsets, self.consumer.consumer_group_metadata(), 60)
            self.producer.commit_transaction(60)
            if self.marking:
                self._commits.append((identity.decode(), time.time()))
        else:
            self.producer.flush(60)
            self.consumer.commit(offsets=offsets, asynchronous=False)
        elapsed = (time.perf_counter_ns() - started) / 1e9
        if self._failures:
            raise kafka_failure(self.first_error, f"{self._failures} record(s) failed in {self.mode} mode:"
                                                  f" {kafka_reason(self.first_error)}")
        return elapsed

    def take_commits(self) -> list[tuple[str, float]]:
        """The (identity, commit-returned wall clock) of each marked transaction since the last call."""
        commits, self._commits = self._commits, []
        return commits

    def warm(self, units: int) -> None:
        """Run units that are not measured (connections, metadata, the coordinator, the JIT of the broker)."""
        for _ in range(units):
            records = self._next_unit()
            if not records:
                return
            self.unit(records)

    def measure(self, units: int) -> tuple[list[float], int, float]:
        """Run up to `units` measured units; return (latencies in s, records, wall seconds incl. polls)."""
        latencies, records_done = [], 0
        started = time.perf_counter()
        for _ in range(units):
            records = self._next_unit()
            if not records:
                break
            latencies.append(self.unit(records))
            records_done += len(records)
        return latencies, records_done, time.perf_counter() - started

    def run(self, warmup_units: int, units: int, progress: Callable[[int, int], None] | None = None,
            block: int = 50) -> StreamingBenchResult:
        """Warm up, then measure up to `units` units in blocks (fewer if the input ends first)."""
        self.warm(warmup_units)
        latencies: list[float] = []
        records, seconds = 0, 0.0
        while len(latencies) < units:
            block_latencies, block_records, block_seconds = self.measure(min(block, units - len(latencies)))
            latencies += block_latencies
            records += block_records
            seconds += block_seconds
            if progress:
                progress(len(latencies), units)
            if not block_latencies:
                break
        return StreamingBenchResult(self.mode, np.asarray(latencies, dtype=np.float64), records, seconds,
                                    self.register_round_trips)

    def close(self) -> None:
        """Close both clients."""
        self.consumer.close()
        if self.other_client:
            self.producer.purge()
        else:
            self.producer.flush(10)
