"""The transactional foreachBatch sink (`--sink kafka-eos`), as DESIGN.md specifies it.

Per task (`--txn-scope partition`, the default), for the slice S of input partition p whose
batch ends at offset `end` (exclusive):

  Step 1. Get a producer for T(p) = <app-id>.<topic>.<p>. A new one calls init_transactions(),
          which fences every older producer of T(p) and aborts its open transaction.
  Step 2. Read c, the group's committed offset of p, stable with respect to pending
          transactions (read_committed makes librdkafka ask for stable offsets).
  Step 3. S' = {r in S : r.offset >= c}. If S' is empty this is a replay of committed work:
          count it as skipped_replay and stop.
  Step 4. begin_transaction; [pre-register]; produce process(S') (poison records to the dead-letter
          topic); send_offsets_to_transaction({p: end}, group); commit_transaction.
  Step 5. On failure: fenced or fatal -> new producer, step 2; abortable -> abort, step 2;
          a timeout -> new producer (re-initialise), step 2. Bounded, then the task fails
          loudly and Spark retries it.

Every commit for T(p) comes from the producer with the newest epoch, so c, read after Step 1,
is still true at commit time; a replayed batch has the same ranges and Step 3 removes what is
already committed. `--txn-scope batch` runs the same steps once per micro-batch on the driver
with T = <app-id>.batch and every partition's offsets in one transaction.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from conf.client_log import CLIENT_LOG
from conf.stream_settings import StreamSettings
from streaming.checkpoint import batch_end_offsets
from streaming.interruption import stop_kept_short
from streaming.process import TRANSFORMS, SourceSlice, arrow_columns, passthrough, source_columns
from streaming.stats import PHASES, STATS_SCHEMA, BatchStats, latency_histogram, stats_arrow_schema

SRC_HEADER = "eos.src"
IN_TS_HEADER = "eos.in_ts"

# A retried attempt is one line on the task's stderr, which is the executor's log (the driver's in
# local mode), in Spark's own format; without it a slow batch after a fault looks clean.
SINK_LOG = logging.getLogger("eosbench.sink")
if not SINK_LOG.handlers:
    _stderr = logging.StreamHandler()
    _stderr.setFormatter(logging.Formatter("%(asctime)s %(levelname)s eosbench sink: %(message)s", "%y/%m/%d %H:%M:%S"))
    SINK_LOG.addHandler(_stderr)

# Per Python worker: Spark reuses workers across tasks, so producers and consumers live on.
_PRODUCERS: dict[str, object] = {}
_OFFSET_READERS: dict[str, object] = {}


class ExactlyOnceViolation(RuntimeError):
    """An invariant of the protocol broke; the job stops rather than write twice or lose."""


class SinkPreconditionError(RuntimeError):
    """The query is shaped so that the protocol cannot hold (split partitions, shuffle, speculation)."""


class SinkTaskFailed(RuntimeError):
    """A task ran out of retries; Spark retries the whole task."""


@dataclass(frozen=True)
class TaskPlan:
    """Everything a task needs, shipped from the driver in the task's closure (picklable)."""

    app_id: str
    output_topic: str
    dead_letter_topic: str
    process: str
    producer_config: dict
    group_metadata: object
    end_offsets: dict
    max_retries: int
    pre_register: bool
    batch_id: int
    fault: str | None


# ----------------------------------------------------------------------------- clients


def _kafka():
    import confluent_kafka

    return confluent_kafka


def transactional_id(app_id: str, topic: str, partition: int) -> str:
    """T(p) for partition scope."""
    return f"{app_id}.{topic}.{partition}"


def _producer(plan: TaskPlan, txn_id: str, timings: dict[str, float]):
    """Step 1: the cached producer for T(p), or a new one that has fenced its predecessors."""
    producer = _PRODUCERS.get(txn_id)
    if producer is None:
        started = time.perf_counter()
        if plan.pre_register:
            from streaming.preregister import PreRegisteringProducer

            producer = PreRegisteringProducer(plan.producer_config, txn_id)
        else:
            producer = _kafka().Producer({**plan.producer_config, "transactional.id": txn_id}, logger=CLIENT_LOG)
            _await_learned_broker(producer, plan.output_topic)
        producer.init_transactions(60)
        timings["init"] += time.perf_counter() - started
        _PRODUCERS[txn_id] = producer
    return producer


def _await_learned_broker(producer, topic: str) -> None:
    """Return once a new client is connected to a broker named by the cluster's metadata.

    librdkafka 2.16 retires its bootstrap connection as soon as the first metadata arrives, and
    connects to the brokers that metadata names only after a pause (reconnect.backoff.ms / 2). A
    transactional producer whose PID state machine runs in that gap finds no broker up and waits
    for its 500 ms retry timer: a new producer's init_transactions took 505 ms instead of 55 ms in
    16 of 80 measured inits, and every partition that moves between Python workers needs one. The
    first metadata request is answered on the bootstrap connection; the second can only be
    answered by a broker from that metadata, which is what init_transactions needs (0 of 80 slow).
    """
    for _ in range(2):
        producer.list_topics(topic, timeout=30)


def _drop_producer(txn_id: str) -> None:
    """Forget a producer; the next one's init_transactions aborts whatever it left open."""
    producer = _PRODUCERS.pop(txn_id, None)
    if producer is not None:
        try:
            producer.purge()
            producer.flush(0)
        except Exception:  # a fenced or fatal producer refuses even this; it is gone either way
            pass


def _classify(exc: Exception) -> str | None:
    """Step 5's cases: 'fenced' (or fatal), 'abortable', 'indefinite', or None for not Kafka's."""
    kafka = _kafka()
    if isinstance(exc, kafka.KafkaException):
        error = exc.args[0]
        # A fatal producer's produce() raises _FATAL without the fatal flag: in partition scope that
        # is a cached producer fenced by the same partition's producer on another Python worker.
        if error.fatal() or error.code() in (kafka.KafkaError._FATAL, kafka.KafkaError._FENCED,
                                             kafka.KafkaError.PRODUCER_FENCED, kafka.KafkaError.INVALID_PRODUCER_EPOCH):
            return "fenced"
        return "abortable" if error.txn_requires_abort() else "indefinite"
    try:  # the pre-registering producer is kafka-python's
        import kafka.errors as kafka_python_errors
    except ImportError:
        return None
    if isinstance(exc, (kafka_python_errors.ProducerFencedError, kafka_python_errors.InvalidProducerEpochError)):
        return "fenced"
    if isinstance(exc, kafka_python_errors.KafkaError):
        return "indefinite"
    return None


def _committed_offset(plan: TaskPlan, topic: str, partition: int) -> int:
    """Step 2: the group's committed offset of p (stable), or -1 if none."""
    reader = _OFFSET_READERS.get(plan.app_id)
    if reader is None:
        reader = _kafka().Consumer({
            "bootstrap.servers": plan.producer_config["bootstrap.servers"], "group.id": plan.app_id,
            "isolation.level": "read_committed", "enable.auto.commit": False,
        }, logger=CLIENT_LOG)
        _OFFSET_READERS[plan.app_id] = reader
    committed = reader.committed([_kafka().TopicPartition(topic, partition)], timeout=60)[0]
    return committed.offset if committed.offset >= 0 else -1


def _maybe_fault(plan: TaskPlan, where: str, partition: int) -> None:
    """Test-only fault hook (EOSBENCH_FAULT), off unless the job was started with one."""
    if plan.fault != f"{where}:{plan.batch_id}:{partition}":
        return
    from pyspark import TaskContext

    context = TaskContext.get()
    if context is None or context.attemptNumber() == 0:
        raise RuntimeError(f"injected fault {plan.fault}")


# ----------------------------------------------------------------------------- one transaction


def _produce_slice(producer, plan: TaskPlan, records: SourceSlice, keep_from: int) -> tuple[int, int, list[int]]:
    """Produce process(S') for one slice; return (records out, dead-lettered, input timestamps)."""
    transform = None if plan.process == "passthrough" else TRANSFORMS[plan.process]
    produce, poll = producer.produce, producer.poll
    output, dead_letter = plan.output_topic, plan.dead_letter_topic
    out = dead = 0
    kept_timestamps: list[int] = []
    for key, value, offset, ts, src, in_ts in zip(records.keys, records.values, records.offsets,
                                                  records.timestamps, records.src, records.in_ts):
        if offset < keep_from:
            continue
        result = transform(key, value) if transform else passthrough(key, value)
        if result is None:
            target, payload = dead_letter, value
            dead += 1
        else:
            target, payload = output, result
            out += 1
            kept_timestamps.append(ts)
        while True:
            try:
                produce(target, payload, key, headers=[(SRC_HEADER, src), (IN_TS_HEADER, in_ts)])
                break
            except BufferError:
                poll(0.005)
    return out, dead, kept_timestamps


# librdkafka can block in send_offsets_to_transaction() past its timeout once the group
# coordinator's broker is killed (confluentinc/librdkafka#5456 and #5511, open in 2.16; seen in the
# three-broker soak). The call runs on a helper thread; a producer still blocked at the deadline is
# abandoned (kept referenced: destroying it under a blocked call is unsafe) and Step 5 initialises
# a new producer for T(p), which fences it and aborts its transaction.
SEND_OFFSETS_TIMEOUT_S = 30.0
_ABANDONED: list[tuple[object, threading.Thread]] = []


def _send_offsets(producer, txn_id: str, offsets: list, group_metadata) -> None:
    """send_offsets_to_transaction, bounded even where librdkafka ignores the timeout."""
    failure: list[BaseException] = []

    def call() -> None:
        try:
            producer.send_offsets_to_transaction(offsets, group_metadata, SEND_OFFSETS_TIMEOUT_S)
        except BaseException as exc:  # handed to the task's thread, which classifies it (Step 5)
            failure.append(exc)
    thread = threading.Thread(target=call, name=f"send-offsets {txn_id}", daemon=True)
    thread.start()
    thread.join(SEND_OFFSETS_TIMEOUT_S + 5)
    _ABANDONED[:] = [(old, blocked) for old, blocked in _ABANDONED if blocked.is_alive()]
    if thread.is_alive():
        _PRODUCERS.pop(txn_id, None)
        _ABANDONED.append((producer, thread))
        kafka = _kafka()
        raise kafka.KafkaException(kafka.KafkaError(
            kafka.KafkaError._TIMED_OUT, f"send_offsets_to_transaction still blocked after {SEND_OFFSETS_TIMEOUT_S + 5:g} s"))
    if failure:
        raise failure[0]


# Seen in soaks: after a single broker's kill -9 and restart, a cached producer's records could
# stay undelivered for minutes; a bounded flush lets Step 5 replace that producer instead.
FLUSH_TIMEOUT_S = 30.0


def run_transaction(plan: TaskPlan, txn_id: str, slices: list[SourceSlice], offsets_to_commit: dict) -> dict:
    """Steps 1-5 for one transactional id over its slices; return the task's statistics row."""
    kafka = _kafka()
    timings = dict.fromkeys(PHASES, 0.0)
    stats = {"records_in": sum(len(records) for records in slices), "records_out": 0, "records_dead_lettered": 0,
             "records_skipped": 0, "retries": 0, "fenced": 0, "aborted": 0, "outcome": "committed",
             "register_round_trips": 0, "first_send_after_begin_s": 0.0}
    latencies = np.empty(0)
    for attempt in range(plan.max_retries + 1):
        stats["retries"] = attempt
        attempt_started, phase = time.perf_counter(), "init"
        try:
            producer = _producer(plan, txn_id, timings)                              # Step 1
            started = time.perf_counter()
            committed = {tp: _committed_offset(plan, *tp) for tp in offsets_to_commit}  # Step 2
            timings["init"] += time.perf_counter() - started
            pending = [(records, committed[(records.topic, records.partition)]) for records in slices]
            if all(offsets_to_commit[tp] <= committed[tp] for tp in offsets_to_commit):  # Step 3
                stats["outcome"] = "skipped_replay"
                stats["records_skipped"] = stats["records_in"]
                break
            to_commit = {tp: end for tp, end in offsets_to_commit.items() if end > committed[tp]}
            phase = "produce"
            producer.begin_transaction()                                              # Step 4
            begun = time.perf_counter()
            if plan.pre_register:
                stats["register_round_trips"] += producer.pre_register(plan.output_topic, to_commit, plan.app_id)
                timings["register"] += time.perf_counter() - begun
            stats["first_send_after_begin_s"] = time.perf_counter() - begun
            started = time.perf_counter()
            out = dead = skipped = 0
            kept: list[int] = []
            for records, keep_from in pending:
                o, d, ts = _produce_slice(producer, plan, records, keep_from)
                out, dead = out + o, dead + d
                kept.extend(ts)
                skipped += len(records) - o - d
            undelivered = producer.flush(FLUSH_TIMEOUT_S)
            if undelivered:  # a producer stuck after a broker restart: replace it (Step 5, indefinite)
                raise kafka.KafkaException(kafka.KafkaError(
                    kafka.KafkaError._TIMED_OUT, f"{undelivered} records undelivered after {FLUSH_TIMEOUT_S:g} s"))
            timings["produce"] += time.perf_counter() - started
            started, phase = time.perf_counter(), "send_offsets"
            _send_offsets(producer, txn_id, [kafka.TopicPartition(t, p, end) for (t, p), end in to_commit.items()],
                          plan.group_metadata)
            timings["send_offsets"] += time.perf_counter() - started
            _maybe_fault(plan, "fail-task-before-commit", next(iter(offsets_to_commit))[1])
            started, phase = time.perf_counter(), "commit"
            producer.commit_transaction(60)
            commit_ms = time.time() * 1000.0
            timings["commit"] += time.perf_counter() - started
            stats.update(records_out=out, records_dead_lettered=dead, records_skipped=skipped)
            latencies = commit_ms - np.asarray(kept, dtype=np.float64)
            break
        except Exception as exc:                                                      # Step 5
            kind, failed_after = _classify(exc), time.perf_counter() - attempt_started
            # Spark runs a partition's task on whichever Python worker is free, so a cached producer
            # is routinely found fenced by its successor on another worker at once: that is not news.
            SINK_LOG.log(logging.INFO if kind == "fenced" and failed_after < 1.0 else logging.WARNING,
                         "%s: attempt %d of %d failed in %s after %.1f s (%s): %s", txn_id, attempt + 1,
                         plan.max_retries + 1, phase, failed_after, kind or "not Kafka's, failing the task", exc)
            if kind is None:
                _drop_producer(txn_id)  # never leave a worker with a producer inside a transaction
                raise
            if kind == "fenced":
                stats["fenced"] += 1
                _drop_producer(txn_id)
            elif kind == "abortable":
                stats["aborted"] += 1
                try:
                    _PRODUCERS[txn_id].abort_transaction(60)
                except Exception:
                    _drop_producer(txn_id)  # a new producer's init aborts the transaction instead
            else:  # indefinite, such as a timeout: re-initialise
                _drop_producer(txn_id)
        except BaseException:
            _drop_producer(txn_id)
            raise
    else:
        raise SinkTaskFailed(f"{txn_id}: no commit after {plan.max_retries + 1} attempts")
    stats.update({f"phase_{phase}_s": seconds for phase, seconds in timings.items()})
    stats["latency_counts"] = latency_histogram(latencies).tolist()
    return stats


# ----------------------------------------------------------------------------- partition scope


def partition_task(plan: TaskPlan):
    """Return the mapInArrow function that runs one transaction per input topic-partition slice."""

    def task(batches: Iterator) -> Iterator:
        import pyarrow as pa

        columns = [arrow_columns(batch) for batch in batches if batch.num_rows]
        if not columns:
            return
        topics = {(records.topic, records.partition) for records in columns}
        if len(topics) != 1 or None in next(iter(topics)):
            raise SinkPreconditionError(
                "a sink task received records of several input partitions; partition scope needs one Spark"
                " partition per Kafka partition (no shuffle, no minPartitions/maxRecordsPerPartition)")
        topic, partition = next(iter(topics))
        end = plan.end_offsets.get(partition)
        if end is None:
            raise SinkPreconditionError(f"no batch end offset for {topic}[{partition}] in the offset log")
        row = run_transaction(plan, transactional_id(plan.app_id, topic, partition), columns,
                              {(topic, partition): end})
        row.update(topic=topic, partition=partition, end_offset=end)
        yield pa.RecordBatch.from_pylist([row], schema=stats_arrow_schema())

    return task


# ----------------------------------------------------------------------------- the driver side


class TransactionalSink:
    """The foreachBatch function: plans each batch on the driver, runs the tasks, merges stats."""

    def __init__(self, settings: StreamSettings, spark, on_batch=None):
        from confluent_kafka import Consumer

        self.settings = settings
        self.spark = spark
        self.on_batch = on_batch
        # Member-less group metadata (generation -1, no member id), built once and shipped.
        memberless = Consumer({"bootstrap.servers": settings.bootstrap_server, "group.id": settings.group_id},
                              logger=CLIENT_LOG)
        self.group_metadata = memberless.consumer_group_metadata()
        memberless.close()
        self.fault = os.environ.get("EOSBENCH_FAULT") or None
        self._check_speculation_off()

    def _check_speculation_off(self) -> None:
        if self.spark.sparkContext.getConf().get("spark.speculation", "false").lower() == "true":
            raise SinkPreconditionError("spark.speculation is on: a speculative copy of a sink task would fence"
                                        " the original mid-transaction; turn it off for --sink kafka-eos")

    def plan(self, batch_id: int) -> TaskPlan:
        """The closure shipped to this batch's tasks."""
        return TaskPlan(
            app_id=self.settings.app_id, output_topic=self.settings.output_topic,
            dead_letter_topic=self.settings.dead_letter, process=self.settings.process,
            producer_config=self.settings.producer_config(), group_metadata=self.group_metadata,
            end_offsets=batch_end_offsets(self.settings.checkpoint_dir, batch_id, self.settings.input_topic),
            max_retries=self.settings.max_retries, pre_register=self.settings.pre_register_partitions,
            batch_id=batch_id, fault=self.fault,
        )

    def __call__(self, df, batch_id: int) -> None:
        started = time.perf_counter()
        plan = self.plan(batch_id)
        stats = BatchStats(batch_id)
        source = df.select(*source_columns())
        with stop_kept_short(batch_id):
            if self.settings.txn_scope == "partition":
                self._check_not_split(source, plan)
                rows = source.mapInArrow(partition_task(plan), STATS_SCHEMA).collect()
                seen = [(row["topic"], row["partition"]) for row in rows]
                if len(seen) != len(set(seen)):
                    raise ExactlyOnceViolation(f"batch {batch_id}: two tasks wrote for one input partition:"
                                               f" {sorted(seen)}")
                for row in rows:
                    stats.add_task(row.asDict())
                self._commit_empty_slices(plan, {p for _, p in seen}, stats)
            else:
                stats.add_task(self._batch_scope(source, plan))
        stats.duration_s = time.perf_counter() - started
        if self.on_batch:
            self.on_batch(stats)
        if self.fault == f"kill-driver-after-sink-commit:{batch_id}":
            _kill_driver(self.spark)

    def _check_not_split(self, source, plan: TaskPlan) -> None:
        partitions = source.rdd.getNumPartitions()
        if partitions > len(plan.end_offsets):
            raise SinkPreconditionError(
                f"batch {plan.batch_id} has {partitions} Spark partitions for {len(plan.end_offsets)} Kafka"
                " partitions: a split (minPartitions / maxRecordsPerPartition) breaks one transaction per partition")

    def _commit_empty_slices(self, plan: TaskPlan, with_records: set[int], stats: BatchStats) -> None:
        """Move the group's offsets over slices that held only aborted records and markers."""
        topic = self.settings.input_topic
        for partition, end in plan.end_offsets.items():
            if partition in with_records:
                continue
            row = run_transaction(plan, transactional_id(plan.app_id, topic, partition), [], {(topic, partition): end})
            stats.fenced += row["fenced"]

    def _batch_scope(self, source, plan: TaskPlan) -> dict:
        """One driver-side transaction for the whole micro-batch."""
        import pyarrow.compute as pc

        columns = []
        for batch in source.toArrow().to_batches():
            for partition in pc.unique(batch.column("partition")).to_pylist():
                columns.append(arrow_columns(batch.filter(pc.equal(batch.column("partition"), partition))))
        topic = self.settings.input_topic
        row = run_transaction(plan, f"{plan.app_id}.batch", columns,
                              {(topic, p): end for p, end in plan.end_offsets.items()})
        row.update(topic=topic, partition=-1, end_offset=-1)
        return row


def _kill_driver(spark) -> None:
    """Test-only: SIGKILL the driver (its JVM, then this process) after the sink committed."""
    jvm_pid = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
    os.kill(int(jvm_pid), signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)
