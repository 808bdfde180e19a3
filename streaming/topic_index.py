"""A topic read into integers: the verifier's view of records, without their payloads.

`read_index` reads a topic to the end offsets it saw when it began, at one isolation level, and
keeps only integers per record in numpy arrays (`TopicIndex`), so millions of records fit in a
few tens of megabytes. `IncrementalIndexes` keeps indexes between reads and fetches only the
records after those it holds. The checks over these integers are `streaming.verify`'s.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
from confluent_kafka import Consumer, KafkaError, TopicPartition

from conf.client_config import Connection, connection
from conf.client_log import CLIENT_LOG
from conf.failures import authorization_failure
from conf.headers import SRC_HEADER, TXN_HEADER, read_txn_header
from conf.watermarks import watermark_offsets

_INTEGER_FIELDS = ("seq", "partition", "offset", "src_partition", "src_offset", "txn", "txn_records")


@dataclass
class TopicIndex:
    """The integers of one topic as read at one isolation level."""

    seq: np.ndarray
    partition: np.ndarray
    offset: np.ndarray
    src_partition: np.ndarray
    src_offset: np.ndarray
    txn: np.ndarray  # eos.txn's attempt token, -1 without the header
    txn_records: np.ndarray  # eos.txn's record count for this topic, 0 without the header
    end_offsets: dict[int, int]
    txn_names: dict[int, str] = field(default_factory=dict)  # attempt token -> identity, for the report

    @classmethod
    def concatenated(cls, earlier: TopicIndex, later: TopicIndex) -> TopicIndex:
        """One index of the records of two reads, with the later read's end offsets."""
        return cls(*(np.concatenate((getattr(earlier, name), getattr(later, name))) for name in _INTEGER_FIELDS),
                   later.end_offsets, {**earlier.txn_names, **later.txn_names})

    def next_offsets(self) -> dict[int, int]:
        """Per partition, the offset after the last record held."""
        ends = np.full(int(self.partition.max(initial=-1)) + 1, -1, dtype=np.int64)
        np.maximum.at(ends, self.partition, self.offset)
        return {partition: int(last) + 1 for partition, last in enumerate(ends) if last >= 0}

    def below(self, offsets: dict[int, int]) -> TopicIndex:
        """Keep only the records under a per-partition offset bound."""
        keep = self.offset < _bounds(self.partition, offsets)
        # indexes read without the eos headers have empty header arrays
        return TopicIndex(*(values[keep] if values.size == self.seq.size else values
                            for values in (getattr(self, name) for name in _INTEGER_FIELDS)),
                          self.end_offsets, self.txn_names)


def topic_reader(bootstrap: str | Connection, isolation: str) -> Consumer:
    """A consumer that reads topics whole at one isolation level, assigning partitions itself (no group)."""
    return Consumer(connection(bootstrap).librdkafka(**{
        "group.id": "eosbench-verify", "isolation.level": isolation, "enable.auto.commit": False,
        "enable.partition.eof": True, "auto.offset.reset": "earliest"}), logger=CLIENT_LOG)


def read_index(bootstrap: str | Connection, topic: str, isolation: str, with_src: bool, timeout_s: float = 60.0,
               start_offsets: dict[int, int] | None = None) -> TopicIndex:
    """Read a topic to its end at one isolation level (from start_offsets, else the start), keeping integers."""
    start = start_offsets or {}
    consumer = topic_reader(bootstrap, isolation)
    seqs, partitions, offsets, src_partitions, src_offsets, txns, txn_records = [], [], [], [], [], [], []
    txn_names: dict[int, str] = {}
    try:
        metadata = consumer.list_topics(topic, timeout=timeout_s).topics.get(topic)
        if metadata is None or metadata.error is not None:
            raise ValueError(f"topic {topic!r} does not exist at {bootstrap}")
        ends = {}
        for p in metadata.partitions:
            ends[p] = watermark_offsets(consumer, topic, p, timeout_s)[1]
        live = [p for p, end in ends.items() if end > start.get(p, 0)]
        consumer.assign([TopicPartition(topic, p, start.get(p, 0)) for p in live])
        at_end: set[int] = set()
        idle_since = time.monotonic()
        while len(at_end) < len(live):
            # consume() waits its whole timeout unless 10,000 messages arrive, so keep it short
            # and bound the silence instead.
            messages = consumer.consume(10_000, timeout=0.2)
            if not messages:
                if time.monotonic() - idle_since > timeout_s:
                    raise TimeoutError(f"{topic}: no end of partition within {timeout_s} s")
                continue
            idle_since = time.monotonic()
            for message in messages:
                error = message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        at_end.add(message.partition())
                        continue
                    if error.code() == KafkaError.GROUP_AUTHORIZATION_FAILED:
                        # The reader's group is a name only (it assigns and commits nothing), but
                        # librdkafka still looks its coordinator up: a principal needs no ACL for it.
                        continue
                    raise authorization_failure(error, topic) or RuntimeError(f"{topic}: {error.str()}")
                # A topic still being written never shows its end to a reader that keeps receiving
                # records, so a read ends at the end offsets it saw when it began.
                partition, offset = message.partition(), message.offset()
                if offset >= ends[partition] - 1:
                    at_end.add(partition)
                    if offset >= ends[partition]:
                        continue
                seqs.append(int(message.key()))
                partitions.append(partition)
                offsets.append(offset)
                if with_src:
                    headers = dict(message.headers() or [])
                    _, src_p, src_off = headers.get(SRC_HEADER, b"::-1").decode().rsplit(":", 2)
                    src_partitions.append(int(src_p) if src_p else -1)
                    src_offsets.append(int(src_off))
                    txn = headers.get(TXN_HEADER)
                    if txn is None:
                        txns.append(-1)
                        txn_records.append(0)
                    else:
                        identity, token, records = read_txn_header(txn)
                        txns.append(token)
                        txn_records.append(records)
                        if token not in txn_names:
                            txn_names[token] = identity.decode()
    finally:
        consumer.close()
    as_array = lambda values: np.asarray(values, dtype=np.int64)  # noqa: E731
    return TopicIndex(*(as_array(values) for values in (seqs, partitions, offsets, src_partitions, src_offsets,
                                                        txns, txn_records)), ends, txn_names)


class IncrementalIndexes:
    """Topic indexes kept between reads: each read fetches only the records after those held.

    Records below a topic's end never change once read (a read_committed read stops at the last
    stable offset, so a transaction still open is read once it has ended), so appending the new
    ones gives what a whole read would.
    """

    def __init__(self) -> None:
        self._held: dict[tuple[str, str, str, bool], TopicIndex] = {}

    def read(self, bootstrap: str | Connection, topic: str, isolation: str, with_src: bool) -> TopicIndex:
        """The whole topic's index, as `read_index` returns it, reading only what is new."""
        key = (bootstrap, topic, isolation, with_src)
        held = self._held.get(key)
        if held is None:
            index = read_index(bootstrap, topic, isolation, with_src)
        else:
            index = TopicIndex.concatenated(
                held, read_index(bootstrap, topic, isolation, with_src, start_offsets=held.next_offsets()))
        self._held[key] = index
        return index


def _bounds(partitions: np.ndarray, offsets: dict[int, int]) -> np.ndarray:
    """Each record's partition bound, vectorised (partition numbers are small); 0 where none."""
    lookup = np.zeros(max([*offsets, int(partitions.max(initial=0))]) + 1, dtype=np.int64)
    for partition, offset in offsets.items():
        lookup[partition] = offset
    return lookup[np.clip(partitions, 0, None)]
