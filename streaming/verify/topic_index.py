"""A topic read into integers: the verifier's view of records, without their payloads.

`read_index` reads a topic to the end offsets it saw when it began, at one isolation level, and
keeps only integers per record in numpy arrays (`TopicIndex`), so millions of records fit in a
few tens of megabytes. `IncrementalIndexes` keeps indexes between reads and fetches only the
records after those it holds. The checks over these integers are `streaming.verify.verifier`'s.

- A key becomes an int64 (`key_id`): a sequence number (ASCII digits) is itself; a null key is
  `NULL_KEY`; any other key is a hash-based id below `NULL_KEY`, far from any realistic sequence
  number. So any key can be counted as a multiset, and none stops a read.
- A value becomes a 64-bit digest (`value_digest`, blake2b, 63 bits so that it is never
  negative); a tombstone is `TOMBSTONE_DIGEST`. Read with the pipeline's `process`, an input
  record's digest is instead that of the output `process` makes of it (`expected_digest`):
  `POISON_DIGEST` for a record `process` refuses, which belongs in the dead letters.
- `eos.src` (`topic:partition:offset`) becomes (partition, offset); a record with no eos.src
  has (-1, -1), and one that names another topic than the input's (or is malformed) has
  (`FOREIGN_SOURCE`, -1).
- A read starts at each partition's log start (its low watermark), which it records: retention
  deletes what lies below, so nothing below it can be read or judged. Where the log start lies
  above the offset the read was to start from (0 for a first read), records it never saw were
  deleted, and the index says so (`trimmed`): the verifier then tells a delivery deleted from
  the output from a lost one (streaming/verify/deleted.py).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np
from confluent_kafka import Consumer, KafkaError, TopicPartition

from conf.client_config import Connection, connection
from conf.client_log import CLIENT_LOG
from conf.failures import authorization_failure
from conf.headers import SRC_HEADER, TXN_HEADER, read_txn_header
from conf.watermarks import END_FETCH_WAIT_MS, watermark_offsets
from streaming.process import POISON, Transform

NULL_KEY = -(1 << 62)
_HASHED_KEYS = 1 << 61  # ids of keys that are not sequence numbers: NULL_KEY - 1 down to NULL_KEY - 2**61
_LONGEST_SEQUENCE_NUMBER = 18  # digits; any 18-digit number fits an int64
UNKNOWN_DIGEST = -1  # read without the pipeline's process, or built by hand
TOMBSTONE_DIGEST = -2
POISON_DIGEST = -3
FOREIGN_SOURCE = -2
PROGRESS_EVERY_S = 5.0  # a long read reports how far it got this often (records_to_end)
_INTEGER_FIELDS = ("seq", "partition", "offset", "src_partition", "src_offset", "txn", "txn_records", "digest")


def key_id(key: bytes | None) -> int:
    """The int64 a key is kept as: a sequence number as itself, a null key as NULL_KEY, any other below it."""
    if key is None:
        return NULL_KEY
    # One spelling per number (no sign, no leading zero, no '_'), so that two keys never share an id.
    if key.isdigit() and len(key) <= _LONGEST_SEQUENCE_NUMBER and (key[:1] != b"0" or len(key) == 1):
        return int(key)
    return NULL_KEY - 1 - int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "big") % _HASHED_KEYS


def value_digest(value: bytes | None) -> int:
    """A value's 63-bit digest; TOMBSTONE_DIGEST for a null value."""
    if value is None:
        return TOMBSTONE_DIGEST
    return int.from_bytes(hashlib.blake2b(value, digest_size=8).digest(), "big") >> 1


def expected_digest(process: Transform, key: bytes | None, value: bytes | None) -> int:
    """The digest of the output `process` makes of an input record; POISON_DIGEST where it refuses the record."""
    result = process(key, value)
    return POISON_DIGEST if result is POISON else value_digest(result)


@dataclass
class TopicIndex:
    """The integers of one topic as read at one isolation level."""

    seq: np.ndarray  # key_id of each record's key
    partition: np.ndarray
    offset: np.ndarray
    src_partition: np.ndarray
    src_offset: np.ndarray
    txn: np.ndarray  # eos.txn's attempt token, -1 without the header
    txn_records: np.ndarray  # eos.txn's record count for this topic, 0 without the header
    end_offsets: dict[int, int]
    txn_names: dict[int, str] = field(default_factory=dict)  # attempt token -> identity, for the report
    digest: np.ndarray | None = None  # per record: value_digest, or expected_digest; None: UNKNOWN_DIGEST for all
    log_start: dict[int, int] = field(default_factory=dict)  # per partition, its low watermark when read
    # per partition whose log start lay above where a read began, the log start it found (the latest)
    trimmed: dict[int, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.digest is None or self.digest.size != self.seq.size:
            self.digest = np.full(self.seq.size, UNKNOWN_DIGEST, dtype=np.int64)

    @classmethod
    def concatenated(cls, earlier: TopicIndex, later: TopicIndex) -> TopicIndex:
        """One index of the records of two reads, with the later read's end offsets and log starts."""
        return cls(**{name: np.concatenate((getattr(earlier, name), getattr(later, name))) for name in _INTEGER_FIELDS},
                   end_offsets=later.end_offsets, txn_names={**earlier.txn_names, **later.txn_names},
                   log_start={**earlier.log_start, **later.log_start}, trimmed={**earlier.trimmed, **later.trimmed})

    def next_offsets(self) -> dict[int, int]:
        """Per partition, the offset after the last record held."""
        ends = np.full(int(self.partition.max(initial=-1)) + 1, -1, dtype=np.int64)
        np.maximum.at(ends, self.partition, self.offset)
        return {partition: int(last) + 1 for partition, last in enumerate(ends) if last >= 0}

    def read_to(self) -> dict[int, int]:
        """Per partition, the offset the reads reached: past the last record held and the end offset read to.

        A read_committed read ends at the last stable offset, past the commit marker that follows
        its last record; the next read starts there, so that retention deleting that marker is not
        taken for records deleted unread.
        """
        reached = self.next_offsets()
        for partition, end in self.end_offsets.items():
            reached[partition] = max(end, reached.get(partition, 0))
        return {partition: offset for partition, offset in reached.items() if offset > 0}

    def below(self, offsets: dict[int, int]) -> TopicIndex:
        """Keep only the records under a per-partition offset bound."""
        return self.kept(self.offset < _bounds(self.partition, offsets))

    def from_log_start(self) -> TopicIndex:
        """Keep only the records at or after their partition's log start (a held index may hold deleted ones)."""
        return self.kept(self.offset >= _bounds(self.partition, self.log_start))

    def kept(self, keep: np.ndarray) -> TopicIndex:
        """Keep only the records chosen."""
        # indexes read without the eos headers have empty header arrays
        return TopicIndex(**{name: values[keep] if values.size == self.seq.size else values
                             for name, values in ((name, getattr(self, name)) for name in _INTEGER_FIELDS)},
                          end_offsets=self.end_offsets, txn_names=self.txn_names, log_start=self.log_start,
                          trimmed=self.trimmed)


def topic_reader(bootstrap: str | Connection, isolation: str) -> Consumer:
    """A consumer that reads topics whole at one isolation level, assigning partitions itself (no group)."""
    # A reader learns that it is at a partition's end from a fetch that finds nothing there, which
    # the broker holds for fetch.wait.max.ms (500 ms by default). A transactional topic ends in a
    # commit marker, not a record, so every read of one waited for it (a verify of six records: 2.9 s, now 1.5).
    return Consumer(connection(bootstrap).librdkafka(**{
        "group.id": "eosbench-verify", "isolation.level": isolation, "enable.auto.commit": False,
        "enable.partition.eof": True, "auto.offset.reset": "earliest", "fetch.wait.max.ms": END_FETCH_WAIT_MS}),
        logger=CLIENT_LOG)


def records_to_end(consumer, topic: str, timeout_s: float = 60.0, start_offsets: dict[int, int] | None = None,
                   on_progress: Callable[[int, int], None] | None = None) -> Iterator:
    """Yield a topic's records, from start_offsets (else the log start) to the end offsets seen when the read began.

    Ends by itself: a topic still being written never shows its end to a reader that keeps
    receiving records. A partition ends at the end offset seen at the start, never below it. The
    first item is {partition: (log start, end)}, then each record's message. `on_progress(read,
    total)` is called every PROGRESS_EVERY_S of a long read.
    """
    start = start_offsets or {}
    metadata = consumer.list_topics(topic, timeout=timeout_s).topics.get(topic)
    if metadata is None or metadata.error is not None:
        raise ValueError(f"topic {topic!r} does not exist")
    bounds = {p: watermark_offsets(consumer, topic, p, timeout_s) for p in metadata.partitions}
    yield bounds
    first = {p: max(start.get(p, 0), low) for p, (low, _) in bounds.items()}
    live = [p for p, (_, end) in bounds.items() if end > first[p]]
    total = sum(bounds[p][1] - first[p] for p in live)
    consumer.assign([TopicPartition(topic, p, first[p]) for p in live])
    at_end: set[int] = set()
    read = 0
    idle_since = reported = time.monotonic()
    while len(at_end) < len(live):
        # consume() waits its whole timeout unless 10,000 messages arrive, so keep it short
        # and bound the silence instead.
        messages = consumer.consume(10_000, timeout=0.2)
        now = time.monotonic()
        if not messages:
            if now - idle_since > timeout_s:
                raise TimeoutError(f"{topic}: no end of partition within {timeout_s} s")
            continue
        idle_since = now
        for message in messages:
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    # An end below the one read at the start is a leader's that has just taken the
                    # partition and not yet caught its high watermark up: the records between are
                    # there, and come once it has. Taken for the end, they were skipped for good
                    # (the live verify of soak b3ea84ee then met their outputs as aborted reads).
                    if message.offset() >= bounds[message.partition()][1]:
                        at_end.add(message.partition())
                    continue
                if error.code() == KafkaError.GROUP_AUTHORIZATION_FAILED:
                    # The reader's group is a name only (it assigns and commits nothing), but
                    # librdkafka still looks its coordinator up: a principal needs no ACL for it.
                    continue
                raise authorization_failure(error, topic) or RuntimeError(f"{topic}: {error.str()}")
            partition, offset = message.partition(), message.offset()
            end = bounds[partition][1]
            if offset >= end - 1:
                at_end.add(partition)
                if offset >= end:
                    continue
            read += 1
            yield message
        if on_progress and now - reported >= PROGRESS_EVERY_S:
            reported = now
            on_progress(read, total)


def read_index(bootstrap: str | Connection, topic: str, isolation: str, with_src: bool, timeout_s: float = 60.0,
               start_offsets: dict[int, int] | None = None, source_topic: str | None = None,
               process: Transform | None = None) -> TopicIndex:
    """Read a topic to its end at one isolation level (from start_offsets, else the log start), keeping integers.

    `source_topic`: the input that eos.src must name (else the record's source is FOREIGN_SOURCE).
    `process`: keep each record's expected_digest under it, instead of its value_digest.
    """
    consumer = topic_reader(bootstrap, isolation)
    seqs, partitions, offsets, src_partitions, src_offsets, txns, txn_records = [], [], [], [], [], [], []
    digests: list[int] = []
    txn_names: dict[int, str] = {}
    try:
        records = records_to_end(consumer, topic, timeout_s, start_offsets)
        try:
            bounds = next(records)
        except ValueError:
            raise ValueError(f"topic {topic!r} does not exist at {bootstrap}") from None
        for message in records:
            key, value = message.key(), message.value()
            seqs.append(key_id(key))
            partitions.append(message.partition())
            offsets.append(message.offset())
            digests.append(value_digest(value) if process is None else expected_digest(process, key, value))
            if with_src:
                headers = dict(message.headers() or [])
                src_partition, src_offset = source_position(headers.get(SRC_HEADER), source_topic)
                src_partitions.append(src_partition)
                src_offsets.append(src_offset)
                txn = headers.get(TXN_HEADER)
                if txn is None:
                    txns.append(-1)
                    txn_records.append(0)
                else:
                    identity, token, records_in_txn = read_txn_header(txn)
                    txns.append(token)
                    txn_records.append(records_in_txn)
                    if token not in txn_names:
                        txn_names[token] = identity.decode()
    finally:
        consumer.close()
    as_array = lambda values: np.asarray(values, dtype=np.int64)  # noqa: E731
    log_start = {p: low for p, (low, _) in bounds.items()}
    trimmed = {p: low for p, low in log_start.items() if low > (start_offsets or {}).get(p, 0)}
    ends = {p: end for p, (_, end) in bounds.items()}
    return TopicIndex(*(as_array(values) for values in (seqs, partitions, offsets, src_partitions, src_offsets,
                                                        txns, txn_records)), ends, txn_names,
                      digest=as_array(digests), log_start=log_start, trimmed=trimmed)


def source_position(header: bytes | None, source_topic: str | None) -> tuple[int, int]:
    """(partition, offset) of an eos.src value; (-1, -1) without one, FOREIGN_SOURCE for another topic or garbage."""
    if header is None:
        return -1, -1
    # topic names cannot hold ':', so the last two fields are the partition and the offset
    topic, _, position = header.decode(errors="replace").rpartition(":")
    topic, _, partition = topic.rpartition(":")
    if not (partition.isdigit() and position.isdigit()) or source_topic is not None and topic != source_topic:
        return FOREIGN_SOURCE, -1
    return int(partition), int(position)


class IncrementalIndexes:
    """Topic indexes kept between reads: each read fetches only the records after those held.

    Records below a topic's end never change once read (a read_committed read stops at the last
    stable offset, so a transaction still open is read once it has ended), so appending the new
    ones gives what a whole read would.
    """

    def __init__(self) -> None:
        self._held: dict[tuple, TopicIndex] = {}

    def read(self, bootstrap: str | Connection, topic: str, isolation: str, with_src: bool,
             source_topic: str | None = None, process: Transform | None = None) -> TopicIndex:
        """The whole topic's index, as `read_index` returns it, reading only what is new."""
        key = (bootstrap, topic, isolation, with_src, source_topic, process)
        held = self._held.get(key)
        if held is None:
            index = read_index(bootstrap, topic, isolation, with_src, source_topic=source_topic, process=process)
        else:
            index = TopicIndex.concatenated(held, read_index(bootstrap, topic, isolation, with_src,
                                                             start_offsets=held.read_to(),
                                                             source_topic=source_topic, process=process))
        self._held[key] = index
        return index


def _bounds(partitions: np.ndarray, offsets: dict[int, int], missing: int = 0) -> np.ndarray:
    """Each record's partition bound, vectorised (partition numbers are small); `missing` where none."""
    lookup = np.full(max([*offsets, int(partitions.max(initial=0))]) + 1, missing, dtype=np.int64)
    for partition, offset in offsets.items():
        lookup[partition] = offset
    return lookup[np.clip(partitions, 0, None)]
