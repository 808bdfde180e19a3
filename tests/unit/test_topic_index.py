"""Reading a topic into integers, against a fake reader: any key, the topic eos.src names, values, the log start,
records deleted unread, and an end reported early by a new leader."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError

from streaming.verify import topic_index
from streaming.process import TRANSFORMS
from streaming.verify.topic_index import (FOREIGN_SOURCE, NULL_KEY, POISON_DIGEST, TOMBSTONE_DIGEST, TopicIndex,
                                   expected_digest, key_id, read_index, value_digest)


class Record:
    """The parts of confluent_kafka.Message that read_index reads."""

    def __init__(self, offset: int, key: bytes | None, value: bytes | None = b"v", src: bytes | None = None):
        self._offset, self._key, self._value = offset, key, value
        self._headers = [("eos.src", src)] if src is not None else None

    def error(self):
        """No error."""

    def partition(self) -> int:
        """Always partition 0."""
        return 0

    def offset(self) -> int:
        """The record's offset."""
        return self._offset

    def key(self) -> bytes | None:
        """The record's key."""
        return self._key

    def value(self) -> bytes | None:
        """The record's value."""
        return self._value

    def headers(self) -> list | None:
        """eos.src, if any."""
        return self._headers


class EndOfPartition(Record):
    """What librdkafka delivers when a fetch finds nothing after `offset`: the partition's end as the leader sees it."""

    def __init__(self, offset: int):
        super().__init__(offset, None)

    def error(self) -> KafkaError:
        """_PARTITION_EOF."""
        return KafkaError(KafkaError._PARTITION_EOF)


class Reader:
    """A one-partition topic whose log runs from `low` to `high`, holding `records`.

    `batches`: what each consume() returns in turn instead (then nothing), for a read whose
    messages come over several fetches.
    """

    def __init__(self, records: list[Record], low: int, high: int, batches: list[list[Record]] | None = None):
        self.records, self.low, self.high = records, low, high
        self.batches = batches
        self.assigned: list[tuple[int, int]] = []

    def list_topics(self, topic, timeout=None):
        """One partition, no error."""
        return SimpleNamespace(topics={topic: SimpleNamespace(partitions={0: None}, error=None)})

    def get_watermark_offsets(self, partition, timeout=None, cached=False):
        """The log start and the end."""
        return self.low, self.high

    def assign(self, partitions):
        """Note where each partition is read from."""
        self.assigned = [(tp.partition, tp.offset) for tp in partitions]

    def consume(self, count, timeout=None):
        """Every record at or after the assigned offset, at once (or the next of `batches`)."""
        if self.batches is not None:
            return self.batches.pop(0) if self.batches else []
        records, self.records = self.records, []
        return [record for record in records if record.offset() >= self.assigned[0][1]]

    def close(self):
        """Nothing to close."""


def read(monkeypatch, records: list[Record], low: int = 0, **options):
    """read_index over a fake one-partition topic; returns (index, where the read began)."""
    reader = Reader(records, low, records[-1].offset() + 1)
    monkeypatch.setattr(topic_index, "topic_reader", lambda bootstrap, isolation: reader)
    return read_index("fake:9092", "t", "read_committed", **{"with_src": False, **options}), reader.assigned


def test_any_key_is_read_and_only_a_plain_sequence_number_keeps_its_value(monkeypatch):
    keys = [b"42", None, b"order-7", b"007", b"-3", b"1_000", b"9" * 19]
    index, _ = read(monkeypatch, [Record(offset, key) for offset, key in enumerate(keys)])
    assert index.seq[0] == 42 and index.seq[1] == NULL_KEY
    hashed = index.seq[2:].tolist()
    assert all(-(1 << 63) < seq < NULL_KEY for seq in hashed) and len(set(hashed)) == len(hashed)
    assert key_id(b"order-7") == hashed[0], "the same key has the same id in every read"


def test_a_read_begins_at_the_log_start_and_records_it(monkeypatch):
    index, began = read(monkeypatch, [Record(offset, str(offset).encode()) for offset in range(5, 8)], low=5)
    assert began == [(0, 5)] and index.log_start == {0: 5} and index.offset.tolist() == [5, 6, 7]


def test_a_read_that_finds_the_log_start_above_where_it_began_says_records_were_deleted_unread(monkeypatch):
    records = [Record(offset, str(offset).encode()) for offset in range(5, 8)]
    first, _ = read(monkeypatch, records, low=5)
    assert first.trimmed == {0: 5}, "a first read begins at 0: offsets 0..4 were deleted before it"
    assert read(monkeypatch, records, low=5, start_offsets={0: 5})[0].trimmed == {}, "nothing unread was deleted"
    assert read(monkeypatch, records, low=5, start_offsets={0: 3})[0].trimmed == {0: 5}
    assert read(monkeypatch, [Record(0, b"0")])[0].trimmed == {}
    first.end_offsets = {0: 10}  # a marker and hidden records up to the end read to
    assert first.read_to() == {0: 10}
    assert TopicIndex.concatenated(first, read(monkeypatch, records, low=5, start_offsets={0: 5})[0]).trimmed == {0: 5}


def test_eos_src_must_name_the_input_topic(monkeypatch):
    sources = [b"in:0:1", b"other:0:1", b"in:2:30", b"garbage", None, b"in:x:1"]
    index, _ = read(monkeypatch, [Record(offset, b"1", src=src) for offset, src in enumerate(sources)],
                    with_src=True, source_topic="in")
    assert list(zip(index.src_partition.tolist(), index.src_offset.tolist())) == [
        (0, 1), (FOREIGN_SOURCE, -1), (2, 30), (FOREIGN_SOURCE, -1), (-1, -1), (FOREIGN_SOURCE, -1)]


def test_values_are_kept_as_digests_and_inputs_as_what_process_makes_of_them(monkeypatch):
    values = [b"plain", None, b"POISON record"]
    records = [Record(offset, b"1", value) for offset, value in enumerate(values)]
    as_read, _ = read(monkeypatch, list(records))
    assert as_read.digest.tolist() == [value_digest(b"plain"), TOMBSTONE_DIGEST, value_digest(b"POISON record")]
    checksum = TRANSFORMS["checksum"]
    expected, _ = read(monkeypatch, list(records), process=checksum)
    assert expected.digest.tolist() == [value_digest(checksum(b"1", b"plain")), TOMBSTONE_DIGEST, POISON_DIGEST]
    assert expected_digest(checksum, b"1", b"plain") != value_digest(b"plain") >= 0


@pytest.mark.parametrize("value", [b"", b"x", b"\x00" * 100])
def test_a_value_digest_is_never_a_sentinel(value):
    assert value_digest(value) >= 0


def test_an_end_below_the_one_read_at_the_start_is_a_new_leaders_and_the_read_goes_on_to_the_true_end(monkeypatch):
    records = [Record(offset, str(offset).encode()) for offset in range(10)]
    # The partition's leader moved during the read: the new one reports the end at 4 until its
    # high watermark catches up with the 10 its predecessor had given.
    batches = [records[:4], [EndOfPartition(4)], records[4:], [EndOfPartition(10)]]
    reader = Reader(records, 0, 10, batches)
    monkeypatch.setattr(topic_index, "topic_reader", lambda bootstrap, isolation: reader)
    index = read_index("fake:9092", "t", "read_committed", with_src=False)
    assert index.offset.tolist() == list(range(10)) and index.read_to() == {0: 10}
