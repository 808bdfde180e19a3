"""A broker-less stand-in for confluent_kafka.Producer, for unit tests of the producer's logic.

Records are "acknowledged" when the client would serve callbacks (poll, flush, commit); an
abort purges what is still queued, as librdkafka does. Anything about exactly-once is proven
against the real broker in tests/integration, never here.
"""

from __future__ import annotations

import json
import time

from confluent_kafka import KafkaError


class FakeMessage:
    """The parts of confluent_kafka.Message the producer reads."""

    def __init__(self, key: bytes, value: bytes):
        self._key, self._value = key, value

    def key(self) -> bytes:
        """The record key."""
        return self._key

    def value(self) -> bytes:
        """The record value."""
        return self._value


class FakeError:
    """The parts of confluent_kafka.KafkaError the delivery callback reads."""

    def __init__(self, code: int):
        self._code = code

    def code(self) -> int:
        """The error code."""
        return self._code

    def str(self) -> str:
        """A description."""
        return f"fake error {self._code}"


class FakeProducer:
    """Transactional producer semantics without a broker."""

    def __init__(self, config: dict, logger=None, stats_cb=None):
        self.config = config
        self.stats_cb = stats_cb
        self.stats_interval_s = int(config.get("statistics.interval.ms", 0)) / 1000
        self._last_stats: float | None = None
        self.delivered = 0
        self.pending: list[tuple] = []
        self.open_transaction: list[bytes] = []
        self.committed: list[bytes] = []
        self.aborted: list[bytes] = []
        self.values: dict[bytes, bytes] = {}

    def init_transactions(self, timeout: float | None = None) -> None:
        """Nothing to fence here."""

    def begin_transaction(self) -> None:
        """Open a transaction."""
        self.open_transaction = []

    def produce(self, topic, value=None, key=None, headers=None, on_delivery=None) -> None:
        """Queue one record."""
        self.pending.append((on_delivery, FakeMessage(key, value)))
        self.open_transaction.append(key)
        self.values[key] = value

    def list_topics(self, topic=None, timeout: float = -1):
        """Every topic exists."""

    def poll(self, timeout: float = 0) -> int:
        """Acknowledge everything queued; report statistics once per statistics.interval.ms, as librdkafka does."""
        served, self.pending = self.pending, []
        for callback, message in served:
            callback(None, message)
        self.delivered += len(served)
        now = time.monotonic()
        if self.stats_cb and self.stats_interval_s > 0 and (
                self._last_stats is None or now - self._last_stats >= self.stats_interval_s):
            self._last_stats = now
            self.stats_cb(json.dumps({"txmsgs": self.delivered, "eos": {"idemp_state": "Assigned"}}))
        return len(served)

    def flush(self, timeout: float | None = None) -> int:
        """Acknowledge everything queued."""
        self.poll()
        return 0

    def commit_transaction(self, timeout: float | None = None) -> None:
        """Acknowledge and commit."""
        self.flush()
        self.committed.extend(self.open_transaction)
        self.open_transaction = []

    def abort_transaction(self, timeout: float | None = None) -> None:
        """Purge what is queued, then abort."""
        purged, self.pending = self.pending, []
        for callback, message in purged:
            callback(FakeError(KafkaError._PURGE_QUEUE), message)
        self.aborted.extend(self.open_transaction)
        self.open_transaction = []


class FakeCluster:
    """Stands in for confluent_kafka as the sink sees it (`sink_clients.kafka_module()`): transactional producers
    and offset readers over one in-memory store of a group's committed offsets (with metadata).

    `commit_faults` lists what the next commits do: "timeout-after-landing" commits and then raises
    a timeout, as a commit whose response was lost does; "timeout-before-landing" raises the same
    timeout without committing; "fenced" raises a fenced error instead.
    """

    def __init__(self, bootstrap: str = "fake:9092"):
        import confluent_kafka

        self.KafkaException, self.KafkaError, self.TopicPartition = (
            confluent_kafka.KafkaException, confluent_kafka.KafkaError, confluent_kafka.TopicPartition)
        self.bootstrap = bootstrap
        self.group: dict[tuple[str, int], tuple[int, str]] = {}  # (topic, partition) -> (offset, metadata)
        self.read_errors: list[int | None] = []  # what the next committed() reads report for every partition
        self.commit_faults: list[str] = []
        self.written: list[tuple[str, bytes]] = []  # (topic, key) of every committed record, in commit order
        self.producers: list[FakeTransactionalProducer] = []
        self.consumers: list[FakeOffsetReader] = []

    def Producer(self, config: dict, logger=None):  # noqa: N802 - confluent_kafka's name
        """A new transactional producer."""
        producer = FakeTransactionalProducer(self, config)
        self.producers.append(producer)
        return producer

    def Consumer(self, config: dict, logger=None):  # noqa: N802 - confluent_kafka's name
        """A new offset reader."""
        consumer = FakeOffsetReader(self, config)
        self.consumers.append(consumer)
        return consumer


class FakeTransactionalProducer:
    """A transactional producer whose offsets land in its FakeCluster's group on commit."""

    def __init__(self, cluster: FakeCluster, config: dict):
        self.cluster, self.config = cluster, config
        self.records: list[tuple[str, bytes]] = []
        self.sent_headers: list[tuple[str, dict]] = []  # (topic, headers) of every record, every transaction
        self.offsets: list = []
        self.commits = 0

    def list_topics(self, topic=None, timeout=None):
        """Metadata arrives at once."""

    def init_transactions(self, timeout=None):
        """Nothing to fence."""

    def begin_transaction(self):
        """Open a transaction."""
        self.records, self.offsets = [], []

    def produce(self, topic, value=None, key=None, headers=None):
        """Queue one record."""
        self.records.append((topic, key))
        self.sent_headers.append((topic, dict(headers or [])))

    def poll(self, timeout=0):
        """Nothing to serve."""
        return 0

    def flush(self, timeout=None):
        """Everything is delivered."""
        return 0

    def purge(self):
        """Nothing queued."""

    def send_offsets_to_transaction(self, offsets, group_metadata, timeout=None):
        """Keep the offsets for the commit."""
        self.offsets = list(offsets)

    def commit_transaction(self, timeout=None):
        """Commit the offsets into the group, then play the next commit fault, if any."""
        fault = self.cluster.commit_faults.pop(0) if self.cluster.commit_faults else None
        error = self.cluster.KafkaError
        if fault == "fenced":
            raise self.cluster.KafkaException(error(error._FENCED, "fenced by a newer instance", fatal=True))
        if fault == "timeout-before-landing":
            raise self.cluster.KafkaException(error(error._TIMED_OUT, "EndTxn not answered"))
        for tp in self.offsets:
            self.cluster.group[(tp.topic, tp.partition)] = (tp.offset, tp.metadata or "")
        self.cluster.written.extend(self.records)
        self.commits += 1
        if fault == "timeout-after-landing":
            raise self.cluster.KafkaException(error(error._TIMED_OUT, "EndTxn response lost"))

    def abort_transaction(self, timeout=None):
        """Drop the transaction."""
        self.records, self.offsets = [], []


class FakeOffsetReader:
    """Reads the FakeCluster group's committed offsets, as Consumer.committed() returns them."""

    def __init__(self, cluster: FakeCluster, config: dict):
        self.cluster, self.config = cluster, config

    def poll(self, timeout=0):
        """No assignment, no queued error: nothing."""
        return None

    def committed(self, partitions, timeout=None):
        """The group's offsets (-1001 where none), each with an error if one is queued."""
        from types import SimpleNamespace

        code = self.cluster.read_errors.pop(0) if self.cluster.read_errors else None
        answer = []
        for tp in partitions:
            offset, metadata = self.cluster.group.get((tp.topic, tp.partition), (-1001, ""))
            error = self.cluster.KafkaError(code) if code is not None else None
            answer.append(SimpleNamespace(topic=tp.topic, partition=tp.partition, offset=-1001 if error else offset,
                                          metadata=None if error else metadata, error=error))
        return answer
