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
