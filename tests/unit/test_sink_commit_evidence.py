"""What the sink's commits leave as evidence, and what the sink concludes from it.

Against the fake cluster of tests/unit/fake_kafka.py: a refresh whose commit did not land is not
counted as done, a slice too large for one transaction commits in several without writing a record
twice, an idle partition costs no transaction, and a partition added after the last commit is
told from one whose offset expired. Exactly-once itself is proven on the real broker.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from streaming.sink import driver as eos_sink
from streaming.sink import start as sink_start
from streaming.sink import task as sink_task
from streaming.sink import sizing as transaction_size
from streaming.group import CommittedOffset, read_committed_offsets
from streaming.source.starting_offsets import unrecorded_partitions
from streaming.stats import BatchStats
from streaming.task_plan import KEEP_COMMITTED
from tests.unit.fake_kafka import FakeTransactionalProducer
from tests.unit.test_eos_sink_counts import cluster, plan_for, records  # noqa: F401 - the fixture is used by name


@pytest.fixture(autouse=True)
def no_rate_learnt(monkeypatch):
    """Each test starts on a worker that has not measured its produce rate."""
    monkeypatch.setattr(transaction_size, "_RECORDS_PER_SECOND", {})
    monkeypatch.setattr(transaction_size, "_RECORDS_CAP", {})


def test_a_refresh_whose_commit_did_not_land_is_retried_not_counted(cluster):  # noqa: F811
    cluster.group[("in", 0)] = (10, "eosbench txn-scope=partition;partitions=1;token=0123456789abcdef;")
    cluster.commit_faults = ["timeout-before-landing"]
    stats = sink_task.run_transaction(plan_for(batch_id=-1), "app.in.0", [], {("in", 0): KEEP_COMMITTED})
    assert [p.commits for p in cluster.producers] == [0, 1], "the second attempt refreshed the offset"
    offset, metadata = cluster.group[("in", 0)]
    assert offset == 10 and "0123456789abcdef" not in metadata, "a new commit, not the old one"
    assert stats["committed_partitions"] == [0] and stats["retries"] == 1


def test_a_refresh_that_landed_although_its_call_failed_is_found_by_its_token(cluster):  # noqa: F811
    cluster.group[("in", 0)] = (10, "eosbench txn-scope=partition;partitions=1;token=0123456789abcdef;")
    cluster.commit_faults = ["timeout-after-landing"]
    stats = sink_task.run_transaction(plan_for(batch_id=-1), "app.in.0", [], {("in", 0): KEEP_COMMITTED})
    assert [p.commits for p in cluster.producers] == [1, 0]
    assert stats["committed_partitions"] == [0] and stats["outcome"] == "committed"


def test_a_slice_larger_than_a_transaction_commits_in_several_each_with_its_offset(cluster, monkeypatch):  # noqa: F811
    monkeypatch.setattr(transaction_size, "records_per_transaction", lambda plan: 3)
    offsets_seen = []
    commit = FakeTransactionalProducer.commit_transaction

    def recording_commit(producer, timeout=None):
        commit(producer, timeout)
        offsets_seen.append(cluster.group[("in", 0)][0])
    monkeypatch.setattr(FakeTransactionalProducer, "commit_transaction", recording_commit)
    slice_ = records(range(0, 8))
    stats = sink_task.run_transaction(plan_for(), "app.in.0", [slice_], {("in", 0): 10})
    assert offsets_seen == [3, 6, 10], "each transaction commits the offset of the first record it left"
    assert [key for _, key in cluster.written] == slice_.keys, "every record once, in order"
    assert stats["transactions"] == 3 and stats["records_out"] == 8 and stats["records_skipped"] == 0


def test_a_retry_after_a_partial_commit_writes_only_what_is_left(cluster, monkeypatch):  # noqa: F811
    monkeypatch.setattr(transaction_size, "records_per_transaction", lambda plan: 5)
    cluster.commit_faults = [None, "fenced"]  # the second transaction is fenced at its commit
    slice_ = records(range(0, 8))
    stats = sink_task.run_transaction(plan_for(), "app.in.0", [slice_], {("in", 0): 10})
    assert [key for _, key in cluster.written] == slice_.keys
    assert cluster.group[("in", 0)][0] == 10 and stats["transactions"] == 2 and stats["fenced"] == 1
    # Spark retries the whole task: Step 3 skips everything already committed.
    again = sink_task.run_transaction(plan_for(), "app.in.0", [slice_], {("in", 0): 10})
    assert again["outcome"] == "skipped_replay" and len(cluster.written) == 8


def test_an_attempt_that_overran_the_budget_halves_the_next_ones_records():
    plan = plan_for(producer_config={"bootstrap.servers": "fake:9092", "transaction.timeout.ms": "2000"})
    assert transaction_size.produce_budget_s(plan) == 1.0 and transaction_size.records_per_transaction(plan) is None
    transaction_size.learn_rate(plan, 10_000, 4.0, overran=True)  # 2,500 records/s: 2,500 fit in the budget
    assert transaction_size.records_per_transaction(plan) == 2_500
    transaction_size.learn_rate(plan, 2_000, 0.1, overran=True)  # a stall the rate missed: halve what overran
    assert transaction_size.records_per_transaction(plan) == 1_000
    transaction_size.learn_rate(plan, 1_000, 0.1, overran=False)  # fast again: the rate alone bounds it
    assert transaction_size.records_per_transaction(plan) == 10_000


def test_idle_partitions_cost_no_transaction_and_count_as_idle(cluster):  # noqa: F811
    cluster.group[("in", 0)], cluster.group[("in", 1)] = (10, ""), (4, "")  # at their ends, nothing new
    sink = object.__new__(eos_sink.TransactionalSink)
    sink.settings = SimpleNamespace(input_topic="in", txn_scope="partition")
    sink.keeper = SimpleNamespace(committed=lambda partitions: None)
    stats = BatchStats(0)
    sink._commit_empty_slices(plan_for(end_offsets={0: 10, 1: 4}, start_offsets={0: 10, 1: 4}), set(), stats)
    assert stats.outcomes["idle"] == 2 and stats.outcomes["skipped_replay"] == 0
    assert cluster.producers == [], "no driver-side producer fences the executors' cached ones"


def test_an_idle_partition_no_batch_committed_yet_gets_its_offset(cluster):  # noqa: F811
    sink = object.__new__(eos_sink.TransactionalSink)
    sink.settings = SimpleNamespace(input_topic="in", txn_scope="partition")
    sink.keeper = SimpleNamespace(committed=lambda partitions: None)
    stats = BatchStats(0)
    sink._commit_empty_slices(plan_for(end_offsets={0: 7}, start_offsets={0: 7}), set(), stats)
    assert cluster.group[("in", 0)][0] == 7 and stats.outcomes["committed"] == 1 and stats.outcomes["idle"] == 0


def test_a_partition_added_after_the_last_commit_is_new_not_expired():
    committed = {0: CommittedOffset(40, "partition", 2, "a" * 16), 1: CommittedOffset(-1, None),
                 2: CommittedOffset(-1, None), 3: CommittedOffset(-1, None)}
    holding = {1: (0, 30), 2: (0, 5), 3: (0, 8)}
    assert unrecorded_partitions(committed, holding) == [1], "2 and 3 came after the commit that knew 2 partitions"
    older = {0: CommittedOffset(40, "partition"), 1: CommittedOffset(-1, None)}
    assert unrecorded_partitions(older, {1: (0, 30)}) == [1], "without a recorded count every gap is suspect"


@pytest.mark.parametrize(("metadata", "read"), [
    ("eosbench txn-scope=batch;partitions=12;token=00112233445566ff;", ("batch", 12, "00112233445566ff")),
    ("eosbench txn-scope=partition;partitions=4;token=00112233445566ff;9\x01garbage", ("partition", 4, "00112233445566ff")),
    ("eosbench txn-scope=partition447-0", ("partition", None, None)),  # an older tag, with bytes past its end
    ("somebody else's", (None, None, None)),
])
def test_a_tag_reads_back_whole_even_with_bytes_past_its_end(metadata, read):
    answer = [SimpleNamespace(partition=0, offset=5, error=None, metadata=metadata)]
    reader = SimpleNamespace(committed=lambda partitions, timeout: answer)
    assert read_committed_offsets(reader, "in", [0], "app") == {0: CommittedOffset(5, *read)}


@pytest.mark.parametrize(("written", "delivered", "trimmed", "refused"), [
    (False, {}, {}, []),  # a first run that committed nothing: nothing is read, the batch runs
    (True, {0: 120, 2: 7}, {}, [0]),  # partition 0's slice is in the output; 2's records there are older
    (True, {}, {}, []),  # written by nothing of this input: no slice was committed
    # An output partition lost its oldest records and holds none of 2's: its slice may be among them.
    (True, {0: 90, 2: 7}, {"out[1]": {0}}, [2]),
])
def test_a_replayed_batch_is_refused_only_where_the_output_holds_or_may_have_lost_its_records(
        monkeypatch, written, delivered, trimmed, refused):
    from streaming.source import starting_offsets
    from streaming.verify.evidence import Evidence

    class Closing:
        def close(self):
            """Nothing to close."""
    monkeypatch.setattr(starting_offsets, "_consumer", lambda bootstrap, **config: Closing())
    monkeypatch.setattr(starting_offsets, "ever_written", lambda consumer, topics: written)
    monkeypatch.setattr(starting_offsets, "read_evidence",
                        lambda *args, **kwargs: Evidence(ends=delivered, trimmed=trimmed))
    committed = {0: CommittedOffset(-1, None), 1: CommittedOffset(50, "partition"), 2: CommittedOffset(-1, None)}
    starts = {0: 100, 1: 50, 2: 10}
    assert starting_offsets.replay_written_again("b:9092", "in", ["out", "out.dlq"], committed, starts, "app",
                                                 settle_timeout_s=1.0) == refused
