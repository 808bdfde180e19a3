"""The grouped Kafka source (`--source grouped`) on the real broker: exact reads, its checkpoint, its slot map.

Every read is compared as a multiset with what the producer committed (record keys) and with
what a plain read_committed consumer reads (partition, offset), so a record skipped or read twice
at a range's end, across batches or across a change of source fails the test.
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from py4j.protocol import Py4JJavaError

from conf.failures import EnvironmentFailure
from conf.stream_settings import GROUPED_SOURCE_FORMAT, SOURCE_OPTION_DEFAULTS
from streaming import job
from streaming.source.batch_ranges import _each_input_partition
from streaming.source.checkpoint import CheckpointLog
from streaming.sink.slots import slot_groups
from streaming.verify.topic_index import records_to_end, topic_reader
from tests.integration.produce_helpers import commit_keys, committed_ids, produce
from tests.integration.stream_checks import assert_exactly_once, consumers_created


def drain(spark, bootstrap: str, topic: str, checkpoint, source: str = "grouped", slots: int = 2, row_ms: int = 0,
          planned: list | None = None, **options):
    """Run one available-now query of `source` into a foreachBatch; return its (key, partition, offset) rows and batch count.

    row_ms > 0 makes the writer take that long for each row, in the task that reads it; `planned`, if
    given, gets each batch's input partitions (the grouped source's SlotInputPartition, on the JVM).
    """
    rows, batches = [], []
    reader = (spark.readStream.format(GROUPED_SOURCE_FORMAT if source == "grouped" else "kafka")
              .options(**SOURCE_OPTION_DEFAULTS).option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic).option("kafka.isolation.level", "read_committed")
              .option("startingOffsets", "earliest").option("includeHeaders", "true"))
    if source == "grouped":
        reader = reader.option("slots", slots)
    reader = reader.options(**{k: str(v) for k, v in options.items()})

    def collect(df, batch_id):
        batches.append(batch_id)
        if planned is not None:
            planned.extend(_each_input_partition(df, lambda partition: partition))
        slow = [f"reflect('java.lang.Thread', 'sleep', cast({row_ms} as bigint)) as slept"] if row_ms else []
        rows.extend((int(r.key), r.partition, r.offset) for r in df.selectExpr(
            "cast(cast(key as string) as bigint) as key", "partition", "offset", *slow).collect())

    query = (reader.load().writeStream.foreachBatch(collect).trigger(availableNow=True)
             .option("checkpointLocation", str(checkpoint)).start())
    try:
        query.awaitTermination()
    except Exception as failed:  # the query's failure, as a plain assertion the tests match on
        raise AssertionError(str(failed)) from None
    return rows, batches


def committed_positions(bootstrap: str, topic: str, start: dict | None = None) -> Counter:
    """(partition, offset) of every committed record, as one plain read_committed consumer reads them."""
    consumer = topic_reader(bootstrap, "read_committed")
    try:
        records = records_to_end(consumer, topic, start_offsets=start)
        next(records)
        return Counter((m.partition(), m.offset()) for m in records)
    finally:
        consumer.close()


def offset_log(checkpoint) -> list[str]:
    """The source's JSON line of each offsets/<batch> file, in batch order."""
    folder = checkpoint / "offsets"
    return [(folder / name).read_text().splitlines()[-1]
            for name in sorted((p.name for p in folder.iterdir() if p.name.isdigit()), key=int)]


def test_exact_reads_at_several_caps_a_source_switch_and_added_partitions(bootstrap, spark, new_topic, tmp_path):
    topic = new_topic(partitions=3, prefix="grouped")
    # Transactions of 40 with three in ten aborted: a cap of 97 ends batches inside aborted
    # transactions and on commit markers.
    produced = produce(bootstrap, topic, 600, records_per_transaction=40, abort_ratio=0.3, seed=11)
    expected_keys, expected_positions = committed_ids(produced.transactions), committed_positions(bootstrap, topic)
    created_before = consumers_created(spark)
    for source in ("grouped", "spark"):
        rows, batches = drain(spark, bootstrap, topic, tmp_path / source, source=source, maxOffsetsPerTrigger=97)
        assert Counter(key for key, _, _ in rows) == expected_keys, source
        assert Counter((p, o) for _, p, o in rows) == expected_positions, source
        assert len(batches) >= 5
    # Spark's rate limit, split by backlog: every batch ends where Spark's source ends it, byte for byte.
    assert offset_log(tmp_path / "grouped") == offset_log(tmp_path / "spark")
    # Two slots, each one consumer kept across the batches.
    assert 0 < consumers_created(spark) - created_before <= 2

    # The query wrote its initial offsets where Spark's source does, in Spark's format.
    assert CheckpointLog(spark, f"file://{tmp_path}/grouped").initial_offsets() == {topic: {"0": 0, "1": 0, "2": 0}}
    assert (tmp_path / "grouped" / "sources" / "0" / "0").read_bytes() == \
        (tmp_path / "spark" / "sources" / "0" / "0").read_bytes()

    # One checkpoint, switched spark -> grouped -> spark -> grouped, with records added between, a
    # partition added after the second, and batches of 10 that end inside each new transaction.
    checkpoint = tmp_path / "switch"
    seen = Counter()
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for step, source in enumerate(("spark", "grouped", "spark", "grouped")):
        if step == 2:
            admin.create_partitions([NewPartitions(topic, 4)])[topic].result()
        if step:
            commit_keys(bootstrap, topic, range(10_000 * step, 10_000 * step + 25), partition=min(step, 3))
        rows, _ = drain(spark, bootstrap, topic, checkpoint, source=source, maxOffsetsPerTrigger=10 if step else 1_000)
        seen.update((p, o) for _, p, o in rows)
    assert seen == committed_positions(bootstrap, topic), "each record once across the switches"
    assert all(f'"3":' in line for line in offset_log(checkpoint)[-3:]), "the added partition is in the offsets"
    # Either source writes the offsets JSON the other writes: each line, read and written again, is itself.
    grouped_offset = spark._jvm.eosbench.spark.GroupedKafkaOffset
    for line in offset_log(checkpoint):
        assert grouped_offset.parse(line, topic).json() == line


def test_poll_timeout_bounds_each_wait_for_records_not_the_whole_slot(bootstrap, spark, new_topic, tmp_path):
    topic = new_topic(partitions=2, prefix="slow")
    for p in (0, 1):
        commit_keys(bootstrap, topic, range(100 * p, 100 * p + 40), partition=p)
    # Each slot's 40 records take 2 s to pass through the writer, in polls of 5: twice the timeout.
    rows, _ = drain(spark, bootstrap, topic, tmp_path / "slow", row_ms=50, **{"kafkaConsumer.pollTimeoutMs": 1_000,
                                                                         "kafka.max.poll.records": 5})
    assert Counter(key for key, _, _ in rows) == Counter([*range(40), *range(100, 140)])


def two_partitions(bootstrap: str, new_topic, prefix: str) -> str:
    """A new topic of two partitions, each one committed transaction of 10 records: offsets 0..9, the marker at 10."""
    topic = new_topic(partitions=2, prefix=prefix)
    for p in (0, 1):
        commit_keys(bootstrap, topic, range(100 * p, 100 * p + 10), partition=p)
    return topic


def test_a_slot_that_waits_pollTimeoutMs_for_records_that_cannot_come_fails_the_query_naming_its_ranges(
        bootstrap, spark, new_topic, tmp_path):
    topic = two_partitions(bootstrap, new_topic, "stuck")
    checkpoint = tmp_path / "stuck"
    assert len(drain(spark, bootstrap, topic, checkpoint, slots=1)[0]) == 20
    commit_keys(bootstrap, topic, range(200, 210), partition=1)  # offsets 11..20, the marker at 21
    # A batch logged and never run (a driver that died after logging it), whose end for partition 0 lies past
    # its log's end: the restarted query runs it as logged, partition 1 reads its range whole, and partition 0's
    # records cannot come, so no poll brings a record or moves a position. No broker has to be paused.
    logged = (checkpoint / "offsets" / "0").read_text().splitlines()
    ends = json.dumps({topic: {"0": 1_000, "1": 22}}, separators=(",", ":"))
    (checkpoint / "offsets" / "1").write_text("\n".join([*logged[:-1], ends]) + "\n")
    with pytest.raises(AssertionError) as failed:
        drain(spark, bootstrap, topic, checkpoint, slots=1, **{"kafkaConsumer.pollTimeoutMs": 500})
    expected = (f"java.lang.IllegalStateException: slot 0 of {topic} read nothing for kafkaConsumer.pollTimeoutMs"
                " = 500 ms short of the batch's end (partition:from:until) 0:11:1000,1:11:22"
                " (partitions still short of it: [0])")
    assert re.search(rf"{re.escape(expected)}$", str(failed.value), re.M), str(failed.value)[:1500]
    assert not (checkpoint / "commits" / "1").exists()


# SlotConsumers.IDLE_MS_PROPERTY: py4j reads no member of a package-private class.
IDLE_MS_PROPERTY = "eosbench.grouped.consumerIdleMs"


def jvm_field(obj, name: str):
    """A field of a JVM object read by reflection, whatever its access: py4j reads public fields only."""
    field = obj.getClass().getDeclaredField(name)
    field.setAccessible(True)
    return field.get(obj)


def slot_reader(spark, slot):
    """A SlotPartitionReader of a SlotInputPartition, made as a task makes it (by reflection: package-private)."""
    gateway = spark.sparkContext._gateway
    constructor = slot.getClass().getClassLoader().loadClass("eosbench.spark.SlotPartitionReader") \
        .getDeclaredConstructors()[0]
    constructor.setAccessible(True)
    arguments = gateway.new_array(gateway.jvm.java.lang.Object, 1)
    arguments[0] = slot
    return constructor.newInstance(arguments)


def read_whole(reader) -> Counter:
    """(partition, offset) of every row a slot reader gives, to its end."""
    rows = Counter()
    while reader.next():
        row = reader.get()
        rows[(row.getInt(3), row.getLong(4))] += 1
    return rows


def is_closed(consumer) -> bool:
    """Whether a KafkaConsumer was closed: every call on a closed one says so."""
    try:
        consumer.assignment()
        return False
    except Py4JJavaError as refused:
        assert "This consumer has already been closed" in str(refused.java_exception), refused
        return True


def drained_positions(spark, bootstrap: str, topic: str, checkpoint, planned: list | None = None) -> Counter:
    """(partition, offset) of every row a one-slot grouped query reads from the topic's start."""
    return Counter((p, o) for _, p, o in drain(spark, bootstrap, topic, checkpoint, slots=1, planned=planned)[0])


def kept_by_one_slot(bootstrap: str, spark, new_topic, tmp_path, prefix: str) -> tuple[str, Counter, object, int]:
    """A two_partitions topic read whole by one slot: it, its (partition, offset)s, the slot, the consumers before."""
    topic = two_partitions(bootstrap, new_topic, prefix)
    expected, planned, created_before = committed_positions(bootstrap, topic), [], consumers_created(spark)
    assert drained_positions(spark, bootstrap, topic, tmp_path / "first", planned) == expected
    assert consumers_created(spark) - created_before == 1, "the slot's one consumer, kept"
    return topic, expected, planned[0], created_before


def test_a_second_task_of_a_busy_slot_reads_on_a_private_consumer_closed_at_its_end_and_the_kept_one_stays(
        bootstrap, spark, new_topic, tmp_path):
    topic, expected, slot, created_before = kept_by_one_slot(bootstrap, spark, new_topic, tmp_path, "busy")
    # No query runs two tasks of a slot at once on demand (a zombie needs a lost executor), so the two tasks
    # are made here, on the driver's JVM, which is the executor's in local mode: the zombie holds the slot's
    # kept consumer while its retry reads the same range beside it.
    zombie = slot_reader(spark, slot)
    retry = slot_reader(spark, slot)
    created = [reader.currentMetricsValues()[0].value() for reader in (zombie, retry)]
    assert created == [0, 1] and consumers_created(spark) - created_before == 2, "the retry's consumer is its own"
    kept, private = jvm_field(zombie, "cached"), jvm_field(retry, "cached")
    assert jvm_field(kept, "pooled") and not jvm_field(private, "pooled")
    assert read_whole(retry) == expected
    retry.close()
    assert is_closed(jvm_field(private, "consumer")), "a private consumer is closed at its task's end"
    assert read_whole(zombie) == expected
    zombie.close()
    assert not is_closed(jvm_field(kept, "consumer"))
    # The next query's slot borrows the kept consumer: exact, and nothing created.
    assert drained_positions(spark, bootstrap, topic, tmp_path / "second") == expected
    assert consumers_created(spark) - created_before == 2


def test_a_kept_consumer_idle_past_the_idle_time_is_closed_and_the_next_query_creates_a_fresh_one(
        bootstrap, spark, new_topic, tmp_path):
    topic, expected, slot, created_before = kept_by_one_slot(bootstrap, spark, new_topic, tmp_path, "idle")
    borrower = slot_reader(spark, slot)
    kept = jvm_field(borrower, "cached")
    borrower.close()
    assert borrower.currentMetricsValues()[0].value() == 0, "the query's consumer was kept for its slot"
    system = spark._jvm.java.lang.System
    system.setProperty(IDLE_MS_PROPERTY, "500")
    try:
        deadline = time.monotonic() + 120  # a guard against a hang, not the judge: the sweeper looks every second
        while not is_closed(jvm_field(kept, "consumer")):
            assert time.monotonic() < deadline, "the idle consumer was never closed"
            time.sleep(0.2)
    finally:
        system.clearProperty(IDLE_MS_PROPERTY)
    assert drained_positions(spark, bootstrap, topic, tmp_path / "second") == expected
    assert consumers_created(spark) - created_before == 2, "the next borrow creates a fresh consumer"


def recreate(bootstrap: str, topic: str, partitions: int) -> None:
    """Delete `topic` and create it again with `partitions` partitions, as an operator starting over would."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.delete_topics([topic])[topic].result()
    deadline = time.monotonic() + 60
    while True:  # the controller refuses the name until the deletion is done
        try:
            admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result()
            return
        except KafkaException as refused:
            if time.monotonic() > deadline:
                raise
            assert refused.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS, refused
            time.sleep(0.5)


def delete_below(bootstrap: str, topic: str, partition: int, offset: int) -> None:
    """DeleteRecords: move the partition's log start to `offset`, as retention would."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for deleted in admin.delete_records([TopicPartition(topic, partition, offset)]).values():
        deleted.result()


# Each case: what it does to the topic after both sources read it whole, what both failures say
# (the partition and the offsets), and the records a plain consumer reads that the lenient run must
# read: from the log start of what was kept.
def _added_partition(bootstrap, topic):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_partitions([NewPartitions(topic, 3)])[topic].result()
    commit_keys(bootstrap, topic, range(1_000, 1_060), partition=2)
    delete_below(bootstrap, topic, 2, 30)
    return rf"Added partition {topic}-2 starts from 30 instead of 0", {2: 30}


def _trimmed(bootstrap, topic):
    commit_keys(bootstrap, topic, range(1_000, 1_050), partition=1)  # offsets 11..60 after the first commit's marker
    delete_below(bootstrap, topic, 1, 40)
    return rf"{topic}-1\b.*\b11\b|\b11\b.*{topic}-1\b", {1: 40}


def _recreated(bootstrap, topic):
    recreate(bootstrap, topic, 2)
    commit_keys(bootstrap, topic, range(1_000, 1_005), partition=0)  # ends at 6, below the 11 read
    return rf"Partition {topic}-(0 offset was changed from 11 to 6|1 offset was changed from 11 to 0)", {}


def _partition_gone(bootstrap, topic):
    recreate(bootstrap, topic, 1)
    commit_keys(bootstrap, topic, range(1_000, 1_020), partition=0)  # ends at 21, past the 11 read
    return rf"Partitions \S*{topic}-1\b.* have been deleted", {0: 11}


@pytest.mark.parametrize("case", [_added_partition, _trimmed, _recreated, _partition_gone],
                         ids=["added-partition-past-0", "trimmed", "recreated-topic", "partition-gone"])
def test_data_loss_fails_both_sources_alike_in_one_line_unless_failOnDataLoss_is_false(bootstrap, spark, new_topic,
                                                                                       tmp_path, case):
    topic = two_partitions(bootstrap, new_topic, "lossy")
    for source in ("spark", "grouped"):
        assert len(drain(spark, bootstrap, topic, tmp_path / source, source=source)[0]) == 20
    failure, kept_from = case(bootstrap, topic)
    lenient = {}
    for source in ("spark", "grouped"):
        with pytest.raises(AssertionError, match="failOnDataLoss") as failed:
            drain(spark, bootstrap, topic, tmp_path / source, source=source)
        assert re.search(failure, str(failed.value), re.S), (source, str(failed.value)[:600])
        # The same checkpoint again, told to go on: it reads what is left, from the log start.
        rows, _ = drain(spark, bootstrap, topic, tmp_path / source, source=source, failOnDataLoss="false")
        lenient[source] = Counter((p, o) for _, p, o in rows)
    expected = Counter({(p, o): n for (p, o), n in committed_positions(bootstrap, topic).items()
                        if o >= kept_from.get(p, 1 << 62)})
    assert lenient["grouped"] == lenient["spark"] == expected


@pytest.mark.parametrize("source,scope", [("spark", "partition"), ("grouped", "slot")])
def test_the_job_stops_at_an_added_partition_past_0_and_goes_on_exactly_once_with_failOnDataLoss_false(
        bootstrap, spark, pipeline, source, scope):
    settings = pipeline(source=source, txn_scope=scope, max_offsets_per_trigger=None)
    job.run(spark, settings)
    topic = settings.input_topic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_partitions([NewPartitions(topic, 4)])[topic].result()
    commit_keys(bootstrap, topic, range(2_000_000, 2_000_060), partition=3)
    delete_below(bootstrap, topic, 3, 30)
    # The command line's exit 3, in one line that names the partition and where it starts.
    with pytest.raises(EnvironmentFailure, match=rf"^[^\n]*Added partition {topic}-3 starts from 30 instead of 0[^\n]*$"):
        job.run(spark, settings)
    # Told to go on, the sink takes the partition from its log start: the 30 records kept, once.
    lenient = job.run(spark, settings.model_copy(update={"source_options": ("failOnDataLoss=false",)}))
    assert lenient.records_out == 30
    assert_exactly_once(bootstrap, settings)


def test_the_java_slot_map_is_slot_groups(spark):
    slot_map = spark._jvm.eosbench.spark.SlotMap
    places = ("executor_a_1", "executor_a_2", "executor_b_1")
    table = [
        ((0, 1, 2, 3), ("",) * 4, 2),
        ((0, 1, 2, 3, 4, 5, 6), tuple(places[(31 * p + 7) % 3] for p in range(7)), 4),
        ((0, 2, 5, 9, 11), (places[0], "", places[1], places[2], places[0]), 2),
        ((1, 3, 8), (places[2], places[2], places[1]), 5),
        (tuple(range(16)), tuple(places[p % 2] for p in range(16)), 3),
    ]
    for partitions, locations, slots in table:
        slot_of, slot_locations = slot_groups(tuple(("t", p, 0, 1) for p in partitions), locations, slots)
        java = slot_map.slotOfText(",".join(map(str, partitions)), "\n".join(locations), slots)
        java_slots, java_locations = java.split(";")
        assert [int(k) for k in java_slots.split(",")] == slot_of, (partitions, locations, slots)
        assert java_locations.split("\n") == slot_locations
