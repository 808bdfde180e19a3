"""Slot scope's map, read on the driver: how many slots, which input partitions each holds, and when the ids are fenced.

The driver side that uses it, and the argument for why slot scope is exactly-once, is
`streaming/sink/driver.py`; the slot's task is `streaming/sink/task.py`'s `slot_task`.
"""

from __future__ import annotations

from streaming.group import SinkPreconditionError
from streaming.task_plan import TaskPlan


def default_slots(spark) -> int:
    """Slot scope's default G: the job's total executor cores (spark.cores.max, or instances times cores)."""
    conf = spark.sparkContext.getConf()
    if conf.contains("spark.cores.max"):
        return int(conf.get("spark.cores.max"))
    if conf.contains("spark.executor.instances") and conf.contains("spark.executor.cores"):
        return int(conf.get("spark.executor.instances")) * int(conf.get("spark.executor.cores"))
    return spark.sparkContext.defaultParallelism


def settle_slot_count(spark, settings):
    """The settings with slot scope's G read once (--txn-slots, else default_slots), where a slot map applies.

    The grouped source and the slot-scope sink must map the same G: read twice, the executors'
    cores could change between the two reads (defaultParallelism counts executors as they register).
    """
    if settings.txn_slots is not None or (settings.txn_scope != "slot" and settings.source != "grouped"):
        return settings
    return settings.model_copy(update={"txn_slots": default_slots(spark)})


def slot_groups(planned: tuple, locations: tuple, slots: int) -> tuple[list[int], list[str]]:
    """The slot of each Spark partition and each slot's preferred executor ("" for none), for SlotCoalescer.

    A Kafka partition's pieces share its slot, and a slot's partitions share one location, so
    that the executor whose consumer pool holds their consumers runs the slot batch after batch.
    The executors seen in the batch each own the slots k with k mod L equal to their rank (L
    executors, sorted); with fewer slots than executors, slot k holds executors k, k + G, ....
    The source places partition p on executor (31p + c) mod L, so p // L numbers an executor's
    partitions consecutively and spreads them evenly over its slots; another placement costs
    balance, never correctness. A slot is a function of p and the executors alone, so idle
    partitions do not move the others.
    """
    places = sorted({location for location in locations if location})
    if not places:
        return [p % slots for _, p, _, _ in planned], [""] * slots
    owned = [[k for k in range(slots) if k % len(places) == j] or [j % slots] for j in range(len(places))]
    rank = {place: j for j, place in enumerate(places)}
    place_of: dict[int, int] = {}
    for (_, p, _, _), location in zip(planned, locations):
        if location:
            place_of.setdefault(p, rank[location])
    slot_of = []
    for _, p, _, _ in planned:
        mine = owned[place_of.get(p, p % len(places))]
        slot_of.append(mine[(p // len(places)) % len(mine)])
    return slot_of, [places[k % len(places)] for k in range(slots)]


def slot_map(coalesced, planned: tuple | None, plan: TaskPlan, topic: str) -> tuple[tuple[int, ...], ...]:
    """Per slot k (coalesced partition k), the input partitions Spark grouped into it; refuse a batch it splits.

    Every input partition with new offsets must lie in one slot, whole: its pieces (minPartitions
    may cut it) together read exactly its range in this batch.
    """
    if planned is None:
        raise SinkPreconditionError(f"batch {plan.batch_id}: the sink cannot read which Kafka ranges the batch's Spark"
                                    " partitions hold (a shuffle before the sink?); slot scope needs them")
    return _whole_in_one_slot([[planned[index] for index in partition.parentsIndices()]
                               for partition in coalesced.partitions()], plan, topic)


def grouped_slot_map(planned: tuple | None, plan: TaskPlan, topic: str, slots: int) -> tuple[tuple[int, ...], ...]:
    """slot_map for the grouped source, whose Spark partition k is slot k (`planned_slots`); nothing is coalesced.

    The source planned with slot_groups' map, the same as SlotCoalescer's; the sink still checks
    that the task index is the slot, that G is its own, and that each range is whole.
    """
    if planned is None:
        raise SinkPreconditionError(f"batch {plan.batch_id}: the sink cannot read the grouped source's slots from the"
                                    " batch's Spark partitions (a shuffle before the sink?); slot scope needs them")
    for index, (k, g, _, _) in enumerate(planned):
        if (k, g) != (index, slots):
            raise SinkPreconditionError(f"batch {plan.batch_id}: the grouped source planned Spark partition {index} as"
                                        f" slot {k} of {g}; the sink runs slot {index} of {slots}")
    return _whole_in_one_slot([list(ranges) for _, _, ranges, _ in planned], plan, topic)


def _whole_in_one_slot(slot_ranges: list[list[tuple]], plan: TaskPlan, topic: str) -> tuple[tuple[int, ...], ...]:
    """Per slot, its partitions; refuse a Kafka partition whose batch range is not read whole by one slot."""
    pieces: dict[int, list[tuple[int, int, int]]] = {}
    slots = []
    for k, ranges in enumerate(slot_ranges):
        mine = set()
        for _, p, start, end in ranges:
            pieces.setdefault(p, []).append((k, start, end))
            mine.add(p)
        slots.append(tuple(sorted(mine)))
    for p, held in pieces.items():
        ranges = sorted((start, end) for _, start, end in held)
        # A partition new to the query starts where the source planned it: at 0, or, when data was
        # lost and failOnDataLoss=false let the source go on, at its log start.
        whole = (plan.start_offsets.get(p, ranges[0][0]), plan.end_offsets.get(p, -1))
        contiguous = all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))
        if len({k for k, _, _ in held}) != 1 or not contiguous or (ranges[0][0], ranges[-1][1]) != whole:
            raise SinkPreconditionError(
                f"batch {plan.batch_id}: {topic}[{p}]'s range {whole[0]}..{whole[1]} is read as"
                f" {[(k, start, end) for k, start, end in sorted(held)]} (slot, from, until): slot scope needs each"
                " Kafka partition whole in one slot")
    return tuple(slots)


def partitions_changing_slot(slot_partitions, slot_of: dict[int, tuple[int, int]], slots: int) -> dict:
    """The partitions whose slot in this batch's map differs from the (k, G) of their last commit, with that (k, G)."""
    return {p: slot_of[p] for k, mine in enumerate(slot_partitions) for p in mine
            if slot_of.get(p, (k, slots)) != (k, slots)}
