"""Where a query without a checkpoint starts reading, and when the transactional sink refuses to start.

A query with a checkpoint resumes from it and Spark ignores `startingOffsets`. Without one (a
first run, or a lost checkpoint), the transactional sink's Step 3 filters each slice by the
group's committed offsets, so a restart from any start is exact as long as every partition the
sink ever wrote has its offset. A partition that holds records but has no offset is the
dangerous case: its offset expired (the sink's group has no members, `streaming/sink_group.py`)
or was deleted, Step 3 keeps every record, and every retained record would be written twice.

So, once the output or the dead-letter topic has ever been written, such a partition is refused
for every mode that reads retained records (`earliest`, `group`); `latest` reads none of them and
cannot write one twice. A partition numbered at or above the input's partition count recorded in
the group's offset metadata (`sink_group.offset_tag`) was added after the last commit: it has no
offset by right and is not refused.

The way back is `--starting-offsets output`: each input partition starts after the highest
`eos.src` offset that the output and dead-letter topics hold from it (or at its group offset, if
higher). An input record that left no output was either aborted (invisible read_committed) or
dead-lettered (found there), so reading it again writes nothing twice.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from conf.client_config import Connection, connection
from conf.client_log import CLIENT_LOG
from conf.headers import SRC_HEADER
from conf.watermarks import watermark_offsets
from streaming.sink_group import CommittedOffset, SinkPreconditionError, read_committed_offsets
from streaming.topic_index import records_to_end, source_position, topic_reader

# startingOffsets' JSON for "the partition's earliest offset".
EARLIEST = -2


def _consumer(bootstrap: str | Connection, **config):
    from confluent_kafka import Consumer

    return Consumer(connection(bootstrap).librdkafka(**{"isolation.level": "read_committed",
                                                        "enable.auto.commit": False, **config}), logger=CLIENT_LOG)


def ever_written(consumer, topics: list[str]) -> bool:
    """True if any partition of these topics has ever held a record or a transaction marker."""
    metadata = consumer.list_topics(timeout=30).topics
    return any(watermark_offsets(consumer, topic, p, timeout_s=30)[1] > 0
               for topic in topics if topic in metadata for p in metadata[topic].partitions)


def unrecorded_partitions(committed: dict[int, CommittedOffset], holding: dict[int, tuple[int, int]]) -> list[int]:
    """The partitions that hold records and have no offset although the sink's last commit knew them.

    `holding` maps each partition that holds records to its (log start, end). A partition the
    group's metadata does not know yet (numbered at or above the largest partition count a commit
    recorded) is new, not expired.
    """
    known = max((c.partitions for c in committed.values() if c.partitions is not None), default=None)
    return sorted(p for p in holding if committed[p].offset < 0 and (known is None or p < known))


def delivered_source_ends(bootstrap: str | Connection, input_topic: str, topics: list[str], timeout_s: float = 60.0,
                          on_progress: Callable[[str], None] | None = None) -> dict[int, int]:
    """Per input partition, the offset after the highest one whose record these topics hold (read_committed).

    Reads every record's eos.src header; only records of `input_topic` count, and only the
    highest offset per partition is kept, however long the topics. `on_progress` receives a
    line every few seconds of a long read.
    """
    ends: dict[int, int] = {}
    for topic in topics:
        def report(read: int, total: int, topic: str = topic) -> None:
            on_progress(f"reading {topic} for the last delivered {input_topic} offsets: {read:,} of about"
                        f" {total:,} records")
        consumer = topic_reader(bootstrap, "read_committed")
        try:
            records = records_to_end(consumer, topic, timeout_s, on_progress=report if on_progress else None)
            try:
                next(records)  # the partitions' bounds
            except ValueError:  # a topic that does not exist holds nothing
                continue
            for message in records:
                header = next((value for name, value in message.headers() or () if name == SRC_HEADER), None)
                partition, offset = source_position(header, input_topic)
                if partition >= 0 and offset + 1 > ends.get(partition, -1):
                    ends[partition] = offset + 1
        finally:
            consumer.close()
    return ends


def resolve_starting_offsets(bootstrap: str | Connection, mode: str, group: str, topic: str,
                             written_topics: list[str], on_progress: Callable[[str], None] | None = None) -> str:
    """The startingOffsets of a transactional sink's query that has no checkpoint, refusing expired offsets.

    `mode` is --starting-offsets; `written_topics` are the output and the dead-letter topic.
    Returns "earliest" or "latest", or JSON offsets for `group` and `output`.
    """
    if mode == "latest":
        return mode
    consumer = _consumer(bootstrap, **{"group.id": group})
    try:
        partitions = sorted(consumer.list_topics(topic, timeout=30).topics[topic].partitions)
        committed = read_committed_offsets(consumer, topic, partitions, group)
        bounds = {p: watermark_offsets(consumer, topic, p, timeout_s=30) for p, c in committed.items() if c.offset < 0}
        holding = {p: (low, high) for p, (low, high) in bounds.items() if high > low}
        expired = unrecorded_partitions(committed, holding)
        if mode != "output" and expired and ever_written(consumer, written_topics):
            p = expired[0]
            low, high = holding[p]
            raise SinkPreconditionError(
                f"--starting-offsets {mode}: group {group!r} has no committed offset for {topic} partition(s)"
                f" {', '.join(map(str, expired))} although they hold records ({topic}[{p}]: offsets {low}..{high - 1})"
                f" and the output was written to; the offsets expired (offsets.retention.minutes) or were deleted,"
                f" and starting there would write those records again. Start with --starting-offsets output, which"
                f" resumes each partition after the last record the output and dead-letter topics hold from it")
    finally:
        consumer.close()
    if mode == "earliest":
        return mode
    starts = {p: c.offset if c.offset >= 0 else EARLIEST for p, c in committed.items()}
    if mode == "output":
        for p, after in delivered_source_ends(bootstrap, topic, written_topics, on_progress=on_progress).items():
            if p in starts:
                starts[p] = max(starts[p], after)
    return json.dumps({topic: {str(p): start for p, start in starts.items()}})


def first_batch_written_again(bootstrap: str | Connection, topic: str, written_topics: list[str],
                              committed: dict[int, CommittedOffset], start_offsets: dict[int, int]) -> list[int]:
    """The partitions whose slice of a replayed first batch was committed although the group lost its offset.

    Batch 0 starts at the query's initial offsets, so a partition's missing offset there is no
    evidence of expiry: the run that died may have committed nothing for it. The output is: if it
    holds a record of the partition at or after the batch's start, the slice was committed, and
    Step 3, with no offset, would write it again. A first run that wrote nothing costs no read.
    """
    below = [p for p, start in start_offsets.items() if committed.get(p, CommittedOffset(-1, None)).offset < start]
    if not below:
        return []
    consumer = _consumer(bootstrap, **{"group.id": "eosbench-recovery"})
    try:
        written = ever_written(consumer, written_topics)
    finally:
        consumer.close()
    if not written:
        return []
    delivered = delivered_source_ends(bootstrap, topic, written_topics)
    return [p for p in below if delivered.get(p, -1) > start_offsets[p]]
