"""A transactional sink's start is one read of Kafka, then decisions of what it read (streaming/sink/start.py).

Every decision is checked here on a `StartRead` built by hand: the scope `auto` chooses, the
refusals, the ids to fence and the starting offsets. The read itself is checked for what it
costs: two consumers, and the output's records read only when a decision asks, and once.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from conf.failures import EnvironmentFailure
from conf.stream_settings import StreamSettings
from streaming.group import CommittedOffset, SinkPreconditionError
from streaming.owner import Owner, Writers
from streaming.sink import start as sink_start
from streaming.source import starting_offsets
from streaming.source.starting_offsets import resolve_starting_offsets
from streaming.verify.evidence import Evidence

NO_OFFSET = CommittedOffset(-1, None)


def start_read(committed=None, owner: Owner | None = None, partitions: int = 2, topics=None, holding=None,
               evidence: Evidence | None = None, reads: list | None = None) -> sink_start.StartRead:
    """What `read_start` would have read of pipeline `app` (input `in`, output `out`); `reads` counts evidence reads."""
    def read():
        if reads is not None:
            reads.append(1)
        return evidence
    return sink_start.StartRead(
        None, list(range(partitions)), committed or {p: NO_OFFSET for p in range(partitions)}, owner,
        {"out": partitions, "out.dlq": partitions} if topics is None else topics, holding or {},
        written=evidence is not None, read_evidence=read)


def settings(**fields) -> StreamSettings:
    """The settings of pipeline `app`."""
    return StreamSettings(**{"input_topic": "in", "output_topic": "out", "app_id": "app", **fields})


def test_a_new_group_gets_slot_scope_and_a_tagged_one_keeps_its_scope_without_reading_the_output():
    reads = []
    resolved, why = sink_start.resolved_scope(settings(), start_read(reads=reads, evidence=Evidence()))
    assert (resolved.txn_scope, why) == ("slot", "txn scope: slot (auto: group 'app' has no committed offsets)")
    tagged = {0: CommittedOffset(5, "batch"), 1: NO_OFFSET}
    assert sink_start.resolved_scope(settings(), start_read(tagged, reads=reads, evidence=Evidence()))[0].txn_scope == \
        "batch"
    assert reads == [], "the tags decide: the output is not read"
    assert sink_start.resolved_scope(settings(sink="kafka-alo"), None)[0].txn_scope == "partition"
    assert sink_start.resolved_scope(settings(txn_scope="slot"), None) == (settings(txn_scope="slot"), None)


def test_reset_offsets_without_an_owner_record_take_the_scope_of_the_outputs_newest_records_read_once():
    reads = []
    evidence = Evidence(writers=Writers(slots=3), newest={"partition": 10, "slot": 20})
    start = start_read({p: CommittedOffset(5, None) for p in range(2)}, evidence=evidence, reads=reads)
    assert sink_start.resolved_scope(settings(), start)[0].txn_scope == "slot"
    assert sink_start.writers_left(start) == Writers(slots=3), "the ids the output's records name"
    assert reads == [1], "the scope and the fence asked; the output was read once"


def test_the_refusals_name_the_missing_dead_letter_topic_the_short_output_and_the_other_scope():
    with pytest.raises(EnvironmentFailure) as refused:
        sink_start.check_start(settings(), start_read(topics={"out": 2, "out.dlq": None}))
    assert "\n" not in str(refused.value) and str(refused.value).startswith(
        "dead-letter topic 'out.dlq' is missing or hidden from this principal")
    assert ("`eosbench acls --app-id app --principal User:<you> --input-topic in --output-topic out"
            " --apply --command-config ADMIN.properties`") in str(refused.value)
    with pytest.raises(SinkPreconditionError, match=r"^--output-partitioning input .* 'out' has 1 partitions for"
                                                    r" 'in''s 2"):
        sink_start.check_start(settings(output_partitioning="input"), start_read(topics={"out": 1, "out.dlq": 2}))
    with pytest.raises(SinkPreconditionError, match=r"committed with --txn-scope partition"):
        sink_start.check_start(settings(txn_scope="slot"), start_read({0: CommittedOffset(5, "partition"), 1: NO_OFFSET}))
    sink_start.check_start(settings(txn_scope="slot", output_partitioning="input"), start_read())


def test_the_ids_to_fence_come_from_the_record_then_the_tags_then_the_output():
    assert sink_start.writers_left(start_read(owner=Owner("r" * 16, "slot", Writers(slots=8)))) == Writers(slots=8)
    tagged = {0: CommittedOffset(5, "slot", 2, "t", (1, 2), 6), 1: NO_OFFSET}
    assert sink_start.writers_left(start_read(tagged)) == Writers(slots=6)
    written = Evidence(writers=Writers(partitions=1, slots=3))
    assert sink_start.writers_left(start_read(evidence=written)) == Writers(partitions=2, slots=3)
    assert sink_start.writers_left(start_read()) == Writers(), "a new pipeline fences nothing of a run before"


@pytest.mark.parametrize(("mode", "committed", "holding", "written", "delivered", "expected"), [
    ("latest", {0: NO_OFFSET}, {0: (0, 9)}, True, None, "latest"),
    ("earliest", {0: NO_OFFSET}, {0: (0, 9)}, False, None, "earliest"),  # never written: nothing to write twice
    ("group", {0: CommittedOffset(7, "slot"), 1: NO_OFFSET}, {}, True, None, {"0": 7, "1": -2}),
    ("output", {0: CommittedOffset(7, "slot"), 1: NO_OFFSET}, {1: (0, 9)}, True, {0: 9, 1: 4}, {"0": 9, "1": 4}),
    ("output", {0: NO_OFFSET}, {}, False, None, {"0": -2}),
])
def test_the_starting_offsets_are_decided_from_the_read(mode, committed, holding, written, delivered, expected):
    evidence = Evidence(ends=delivered) if delivered is not None else None
    chosen = resolve_starting_offsets(mode, "app", "in", ["out", "out.dlq"], committed, holding, written,
                                      lambda: evidence)
    assert (chosen if isinstance(expected, str) else json.loads(chosen)["in"]) == expected


def test_expired_offsets_of_a_written_output_are_refused_and_output_refuses_a_partition_with_no_evidence():
    expired = {0: CommittedOffset(5, "slot", partitions=2), 1: NO_OFFSET}
    with pytest.raises(SinkPreconditionError, match=r"^--starting-offsets earliest: group 'app' has no committed"
                                                    r" offset for in partition\(s\) 1 although they hold records"
                                                    r" \(in\[1\]: offsets 3\.\.8\)"):
        resolve_starting_offsets("earliest", "app", "in", ["out", "out.dlq"], expired, {1: (3, 9)}, True, lambda: None)
    with pytest.raises(SinkPreconditionError, match=r"in\[1\] holds records \(offsets 3\.\.8\) but group 'app' has no"
                                                    r" offset for it"):
        resolve_starting_offsets("output", "app", "in", ["out", "out.dlq"], expired, {1: (3, 9)}, True,
                                 lambda: Evidence(ends={0: 5}))


def test_a_start_reads_with_two_consumers_and_closes_both(monkeypatch):
    made = []

    class Consumer:
        def __init__(self, group):
            made.append(group)
            self.closed = False

        def list_topics(self, topic=None, timeout=None):
            names = [topic] if topic else ["in", "out", "out.dlq"]
            return SimpleNamespace(topics={name: SimpleNamespace(partitions={0: None, 1: None}, error=None)
                                           for name in names})

        def consumer_group_metadata(self):
            return "metadata"

        def close(self):
            self.closed = True

    monkeypatch.setattr(sink_start, "_memberless_consumer", lambda s: Consumer(s.group_id))
    monkeypatch.setattr(sink_start, "_owner_consumer", lambda s: Consumer(f"{s.app_id}.owner"))
    monkeypatch.setattr(sink_start, "read_committed_offsets", lambda *_: {0: CommittedOffset(4, "slot"), 1: NO_OFFSET})
    monkeypatch.setattr(sink_start, "read_owner", lambda *_: None)
    ends = {("in", 1): (0, 6), ("out", 0): (0, 0), ("out", 1): (0, 2), ("out.dlq", 0): (0, 0), ("out.dlq", 1): (0, 0)}
    monkeypatch.setattr(sink_start, "watermark_offsets", lambda consumer, topic, p, timeout_s: ends[(topic, p)])
    monkeypatch.setattr(starting_offsets, "watermark_offsets", lambda consumer, topic, p, timeout_s: ends[(topic, p)])
    start = sink_start.read_start(settings())
    assert made == ["app", "app.owner"]
    assert (start.partitions, start.topic_partitions, start.holding, start.written, start.group_metadata) == (
        [0, 1], {"out": 2, "out.dlq": 2}, {1: (0, 6)}, True, "metadata")
