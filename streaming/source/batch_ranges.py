"""What Spark planned for a micro-batch: the RDD its tasks run on, and the Kafka offset range of each Spark partition.

Read on the driver from the batch's own RDD lineage, before any task runs: partition scope's
split guard checks it, and slot scope's map is read from it (streaming/sink/driver.py). Spark's
Kafka source plans a KafkaBatchInputPartition per range; the grouped source a SlotInputPartition
per slot, several whole ranges each.
"""

from __future__ import annotations


def batch_rdd(df):
    """The JVM RDD whose partitions a batch's tasks run on.

    foreachBatch hands over a DataFrame over the micro-batch's own RDD (a LogicalRDD), which is
    read as it is; planning the DataFrame again would cost tens of milliseconds a batch. Any other
    DataFrame is planned.
    """
    execution = df._jdf.queryExecution()
    logical = execution.logical()
    return logical.rdd() if logical.getClass().getSimpleName() == "LogicalRDD" else execution.toRdd()


def planned_ranges(df) -> tuple | None:
    """The Kafka offset range of each Spark partition of a batch, as Spark planned it; None if unknown.

    Read on the driver from the batch's RDD lineage: the DataSourceRDD at its root holds one
    KafkaBatchInputPartition per Spark partition. Only one-to-one dependencies are followed, so
    that Spark partition i of anything mapped from `df` reads range i; a shuffle gives None.
    """
    planned = _planned_source(df, with_locations=False)
    return None if planned is None else tuple(entry[:4] for entry in planned)


def planned_ranges_and_locations(df) -> tuple[tuple | None, tuple]:
    """planned_ranges, and the executor the Kafka source prefers for each Spark partition ("" if none)."""
    planned = _planned_source(df, with_locations=True)
    if planned is None:
        return None, ()
    return tuple(entry[:4] for entry in planned), tuple(entry[4] for entry in planned)


def planned_slots(df) -> tuple | None:
    """Per Spark partition of a grouped-source batch: (slot k, G, ((topic, partition, from, until), ...), location).

    None if the batch's root is not the grouped source's, or a shuffle lies between.
    """
    def slot_of(slot) -> tuple:
        topic, text = slot.topic(), slot.ranges()
        ranges = tuple((topic, *map(int, piece.split(":"))) for piece in text.split(",")) if text else ()
        return slot.slot(), slot.slots(), ranges, slot.location()

    return _each_input_partition(df, slot_of)


def _planned_source(df, with_locations: bool) -> tuple | None:
    def range_of(partition) -> tuple:
        offset_range = partition.offsetRange()
        location = ""
        if with_locations:
            preferred = offset_range.preferredLoc()
            location = preferred.get() if preferred.isDefined() else ""
        return (offset_range.topic(), offset_range.partition(), offset_range.fromOffset(), offset_range.untilOffset(),
                location)

    return _each_input_partition(df, range_of)


def _each_input_partition(df, read) -> tuple | None:
    """`read` of each input partition of the DataSourceRDD at the batch's root, followed through one-to-one
    dependencies only; None past a shuffle, or where `read` does not fit the source (Py4JError)."""
    from py4j.protocol import Py4JError

    try:
        rdd = batch_rdd(df)
        while rdd.getClass().getSimpleName() != "DataSourceRDD":
            dependencies = rdd.dependencies()
            if dependencies.size() != 1 or dependencies.head().getClass().getSimpleName() != "OneToOneDependency":
                return None
            rdd = dependencies.head().rdd()
        return tuple(read(partition.inputPartition().get()) for partition in rdd.partitions())
    except Py4JError:  # another source than `read` expects, or Spark's classes changed: the tasks refuse
        return None
