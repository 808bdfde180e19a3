"""The transactional foreachBatch sink (`--sink kafka-eos`): its driver side.

`TransactionalSink` is the foreachBatch function. For each micro-batch it builds the TaskPlan
from the query's offset log, checks that partition scope gets one Spark partition per Kafka
partition with new offsets, runs the tasks (`streaming/sink/task.py`, which holds the protocol's
steps, the producer cache and one transaction), merges their stats, commits the group's offsets
over slices that held only aborted records, and in batch scope runs the one transaction itself.
Between batches its `OffsetKeeper` re-commits offsets no batch committed lately.

Slot scope (`--txn-scope slot`) is exactly-once for the reasons partition scope is, with the
slot's id in place of the partition's:

- **One writer per partition per batch.** The driver coalesces the batch's Spark partitions into
  at most G tasks (no shuffle) on the JVM, reads from that very RDD which input partitions each
  coalesced partition k holds, and runs the tasks on it (on the grouped source, `--source
  grouped`, Spark partition k is slot k already, and the driver reads its partitions from it).
  Task k refuses any record outside its
  slot's partitions and ranges, so in one batch only T(k) = `<app-id>.slot.<k>` commits them.
- **Every attempt of slot k shares T(k).** A retry's new producer fences the attempt before it,
  so c, read after Step 1, is still true at commit time, and Step 3 drops what is committed.
- **A partition that changes slot.** The grouping follows the executors that the Kafka source
  prefers (`slot_groups`; with Spark's own coalesce, also which ranges hold offsets), so a
  partition can belong to slot k in one batch and slot j in the next. A writer of T(k) fenced in
  batch b cannot commit, but one that no later attempt of T(k) fenced could still commit a
  partition that T(j) now owns. So every commit records its slot and G in the offset metadata,
  and the driver runs `init_transactions` on every slot id before any task of a batch in which a
  partition's slot differs from the slot of its last commit: the old writer is fenced before
  T(j) reads c.
- **A writer of an older driver run.** A restart can change G, and the writers of the run that
  died are no later attempt's. Before its query starts, the driver claims the pipeline
  (`streaming/sink/start.py: claim`): it writes its run into the owner record, then fences every
  slot id the record says a run may have used; every writer reads the record after its
  producer's init and stops unless it names its own run (`streaming/owner.py`).
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace

from conf.failures import AuthorizationFailure, java_authorization_failure
from conf.stream_settings import StreamSettings
from streaming.sink import clients
from streaming.source.batch_ranges import batch_rdd, planned_ranges, planned_ranges_and_locations, planned_slots
from streaming.source.checkpoint import CheckpointLog
from streaming.sink.interruption import stop_kept_short
from streaming.verify.evidence import settle_timeout_s
from streaming.process import arrow_columns, source_columns
from streaming.sink.clients import group_offsets_of
from streaming.group import OffsetKeeper, SinkPreconditionError, offsets_retention_minutes
from streaming.sink.start import StartRead, check_start, claim, driver_plan, partition_recommits, read_start
from streaming.sink.task import SINK_LOG, partition_task, run_transaction, slot_task
from streaming.sink.slots import grouped_slot_map, partitions_changing_slot, settle_slot_count, slot_groups, slot_map
from streaming.source.starting_offsets import replay_written_again
from streaming.stats import STATS_SCHEMA, BatchStats, writers_of
from streaming.task_plan import KEEP_COMMITTED, ExactlyOnceViolation, TaskPlan, slot_transactional_id, transactional_id


# ----------------------------------------------------------------------------- the driver side


def _refusal_in(exc: Exception) -> Exception | None:
    """What stopped a batch for good, recovered from the Spark job failure that carries it.

    A sink task's refusal (SinkPreconditionError) or missing ACL (AuthorizationFailure), or the
    Kafka source's refused fetch (Java's TopicAuthorizationException): retrying cannot help.
    """
    text = str(exc)
    for kind in (SinkPreconditionError, AuthorizationFailure):
        marker = f"{kind.__name__}: "
        lines = [line for line in text.splitlines() if marker in line]
        if lines:
            return kind(lines[-1].split(marker, 1)[1].strip())
    return java_authorization_failure(text)


class TransactionalSink:
    """The foreachBatch function: plans each batch on the driver, runs the tasks, merges stats."""

    def __init__(self, settings: StreamSettings, spark, checkpoint: CheckpointLog, on_batch=None,
                 start: StartRead | None = None):
        self.settings = settings
        self.spark = spark
        self.on_batch = on_batch
        start = start or read_start(settings)  # the job's read of Kafka at its start, or one of the sink's own
        check_start(settings, start)
        self.group_metadata, self._partitions = start.group_metadata, start.partitions
        self.slots = settle_slot_count(spark, settings).txn_slots or 0  # G, in slot scope (job.run settled it)
        self.fault = os.environ.get("EOSBENCH_FAULT") or None
        self._check_speculation_off()
        self.claim = claim(settings, start, self.slots)
        self.run = self.claim.run
        self.slots_fenced = self.claim.fenced.slots  # slot ids fenced by the driver, for the next batch's stats
        # Slot scope: each partition's slot, as (k, G), of its last commit since the last fence of every slot id. The
        # claim fenced them all, so none is bound yet.
        self._slot_of: dict[int, tuple[int, int]] = {}
        # Per transactional id, the writer token of its latest init that a row reported (or the driver's fence), for
        # the next plan: a worker drops a copy that a later init fenced before it fails an attempt with it.
        self._writers: dict[str, str] = {}
        self.checkpoint = checkpoint
        self._pending_batch = self.checkpoint.pending_batch()  # read before the query starts
        # The driver's transactions (empty slices, batch scope, the keeper) share the driver's cached
        # producers; one lock serialises them, and the keeper never runs while a batch does.
        self.lock = threading.Lock()
        self.refusal: Exception | None = None  # what stopped the query for good, for a one-line error
        self.keeper = OffsetKeeper(self, offsets_retention_minutes(settings))
        self._warned_default_coalescer = False

    def _check_speculation_off(self) -> None:
        if self.spark.sparkContext.getConf().get("spark.speculation", "false").lower() == "true":
            raise SinkPreconditionError("spark.speculation is on: a speculative copy of a sink task would fence"
                                        " the original mid-transaction; turn it off for --sink kafka-eos")

    def input_partitions(self) -> list[int]:
        """The input topic's partitions, as of the last batch (or the start)."""
        return self._partitions

    def plan(self, batch_id: int) -> TaskPlan:
        """The closure shipped to this batch's tasks.

        A batch that the previous run may have committed before it died is `replayed`: its tasks
        refuse a partition whose group offset fell below the batch's start. Batch 0 starts at the
        query's initial offsets, where a missing offset proves nothing, so the driver judges it
        (`_check_first_batch_replay`).
        """
        topic = self.settings.input_topic
        end_offsets = self.checkpoint.batch_end_offsets(batch_id, topic)
        return TaskPlan(
            app_id=self.settings.app_id, output_topic=self.settings.output_topic,
            dead_letter_topic=self.settings.dead_letter, process=self.settings.process,
            producer_config=self.settings.producer_config(), group_metadata=self.group_metadata,
            end_offsets=end_offsets, input_partitions=max([*self._partitions, *end_offsets], default=-1) + 1,
            max_retries=self.settings.max_retries, pre_register=self.settings.pre_register_partitions,
            batch_id=batch_id, fault=self.fault, txn_scope=self.settings.txn_scope,
            start_offsets=self.checkpoint.batch_start_offsets(batch_id, topic),
            replayed=0 < batch_id == self._pending_batch, sink_client=self.settings.client,
            txn_slots=self.slots, output_partitioning=self.settings.output_partitioning, run=self.run,
            writers=dict(self._writers),
        )

    @contextmanager
    def keeping_offsets(self) -> Iterator[TransactionalSink]:
        """A context in which the keeper refreshes the group's offsets (the query's lifetime)."""
        self.keeper.start()
        try:
            yield self
        finally:
            self.keeper.stop()

    def __call__(self, df, batch_id: int) -> None:
        started = time.perf_counter()
        stats = BatchStats(batch_id)
        try:
            with stats.timing("keeper_wait"):
                self.lock.acquire()
            try:
                with stop_kept_short(batch_id):
                    self._run_batch(df, batch_id, stats)
            finally:
                self.lock.release()
        except (SinkPreconditionError, AuthorizationFailure, ExactlyOnceViolation) as exc:
            self.refusal = exc
            raise
        except Exception as exc:
            refusal = _refusal_in(exc)
            if refusal is None:
                raise
            self.refusal = refusal
            raise refusal from None
        stats.duration_s = time.perf_counter() - started
        if self.on_batch:
            self.on_batch(stats)
        if self.fault == f"kill-driver-after-sink-commit:{batch_id}":
            _kill_driver(self.spark)

    def _run_batch(self, df, batch_id: int, stats: BatchStats) -> None:
        with stats.timing("plan"):
            plan = self.plan(batch_id)
        self._partitions = sorted(set(self._partitions) | set(plan.end_offsets))
        if batch_id == 0 == self._pending_batch:
            with stats.timing("first_batch_check"):
                self._check_first_batch_replay(plan)
        source = df.select(*source_columns())
        if self.settings.txn_scope == "partition":
            # `df`, not `source`: a projection keeps the partitions, and only `df` is foreachBatch's own.
            with stats.timing("split_guard"):
                if self.fault != "blind-driver-split-check":
                    self._check_one_task_per_partition(df, plan)
                plan = replace(plan, planned_ranges=planned_ranges(df))
            with stats.timing("tasks"):
                rows = source.mapInArrow(partition_task(plan), STATS_SCHEMA).collect()
            seen = [(row["topic"], row["partition"]) for row in rows]
            if len(seen) != len(set(seen)):
                raise ExactlyOnceViolation(f"batch {batch_id}: two tasks wrote for one input partition:"
                                           f" {sorted(seen)}")
            for row in rows:
                stats.add_task(row.asDict())
            self.keeper.committed(row["partition"] for row in rows if row["outcome"] == "committed")
            with stats.timing("empty_slices"):
                self._commit_empty_slices(plan, {p for _, p in seen}, stats)
        elif self.settings.txn_scope == "slot":
            self._slot_scope(df, plan, stats)
        else:
            with stats.timing("tasks"):
                row = self._batch_scope(source, plan)
            stats.add_task(row)
            self.keeper.committed(row["committed_partitions"])
        stats.slots_fenced, self.slots_fenced = self.slots_fenced, 0
        self._writers.update(stats.writers)

    def _check_one_task_per_partition(self, df, plan: TaskPlan) -> None:
        """The driver's split guard: one Spark partition per Kafka partition with new offsets.

        Spark drops the ranges that hold no offsets before it splits the others (minPartitions,
        maxRecordsPerPartition), so the Spark partitions are counted against the partitions whose
        range is not empty: this batch's ends in the offset log against the previous batch's
        (or the query's initial offsets).
        """
        tasks = batch_rdd(df).getNumPartitions()
        with_offsets = sorted(p for p, end in plan.end_offsets.items() if end > plan.start_offsets.get(p, 0))
        if tasks != len(with_offsets):
            raise SinkPreconditionError(
                f"batch {plan.batch_id} has {tasks} Spark partitions for {len(with_offsets)} Kafka partitions with"
                f" new offsets ({self.settings.input_topic} {with_offsets}): partition scope needs exactly one Spark"
                " partition per Kafka partition, so no minPartitions or maxRecordsPerPartition split and no shuffle"
                " or coalesce before the sink; use --txn-scope batch for those")

    def _check_first_batch_replay(self, plan: TaskPlan) -> None:
        """Refuse to run batch 0 again where the run that died committed a slice whose group offset is gone."""
        topic = self.settings.input_topic
        committed = group_offsets_of(plan, topic, sorted(plan.end_offsets))
        written = replay_written_again(self.settings.connection, topic,
                                       [self.settings.output_topic, self.settings.dead_letter], committed,
                                       {p: plan.start_offsets.get(p, 0) for p in plan.end_offsets}, plan.app_id,
                                       settle_timeout_s(self.settings))
        if written:
            p = written[0]
            raise SinkPreconditionError(
                f"batch 0 is run again after a restart, but group {plan.app_id!r} has no offset for {topic}"
                f" partition(s) {', '.join(map(str, written))} although the output holds records of this batch"
                f" from {topic}[{p}]: the offsets expired (offsets.retention.minutes) or were deleted, and running"
                f" it again would write them twice. Delete the checkpoint ({self.checkpoint.uri}) and start with"
                " --starting-offsets output")

    def _commit_empty_slices(self, plan: TaskPlan, with_records: set[int], stats: BatchStats) -> None:
        """Move the group's offsets over slices that held only aborted records and markers.

        A partition with no new offsets needs a transaction only if its group offset is not at
        the batch end yet (a partition no batch has committed): one read of the group's offsets
        tells, so an idle partition costs no driver-side producer, which would fence the
        executors' cached producer of its transactional id.
        """
        topic = self.settings.input_topic
        empty = {p: end for p, end in plan.end_offsets.items() if p not in with_records}
        unmoved = sorted(p for p, end in empty.items() if end <= plan.start_offsets.get(p, 0))
        at_end = {p for p, c in group_offsets_of(plan, topic, unmoved).items()
                  if c.offset >= empty[p]} if unmoved else set()
        stats.outcomes["idle"] += len(at_end)
        for partition, end in empty.items():
            if partition in at_end:
                continue
            txn_id, slot = self._writer_of(plan, partition)
            row = run_transaction(plan, txn_id, [], {(topic, partition): end}, slot=slot)
            stats.add_task(row)
            self.keeper.committed(row["committed_partitions"])
            self._note_slots(row["committed_partitions"], slot)

    def _writer_of(self, plan: TaskPlan, partition: int) -> tuple[str, int | None]:
        """The transactional id (and slot) of a driver-side transaction over one partition.

        In slot scope, the slot of the partition's last commit, so that no partition changes slot
        outside a batch's fenced map; a partition not committed since the last fence of every slot
        id takes p mod G.
        """
        if self.settings.txn_scope != "slot":
            return transactional_id(plan.app_id, self.settings.input_topic, partition), None
        slot = self._slot_of.get(partition, (partition % self.slots, self.slots))[0]  # unbound since a fence: any
        return slot_transactional_id(plan.app_id, slot), slot

    def _note_slots(self, partitions, slot: int | None) -> None:
        """Remember that `slot` committed these partitions last (slot scope)."""
        if slot is not None:
            for partition in partitions:
                self._slot_of[partition] = (slot, self.slots)

    def _slot_scope(self, df, plan: TaskPlan, stats: BatchStats) -> None:
        """Coalesce the batch into at most G slots, fence the slot ids if a partition moved, run one transaction a slot."""
        from pyspark.sql import DataFrame

        topic = self.settings.input_topic
        with stats.timing("slot_map"):
            if self.settings.source == "grouped":  # Spark partition k is slot k already: nothing to coalesce
                slot_partitions = grouped_slot_map(planned_slots(df), plan, topic, self.slots)
                coalesced = None
            else:
                planned, locations = planned_ranges_and_locations(df)
                coalesced = batch_rdd(df).coalesce(self.slots, False, self._coalescer(planned, locations), None)
                slot_partitions = slot_map(coalesced, planned, plan, topic)
        plan = replace(plan, slot_partitions=slot_partitions)
        moved = partitions_changing_slot(slot_partitions, self._slot_of, self.slots)
        if moved:
            SINK_LOG.info("batch %d: %d partitions of %s change slot (first: %s from slot %s to another), fencing"
                          " the slot ids first", plan.batch_id, len(moved), topic, *next(iter(moved.items())))
            with stats.timing("fence"):
                self._fence_slots(set(moved.values()))
        # The very RDD whose grouping was read: planning a coalesce again could group differently.
        batch = df if coalesced is None else DataFrame(
            self.spark._jsparkSession.internalCreateDataFrame(coalesced, df._jdf.schema(), False), self.spark)
        with stats.timing("tasks"):
            rows = batch.select(*source_columns()).mapInArrow(slot_task(plan, topic), STATS_SCHEMA).collect()
        committed = {p for row in rows for p in row["committed_partitions"]}
        for row in rows:
            stats.add_task(row.asDict())
        for k, mine in enumerate(slot_partitions):
            self._note_slots([p for p in mine if p in committed], k)
        self.keeper.committed(committed)
        with stats.timing("empty_slices"):
            self._commit_empty_slices(plan, {p for mine in slot_partitions for p in mine}, stats)

    def _coalescer(self, planned: tuple | None, locations: tuple):
        """Option(SlotCoalescer) over slot_groups' map; Spark's default coalescer when its jar is not on the classpath."""
        from py4j.java_gateway import JavaClass

        jvm = self.spark._jvm
        coalescer_class = jvm.eosbench.spark.SlotCoalescer
        if planned is None or not isinstance(coalescer_class, JavaClass):
            if planned is not None and not self._warned_default_coalescer:
                self._warned_default_coalescer = True
                SINK_LOG.warning("eosbench's SlotCoalescer is not on Spark's classpath (eosbench-spark.jar, which"
                                 " `eosbench stream` ships): Spark's coalescer places each slot on a host, not an"
                                 " executor, so a slot's consumers may be created again where it lands")
            return getattr(jvm.scala.Option, "empty")()
        slot_of, slot_locations = slot_groups(planned, locations, self.slots)
        return jvm.scala.Option.apply(coalescer_class(",".join(map(str, slot_of)), "\n".join(slot_locations)))

    def _fence_slots(self, old: set[tuple[int, int]]) -> None:
        """init_transactions on every slot id of this run and the given old (k, G) ones, before any task runs.

        A new producer's init fences every earlier producer of its id and aborts its open
        transaction; the driver's producers are dropped at once, so the tasks' own inits follow.
        """
        plan = self._driver_plan()
        ids = sorted(set(range(self.slots)) | {k for k, _ in old})
        started = time.perf_counter()
        fenced = [slot_transactional_id(plan.app_id, k) for k in ids]
        clients.fence(plan, fenced)
        self._writers.update(dict.fromkeys(fenced, clients.FENCED_BY_DRIVER))
        self.slots_fenced += len(ids)
        self._slot_of.clear()  # every slot id is fenced: no partition is bound to its last slot any more
        SINK_LOG.info("fenced %d slot transactional ids (%s.slot.0..%d) in %.2f s", len(ids), plan.app_id,
                      ids[-1], time.perf_counter() - started)

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

    def _driver_plan(self) -> TaskPlan:
        """The plan of the driver's transactions outside a batch (the keeper's, the slot fence)."""
        return replace(driver_plan(self.settings, self.group_metadata, self._partitions, self.slots, self.run),
                       writers=dict(self._writers))

    def renew_owner(self) -> None:
        """Write the owner record again before Kafka expires it (the keeper's)."""
        self.claim.renew(self.settings)

    def recommit(self, partitions: list[int]) -> list[int]:
        """Re-commit the group's current offsets of these partitions, unchanged (the keeper's refresh)."""
        topic = self.settings.input_topic
        plan = self._driver_plan()
        if self.settings.txn_scope == "batch":
            rows = [run_transaction(plan, f"{plan.app_id}.batch", [], {(topic, p): KEEP_COMMITTED for p in partitions})]
        elif self.settings.txn_scope == "slot":  # each partition in the slot that committed it last
            by_slot: dict[int, list[int]] = {}
            for p in partitions:
                by_slot.setdefault(self._writer_of(plan, p)[1], []).append(p)
            rows = [run_transaction(plan, slot_transactional_id(plan.app_id, k), [],
                                    {(topic, p): KEEP_COMMITTED for p in mine}, slot=k)
                    for k, mine in sorted(by_slot.items())]
            for (k, _), row in zip(sorted(by_slot.items()), rows):
                self._note_slots(row["committed_partitions"], k)
        else:
            rows = partition_recommits(plan, topic, partitions)
        self._writers.update(writers_of(rows))
        return sorted(p for row in rows for p in row["committed_partitions"])


def _kill_driver(spark) -> None:
    """Test-only: SIGKILL the driver (its JVM, then this process) after the sink committed."""
    jvm_pid = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
    os.kill(int(jvm_pid), signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)
