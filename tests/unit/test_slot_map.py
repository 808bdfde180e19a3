"""Slot scope's map on the driver: which partitions each coalesced task holds, and when the slot ids are fenced."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from conf.stream_settings import StreamSettings
from streaming.sink.slots import partitions_changing_slot, settle_slot_count, slot_groups, slot_map
from streaming.group import SinkPreconditionError
from streaming.task_plan import TaskPlan


def plan(start: dict, end: dict) -> TaskPlan:
    """A batch plan with these ranges of topic `in`."""
    return TaskPlan(app_id="app", output_topic="out", dead_letter_topic="out.dlq", process="passthrough",
                    producer_config={}, group_metadata=None, end_offsets=end, max_retries=0, pre_register=False,
                    batch_id=4, fault=None, txn_scope="slot", start_offsets=start)


def coalesced(*groups):
    """A stand-in for the JVM's CoalescedRDD: coalesced partition k holds the Spark partitions groups[k]."""
    return SimpleNamespace(partitions=lambda: [SimpleNamespace(parentsIndices=lambda g=g: g) for g in groups])


def test_each_slot_holds_the_kafka_partitions_of_its_spark_partitions():
    ranges = (("in", 0, 0, 10), ("in", 1, 5, 9), ("in", 2, 0, 4), ("in", 3, 7, 8))
    slots = slot_map(coalesced([0, 2], [1, 3]), ranges, plan({1: 5, 3: 7}, {0: 10, 1: 9, 2: 4, 3: 8}), "in")
    assert slots == ((0, 2), (1, 3))


def test_a_partition_split_across_slots_or_read_in_part_is_refused():
    split = (("in", 0, 0, 5), ("in", 0, 5, 10), ("in", 1, 0, 3))
    whole = plan({}, {0: 10, 1: 3})
    assert slot_map(coalesced([1, 0, 2]), split, whole, "in") == ((0, 1),), "pieces in one slot are whole"
    with pytest.raises(SinkPreconditionError, match=r"in\[0\]'s range 0..10 is read as \[\(0, 0, 5\), \(1, 5, 10\)\]"):
        slot_map(coalesced([0, 2], [1]), split, whole, "in")
    with pytest.raises(SinkPreconditionError, match=r"in\[0\]'s range 0..12"):
        slot_map(coalesced([0, 1, 2]), split, plan({}, {0: 12, 1: 3}), "in")
    with pytest.raises(SinkPreconditionError, match="a shuffle before the sink"):
        slot_map(coalesced([0]), None, whole, "in")


def test_the_slot_ids_are_fenced_only_when_a_partition_leaves_the_slot_of_its_last_commit():
    last = {0: (0, 2), 1: (0, 2), 2: (1, 2)}
    assert partitions_changing_slot(((0, 1), (2,)), last, 2) == {}
    assert partitions_changing_slot(((2,),), last, 2) == {2: (1, 2)}, "an idle partition 0 and 1 moved partition 2"
    assert partitions_changing_slot(((0, 1, 2),), last, 1) == {0: (0, 2), 1: (0, 2), 2: (1, 2)}, "G changed"
    assert partitions_changing_slot(((5,),), last, 2) == {}, "a partition never committed is bound to no slot"


@pytest.mark.parametrize("fields, error", [
    ({"txn_scope": "partition", "txn_slots": 2}, "--txn-slots applies to --sink kafka-eos --txn-scope slot only"),
    ({"txn_scope": "slot", "txn_slots": 0}, "--txn-slots must be at least 1"),
    ({"sink": "kafka-alo", "output_partitioning": "input"}, "--output-partitioning input applies to --sink kafka-eos only"),
])
def test_slot_and_partitioning_flags_are_checked_where_they_apply(fields, error):
    from pydantic import ValidationError

    from conf.stream_settings import StreamSettings

    with pytest.raises(ValidationError, match=error):
        StreamSettings(input_topic="in", output_topic="out", **fields)


def test_slot_groups_keep_each_slot_on_the_executor_that_the_source_prefers_for_its_partitions():
    a, b = "executor_127.0.0.1_0", "executor_127.0.0.1_1"
    ranges = tuple(("in", p, 0, 5) for p in range(8))
    locations = tuple(a if p % 2 == 0 else b for p in range(8))  # the source's (31p + c) mod 2
    slot_of, slot_locations = slot_groups(ranges, locations, 4)
    assert slot_locations == [a, b, a, b]
    assert slot_of == [0, 1, 2, 3, 0, 1, 2, 3], "each executor's partitions spread evenly over its own slots"
    idle = [p for p in range(8) if p != 2]
    assert slot_groups(tuple(ranges[p] for p in idle), tuple(locations[p] for p in idle), 4)[0] == \
        [slot_of[p] for p in idle], "an idle partition moves no other partition's slot"


def test_slot_groups_put_a_partitions_pieces_in_one_slot_and_cope_with_fewer_slots_than_executors():
    places = ["executor_h_0", "executor_h_1", "executor_h_2"]
    ranges = (("in", 0, 0, 5), ("in", 0, 5, 9), ("in", 1, 0, 5), ("in", 2, 0, 5))
    slot_of, slot_locations = slot_groups(ranges, ("executor_h_0", "", places[1], places[2]), 2)
    assert slot_of == [0, 0, 1, 0] and slot_locations == places[:2], "executor 2 shares slot 0 (2 mod 2)"


def test_slot_groups_without_locations_deal_partitions_by_number():
    ranges = tuple(("in", p, 0, 5) for p in (0, 1, 2, 5))
    assert slot_groups(ranges, ("",) * 4, 2) == ([0, 1, 0, 1], ["", ""])


def test_slot_scopes_count_is_read_once_so_the_grouped_source_and_the_sink_map_the_same_g():
    class Context:  # defaultParallelism grows as executors register: each read may differ
        reads = 0

        def getConf(self):
            return SimpleNamespace(contains=lambda _key: False)

        @property
        def defaultParallelism(self):
            Context.reads += 1
            return 1 + Context.reads

    class Spark:
        sparkContext = Context()
        reads = property(lambda self: Context.reads)

    settled = settle_slot_count(Spark(), StreamSettings(input_topic="in", output_topic="out", txn_scope="slot",
                                                        source="grouped"))
    assert settled.txn_slots == 2 and settle_slot_count(Spark(), settled).txn_slots == 2 and Spark().reads == 1
    named = StreamSettings(input_topic="in", output_topic="out", txn_scope="slot", txn_slots=5)
    assert settle_slot_count(Spark(), named).txn_slots == 5 and Spark().reads == 1
    # Partition scope on Spark's source has no slot map: nothing is read, and no G is set.
    partition = StreamSettings(input_topic="in", output_topic="out")
    assert settle_slot_count(Spark(), partition).txn_slots is None and Spark().reads == 1
