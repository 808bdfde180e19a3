"""The owner record and a driver's claim of its pipeline (streaming/owner.py, sink_start.claim), without a broker.

The claim's order is what makes it sound: the record names the new run before any fence, so a
writer of an older run either is fenced or reads the new run. These tests record every read,
write and fence the claim makes, in order.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from conf.stream_settings import StreamSettings
from streaming.sink import start as sink_start
from streaming.group import CommittedOffset, SinkPreconditionError
from streaming.owner import Owner, Writers, check_owner, owner_tag, parse_owner, writers_from_tags

RUN = "0123456789abcdef"


def test_the_record_reads_back_whole_past_stray_bytes_and_other_metadata_is_none():
    owner = Owner(RUN, "slot", Writers(partitions=16, slots=4, batch=True))
    assert parse_owner(owner_tag(owner)) == owner
    assert parse_owner(owner_tag(owner) + "\x00junk") == owner
    for other in (None, "", "eosbench txn-scope=slot;partitions=4;token=0123456789abcdef;",
                  owner_tag(owner).replace("scope=slot", "scope=queue")):
        assert parse_owner(other) is None


def test_a_writer_goes_on_only_where_the_record_names_its_own_run():
    check_owner(Owner(RUN, "slot", Writers(slots=2)), RUN, "app")
    with pytest.raises(SinkPreconditionError, match=r"names run fedcba9876543210, not this writer's run 0123456789abcdef:"
                                                    r" a newer driver has claimed the pipeline"):
        check_owner(Owner("fedcba9876543210", "slot", Writers(slots=2)), RUN, "app")
    with pytest.raises(SinkPreconditionError, match=r"^the owner record of pipeline 'app' \(group 'app.owner'\) names no"
                                                    r" run \(it expired or was deleted\)"):
        check_owner(None, RUN, "app")


def test_writers_name_every_id_of_their_families():
    writers = Writers(partitions=2) | Writers(slots=3) | Writers(batch=True) | Writers(slots=1)
    assert writers.txn_ids("app", "in") == ["app.in.0", "app.in.1", "app.slot.0", "app.slot.1", "app.slot.2", "app.batch"]
    assert writers.without("partition") == Writers(slots=3, batch=True)
    assert writers.without("batch").txn_ids("app", "in")[-1] == "app.slot.2"
    assert not Writers() and Writers.of("slot", 64, 4) == Writers(slots=4)


def test_tags_of_the_last_release_name_the_slot_ids_any_run_had_used():
    committed = {0: CommittedOffset(5, "slot", 3, "t", (1, 2), 8), 1: CommittedOffset(5, "slot", 3, "t", (0, 4)),
                 2: CommittedOffset(-1, None)}
    assert writers_from_tags(committed, 3) == Writers(slots=8)
    assert writers_from_tags({0: CommittedOffset(5, "partition", 5)}, 3) == Writers(partitions=5)
    assert writers_from_tags({0: CommittedOffset(5, None)}, 3) == Writers(), "an untagged offset names no id"


class Recorder:
    """Stands in for the claim's clients: the owner record in memory, the start's read and every write and fence, in order."""

    def __init__(self, monkeypatch, owner: Owner | None, evidence=None):
        self.owner, self.evidence, self.steps = owner, evidence, []
        monkeypatch.setattr(sink_start, "_owner_consumer", lambda _: SimpleNamespace(close=lambda: None))
        monkeypatch.setattr(sink_start, "write_owner", self.write)
        monkeypatch.setattr(sink_start.clients, "fence", self.fence)

    def read(self, committed) -> sink_start.StartRead:
        """The start's read of a three-partition pipeline, as `read_start` would make it of this record."""
        self.steps.append(("read", self.owner))
        return sink_start.StartRead(None, [0, 1, 2], committed, self.owner, {"out": 3, "out.dlq": 3}, {},
                                    written=self.evidence is not None, read_evidence=lambda: self.evidence)

    def write(self, consumer, topic, app_id, owner):
        self.owner = owner
        self.steps.append(("write", owner.scope, owner.fence))

    def fence(self, plan, txn_ids):
        assert plan.run == self.owner.run, "the record names the new run before any fence"
        self.steps.append(("fence", tuple(txn_ids)))


def claimed(recorder: Recorder, scope: str, slots: int = 0, committed=None) -> sink_start.Claim:
    """A claim of a three-partition pipeline `app` in `scope`, after the start's read."""
    settings = StreamSettings(input_topic="in", output_topic="out", app_id="app", txn_scope=scope)
    return sink_start.claim(settings, recorder.read(committed or {p: CommittedOffset(-1, None) for p in range(3)}), slots)


def test_a_claim_writes_the_record_then_fences_what_it_names_then_writes_its_own_ids(monkeypatch):
    recorder = Recorder(monkeypatch, Owner(RUN, "slot", Writers(slots=8)))
    claim = claimed(recorder, "slot", slots=2)
    assert recorder.steps == [
        ("read", Owner(RUN, "slot", Writers(slots=8))),
        ("write", "slot", Writers(slots=8)),
        ("fence", tuple(f"app.slot.{k}" for k in range(8))),
        ("write", "slot", Writers(slots=2)),
    ]
    assert claim.run != RUN and recorder.owner.run == claim.run and claim.fenced.slots == 8


def test_a_change_of_scope_fences_the_other_scopes_ids_and_a_scope_that_fences_its_own_skips_them(monkeypatch):
    recorder = Recorder(monkeypatch, Owner(RUN, "partition", Writers(partitions=3)))
    claimed(recorder, "slot", slots=1)
    assert recorder.steps[2] == ("fence", ("app.in.0", "app.in.1", "app.in.2", "app.slot.0"))
    assert recorder.steps[1] == ("write", "slot", Writers(partitions=3, slots=1)), "a claim cut short leaves them named"
    # Partition scope over partition scope: each task's init of T(p) fences the old T(p) before it reads c.
    recorder = Recorder(monkeypatch, Owner(RUN, "partition", Writers(partitions=3)))
    claimed(recorder, "partition")
    assert recorder.steps[2] == ("fence", ())
    # A claim that died between its two writes left the ids of the runs before it to the next.
    recorder = Recorder(monkeypatch, Owner(RUN, "batch", Writers(slots=4, batch=True)))
    claimed(recorder, "batch")
    assert recorder.steps[2] == ("fence", tuple(f"app.slot.{k}" for k in range(4)))
    assert recorder.steps[3] == ("write", "batch", Writers(batch=True))


def test_without_a_record_the_tags_and_then_the_outputs_records_name_the_ids_to_fence(monkeypatch):
    tagged = {0: CommittedOffset(5, "slot", 3, "t", (1, 2), 6), 1: CommittedOffset(-1, None),
              2: CommittedOffset(-1, None)}
    recorder = Recorder(monkeypatch, None)
    claimed(recorder, "slot", slots=2, committed=tagged)
    assert recorder.steps[2] == ("fence", tuple(f"app.slot.{k}" for k in range(6)))
    # Reset offsets (no tag) of a pipeline whose output records name slots 0..4 and partition 1.
    untagged = {p: CommittedOffset(5, None) for p in range(3)}
    recorder = Recorder(monkeypatch, None, SimpleNamespace(writers=Writers(partitions=2, slots=5)))
    claimed(recorder, "slot", slots=2, committed=untagged)
    assert recorder.steps[2] == ("fence", ("app.in.0", "app.in.1", "app.in.2",
                                           *(f"app.slot.{k}" for k in range(5))))
    # Reset offsets and an output this pipeline never wrote: an eosbench older than the tags, partition scope.
    recorder = Recorder(monkeypatch, None, None)
    claimed(recorder, "slot", slots=1, committed=untagged)
    assert recorder.steps[2] == ("fence", ("app.in.0", "app.in.1", "app.in.2", "app.slot.0"))
    # A new pipeline: nothing but its own slot ids.
    recorder = Recorder(monkeypatch, None, None)
    claimed(recorder, "slot", slots=2)
    assert recorder.steps[2] == ("fence", ("app.slot.0", "app.slot.1"))
