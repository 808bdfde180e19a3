"""Slot scope (`--txn-scope slot`) on the real broker: one transaction per coalesced task, under faults.

Each test ends in the verifier's exact multiset comparison (`assert_exactly_once`). The
executor kill and the driver's SIGKILL between the sink's commit and Spark's commit log are the
CI soak's and `test_stream_eos.py`'s rounds in slot scope.
"""

from __future__ import annotations

import shutil
import threading

import pytest
from confluent_kafka import Consumer, KafkaException, Producer

from streaming import job
from streaming.source.checkpoint import CheckpointLog
from streaming.sink.driver import TransactionalSink
from streaming.quiet_stop import stop_quietly
from streaming.group import SinkPreconditionError
from tests.integration.produce_helpers import commit_keys
from tests.integration.stream_checks import assert_exactly_once, consumers_created, group_offsets, local_checkpoint


def open_zombie(bootstrap: str, settings, slot: int) -> Producer:
    """A writer of T(slot) with a transaction open on the output, as an executor the driver lost would hold."""
    zombie = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{settings.app_id}.slot.{slot}"})
    zombie.init_transactions(30)
    zombie.begin_transaction()
    zombie.produce(settings.output_topic, b"zombie", b"zombie")
    assert zombie.flush(30) == 0
    return zombie


def assert_fenced(zombie: Producer) -> None:
    """The zombie's transaction was aborted by a fence: its commit fails and never lands."""
    with pytest.raises(KafkaException):
        zombie.commit_transaction(30)


SOURCES = pytest.mark.parametrize("source", ["spark", "grouped"])


@SOURCES
def test_one_transaction_a_slot_through_a_retried_task_a_replay_and_the_keeper(bootstrap, spark, pipeline, monkeypatch,
                                                                               source):
    settings = pipeline(txn_scope="slot", txn_slots=2, source=source)
    created_before = consumers_created(spark)
    batches = []
    # Slot k's task fails after producing and sending its offsets, before commit: Spark retries it.
    monkeypatch.setenv("EOSBENCH_FAULT", "fail-task-before-commit:1:0")
    summary = job.run(spark, settings, on_batch=batches.append)
    monkeypatch.delenv("EOSBENCH_FAULT")
    report = assert_exactly_once(bootstrap, settings)
    assert summary.records_out == report.output_committed
    assert len(batches) >= 4 and all(batch.tasks <= 2 for batch in batches), [b.tasks for b in batches]
    assert summary.slots_fenced >= 2, "the driver's start fences this run's two slot ids"
    if source == "grouped":  # one consumer a slot, kept across batches and for the retried task
        assert 0 < consumers_created(spark) - created_before <= 2
    before = group_offsets(bootstrap, settings)
    assert {c.scope for c in before.values()} == {"slot"}
    assert {c.slot[1] for c in before.values()} == {2} and {c.slot[0] for c in before.values()} <= {0, 1}

    # A replay of the last two batches (a driver that died before Spark's commit log) writes nothing.
    commits = sorted(int(p.name) for p in (local_checkpoint(settings) / "commits").iterdir() if p.name.isdigit())
    for batch_id in commits[-2:]:
        (local_checkpoint(settings) / "commits" / str(batch_id)).unlink()
        (local_checkpoint(settings) / "commits" / f".{batch_id}.crc").unlink(missing_ok=True)
    replay = job.run(spark, settings)
    assert replay.records_out == 0 and replay.outcomes["skipped_replay"] >= 1

    # The keeper re-commits each partition's offset unchanged. A new driver fenced every slot id, so
    # no partition is bound to its last slot, and a refresh takes slot p mod G.
    sink = TransactionalSink(settings, spark, CheckpointLog(spark, settings.checkpoint_uri))
    assert sink.recommit([0, 1, 2]) == [0, 1, 2]
    after = group_offsets(bootstrap, settings)
    assert {p: (c.offset, c.slot) for p, c in after.items()} == {p: (c.offset, (p % 2, 2)) for p, c in before.items()}
    assert all(after[p].token != before[p].token for p in range(3)), "each refresh is a commit of its own"
    assert_exactly_once(bootstrap, settings)


def stop_when(spark, settings, done: threading.Event) -> threading.Thread:
    """Stop the query of `settings` between its batches once `done` is set, as its --timeout-s would stop it later.

    The timeout stays the bound; the batches a test waits for come within seconds of the start,
    and the rest of the timeout would be spent idle.
    """
    def stop() -> None:
        done.wait()
        for query in spark.streams.active:
            if query.name == settings.app_id:
                stop_quietly(spark, query, between_batches=True)

    stopper = threading.Thread(target=stop, name="stop-when-done", daemon=True)
    stopper.start()
    return stopper


def spark_coalescer(sink, planned, locations):
    """Spark's own coalescer, as a job without eosbench's jar has: it groups by position, so idle partitions move."""
    return getattr(sink.spark._jvm.scala.Option, "empty")()


def test_a_changed_slot_map_fences_the_old_slot_ids_before_any_task_runs(bootstrap, spark, pipeline, monkeypatch):
    settings = pipeline(txn_scope="slot", txn_slots=2, trigger="1 second", timeout_s=15,
                        max_offsets_per_trigger=None)
    monkeypatch.setattr(TransactionalSink, "_coalescer", spark_coalescer)
    zombies, fenced, fed_batch_done = [], [], threading.Event()

    def after(batch) -> None:
        if batch.batch_id == 0:  # every partition had records: find one in slot 1, feed only it, open a zombie there
            moving = next(p for p, c in group_offsets(bootstrap, settings).items() if c.slot == (1, 2))
            commit_keys(bootstrap, settings.input_topic, range(1_000_000, 1_000_300), partition=moving)
            zombies.append(open_zombie(bootstrap, settings, 1))
        elif batch.records_in:  # the fed partition alone: slot 0 now, so the driver fenced both ids first
            fenced.append(batch.slots_fenced)
            fed_batch_done.set()

    stopper = stop_when(spark, settings, fed_batch_done)
    job.run(spark, settings, on_batch=after)
    stopper.join(timeout=30)
    monkeypatch.undo()
    assert fenced == [2], fenced
    assert_fenced(zombies[0])
    tags = group_offsets(bootstrap, settings)
    assert sorted(c.slot for c in tags.values()).count((0, 2)) >= 1
    old_slot_one = [p for p, c in tags.items() if c.slot == (1, 2)]
    assert old_slot_one, "a partition that no later batch committed keeps its slot 1 tag"

    # G changes across a restart (2 -> 1): the new driver fences slot 1 too, which its map never uses.
    zombie = open_zombie(bootstrap, settings, 1)
    commit_keys(bootstrap, settings.input_topic, range(2_000_000, 2_000_300), partition=old_slot_one[0])
    restarted = job.run(spark, settings.model_copy(update={"txn_slots": 1, "trigger": "available-now"}))
    assert restarted.slots_fenced == 2 and restarted.records_out == 300
    assert_fenced(zombie)
    assert {c.slot for c in group_offsets(bootstrap, settings).values()} >= {(0, 1)}

    # eosbench's SlotCoalescer gives partition p slot p mod G on one executor: a partition fed alone stays put.
    for partition in range(3):
        commit_keys(bootstrap, settings.input_topic, range(3_000_000 + 100 * partition, 3_000_100 + 100 * partition),
                    partition=partition)
    fenced.clear()
    one_fed_batch_done = threading.Event()

    def feed_one(batch) -> None:
        if batch.records_in == 300:
            commit_keys(bootstrap, settings.input_topic, range(4_000_000, 4_000_100), partition=1)
        elif batch.records_in:
            fenced.append(batch.slots_fenced)
            one_fed_batch_done.set()

    stopper = stop_when(spark, settings, one_fed_batch_done)
    job.run(spark, settings.model_copy(update={"timeout_s": 8}), on_batch=feed_one)
    stopper.join(timeout=30)
    assert fenced == [0], fenced
    assert {p: c.slot for p, c in group_offsets(bootstrap, settings).items()} == {p: (p % 2, 2) for p in range(3)}
    assert_exactly_once(bootstrap, settings)


@SOURCES
def test_a_lost_checkpoint_resumes_from_the_group_and_a_scope_switch_is_refused(bootstrap, spark, pipeline, source):
    # --txn-scope auto gives a new group slot scope, and the group keeps it after a lost checkpoint.
    settings = pipeline(txn_scope="auto", txn_slots=2, max_offsets_per_trigger=None, source=source)
    first = job.run(spark, settings)
    assert first.txn_scope == "slot" and first.txn_scope_chosen.endswith("has no committed offsets)")
    shutil.rmtree(local_checkpoint(settings))
    for other in ("partition", "batch"):
        with pytest.raises(SinkPreconditionError, match="committed with --txn-scope slot"):
            job.run(spark, pipeline(txn_scope=other, starting_offsets="group"))
    commit_keys(bootstrap, settings.input_topic, range(1_000_000, 1_000_200), partition=1)
    resumed = job.run(spark, settings.model_copy(update={"starting_offsets": "group"}))
    assert resumed.records_out == 200
    assert resumed.txn_scope == "slot" and resumed.txn_scope_chosen.endswith("holds offsets slot scope committed)")
    assert_exactly_once(bootstrap, settings)


def test_co_partitioned_output_keeps_each_record_on_its_input_partition_number(bootstrap, spark, pipeline, new_topic):
    dead_letters = new_topic(partitions=3, prefix="dlq")
    settings = pipeline(txn_scope="slot", output_partitioning="input", max_offsets_per_trigger=None,
                        dead_letter_topic=dead_letters)
    summary = job.run(spark, settings)
    assert_exactly_once(bootstrap, settings)
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": "co-partitioned", "isolation.level": "read_committed",
                       "auto.offset.reset": "earliest", "enable.auto.commit": False})
    reader.subscribe([settings.output_topic])
    moved, seen = [], 0
    while seen < summary.records_out:
        message = reader.poll(10)
        assert message is not None, f"{seen} of {summary.records_out} read"
        if message.error():
            continue
        seen += 1
        source = dict(message.headers())["eos.src"].decode()
        if int(source.split(":")[1]) != message.partition():
            moved.append(source)
    reader.close()
    assert moved == []
    narrow = new_topic(partitions=2, prefix="narrow")
    with pytest.raises(SinkPreconditionError, match=r"has 2 partitions for .*'s 3"):
        job.run(spark, pipeline(output_topic=narrow, output_partitioning="input", app_id=f"app-{narrow}",
                                dead_letter_topic=dead_letters))


@SOURCES
def test_a_smaller_slot_count_fences_every_old_slot_id_and_a_late_task_of_the_old_run_stops(bootstrap, spark,
                                                                                             pipeline, source):
    from confluent_kafka import Consumer as Memberless

    from streaming.owner import owner_group, read_owner
    from streaming.sink.task import run_transaction
    from streaming.task_plan import TaskPlan

    settings = pipeline(txn_scope="slot", txn_slots=8, source=source)
    job.run(spark, settings)
    tags = group_offsets(bootstrap, settings)
    assert {c.slot[1] for c in tags.values()} == {8}
    old_run = next(iter({c.run for c in tags.values()}))
    unused = next(k for k in range(8) if k not in {c.slot[0] for c in tags.values()})
    # A stopped worker of that run held slot `unused`'s producer with a transaction open; no partition's last
    # commit names that slot. The owner record names all eight ids the run may have used, and a restart with 4 slots
    # fences them all.
    zombie = open_zombie(bootstrap, settings, unused)
    commit_keys(bootstrap, settings.input_topic, range(5_000_000, 5_000_090), partition=0)
    restarted = job.run(spark, settings.model_copy(update={"txn_slots": 4}))
    assert restarted.records_out == 90 and restarted.slots_fenced == 8
    assert_fenced(zombie)
    owners = Memberless({"bootstrap.servers": bootstrap, "group.id": owner_group(settings.app_id)})
    owner = read_owner(owners, settings.dead_letter, settings.app_id)
    owners.close()
    assert owner.run != old_run and owner.scope == "slot" and owner.fence.slots == 4, owner
    tags = group_offsets(bootstrap, settings)
    assert tags[0].run == owner.run, "partition 0's new records were committed by the new run"

    # A task of the old run that makes its producer only now, after the new run's claim (a worker resumed late),
    # reads the owner record and stops before it reads an offset.
    reader = Memberless({"bootstrap.servers": bootstrap, "group.id": settings.app_id})
    late = TaskPlan(app_id=settings.app_id, output_topic=settings.output_topic, dead_letter_topic=settings.dead_letter,
                    process="passthrough", producer_config=settings.producer_config(),
                    group_metadata=reader.consumer_group_metadata(), end_offsets={}, max_retries=0,
                    pre_register=False, batch_id=5, fault=None, txn_scope="slot", input_partitions=3, txn_slots=8,
                    run=old_run)
    reader.close()
    before = {p: c.offset for p, c in tags.items()}
    with pytest.raises(SinkPreconditionError, match=rf"^the owner record of pipeline '{settings.app_id}' \(group"
                                                    rf" '{settings.app_id}.owner'\) names run {owner.run}, not this"
                                                    rf" writer's run {old_run}: a newer driver has claimed"):
        run_transaction(late, f"{settings.app_id}.slot.{unused}", [], {(settings.input_topic, 0): before[0] + 10**6},
                        slot=unused)
    assert {p: c.offset for p, c in group_offsets(bootstrap, settings).items()} == before
    assert_exactly_once(bootstrap, settings)
