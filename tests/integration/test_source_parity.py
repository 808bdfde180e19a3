"""What Spark's Kafka source gives a user, on the grouped source beside it: the same input, the same options, the same answer.

Each test runs both sources over one input and compares what a user sees: the lag metrics of
the query's progress, where a query started by timestamp begins, and when minOffsetsPerTrigger
holds a batch back.
"""

from __future__ import annotations

import json
import time

import pytest
from confluent_kafka import Producer

from conf.stream_settings import GROUPED_SOURCE_FORMAT, SOURCE_OPTION_DEFAULTS
from tests.integration.produce_helpers import produce

SOURCES = ("spark", "grouped")


def reader(spark, bootstrap: str, topic: str, source: str, **options):
    """A read_committed stream of `topic` on `source`, with the job's own defaults and these options."""
    stream = (spark.readStream.format(GROUPED_SOURCE_FORMAT if source == "grouped" else "kafka")
              .options(**SOURCE_OPTION_DEFAULTS).option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic).option("kafka.isolation.level", "read_committed")
              .option("includeHeaders", "true"))
    if source == "grouped":
        stream = stream.option("slots", 2)
    return stream.options(**{name: str(value) for name, value in options.items()}).load()


def drained(spark, bootstrap: str, topic: str, source: str, checkpoint, **options) -> tuple[list, list[dict]]:
    """One available-now query: its (partition, offset) rows, sorted, and its progress reports' source entries."""
    rows = []

    def collect(df, _):
        rows.extend((r.partition, r.offset) for r in df.select("partition", "offset").collect())

    query = (reader(spark, bootstrap, topic, source, **options).writeStream.foreachBatch(collect)
             .trigger(availableNow=True).option("checkpointLocation", str(checkpoint)).start())
    try:
        query.awaitTermination()
    except Exception as failed:  # the query's failure, as a plain assertion the tests match on
        raise AssertionError(str(failed)) from None
    reports = [report["sources"][0] for report in query.recentProgress if report["numInputRows"]]
    return sorted(rows), reports


def test_the_lag_metrics_and_the_latest_offset_in_the_progress_are_spark_sources_own(bootstrap, spark, new_topic,
                                                                                        tmp_path):
    topic = new_topic(partitions=3, prefix="lag")
    produce(bootstrap, topic, 300, records_per_transaction=40, abort_ratio=0.3, seed=12)
    seen = {source: drained(spark, bootstrap, topic, source, tmp_path / source, startingOffsets="earliest",
                            maxOffsetsPerTrigger=97) for source in SOURCES}
    assert seen["grouped"][0] == seen["spark"][0], "the same records"
    progress = {source: [(report["endOffset"], report["latestOffset"], report["metrics"]) for report in reports]
                for source, (_, reports) in seen.items()}
    assert progress["grouped"] == progress["spark"]
    assert len(progress["spark"]) >= 3 and float(progress["spark"][0][2]["maxOffsetsBehindLatest"]) > 0
    assert progress["spark"][-1][2] == {"minOffsetsBehindLatest": "0", "maxOffsetsBehindLatest": "0",
                                        "avgOffsetsBehindLatest": "0.0"}


def test_a_query_started_by_timestamp_begins_where_spark_sources_does(bootstrap, spark, new_topic, tmp_path):
    topic = new_topic(partitions=3, prefix="by-ts")
    base = int(time.time() * 1000) - 600_000
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(30):  # partition p holds records i = p, p + 3, ... stamped base + i seconds
        producer.produce(topic, str(i).encode(), str(i).encode(), partition=i % 3, timestamp=base + i * 1000)
    producer.flush(30)
    by_partition = json.dumps({topic: {"0": base + 12_000, "1": base + 3_000, "2": base + 29_000}})
    every = {"startingOffsetsByTimestamp": by_partition}
    once = {"startingTimestamp": base + 20_000}
    for name, options, expected in (
            ("by-partition", every, [(0, o) for o in range(4, 10)] + [(1, o) for o in range(1, 10)] + [(2, 9)]),
            ("global", once, [(p, o) for p in range(3) for o in range(10) if 3 * o + p >= 20])):
        rows = {source: drained(spark, bootstrap, topic, source, tmp_path / f"{name}-{source}", **options)[0]
                for source in SOURCES}
        assert rows["grouped"] == rows["spark"] == sorted(expected), name
    # No record at or after the timestamp: an error on both, unless the strategy says latest.
    late = json.dumps({topic: {str(p): base + 60_000 for p in range(3)}})
    for source in SOURCES:
        with pytest.raises(AssertionError, match="No offset matched from request of topic-partition"):
            drained(spark, bootstrap, topic, source, tmp_path / f"late-{source}", startingOffsetsByTimestamp=late)
        assert drained(spark, bootstrap, topic, source, tmp_path / f"latest-{source}", startingOffsetsByTimestamp=late,
                       startingOffsetsByTimestampStrategy="latest")[0] == []


def test_min_offsets_per_trigger_holds_a_batch_back_until_enough_offsets_wait_on_either_source(bootstrap, spark,
                                                                                                 new_topic, tmp_path):
    max_delay_s = 40
    for source in SOURCES:
        topic = new_topic(partitions=2, prefix=f"min-{source}")
        produce(bootstrap, topic, 10, records_per_transaction=10, seed=1)
        batches: list[tuple[float, int]] = []
        query = (reader(spark, bootstrap, topic, source, startingOffsets="earliest", minOffsetsPerTrigger=50,
                        maxTriggerDelay=f"{max_delay_s}s")
                 .writeStream.foreachBatch(lambda df, _: batches.append((time.monotonic(), df.count())))
                 .trigger(processingTime="200 milliseconds").option("checkpointLocation", str(tmp_path / source)).start())
        try:
            # The first trigger is past maxTriggerDelay since no batch ran: it reads what there is.
            deadline = time.monotonic() + 120
            while not batches and time.monotonic() < deadline:
                time.sleep(0.2)
            assert [count for _, count in batches] == [10], source
            # Ten more offsets (nine records and a marker) stay below 50: no batch, trigger after trigger.
            produce(bootstrap, topic, 9, records_per_transaction=9, seed=2)
            time.sleep(5)
            assert len(batches) == 1, f"{source}: a batch below minOffsetsPerTrigger ran: {batches}"
            # Fifty more: enough, and the batch runs long before maxTriggerDelay would make it.
            produce(bootstrap, topic, 49, records_per_transaction=49, seed=3)
            while len(batches) < 2 and time.monotonic() < batches[0][0] + max_delay_s:
                time.sleep(0.2)
            assert [count for _, count in batches] == [10, 58], source
            assert batches[1][0] - batches[0][0] < max_delay_s, f"{source}: ran for its delay, not its offsets"
        finally:
            query.stop()
