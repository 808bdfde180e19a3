"""Slot scope's map on the driver: which partitions each coalesced task holds, and when the slot ids are fenced."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from streaming.slot_map import partitions_changing_slot, slot_map
from streaming.sink_group import SinkPreconditionError
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
    ({"txn_slots": 2}, "--txn-slots applies to --sink kafka-eos --txn-scope slot only"),
    ({"txn_scope": "slot", "txn_slots": 0}, "--txn-slots must be at least 1"),
    ({"sink": "kafka-alo", "output_partitioning": "input"}, "--output-partitioning input applies to --sink kafka-eos only"),
])
def test_slot_and_partitioning_flags_are_checked_where_they_apply(fields, error):
    from pydantic import ValidationError

    from conf.stream_settings import StreamSettings

    with pytest.raises(ValidationError, match=error):
        StreamSettings(input_topic="in", output_topic="out", **fields)
