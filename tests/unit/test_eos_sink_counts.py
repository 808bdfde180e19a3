"""The sink's transaction loop against a fake cluster: counts after retries, errors in the offset
read, and clients kept per cluster. Exactly-once itself is proven on the real broker
(tests/integration); these check what the loop reports and which client it talks to.
"""

from __future__ import annotations

import re
import time
from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError

from streaming.sink import driver as eos_sink
from streaming.sink import clients as sink_clients
from streaming.sink import task as sink_task
from streaming.process import SourceSlice
from streaming.stats import BatchStats
from streaming.task_plan import SinkTaskFailed, TaskPlan
from tests.unit.fake_kafka import FakeCluster


@pytest.fixture
def cluster(monkeypatch) -> FakeCluster:
    """A fake cluster behind sink_clients.kafka_module(), with empty client caches."""
    fake = FakeCluster()
    monkeypatch.setattr(sink_clients, "kafka_module", lambda: fake)
    monkeypatch.setattr(sink_clients, "_PRODUCERS", {})
    monkeypatch.setattr(sink_clients, "_OFFSET_READERS", {})
    monkeypatch.setattr(sink_clients, "_WRITERS", {})
    return fake


def plan_for(bootstrap: str = "fake:9092", **overrides) -> TaskPlan:
    """A task plan for input partition in[0], whose batch ends at offset 10."""
    fields = dict(app_id="app", output_topic="out", dead_letter_topic="out.dlq", process="passthrough",
                  producer_config={"bootstrap.servers": bootstrap}, group_metadata="group", end_offsets={0: 10},
                  max_retries=3, pre_register=False, batch_id=0, fault=None)
    return TaskPlan(**{**fields, **overrides})


def records(offsets: range) -> SourceSlice:
    """A slice of in[0] with these offsets, created a second ago."""
    keys = [str(o).encode() for o in offsets]
    now_ms = int(time.time() * 1000) - 1000
    return SourceSlice(keys=keys, values=keys, offsets=list(offsets), timestamps=[now_ms] * len(keys),
                       src=[f"in:0:{o}".encode() for o in offsets], in_ts=[str(now_ms).encode()] * len(keys),
                       topic="in", partition=0)


def test_a_commit_that_timed_out_but_landed_counts_as_committed_with_its_records(cluster):
    cluster.commit_faults = ["timeout-after-landing"]
    stats = sink_task.run_transaction(plan_for(), "app.in.0", [records(range(0, 8))], {("in", 0): 10})
    assert cluster.group[("in", 0)][0] == 10
    assert [p.commits for p in cluster.producers] == [1, 0], "the retry found the commit and wrote nothing again"
    assert stats["outcome"] == "committed" and stats["retries"] == 1
    assert stats["records_out"] == 8 and stats["records_skipped"] == 0
    assert sum(stats["latency_counts"]) == 8, "every record's end-to-end latency is measured once"
    assert stats["phase_produce_s"] > 0 and stats["phase_commit_s"] > 0


def test_a_replay_after_a_clean_commit_is_still_skipped(cluster):
    sink_task.run_transaction(plan_for(), "app.in.0", [records(range(0, 8))], {("in", 0): 10})
    replay = sink_task.run_transaction(plan_for(), "app.in.0", [records(range(0, 8))], {("in", 0): 10})
    assert replay["outcome"] == "skipped_replay" and replay["records_out"] == 0 and replay["records_skipped"] == 8


def test_a_cached_producer_that_a_later_init_fenced_is_replaced_before_the_attempt_not_after_it(cluster):
    first = sink_task.run_transaction(plan_for(), "app.in.0", [records(range(0, 4))], {("in", 0): 5})
    # The driver heard that another worker's producer inited app.in.0 since: this worker's copy is fenced.
    moved = sink_task.run_transaction(plan_for(writers={"app.in.0": "4242.elsewhere"}), "app.in.0",
                                      [records(range(5, 8))], {("in", 0): 9})
    assert len(cluster.producers) == 2 and moved["writer"] not in ("", first["writer"])
    assert (moved["retries"], moved["fenced"], moved["outcome"]) == (0, 0, "committed")
    # The copy the driver names as the latest is kept.
    kept = sink_task.run_transaction(plan_for(writers={"app.in.0": moved["writer"]}, end_offsets={0: 10}), "app.in.0",
                                     [records(range(9, 10))], {("in", 0): 10})
    assert len(cluster.producers) == 2 and kept["writer"] == moved["writer"]
    batch = BatchStats(0)
    for row in (first, moved):
        batch.add_task(row)
    assert batch.writers == {"app.in.0": moved["writer"]}, "the driver keeps each id's latest writer for the next plan"


def test_offsets_held_open_past_a_cached_producer_get_a_new_producer_and_a_fresh_one_waits(cluster, monkeypatch):
    monkeypatch.setattr(sink_task, "HELD_OPEN_S", 0.0)
    sink_task.run_transaction(plan_for(), "app.in.0", [records(range(0, 4))], {("in", 0): 5})
    assert len(cluster.producers) == 1
    # An attempt on another worker holds them: librdkafka retries UNSTABLE_OFFSET_COMMIT until its timeout.
    cluster.read_errors = [KafkaError._TIMED_OUT] * 2
    stats = sink_task.run_transaction(plan_for(end_offsets={0: 10}), "app.in.0", [records(range(5, 8))], {("in", 0): 10})
    assert len(cluster.producers) == 2, "the cached producer gave way to one whose init fences the holder"
    assert stats["outcome"] == "committed" and stats["retries"] == 0 and cluster.group[("in", 0)][0] == 10
    cluster.read_errors = [KafkaError._TIMED_OUT, KafkaError.UNSTABLE_OFFSET_COMMIT]
    sink_clients.drop_producer(sink_clients.producer_key(plan_for(), "app.in.0"))
    sink_task.run_transaction(plan_for(end_offsets={0: 12}), "app.in.0", [records(range(10, 11))], {("in", 0): 12})
    assert len(cluster.producers) == 3, "a new producer has fenced every holder of its id: it waits, as before"


def test_a_passing_error_in_the_committed_offset_read_is_retried_never_read_as_no_commit(cluster):
    cluster.group[("in", 0)] = (10, "")  # batch 0 was committed; Spark replays it
    cluster.read_errors = [KafkaError.COORDINATOR_LOAD_IN_PROGRESS]
    stats = sink_task.run_transaction(plan_for(), "app.in.0", [records(range(0, 8))], {("in", 0): 10})
    assert stats["outcome"] == "skipped_replay"
    assert sum(p.commits for p in cluster.producers) == 0, "read as 'no commit', the slice would be written twice"


def test_any_other_error_in_the_committed_offset_read_fails_the_task_without_a_commit(cluster):
    cluster.group[("in", 0)] = (10, "")
    cluster.read_errors = [KafkaError.INVALID_REQUEST] * 4
    with pytest.raises(SinkTaskFailed):
        sink_task.run_transaction(plan_for(), "app.in.0", [records(range(0, 8))], {("in", 0): 10})
    assert sum(p.commits for p in cluster.producers) == 0


def test_a_missing_acl_stops_the_task_at_once_naming_what_it_lacks(cluster):
    from conf.failures import ACLS_HINT, AuthorizationFailure

    cluster.group[("in", 0)] = (10, "")
    cluster.read_errors = [KafkaError.GROUP_AUTHORIZATION_FAILED]  # one refusal: no retry may read again
    with pytest.raises(AuthorizationFailure) as denied:
        sink_task.run_transaction(plan_for(), "app.in.0", [records(range(0, 8))], {("in", 0): 10})
    assert str(denied.value) == f"GROUP_AUTHORIZATION_FAILED on app: {ACLS_HINT}"
    assert sum(p.commits for p in cluster.producers) == 0


def test_clients_are_never_reused_across_clusters(cluster):
    sink_task.run_transaction(plan_for("first:9092"), "app.in.0", [records(range(0, 8))], {("in", 0): 10})
    cluster.group.clear()  # the second cluster is a new one, with the same app id and topics
    sink_task.run_transaction(plan_for("second:9092"), "app.in.0", [records(range(0, 8))], {("in", 0): 10})
    assert [p.config["bootstrap.servers"] for p in cluster.producers] == ["first:9092", "second:9092"]
    assert [c.config["bootstrap.servers"] for c in cluster.consumers] == ["first:9092", "second:9092"]
    assert [p.commits for p in cluster.producers] == [1, 1]


def test_empty_slices_committed_by_the_driver_count_in_outcomes_and_phases(cluster):
    cluster.commit_faults = ["fenced"]  # the driver's cached producer was fenced by a task's
    sink = object.__new__(eos_sink.TransactionalSink)
    sink.settings = SimpleNamespace(input_topic="in", txn_scope="partition")
    sink.keeper = SimpleNamespace(committed=lambda partitions: None)
    stats = BatchStats(0)
    sink._commit_empty_slices(plan_for(end_offsets={0: 10, 1: 4}), {1}, stats)
    assert cluster.group[("in", 0)][0] == 10
    assert stats.outcomes["committed"] == 1 and stats.outcomes["fenced"] == 1 and stats.fenced == 1
    assert stats.phase_seconds["commit"] > 0 and len(stats.task_phases) == 1


def test_step_2_refuses_offsets_the_other_scope_committed_before_any_commit(cluster):
    from streaming.group import SinkPreconditionError

    cluster.group[("in", 0)] = (4, "eosbench txn-scope=batch")
    with pytest.raises(SinkPreconditionError, match="committed with --txn-scope batch"):
        sink_task.run_transaction(plan_for(), "app.in.0", [records(range(0, 8))], {("in", 0): 10})
    assert cluster.group[("in", 0)] == (4, "eosbench txn-scope=batch")
    assert sum(p.commits for p in cluster.producers) == 0


def test_every_commit_names_its_scope_the_inputs_partition_count_and_its_attempt(cluster):
    sink_task.run_transaction(plan_for(input_partitions=3), "app.in.0", [records(range(0, 8))], {("in", 0): 10})
    offset, metadata = cluster.group[("in", 0)]
    assert offset == 10 and re.fullmatch(r"eosbench txn-scope=partition;partitions=3;token=[0-9a-f]{16};", metadata)


def test_a_landed_commit_is_recognised_even_after_a_failed_attempt_between(cluster, monkeypatch):
    cluster.commit_faults = ["timeout-after-landing"]
    cluster.read_errors = [None, KafkaError.INVALID_REQUEST]  # the second attempt fails in Step 2
    stats = sink_task.run_transaction(plan_for(), "app.in.0", [records(range(0, 8))], {("in", 0): 10})
    assert sum(p.commits for p in cluster.producers) == 1, "the slice is written once"
    assert stats["outcome"] == "committed" and stats["retries"] == 2 and stats["records_out"] == 8


def test_every_record_names_its_attempt_and_the_attempts_size_in_its_topic(cluster):
    cluster.commit_faults = ["fenced"]  # the first attempt is fenced at its commit; the second commits
    poisoned = records(range(0, 8))
    poisoned.values[3] = b"POISON"
    before = time.time()
    stats = sink_task.run_transaction(plan_for(batch_id=7), "app.in.0", [poisoned], {("in", 0): 10})
    first, second = ([headers for _, headers in p.sent_headers] for p in cluster.producers)
    assert len(first) == len(second) == 8
    identities = [{h["eos.txn"].rsplit(b":", 1)[0] for h in attempt} for attempt in (first, second)]
    assert len(identities[0]) == len(identities[1]) == 1 and identities[0] != identities[1], "a retry is a new identity"
    for (identity,) in identities:
        assert identity.decode().split(":")[:3] == ["app", "0", "7"] and len(identity.decode().split(":")[3]) == 15
    sizes = {(topic, headers["eos.txn"].rsplit(b":", 1)[1]) for topic, headers in cluster.producers[1].sent_headers}
    assert sorted(sizes) == [("out", b"7"), ("out.dlq", b"1")]
    assert stats["txn"] == identities[1].pop().decode()
    assert before <= stats["committed_at_s"] <= time.time()


def test_a_commit_found_landed_reports_no_commit_time(cluster):
    cluster.commit_faults = ["timeout-after-landing"]  # when the commit really returned is unknown
    stats = sink_task.run_transaction(plan_for(), "app.in.0", [records(range(0, 8))], {("in", 0): 10})
    assert stats["outcome"] == "committed" and (stats["txn"], stats["committed_at_s"]) == ("", 0.0)


def test_a_producer_idle_past_the_limit_is_closed_when_another_is_used(cluster, monkeypatch):
    now = [1000.0]
    monkeypatch.setattr(sink_clients, "_clock", lambda: now[0])
    monkeypatch.setattr(sink_clients, "_LAST_USED", {})
    sink_task.run_transaction(plan_for(), "app.in.0", [records(range(0, 8))], {("in", 0): 10})
    now[0] += sink_clients.PRODUCER_IDLE_S + 1  # in.0's task ran on another worker since, or its query ended
    sink_task.run_transaction(plan_for(end_offsets={1: 10}), "app.in.1", [], {("in", 1): 10})
    assert [key[0] for key in sink_clients._PRODUCERS] == ["app.in.1"], "the idle copy's threads are gone"
    sink_task.run_transaction(plan_for(), "app.in.0", [records(range(0, 8))], {("in", 0): 10})
    assert len(cluster.producers) == 3, "wanted again, it costs one new producer"


def test_past_the_cap_the_least_recently_used_producer_is_closed(cluster, monkeypatch):
    monkeypatch.setattr(sink_clients, "MAX_CACHED_PRODUCERS", 2)
    monkeypatch.setattr(sink_clients, "_LAST_USED", {})
    for partition in (0, 1, 0, 2):  # in.0 was used again after in.1, so in.1 is the least recent
        sink_task.run_transaction(plan_for(end_offsets={partition: 10}), f"app.in.{partition}", [],
                                  {("in", partition): 10})
    assert sorted(key[0] for key in sink_clients._PRODUCERS) == ["app.in.0", "app.in.2"]
    assert len(cluster.producers) == 3, "in.0's second task reused its producer"
