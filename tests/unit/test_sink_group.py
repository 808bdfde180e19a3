"""streaming/group.py without a broker: the offset keeper's timing and the scope check."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest

from streaming.group import CommittedOffset, OffsetKeeper, SinkPreconditionError, auto_scope, check_scope


class RecordingSink:
    """What the keeper needs of a TransactionalSink; records each re-commit."""

    def __init__(self, partitions: list[int]):
        self.lock, self.settings = threading.Lock(), SimpleNamespace(input_topic="in")
        self.partitions, self.recommits, self.owner_renewals = partitions, [], 0

    def input_partitions(self) -> list[int]:
        """The input's partitions."""
        return self.partitions

    def recommit(self, partitions: list[int]) -> list[int]:
        """Pretend every partition but 2 has an offset to re-commit."""
        self.recommits.append(list(partitions))
        return [p for p in partitions if p != 2]

    def renew_owner(self) -> None:
        """Count the owner record's renewals."""
        self.owner_renewals += 1


def test_the_keeper_refreshes_what_no_commit_touched_for_a_third_of_the_retention(monkeypatch):
    clock = [1000.0]
    monkeypatch.setattr("streaming.group.time.monotonic", lambda: clock[0])
    sink = RecordingSink([0, 1, 2])
    keeper = OffsetKeeper(sink, retention_minutes=3)  # refresh after 60 s, wake every 15 s
    assert (keeper.refresh_after_s, keeper.wake_s) == (60.0, 15.0)
    assert keeper.refresh() == [0, 1], "at start nothing says when the last commit was: all are refreshed"
    clock[0] += 40
    keeper.committed([0])  # a batch committed partition 0
    clock[0] += 30
    assert keeper.refresh() == [1] and sink.recommits[-1] == [1, 2]
    assert keeper.refresh() == [] and len(sink.recommits) == 2
    assert sink.owner_renewals == 1, "the owner record, written at the claim, once it is as old as an offset to refresh"


def test_the_keeper_judges_staleness_after_the_batch_it_waited_for(monkeypatch):
    clock = [1000.0]
    monkeypatch.setattr("streaming.group.time.monotonic", lambda: clock[0])
    sink = RecordingSink([0, 1])
    keeper = OffsetKeeper(sink, retention_minutes=3)
    sink.lock.acquire()  # a long first batch is running
    refreshing = threading.Thread(target=lambda: keeper.refresh())
    refreshing.start()
    refreshing.join(0.2)
    keeper.committed([0, 1])  # the batch committed every partition, then released the lock
    sink.lock.release()
    refreshing.join(5)
    assert sink.recommits == [], "nothing the batch just committed is re-committed"


def test_a_group_written_by_the_other_scope_is_refused_and_an_untagged_one_is_not():
    check_scope({0: CommittedOffset(5, None), 1: CommittedOffset(-1, None)}, "in", "app", "batch")
    with pytest.raises(SinkPreconditionError, match=r"partitions 1, 3\); .* Keep --txn-scope partition, or use a new"):
        check_scope({0: CommittedOffset(5, "batch"), 1: CommittedOffset(7, "partition"),
                     3: CommittedOffset(9, "partition")}, "in", "app", "batch")


class Undecodable:
    """A TopicPartition whose metadata confluent-kafka cannot decode (bytes read past its end)."""

    partition, offset, error = 0, 5, None

    @property
    def metadata(self):
        """Raise as confluent-kafka does for such metadata."""
        raise UnicodeDecodeError("utf-8", b"\xf6", 0, 1, "invalid start byte")


def test_auto_gives_a_new_group_slot_scope_and_a_written_group_the_scope_that_wrote_it():
    none = {0: CommittedOffset(-1, None), 1: CommittedOffset(-1, None)}
    assert auto_scope(none, "g", realtime=False) == ("slot", "auto: group 'g' has no committed offsets")
    assert auto_scope(none, "g", realtime=True)[0] == "partition", "real-time mode commits per input partition"
    for scope in ("partition", "slot", "batch"):
        written = {0: CommittedOffset(5, scope), 1: CommittedOffset(-1, None)}
        assert auto_scope(written, "g", realtime=False) == (scope, f"auto: group 'g' holds offsets {scope} scope committed")
    untagged = {0: CommittedOffset(5, None), 1: CommittedOffset(-1, None)}
    assert auto_scope(untagged, "g", realtime=False)[0] == "partition", "an eosbench older than the tags ran partition"
    # A reset (kafka-consumer-groups writes no metadata): the owner record's scope, else the output's newest records'.
    assert auto_scope(untagged, "g", realtime=False, owner_scope="slot") == (
        "slot", "auto: the owner record of 'g' names a run of slot scope")
    assert auto_scope(untagged, "g", realtime=False, output_scope="slot")[0] == "slot"
    assert auto_scope(none, "g", realtime=False, owner_scope="partition")[0] == "partition", "a run that committed nothing"
    assert auto_scope(written, "g", realtime=False, owner_scope="slot")[0] == "batch", "tagged offsets decide first"
    with pytest.raises(SinkPreconditionError, match="several scopes \\(partition, slot\\)"):
        auto_scope({0: CommittedOffset(5, "slot"), 1: CommittedOffset(5, "partition")}, "g", realtime=False)


def test_a_scope_tag_is_read_by_its_prefix_and_undecodable_metadata_is_nobodys():
    from streaming.group import read_committed_offsets

    def reader(*answer):
        return SimpleNamespace(committed=lambda partitions, timeout: list(answer))

    tagged = SimpleNamespace(partition=0, offset=5, error=None, metadata="eosbench txn-scope=partition447-0")
    assert read_committed_offsets(reader(tagged), "in", [0], "app") == {0: CommittedOffset(5, "partition")}
    assert read_committed_offsets(reader(Undecodable()), "in", [0], "app") == {0: CommittedOffset(5, None)}


def test_a_tag_carries_its_run_and_a_slot_tag_its_slot_and_older_tags_still_read():
    from streaming.group import new_commit_token, new_run, offset_tag, read_committed_offsets

    token = new_commit_token()

    def read(metadata: str) -> CommittedOffset:
        tp = SimpleNamespace(partition=0, offset=7, error=None, metadata=metadata)
        return read_committed_offsets(SimpleNamespace(committed=lambda partitions, timeout: [tp]), "in", [0], "a")[0]

    run = new_run()
    assert read(offset_tag("slot", 64, token, run, (3, 8)) + "\x00junk") == CommittedOffset(
        7, "slot", 64, token, (3, 8), None, run), "slot, slot count and run, stray bytes left"
    assert read(offset_tag("partition", 64, token, run)) == CommittedOffset(7, "partition", 64, token, None, None, run)
    assert read(f"eosbench txn-scope=slot;partitions=64;token={token};slot=3/8;ids=12;run={run};") == CommittedOffset(
        7, "slot", 64, token, (3, 8), 12, run), "the last release's slot tag, with the slot ids any run had used"
    assert read(f"eosbench txn-scope=slot;partitions=64;token={token};slot=3/8;") == CommittedOffset(
        7, "slot", 64, token, (3, 8)), "a slot tag from before ids and run"
    assert read(offset_tag("partition", 64, token)) == CommittedOffset(7, "partition", 64, token, None)
    with pytest.raises(SinkPreconditionError, match="committed with --txn-scope slot"):
        check_scope({0: read(offset_tag("slot", 4, token, run, (0, 2)))}, "in", "app", "partition")
