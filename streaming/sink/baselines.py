"""The baselines measured beside kafka-eos: Spark's own Kafka sink and an idempotent Delta table.

Both run the same `process` transform in the same Python pass (mapInArrow) as the
transactional sink, so that a side-by-side run isolates the cost of the sink itself.
"""

from __future__ import annotations

from collections.abc import Iterator

from conf.stream_settings import StreamSettings
from conf.headers import IN_TS_HEADER, SRC_HEADER
from streaming.sink.interruption import stop_kept_short
from streaming.process import POISON, TRANSFORMS, arrow_columns, source_columns
from streaming.stats import BatchStats

PROCESSED_SCHEMA = ("topic string, key binary, value binary, src string, in_ts bigint, "
                    "headers array<struct<key: string, value: binary>>")


def processed_rows(settings: StreamSettings):
    """The mapInArrow function: process(record) with its routing topic (poison: the dead letters) and eos headers."""
    transform = TRANSFORMS[settings.process]
    output, dead_letter = settings.output_topic, settings.dead_letter

    def task(batches: Iterator) -> Iterator:
        import pyarrow as pa

        for batch in batches:
            if not batch.num_rows:
                continue
            records = arrow_columns(batch)
            rows = {"topic": [], "key": [], "value": [], "src": [], "in_ts": [], "headers": []}
            for key, value, ts, src, in_ts in zip(records.keys, records.values, records.timestamps,
                                                  records.src, records.in_ts):
                result = transform(key, value)
                poison = result is POISON
                rows["topic"].append(dead_letter if poison else output)
                rows["key"].append(key)
                rows["value"].append(value if poison else result)  # a tombstone stays one: None
                rows["src"].append(src.decode())
                rows["in_ts"].append(ts)
                rows["headers"].append([{"key": SRC_HEADER, "value": src}, {"key": IN_TS_HEADER, "value": in_ts}])
            yield pa.RecordBatch.from_pydict(rows, schema=pa.schema([
                ("topic", pa.string()), ("key", pa.binary()), ("value", pa.binary()), ("src", pa.string()),
                ("in_ts", pa.int64()),
                ("headers", pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))),
            ]))

    return task


class _ProcessedSink:
    """A foreachBatch function that runs `process` in Python, then hands the rows to `write`."""

    def __init__(self, settings: StreamSettings, on_batch=None):
        self.settings = settings
        self.on_batch = on_batch

    def write(self, processed, batch_id: int) -> None:
        """Write one processed micro-batch."""
        raise NotImplementedError

    def __call__(self, df, batch_id: int) -> None:
        import time

        started = time.perf_counter()
        with stop_kept_short(batch_id):
            self.write(df.select(*source_columns()).mapInArrow(processed_rows(self.settings), PROCESSED_SCHEMA),
                       batch_id)
        if self.on_batch:
            self.on_batch(BatchStats(batch_id, duration_s=time.perf_counter() - started))


class AtLeastOnceKafkaSink(_ProcessedSink):
    """`--sink kafka-alo`: Spark's built-in Kafka writer in foreachBatch (at-least-once)."""

    def write(self, processed, batch_id: int) -> None:
        """Spark's Kafka writer, routing by the topic column (output or dead-letter)."""
        (processed.select("topic", "key", "value", "headers").write.format("kafka")
         .options(**self.settings.spark_kafka_options())
         .option("kafka.bootstrap.servers", self.settings.bootstrap_server)
         .option("kafka.linger.ms", "5").save())


class IdempotentDeltaSink(_ProcessedSink):
    """`--sink delta`: append to a Delta table with txnAppId/txnVersion, so a replay is a no-op."""

    def write(self, processed, batch_id: int) -> None:
        """An idempotent Delta append keyed by (app id, batch id)."""
        (processed.select("topic", "key", "value", "src", "in_ts").write.format("delta")
         .option("txnAppId", self.settings.app_id).option("txnVersion", batch_id)
         .mode("append").save(str(self.settings.delta_path)))
