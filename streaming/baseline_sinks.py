"""The baselines measured beside kafka-eos: Spark's own Kafka sink and an idempotent Delta table.

Both run the same `process` transform in the same Python pass (mapInArrow) as the
transactional sink, so that a side-by-side run isolates the cost of the sink itself.
"""

from __future__ import annotations

from collections.abc import Iterator

from conf.stream_settings import StreamSettings
from streaming.eos_sink import IN_TS_HEADER, SRC_HEADER
from streaming.process import TRANSFORMS, arrow_columns, source_columns
from streaming.stats import BatchStats

PROCESSED_SCHEMA = ("topic string, key binary, value binary, src string, in_ts bigint, "
                    "headers array<struct<key: string, value: binary>>")


def processed_rows(settings: StreamSettings):
    """The mapInArrow function: process(record) with its routing topic and eos headers."""
    transform = TRANSFORMS[settings.process]
    output, dead_letter = settings.output_topic, settings.dead_letter

    def task(batches: Iterator) -> Iterator:
        import pyarrow as pa

        for batch in batches:
            if not batch.num_rows:
                continue
            keys, values, offsets, timestamps, topic, partition = arrow_columns(batch)
            partitions = batch.column("partition").to_pylist()
            topics = batch.column("topic").to_pylist()
            rows = {"topic": [], "key": [], "value": [], "src": [], "in_ts": [], "headers": []}
            for key, value, offset, ts, in_topic, in_partition in zip(keys, values, offsets, timestamps,
                                                                       topics, partitions):
                result = transform(key, value)
                src = f"{in_topic}:{in_partition}:{offset}"
                rows["topic"].append(output if result is not None else dead_letter)
                rows["key"].append(key)
                rows["value"].append(result if result is not None else value)
                rows["src"].append(src)
                rows["in_ts"].append(ts)
                rows["headers"].append([{"key": SRC_HEADER, "value": src.encode()},
                                        {"key": IN_TS_HEADER, "value": str(ts).encode()}])
            yield pa.RecordBatch.from_pydict(rows, schema=pa.schema([
                ("topic", pa.string()), ("key", pa.binary()), ("value", pa.binary()), ("src", pa.string()),
                ("in_ts", pa.int64()),
                ("headers", pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))),
            ]))

    return task


class AtLeastOnceKafkaSink:
    """`--sink kafka-alo`: Spark's built-in Kafka writer in foreachBatch (at-least-once)."""

    def __init__(self, settings: StreamSettings, on_batch=None):
        self.settings = settings
        self.on_batch = on_batch

    def __call__(self, df, batch_id: int) -> None:
        import time

        started = time.perf_counter()
        processed = df.select(*source_columns()).mapInArrow(processed_rows(self.settings), PROCESSED_SCHEMA)
        (processed.select("topic", "key", "value", "headers").write.format("kafka")
         .option("kafka.bootstrap.servers", self.settings.bootstrap_server)
         .option("kafka.linger.ms", "5").save())
        if self.on_batch:
            self.on_batch(BatchStats(batch_id, duration_s=time.perf_counter() - started))


class IdempotentDeltaSink:
    """`--sink delta`: append to a Delta table with txnAppId/txnVersion, so a replay is a no-op."""

    def __init__(self, settings: StreamSettings, on_batch=None):
        self.settings = settings
        self.on_batch = on_batch

    def __call__(self, df, batch_id: int) -> None:
        import time

        started = time.perf_counter()
        processed = df.select(*source_columns()).mapInArrow(processed_rows(self.settings), PROCESSED_SCHEMA)
        (processed.select("topic", "key", "value", "src", "in_ts").write.format("delta")
         .option("txnAppId", self.settings.app_id).option("txnVersion", batch_id)
         .mode("append").save(str(self.settings.delta_path)))
        if self.on_batch:
            self.on_batch(BatchStats(batch_id, duration_s=time.perf_counter() - started))
