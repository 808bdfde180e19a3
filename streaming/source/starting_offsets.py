"""Where a query without a checkpoint starts reading, and when the transactional sink refuses to start.

A query with a checkpoint resumes from it and Spark ignores `startingOffsets`. Without one (a
first run, or a lost checkpoint), the transactional sink's Step 3 filters each slice by the
group's committed offsets, so a restart from any start is exact as long as every partition the
sink ever wrote has its offset. A partition that holds records but has no offset is the
dangerous case: its offset expired (the sink's group has no members, `streaming/group.py`)
or was deleted, Step 3 keeps every record, and every retained record would be written twice.

So, once the output or the dead-letter topic has ever been written, such a partition is refused
for every mode that reads retained records (`earliest`, `group`); `latest` reads none of them and
cannot write one twice. A partition numbered at or above the input's partition count recorded in
the group's offset metadata (`sink_group.offset_tag`) was added after the last commit: it has no
offset by right and is not refused.

The way back is `--starting-offsets output`: each input partition starts after the highest
`eos.src` offset that this pipeline's records in the output and dead-letter topics name (or at
its group offset, if it has one and it is higher). An input record that left no output was either
aborted (invisible read_committed) or dead-lettered (found there), so reading it again writes
nothing twice. What the topics can prove, and where that read refuses (an open transaction, a
compacted or trimmed topic), is `streaming/verify/evidence.py`; once the output was written, a
partition that holds records but has neither an offset nor a delivered record is refused rather
than read from its start.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from conf.client_config import Connection, connection
from conf.client_log import CLIENT_LOG
from conf.watermarks import watermark_offsets
from streaming.verify.evidence import Evidence, read_evidence
from streaming.group import CommittedOffset, SinkPreconditionError

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


def resolve_starting_offsets(mode: str, group: str, topic: str, written_topics: list[str],
                             committed: dict[int, CommittedOffset], holding: dict[int, tuple[int, int]], written: bool,
                             evidence: Callable[[], Evidence | None]) -> str:
    """The startingOffsets of a transactional sink's query that has no checkpoint, refusing expired offsets.

    `mode` is --starting-offsets; `group` is the sink's group, which is also the pipeline its
    records name; `written_topics` are the output and the dead-letter topic. The rest is what the
    start read (streaming/sink/start.py): the group's offsets, the partitions without one that
    hold records, whether the written topics were ever written, and what their records prove
    (read on the first ask). Returns "earliest" or "latest", or JSON offsets for `group` and
    `output`.
    """
    if mode == "latest":
        return mode
    expired = unrecorded_partitions(committed, holding)
    if mode != "output" and expired and written:
        p = expired[0]
        low, high = holding[p]
        raise SinkPreconditionError(
            f"--starting-offsets {mode}: group {group!r} has no committed offset for {topic} partition(s)"
            f" {', '.join(map(str, expired))} although they hold records ({topic}[{p}]: offsets {low}..{high - 1})"
            f" and the output was written to; the offsets expired (offsets.retention.minutes) or were deleted,"
            f" and starting there would write those records again. Start with --starting-offsets output, which"
            f" resumes each partition after the last record the output and dead-letter topics hold from it")
    if mode == "earliest":
        return mode
    starts = {p: c.offset if c.offset >= 0 else EARLIEST for p, c in committed.items()}
    if mode == "output":
        delivered = evidence() or Evidence()  # a topic never written proves nothing was delivered
        for p, c in committed.items():
            if c.offset >= 0:  # the group's own offset is evidence, whatever the output lost
                starts[p] = max(c.offset, delivered.ends.get(p, 0))
            elif p in delivered.ends or (written and p in holding):
                _refuse_unsure(delivered, group, topic, p, written_topics, holding.get(p))
                starts[p] = delivered.ends[p]
    return json.dumps({topic: {str(p): start for p, start in starts.items()}})


def _refuse_unsure(evidence: Evidence, group: str, topic: str, partition: int, written_topics: list[str],
                   held: tuple[int, int] | None) -> None:
    """Refuse `--starting-offsets output` for a partition whose last delivered record the output may no longer hold."""
    way_out = (f" If you know where it was left, give group {group!r} that offset (kafka-consumer-groups --group {group}"
               f" --reset-offsets --topic {topic}:{partition} --to-offset N --execute) and start again")
    lost = evidence.unsure(partition)
    if lost:
        raise SinkPreconditionError(
            f"--starting-offsets output: {lost[0]} has lost its oldest records (its log start is above 0) and holds none"
            f" that this pipeline delivered from {topic}[{partition}], so the last ones delivered from it may be among"
            f" those lost and group {group!r} has no offset for it.{way_out}")
    if partition not in evidence.ends:
        low, high = held
        raise SinkPreconditionError(
            f"--starting-offsets output: {topic}[{partition}] holds records (offsets {low}..{high - 1}) but group"
            f" {group!r} has no offset for it and {', '.join(written_topics)} hold no record this pipeline delivered"
            f" from it, although they were written to: nothing shows where it was left.{way_out}")


def replay_written_again(bootstrap: str | Connection, topic: str, written_topics: list[str],
                         committed: dict[int, CommittedOffset], start_offsets: dict[int, int], pipeline: str,
                         settle_timeout_s: float) -> list[int]:
    """The partitions whose slice of a replayed batch may be written already although the group has no offset to say so.

    A replay starts at `start_offsets` (a first micro-batch at the query's initial offsets, a
    real-time query where its last finished epoch ended), where a partition's missing or lower
    offset is no evidence of expiry by itself: the run that died may have committed nothing for
    it, or (real-time mode) committed only up to its last record before aborted ones. The output
    is the evidence: if it holds a record of the partition at or after the start, or may have
    lost one (streaming/verify/evidence.py), the slice was committed, and Step 3, with no offset
    to filter by, would write it again. A first run that wrote nothing costs no read.
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
    evidence = read_evidence(bootstrap, topic, written_topics, pipeline, settle_timeout_s)
    return [p for p in below if evidence.ends.get(p, -1) > start_offsets[p] or evidence.unsure(p)]
