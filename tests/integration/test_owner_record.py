"""A driver's claim of its pipeline on the real broker: writers of older runs, of other scopes and after a reset of
the group's offsets are fenced before the new run reads an offset, and the output stays exact.

Each zombie is a sink writer of a run that died: its producer was made (and it read the group's
offsets) before the new driver started, then it froze. It wakes at the worst moment the test can
give it, writes its range again and tries to commit; it must find itself fenced, and the verifier's
multisets must come out exact. streaming/owner.py has the argument these tests hold it to.
"""

from __future__ import annotations

import shutil

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from conf.headers import IN_TS_HEADER, SRC_HEADER, transaction_identity, txn_header
from streaming import job
from streaming.sink import clients as sink_clients
from tests.integration.produce_helpers import commit_keys, produce
from tests.integration.stream_checks import assert_exactly_once, committed_records, group_offsets, local_checkpoint

OLD_RUN = "00000000000000aa"


class Zombie:
    """A sink writer of a run that died: its producer made and the group's offsets read, then frozen."""

    def __init__(self, bootstrap: str, settings, txn_id: str):
        self.bootstrap, self.settings = bootstrap, settings
        self.producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id})
        self.producer.init_transactions(30)
        reader = Consumer({"bootstrap.servers": bootstrap, "group.id": settings.app_id})
        self.group_metadata = reader.consumer_group_metadata()
        reader.close()

    def wake(self, partition: int, start: int, tag: str) -> KafkaException | None:
        """Write the input partition's committed records from `start` as the sink does and commit their offsets with
        `tag`; return the failure (a fenced producer's), None if the commit landed."""
        records = committed_records(self.bootstrap, self.settings.input_topic, partition, start)
        identity = transaction_identity(self.settings.app_id, partition, 99)
        try:
            self.producer.begin_transaction()
            for offset, key, value, timestamp in records:
                self.producer.produce(self.settings.output_topic, value, key, headers=[
                    (SRC_HEADER, f"{self.settings.input_topic}:{partition}:{offset}".encode()),
                    (IN_TS_HEADER, str(timestamp).encode()), txn_header(identity, len(records))])
            self.producer.flush(30)
            end = TopicPartition(self.settings.input_topic, partition, records[-1][0] + 1, metadata=tag)
            self.producer.send_offsets_to_transaction([end], self.group_metadata, 30)
            self.producer.commit_transaction(30)
        except KafkaException as fenced:
            return fenced
        return None


def slot_tag(slot: int, slots: int) -> str:
    """The offset tag of an old run's slot commit."""
    return f"eosbench txn-scope=slot;partitions=3;token=0123456789abcdef;run={OLD_RUN};slot={slot}/{slots};"


def test_a_writer_of_the_old_run_that_commits_while_the_new_driver_starts_is_fenced_before_it_can(
        bootstrap, spark, pipeline, monkeypatch):
    settings = pipeline(txn_scope="slot", txn_slots=2, max_offsets_per_trigger=None)
    job.run(spark, settings)
    tags = group_offsets(bootstrap, settings)
    p = next(p for p, c in tags.items() if c.slot == (0, 2))  # last committed by slot 0, which a restart takes first
    start = tags[p].offset
    # The old run's next batch held p in slot 1 (its map changed): that task made its producer, read c = start, froze.
    commit_keys(bootstrap, settings.input_topic, range(7_000_000, 7_000_200), partition=p)
    zombie = Zombie(bootstrap, settings, f"{settings.app_id}.slot.1")
    woke: list[KafkaException | None] = []
    send_offsets = sink_clients.send_offsets

    def the_zombie_commits_first(*args, **kwargs):
        """The driver's first commit of its own: the zombie wakes after the driver read c and commits before it does."""
        if not woke:
            woke.append(zombie.wake(p, start, slot_tag(1, 2)))
        return send_offsets(*args, **kwargs)

    monkeypatch.setattr(sink_clients, "send_offsets", the_zombie_commits_first)
    restarted = job.run(spark, settings.model_copy(update={"txn_slots": 3}))  # G changes: 2 -> 3
    monkeypatch.undo()
    if not woke:  # the new driver committed nothing of its own: the zombie wakes now
        woke.append(zombie.wake(p, start, slot_tag(1, 2)))
    assert isinstance(woke[0], KafkaException), "the old run's writer must be fenced before the new run reads c"
    assert restarted.records_out == 200
    assert_exactly_once(bootstrap, settings)


@pytest.mark.parametrize("restart_scope", ["auto", "slot"])
def test_a_writer_of_a_partition_scope_run_that_committed_nothing_is_fenced_by_a_run_of_any_scope(
        bootstrap, spark, pipeline, new_topic, tmp_path, restart_scope):
    # A partition scope run on a new group (named, or real-time mode's) that committed nothing before it died: its
    # driver claimed the pipeline, and its empty first batch's offsets are taken away again.
    settings = pipeline(input_topic=new_topic(partitions=3, prefix="in"), txn_scope="partition",
                        max_offsets_per_trigger=None, checkpoint=str(tmp_path / "first"))
    assert job.run(spark, settings).records_out == 0
    delete_group(bootstrap, settings.app_id)
    produce(bootstrap, settings.input_topic, 3_000, records_per_transaction=250, abort_ratio=0.3, seed=5)
    assert all(c.offset < 0 for c in group_offsets(bootstrap, settings).values())
    # Its task of partition 0 had made T(0)'s producer and found no offset, then froze.
    zombie = Zombie(bootstrap, settings, f"{settings.app_id}.{settings.input_topic}.0")
    restarted = job.run(spark, settings.model_copy(update={"txn_scope": restart_scope,
                                                           "checkpoint": str(tmp_path / "second")}))
    failure = zombie.wake(0, 0, "eosbench txn-scope=partition;partitions=3;token=0123456789abcdef;")
    assert isinstance(failure, KafkaException), "the other scope's writer must be fenced"
    assert_exactly_once(bootstrap, settings)
    # auto keeps the scope the owner record names; slot scope, named, fenced partition scope's ids first.
    assert restarted.txn_scope == {"auto": "partition", "slot": "slot"}[restart_scope], restarted.txn_scope_chosen


def delete_group(bootstrap: str, group: str) -> None:
    """Delete a group whole, with every offset it holds."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.delete_consumer_groups([group]).values():
        future.result(timeout=30)


def reset_offsets(bootstrap: str, settings, offsets: dict[int, int]) -> None:
    """Commit these offsets with no metadata, as `kafka-consumer-groups --reset-offsets --execute` does."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    request = ConsumerGroupTopicPartitions(settings.app_id, [TopicPartition(settings.input_topic, p, offset)
                                                             for p, offset in offsets.items()])
    for future in admin.alter_consumer_group_offsets([request]).values():
        future.result(timeout=30)


def test_offsets_reset_without_tags_keep_slot_scope_and_fence_every_slot_id_the_pipeline_used(bootstrap, spark, pipeline):
    settings = pipeline(txn_scope="slot", txn_slots=4, max_offsets_per_trigger=None)
    job.run(spark, settings)
    slot_of_2 = group_offsets(bootstrap, settings)[2].slot[0]  # 2 (p mod G), which today's G (2, local[2]) does not reach
    assert slot_of_2 >= 2
    for kept_owner_record in (True, False):
        tags = group_offsets(bootstrap, settings)
        reset_offsets(bootstrap, settings, {p: c.offset for p, c in tags.items()})
        assert all(c.scope is None for c in group_offsets(bootstrap, settings).values()), "a reset writes no tag"
        if not kept_owner_record:  # a pipeline last run by a release before the owner record: its output tells
            delete_group(bootstrap, f"{settings.app_id}.owner")
        # The first run's task of partition 2 froze with its producer made.
        zombie = Zombie(bootstrap, settings, f"{settings.app_id}.slot.{slot_of_2}")
        commit_keys(bootstrap, settings.input_topic, range(8_000_000, 8_000_100), partition=2)
        shutil.rmtree(local_checkpoint(settings))  # the reset's way back: a new checkpoint from the group's offsets
        restarted = job.run(spark, settings.model_copy(update={"txn_scope": "auto", "txn_slots": None,
                                                               "starting_offsets": "group"}))
        failure = zombie.wake(2, tags[2].offset, slot_tag(slot_of_2, 4))
        assert isinstance(failure, KafkaException), f"slot {slot_of_2} must be fenced ({kept_owner_record=})"
        assert_exactly_once(bootstrap, settings)
        assert restarted.txn_scope == "slot", restarted.txn_scope_chosen
        assert restarted.records_out == 100
