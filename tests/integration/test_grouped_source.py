"""The grouped Kafka source (`--source grouped`) on the real broker: exact reads, its checkpoint, its slot map.

Every read is compared as a multiset with what the producer committed (record keys) and with
what a plain read_committed consumer reads (partition, offset), so a record skipped or read twice
at a range's end, across batches or across a change of source fails the test.
"""

from __future__ import annotations

from collections import Counter

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions

from conf.stream_settings import GROUPED_SOURCE_FORMAT, SOURCE_OPTION_DEFAULTS
from streaming.checkpoint import CheckpointLog
from streaming.slot_map import slot_groups
from streaming.topic_index import records_to_end, topic_reader
from tests.integration.produce_helpers import commit_keys, committed_ids, produce
from tests.integration.stream_checks import consumers_created


def drain(spark, bootstrap: str, topic: str, checkpoint, source: str = "grouped", slots: int = 2, **options):
    """Run one available-now query of `source` into a foreachBatch; return its (key, partition, offset) rows and batch count."""
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
        rows.extend((int(r.key), r.partition, r.offset) for r in df.selectExpr(
            "cast(cast(key as string) as bigint) as key", "partition", "offset").collect())

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


def test_data_loss_fails_the_query_unless_failOnDataLoss_is_false(bootstrap, spark, new_topic, tmp_path):
    topic = new_topic(partitions=1, prefix="lossy")
    commit_keys(bootstrap, topic, range(0, 50))
    for checkpoint in ("strict", "lenient"):
        assert len(drain(spark, bootstrap, topic, tmp_path / checkpoint)[0]) == 50
    commit_keys(bootstrap, topic, range(50, 100))  # offsets 51..100 (50 is the first commit's marker)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for deleted in admin.delete_records([TopicPartition(topic, 0, 80)]).values():
        deleted.result()
    with pytest.raises(AssertionError, match="failOnDataLoss"):
        drain(spark, bootstrap, topic, tmp_path / "strict")
    rows, _ = drain(spark, bootstrap, topic, tmp_path / "lenient", failOnDataLoss="false")
    assert sorted(key for key, _, _ in rows) == list(range(79, 100)), "read on from the log start"


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
