"""The exactly-once verifier: reads the input, the output and the dead letters, and reports.

The checks are `streaming.verify.checks`' arithmetic over integers (streaming/verify/topic_index.py
reads topics into them); this module reads the topics, bounds a live run, and adds what only
the cluster can tell: that no transaction is left hanging (last stable offset = end offset on
every partition of the input, the output and the dead-letter topic), and where the sink group's
committed offsets stand (with --app-id; `group_offset_mismatches` judges them). Aborted data is
also read (read_uncommitted) to show that it existed and stayed hidden.

`live=True` checks a pipeline that is still running (the soak verifies after every fault): the
producer keeps writing and the stream keeps committing, so only a stable prefix is judged. The
sink group's offsets are read first, then the input's last stable offsets; then the verify waits
until every transaction open on the outputs at that moment has ended, because a read_committed
reader sees nothing past a partition's last stable offset, and the output of a transaction
already counted in the group's offsets can sit behind another task's transaction still open on
the same output partition (a sink task blocked after a broker kill held one open for 45 s in
the three-broker soak test, and 1,194 committed records read as lost). Only then is the data
read. Every committed input below the group's offsets must have been delivered exactly once;
records in flight (above them) are checked for duplicates and aborted reads wherever their
source is below the stable offsets read, and a transaction is judged whole once one of its
records names a source below the group's offsets (it committed them, and the wait above saw its
markers written). An output transaction still open after `stable_timeout_s` is reported as
hanging. A live verify can read through an `IncrementalIndexes`, which fetches only the records
after those it already holds. The soak verifies again and again, so for output with eos headers
it uses `streaming.verify.live_ledger` instead, which also judges only the new records;
`judge_records` is the arithmetic that ledger is held equal to.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from confluent_kafka import Consumer

from conf.client_config import Connection, connection
from conf.client_log import CLIENT_LOG
from conf.watermarks import watermark_offsets
from streaming.process import TRANSFORMS
from streaming.group import read_committed_offsets
# TopicIndex is named here too for the callers that read indexes through this module.
from streaming.verify.topic_index import IncrementalIndexes, TopicIndex, read_index, topic_reader  # noqa: F401
from streaming.verify.checks import (DEFAULT_PROCESS, VerifyReport, _conclude, committed_floors,
                                     group_offset_mismatches, judge_records, sources_by_key)


class StableAndEndOffsets:
    """A read_committed and a read_uncommitted reader, kept open across looks at last stable and end offsets.

    A caller that looks again and again (a wait for open transactions polls every half second)
    keeps one; on a secured cluster each new pair of clients costs a TLS and SASL handshake per
    broker, which made a soak round's verify take 3-6 s instead of 1-2 s.
    """

    def __init__(self, bootstrap: str | Connection, timeout_s: float = 30.0) -> None:
        self.timeout_s = timeout_s
        self._committed = topic_reader(bootstrap, "read_committed")
        self._uncommitted = topic_reader(bootstrap, "read_uncommitted")

    def of(self, topic: str) -> dict[int, tuple[int, int]]:
        """{partition: (last stable offset, end offset)}; they differ while a transaction is open."""
        partitions = self._committed.list_topics(topic, timeout=self.timeout_s).topics[topic].partitions
        return {p: (watermark_offsets(self._committed, topic, p, self.timeout_s)[1],
                    watermark_offsets(self._uncommitted, topic, p, self.timeout_s)[1]) for p in partitions}

    def close(self) -> None:
        """Close both readers."""
        self._committed.close()
        self._uncommitted.close()

    def __enter__(self) -> StableAndEndOffsets:
        return self

    def __exit__(self, *_exc) -> None:
        self.close()


def stable_and_end_offsets(bootstrap: str | Connection, topic: str, timeout_s: float = 30.0) -> dict[int, tuple[int, int]]:
    """{partition: (last stable offset, end offset)} of one look; they differ while a transaction is open."""
    with StableAndEndOffsets(bootstrap, timeout_s) as offsets:
        return offsets.of(topic)


def group_offsets(bootstrap: str | Connection, group: str, topic: str, partitions: list[int]) -> dict[int, int]:
    """The group's committed offsets (stable), -1 where none."""
    consumer = Consumer(connection(bootstrap).librdkafka(**{"group.id": group, "isolation.level": "read_committed",
                                                            "enable.auto.commit": False}), logger=CLIENT_LOG)
    try:
        return {p: c.offset for p, c in read_committed_offsets(consumer, topic, partitions, group).items()}
    finally:
        consumer.close()


def verify(bootstrap: str | Connection, input_topic: str, output_topic: str, app_id: str | None = None,
           dead_letter_topic: str | None = None, topic_exists=None, live: bool = False,
           indexes: IncrementalIndexes | None = None, stable_timeout_s: float = 90.0,
           match_by: str = "source", process: str = DEFAULT_PROCESS) -> VerifyReport:
    """Run every check and return the report (live: judge the stable prefix of a running pipeline).

    `process` names the stream's transform (streaming/process.py), which each output value must
    be the work of; matched by key (Kafka's copier, which copies values unchanged) it is unused.
    """
    if indexes is not None and not live:
        raise ValueError("only a live verify reads incrementally; the final verify reads every topic whole")
    if match_by not in ("source", "key"):
        raise ValueError(f"match_by must be 'source' or 'key', not {match_by!r}")
    if process not in TRANSFORMS:
        raise ValueError(f"process must be one of {', '.join(TRANSFORMS)}, not {process!r}")
    read = indexes.read if indexes is not None else read_index
    report = VerifyReport(input_topic, output_topic, match_by=match_by, process=process if match_by == "source" else "")
    with_dead_letter = bool(dead_letter_topic) and (topic_exists is None or topic_exists(dead_letter_topic))
    outputs = [output_topic] + ([dead_letter_topic] if with_dead_letter else [])
    cutoff = stable = None
    if live:
        if not app_id:
            raise ValueError("a live verify needs the sink's app id (its group offsets bound what must be delivered)")
        cutoff, stable, hanging = live_bounds(bootstrap, input_topic, app_id, outputs, stable_timeout_s)
        report.hanging_partitions += hanging
    # Matched by key, an input's digest is its own value's: what the copier must deliver.
    committed_in = read(bootstrap, input_topic, "read_committed", with_src=False,
                        process=TRANSFORMS[process] if match_by == "source" else None)
    all_in = None if live else read_index(bootstrap, input_topic, "read_uncommitted", with_src=False)
    if stable is not None:
        committed_in = committed_in.below(stable)
    out = read(bootstrap, output_topic, "read_committed", with_src=True, source_topic=input_topic)
    out_all = None if live else read_index(bootstrap, output_topic, "read_uncommitted", with_src=True)
    dead = (read(bootstrap, dead_letter_topic, "read_committed", with_src=True, source_topic=input_topic)
            if with_dead_letter else None)

    report.input_committed = int(committed_in.seq.size)
    report.input_aborted = int(all_in.seq.size - committed_in.seq.size) if all_in is not None else 0
    report.output_committed = int(out.seq.size)
    report.output_aborted_hidden = int(out_all.seq.size - out.seq.size) if out_all is not None else 0
    report.dead_lettered = int(dead.seq.size) if dead is not None else 0

    if match_by == "key":
        inputs = [committed_in] + ([all_in] if all_in is not None else [])
        out = sources_by_key(out, inputs)
        dead = sources_by_key(dead, inputs) if dead is not None else None
    # A live verify judges compaction not at all, as the soak's live ledger does not.
    report.compacted_topics = [] if live else compacted_topics(bootstrap, [input_topic, *outputs])
    # Matched by key, a delivery's source is found among the records held, never a missing one.
    compacted = report.compacted_topics
    compacted_input = all_in if match_by == "source" and input_topic in compacted else None
    judge_records(report, committed_in, out, dead, cutoff, stable, compacted_input,
                  (output_topic in compacted, with_dead_letter and dead_letter_topic in compacted))

    if live:
        return _conclude(report)
    with StableAndEndOffsets(bootstrap) as looks:
        input_ends = looks.of(input_topic)
        ends_by_topic = [(input_topic, input_ends), *((t, looks.of(t)) for t in outputs)]
    for topic, offsets in ends_by_topic:
        for partition, (stable, end) in offsets.items():
            if stable != end:
                report.hanging_partitions.append(f"{topic}[{partition}]: last stable offset {stable} < end {end}")
    if app_id:
        ends = {partition: end for partition, (_, end) in input_ends.items()}
        # The group may stop after the last committed record, short of a tail of markers and aborted
        # records: a pipeline matched by key, and real-time mode, which commits {p: last record + 1}.
        floors = committed_floors(committed_in, ends)
        report.group_offset_mismatches += group_offset_mismatches(
            input_topic, app_id, group_offsets(bootstrap, app_id, input_topic, sorted(ends)), ends, floors)
    return _conclude(report)


def live_bounds(bootstrap: str | Connection, input_topic: str, app_id: str, outputs: list[str],
                stable_timeout_s: float) -> tuple[dict[int, int], dict[int, int], list[str]]:
    """A live verify's bounds: the group's offsets, then the input's last stable offsets, then the outputs settled.

    Returns (group offsets, last stable offsets, output partitions still hanging after the wait).
    """
    with StableAndEndOffsets(bootstrap) as looks:
        input_partitions = sorted(looks.of(input_topic))
        cutoff = {p: max(0, o) for p, o in group_offsets(bootstrap, app_id, input_topic, input_partitions).items()}
        stable = {p: lso for p, (lso, _) in looks.of(input_topic).items()}
    # Everything counted in the group's offsets was written before them: once the transactions
    # open on the outputs now have ended, all of it lies below the last stable offsets.
    return cutoff, stable, wait_until_stable(bootstrap, outputs, timeout_s=stable_timeout_s)


def compacted_topics(bootstrap: str | Connection, topics: list[str]) -> list[str]:
    """The topics whose cleanup.policy compacts (not those whose configuration cannot be read), in the order given."""
    from concurrent.futures import TimeoutError as FutureTimeout

    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

    admin = AdminClient(connection(bootstrap).librdkafka(), logger=CLIENT_LOG)
    try:
        futures = admin.describe_configs([ConfigResource(ResourceType.TOPIC, name) for name in dict.fromkeys(topics)])
    except KafkaException:
        return []
    compacted = []
    for resource, future in futures.items():
        try:
            if "compact" in future.result(timeout=30)["cleanup.policy"].value:
                compacted.append(resource.name)
        except (KafkaException, KeyError, FutureTimeout):  # a principal without DescribeConfigs is judged strictly
            continue
    return sorted(compacted, key=topics.index)


def wait_until_stable(bootstrap: str | Connection, topics: list[str], timeout_s: float,
                      on_wait: Callable[[dict[tuple[str, int], tuple[int, int]], float], None] | None = None) -> list[str]:
    """Find hanging transactions in a running pipeline; return one line per hanging partition.

    Open transactions are normal while producers run, so a snapshot of end offsets is taken and
    each partition's last stable offset must reach it within the timeout: every transaction open
    at the snapshot must end (commit, abort or time out) by then. `on_wait` is told, at every look
    that finds some still open, each such (topic, partition)'s (last stable offset, target) and the
    seconds waited.
    """
    with StableAndEndOffsets(bootstrap) as offsets:
        targets = {(topic, p): end for topic in topics for p, (_, end) in offsets.of(topic).items()}
        started = time.monotonic()
        while True:
            behind = {}
            for topic in {t for t, _ in targets}:
                for p, (lso, _) in offsets.of(topic).items():
                    if lso < targets.get((topic, p), 0):
                        behind[(topic, p)] = lso
            if not behind or time.monotonic() - started > timeout_s:
                return [f"{topic}[{p}]: last stable offset {lso} still below {targets[(topic, p)]} after {timeout_s:g} s"
                        for (topic, p), lso in sorted(behind.items())]
            if on_wait:
                on_wait({key: (lso, targets[key]) for key, lso in behind.items()}, time.monotonic() - started)
            time.sleep(0.5)
