"""The job in Spark's real-time mode (`--trigger realtime:<interval>`): records commit every ~100 ms.

In real-time mode one long task per input partition reads records as they arrive, and the
trigger's interval is only how often Spark checkpoints (an epoch); foreachBatch does not run.
The transactional sink is then a `foreach` writer, `streaming/realtime/jvm/RealTimeTransactionalWriter.java`,
which commits one transaction of partition p whenever its oldest unwritten record has waited
`--commit-interval-ms`, and at each epoch's end.

Why exactly once. T(p) = <app-id>.<topic>.<p>, partition scope's id, so every commit of p's
offsets comes from the newest producer of T(p): a task's first record makes it fence every older
one (initTransactions), and a fenced producer can commit nothing. After the fence it reads c, the
group's offset of p, which is stable because no other producer of T(p) can move it. Each
transaction writes the records from c on and commits {p: last + 1} with them, atomically. When
anything fails, Spark runs the epoch again from its checkpointed start offsets, which are at or
below c; the writer drops every record below c and writes the rest once. A retry inside the task
(a timed-out commit) takes a new producer, whose fence settles the transaction in doubt, and reads
c again to learn whether it landed.

What a replay costs: every record of the epoch up to the failure is read again and dropped (the
sink writes nothing twice, but Spark reads up to one checkpoint interval again), so a long
interval makes recovery slower, never wrong.

Why in Java. PySpark's `foreach` hands rows to its Python worker in pickles that double in size
until they reach a megabyte (`SerDeUtil.AutoBatchedPickler`); in real-time mode the next pickle
waits for its rows, so a row waited up to the rest of its epoch before Python saw it (measured:
docs/benchmarks.md, "Real-time mode"). The writer runs in the executor's JVM instead, with
Kafka's Java client, and `--process` is the same transform in Java (a unit test holds the two to
the same bytes).

Preconditions, refused in one line before the query starts: every input partition needs a task
slot at once (real-time mode runs all of an epoch's tasks together), one task per partition (no
minPartitions, no maxRecordsPerPartition), no speculation (two attempts of one task would fence
each other over and over), and no partition pre-registration (Kafka's Java producer cannot).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

from conf.settings import SettingsError, parse_kv_pairs
from conf.stream_settings import StreamSettings
from streaming.stats import LATENCY_BOUNDS_MS, BatchStats

WRITER_CLASS = "eosbench.spark.RealTimeTransactionalWriter"
# The writer's Counters slots, in RealTimeTransactionalWriter.Counters' order.
COUNTER_NAMES = ("records_out", "records_dead_lettered", "records_skipped", "transactions", "retries", "producers")
_SPLITTING_OPTIONS = ("minpartitions", "maxrecordsperpartition")


class RealTimeWriterMissing(SettingsError):
    """The jar with the real-time writer is not on the job's classpath."""


def precondition_problem(settings: StreamSettings, input_partitions: int, task_slots: int,
                         speculation: bool) -> str | None:
    """Why real-time mode cannot run this job exactly once (or at all), in one line; None when it can."""
    if settings.sink not in ("kafka-eos", "kafka-alo"):
        return f"--trigger {settings.trigger}: real-time mode writes to Kafka only (--sink kafka-eos or kafka-alo)"
    if settings.sink == "kafka-alo" and settings.process != "passthrough":
        return (f"--trigger {settings.trigger} --sink kafka-alo: Spark's own Kafka sink runs in real-time mode without"
                " Python, so only --process passthrough")
    if settings.pre_register_partitions:
        return (f"--trigger {settings.trigger}: the real-time writer uses Kafka's Java producer, which cannot"
                " register partitions before the first send; drop --pre-register-partitions")
    if settings.txn_scope not in ("partition", "auto") or settings.sink_client is not None:  # auto: partition here
        return (f"--trigger {settings.trigger}: real-time mode commits per input partition (partition scope, Kafka's"
                " Java client); drop --txn-scope and --sink-client")
    if settings.max_offsets_per_trigger is not None:
        return f"--trigger {settings.trigger}: real-time mode reads as records arrive; drop --max-offsets-per-trigger"
    if settings.observe_visibility or settings.visibility_log is not None:
        return f"--trigger {settings.trigger}: --observe-visibility is measured in micro-batch mode only"
    split = [name for name in settings.extra_source_options() if name.lower() in _SPLITTING_OPTIONS]
    if split:
        return (f"--source-options {split[0]}: real-time mode needs one task per Kafka partition, which the"
                " transactional writer commits alone")
    if speculation:
        return ("spark.speculation is on: a speculative copy of a real-time task would fence the original's"
                " producer, and each the other's, for the whole epoch; turn it off")
    if task_slots < input_partitions:
        return (f"{settings.input_topic} has {input_partitions} partitions but the job has {task_slots} task slots:"
                f" real-time mode runs one task per partition, all at once; give it at least {input_partitions}"
                f" (local[{input_partitions}], or executors x cores)")
    return None


class RealTimeWriter:
    """The driver's handle on the Java writer: builds it, and reads its accumulators back as per-epoch BatchStats."""

    def __init__(self, spark, settings: StreamSettings, input_partitions: int, offsets: RealTimeOffsets):
        from py4j.java_gateway import JavaClass

        jvm, jsc = spark.sparkContext._jvm, spark.sparkContext._jsc.sc()
        writer_class = getattr(jvm, WRITER_CLASS)
        if not isinstance(writer_class, JavaClass):  # py4j names a missing class a package
            raise RealTimeWriterMissing(
                "the real-time writer is not on Spark's classpath (eosbench-spark.jar, which `eosbench stream` ships"
                " and `eosbench setup` builds into the jar cache): add it to --jars")
        self._counters = writer_class.Counters()
        gateway = spark.sparkContext._gateway
        bounds = gateway.new_array(gateway.jvm.double, len(LATENCY_BOUNDS_MS))
        for index, bound in enumerate(LATENCY_BOUNDS_MS):
            bounds[index] = float(bound)
        self._latency = writer_class.LatencyHistogram(bounds)
        jsc.register(self._counters, f"eosbench-{settings.app_id}-counters")
        jsc.register(self._latency, f"eosbench-{settings.app_id}-latency")
        client = {"bootstrap.servers": settings.bootstrap_server,
                  **{key[len("kafka."):]: value for key, value in settings.spark_kafka_options().items()}}
        producer = {"linger.ms": "5", "transaction.timeout.ms": "60000",
                    **parse_kv_pairs(list(settings.producer_props))}
        self.java = writer_class(client, producer, settings.app_id, offsets.claim.run, settings.output_topic,
                                 settings.dead_letter,
                                 settings.process, settings.output_partitioning == "input",
                                 settings.commit_interval_ms, input_partitions, settings.max_retries,
                                 self._counters, self._latency)
        self.offsets = offsets
        self._seen = np.zeros(len(COUNTER_NAMES), dtype=np.int64)
        self._seen_latency = np.zeros(len(LATENCY_BOUNDS_MS) + 1, dtype=np.int64)
        self._lock = threading.Lock()

    @contextmanager
    def keeping_offsets(self) -> Iterator[RealTimeWriter]:
        """A context in which the offset keeper refreshes the group's offsets of idle partitions (the query's lifetime)."""
        self.offsets.keeper.start()
        try:
            yield self
        finally:
            self.offsets.keeper.stop()

    def totals(self) -> dict[str, int]:
        """Every count so far (tasks report theirs when their epoch ends)."""
        return dict(zip(COUNTER_NAMES, (int(count) for count in self._counters.value())))

    def epoch_done(self, batch_id: int, input_rows: int) -> BatchStats:
        """The counts added since the last call, as one epoch's BatchStats."""
        with self._lock:
            counts = np.asarray(list(self._counters.value()), dtype=np.int64)
            latency = np.asarray(list(self._latency.value()), dtype=np.int64)
            delta, latency_delta = counts - self._seen, latency - self._seen_latency
            self._seen, self._seen_latency = counts, latency
        named = dict(zip(COUNTER_NAMES, (int(count) for count in delta)))
        batch = BatchStats(batch_id, records_in=input_rows, records_out=named["records_out"],
                           records_dead_lettered=named["records_dead_lettered"],
                           records_skipped=named["records_skipped"], retries=named["retries"],
                           latency_counts=latency_delta)
        batch.outcomes["committed"] = named["transactions"]
        return batch


def write_stream(spark, df, settings: StreamSettings, writer: RealTimeWriter | None):
    """The real-time query's DataStreamWriter: the transactional writer, or Spark's own Kafka sink for kafka-alo."""
    from pyspark.sql import functions as F

    interval = settings.realtime_interval
    if writer is None:  # kafka-alo: Spark's Kafka sink, with the same routing and eos headers, no Python
        poison = F.col("value").startswith(F.lit(b"POISON"))
        src = F.concat_ws(":", "topic", F.col("partition").cast("string"), F.col("offset").cast("string"))
        projected = df.select(
            F.when(poison, F.lit(settings.dead_letter)).otherwise(F.lit(settings.output_topic)).alias("topic"),
            "key", "value",
            F.array(F.struct(F.lit("eos.src").alias("key"), src.cast("binary").alias("value")),
                    F.struct(F.lit("eos.in_ts").alias("key"),
                             F.unix_millis("timestamp").cast("string").cast("binary").alias("value"))).alias("headers"))
        return (projected.writeStream.format("kafka").outputMode("update")
                .options(**settings.spark_kafka_options())
                .option("kafka.bootstrap.servers", settings.bootstrap_server).option("kafka.linger.ms", "5")
                .trigger(realTime=interval))
    stream = df.writeStream.outputMode("update").trigger(realTime=interval)
    stream._jwrite = stream._jwrite.foreach(writer.java)
    return stream


def prepared_writer(spark, settings: StreamSettings, checkpoint, start=None) -> RealTimeWriter | None:
    """Check the preconditions (raising SinkPreconditionError), then the transactional writer; None for kafka-alo.

    `checkpoint` is the query's CheckpointLog: a query resumed on it must find the group's
    offsets it replays against (`check_resume`). `start` is the transactional sink's read of
    Kafka at the job's start (streaming/sink/start.py).
    """
    from streaming.group import SinkPreconditionError
    from streaming.sink.slots import default_slots
    from streaming.sink.start import check_start, claim, read_start

    if settings.sink == "kafka-eos":
        start = start or read_start(settings)
        check_start(settings, start)
        partitions = start.partitions
    else:
        from confluent_kafka import Consumer

        from conf.client_log import CLIENT_LOG

        reader = Consumer(settings.connection.librdkafka(**{"group.id": f"{settings.app_id}.metadata"}), logger=CLIENT_LOG)
        try:
            partitions = list(reader.list_topics(settings.input_topic, timeout=30).topics[settings.input_topic].partitions)
        finally:
            reader.close()
    speculation = spark.sparkContext.getConf().get("spark.speculation", "false").lower() == "true"
    problem = precondition_problem(settings, len(partitions), default_slots(spark), speculation)
    if problem:
        raise SinkPreconditionError(problem)
    if settings.sink != "kafka-eos":
        return None
    check_resume(settings, checkpoint, start.committed)
    offsets = RealTimeOffsets(settings, start.group_metadata, partitions, claim(settings, start))
    return RealTimeWriter(spark, settings, len(partitions), offsets)


def check_resume(settings: StreamSettings, checkpoint, committed: dict) -> None:
    """Refuse to resume a real-time query where the group lost the offsets its replay must filter by.

    A resumed query replays from where its last logged epoch ended, and the writer drops what
    the group's offset c of each partition says is written (Step 3). The writer commits every
    100 ms, so the unfinished epoch is partly written, and without c (expired while the job was
    down, or deleted) every record of it would be written again. c below the start proves
    nothing here (an epoch may end in aborted records after the last commit), so, as for a
    micro-batch query's first batch, the output is the evidence (`replay_written_again`).
    """
    from streaming.verify.evidence import settle_timeout_s
    from streaming.group import SinkPreconditionError
    from streaming.source.starting_offsets import replay_written_again

    topic = settings.input_topic
    resumed = checkpoint.resumed_batch(topic)
    if resumed is None:
        return
    epoch, starts = resumed
    written = replay_written_again(settings.connection, topic, [settings.output_topic, settings.dead_letter],
                                   committed, starts, settings.app_id, settle_timeout_s(settings))
    if written:
        p = written[0]
        raise SinkPreconditionError(
            f"epoch {epoch} is run again after a restart, but group {settings.app_id!r} has no offset for {topic}"
            f" partition(s) {', '.join(map(str, written))} although the output holds records of it from {topic}[{p}]"
            f" (at or after offset {starts[p]}, where the query resumes): the offsets expired (offsets.retention."
            f"minutes) or were deleted, and running it again would write them twice. Delete the checkpoint"
            f" ({checkpoint.uri}) and start with --starting-offsets output")


class RealTimeOffsets:
    """Real-time mode's group offsets on the driver: the offset keeper's sink (`streaming/group.py`).

    The writer's tasks commit on the executors, so the driver learns which partitions committed
    from the commit tokens in the group's offset metadata, and re-commits an idle partition's
    offset with T(p), as partition scope's keeper does: its producer's init fences the writer's
    producer of T(p), which the writer replaces at p's next commit (a retry, once a third of the
    retention), and it commits c unchanged.
    """

    def __init__(self, settings: StreamSettings, group_metadata, partitions: list[int], claim):
        from streaming.sink.start import driver_plan
        from streaming.group import OffsetKeeper, offsets_retention_minutes

        self.settings = settings
        self.claim = claim  # the driver run's claim of the pipeline (streaming/sink/start.py), which the keeper renews
        self.lock = threading.Lock()  # the keeper's; no batch runs on the driver in this mode
        self._partitions = partitions
        self._plan = driver_plan(settings, group_metadata, partitions, run=claim.run)
        self.keeper = OffsetKeeper(self, offsets_retention_minutes(settings))

    def input_partitions(self) -> list[int]:
        """The input's partitions when the query started (real-time mode runs a task for each)."""
        return self._partitions

    def commit_tokens(self) -> dict[int, str | None]:
        """Each partition's commit token in the group's offset metadata (None: no sink commit)."""
        from streaming.sink.clients import group_offsets_of

        committed = group_offsets_of(self._plan, self.settings.input_topic, self._partitions)
        return {p: c.token for p, c in committed.items()}

    def recommit(self, partitions: list[int]) -> list[int]:
        """Re-commit these partitions' offsets unchanged, each with T(p) (the keeper's refresh)."""
        from streaming.sink.start import recommit_partitions

        return recommit_partitions(self._plan, self.settings.input_topic, partitions)

    def renew_owner(self) -> None:
        """Write the owner record again before Kafka expires it (the keeper's)."""
        self.claim.renew(self.settings)


class EpochCounts:
    """Turns each finished epoch of a real-time query into one BatchStats for `on_epoch` (summary, metrics, echo).

    It is fed the query's new progress reports, one per epoch, by the job's progress watcher.
    """

    def __init__(self, writer: RealTimeWriter | None, on_epoch):
        self.writer, self.on_epoch = writer, on_epoch
        self._last_batch_id = -1

    def report(self, progress: dict) -> None:
        """Count one epoch's progress report: its input rows, and what the writer's tasks reported since the last."""
        batch_id, input_rows = progress["batchId"], progress["numInputRows"]
        self._last_batch_id = batch_id
        self.on_epoch(self.writer.epoch_done(batch_id, input_rows) if self.writer else BatchStats(batch_id, records_in=input_rows))

    def finish(self) -> None:
        """After the query: counts the tasks reported after the last progress form one more epoch."""
        if self.writer:
            rest = self.writer.epoch_done(self._last_batch_id + 1, 0)
            if rest.records_out or rest.records_dead_lettered or rest.records_skipped or rest.retries:
                self.on_epoch(rest)
