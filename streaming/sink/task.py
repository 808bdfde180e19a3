"""The transactional sink's task side (`--sink kafka-eos`), as docs/design.md specifies it.

Per task (`--txn-scope partition`), for the slice S of input partition p whose
batch ends at offset `end` (exclusive):

  Step 1. Get a producer for T(p) = <app-id>.<topic>.<p>. A new one calls init_transactions(),
          which fences every older producer of T(p) and aborts its open transaction.
  Step 2. Read c, the group's committed offset of p, stable with respect to pending
          transactions (read_committed makes librdkafka ask for stable offsets). After a new
          producer's init, stop unless the owner record names this driver run (streaming/owner.py).
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

Every offset the sink commits carries metadata naming its scope, and Step 2 refuses offsets that
the other scope wrote (the two scopes' transactional ids never fence each other). A partition
scope batch runs only if each Kafka partition with new offsets is read by exactly one Spark
partition: the driver counts them before any task starts, and each task checks, before Step 1,
that Spark planned it the partition's whole range. Between batches the driver re-commits the
offsets of partitions no batch committed lately, so that none expires (`OffsetKeeper`).

This module holds what runs in the tasks (and in the driver's own transactions): one
transaction (`run_transaction`), the partition-scope task and its guards. Beside it:
`streaming/task_plan.py`, the TaskPlan shipped to the tasks; `streaming/sink/clients.py`, the
clients of Steps 1, 2 and 5 cached per Python worker; `streaming/sink/sizing.py`, how many
records one transaction may take. The driver side, which plans batches and runs the tasks, is
`streaming/sink/driver.py`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from conf.client_config import connection_of
from conf.failures import AuthorizationFailure, authorization_error_name, authorization_failure, unauthorized_topic
from conf.headers import IN_TS_HEADER, SRC_HEADER, transaction_identity, txn_header
from streaming.sink import clients
from streaming.sink import sizing
from streaming.sink.in_flight import in_flight
from streaming.process import POISON, TRANSFORMS, Poison, SourceSlice, arrow_columns
from streaming.group import OffsetsHeldOpen, SinkPreconditionError, check_scope, new_commit_token, offset_tag
from streaming.sink.guards import check_no_skip, check_replay_has_its_offsets
from streaming.owner import check_owner
from streaming.stats import PHASES, latency_histogram, stats_arrow_schema
from streaming.task_plan import SinkTaskFailed, TaskPlan, slot_transactional_id, transactional_id


# A retried attempt is one line on the task's stderr, which is the executor's log (the driver's in
# local mode), in Spark's own format; without it a slow batch after a fault looks clean.
SINK_LOG = logging.getLogger("eosbench.sink")
if not SINK_LOG.handlers:
    _stderr = logging.StreamHandler()
    _stderr.setFormatter(logging.Formatter("%(asctime)s %(levelname)s eosbench sink: %(message)s", "%y/%m/%d %H:%M:%S"))
    SINK_LOG.addHandler(_stderr)


# ----------------------------------------------------------------------------- clients


def _maybe_fault(plan: TaskPlan, where: str, partitions) -> None:
    """Test-only fault hook (EOSBENCH_FAULT), off unless the job was started with one naming one of `partitions`."""
    if plan.fault not in {f"{where}:{plan.batch_id}:{partition}" for partition in partitions}:
        return
    from pyspark import TaskContext

    context = TaskContext.get()
    if context is None or context.attemptNumber() == 0:
        raise RuntimeError(f"injected fault {plan.fault}")


# ----------------------------------------------------------------------------- one transaction


def _process(plan: TaskPlan, records: SourceSlice) -> list[bytes | None | Poison]:
    """process(S') for one kept slice: a result per record, POISON for a poison record.

    None is a tombstone, carried to the output as one.
    """
    transform = TRANSFORMS[plan.process]
    return list(map(transform, records.keys, records.values))


def _transaction_headers(plan: TaskPlan, identity: bytes,
                         results: list[list[bytes | None | Poison]]) -> dict[str, tuple]:
    """Per target topic, the eos.txn header of one attempt: its identity and its size in that topic."""
    dead = sum(result is POISON for kept in results for result in kept)
    out = sum(len(kept) for kept in results) - dead
    return {plan.output_topic: txn_header(identity, out), plan.dead_letter_topic: txn_header(identity, dead)}


def _produce_slice(producer, plan: TaskPlan, records: SourceSlice, results: list[bytes | None | Poison],
                   txn_headers: dict[str, tuple]) -> tuple[int, int, list[int]]:
    """Produce one kept slice's results; return (records out, dead-lettered, input timestamps of those out).

    `txn_headers` holds, per target topic, the transaction's eos.txn header (`conf/headers.py`),
    built once per attempt: a record costs its own two header values and nothing more.
    """
    produce, poll = producer.produce, producer.poll
    output, dead_letter = plan.output_topic, plan.dead_letter_topic
    # Co-partitioned output: the input's partition number on both topics, as Kafka's TransactionalMessageCopier does.
    where = {"partition": records.partition} if plan.output_partitioning == "input" else {}
    out_txn, dead_txn = txn_headers[output], txn_headers[dead_letter]
    dead = 0
    kept_timestamps: list[int] = []
    for key, value, ts, src, in_ts, result in zip(records.keys, records.values, records.timestamps, records.src,
                                                  records.in_ts, results):
        if result is POISON:
            target, payload, txn = dead_letter, value, dead_txn
            dead += 1
        else:
            target, payload, txn = output, result, out_txn
            kept_timestamps.append(ts)
        while True:
            try:
                produce(target, payload, key, headers=[(SRC_HEADER, src), (IN_TS_HEADER, in_ts), txn], **where)
                break
            except BufferError:
                poll(0.005)
    return len(kept_timestamps), dead, kept_timestamps


# How long Step 2 with a cached producer waits for stable offsets before it takes them for held by
# an older attempt's transaction and fences it: a transaction this worker just committed may hold
# them for the few milliseconds its markers take, and a new producer costs one init.
HELD_OPEN_S = 1.0

# Seen in soaks: after a single broker's kill -9 and restart, a cached producer's records could
# stay undelivered for minutes; a bounded flush lets Step 5 replace that producer instead.
FLUSH_TIMEOUT_S = 30.0


@dataclass
class _Attempt:
    """What one attempt wrote, kept in case its commit landed although commit_transaction failed."""

    to_commit: dict
    token: str  # in the commit's offset metadata: the evidence that this attempt's commit landed
    identity: bytes
    records_out: int
    records_dead_lettered: int
    input_timestamps: list[int]
    whole: bool  # it took every record left; False: a later transaction writes the rest


def _count_commit(stats: dict, attempt: _Attempt, latencies: list, returned_ms: float | None) -> None:
    """Add one committed transaction to the task's statistics row.

    `returned_ms` is when commit_transaction returned (for visibility latency), None for a commit
    found landed by a later attempt, whose return is unknown.
    """
    stats["records_out"] += attempt.records_out
    stats["records_dead_lettered"] += attempt.records_dead_lettered
    stats["committed_partitions"] = sorted(set(stats["committed_partitions"]) | {p for _, p in attempt.to_commit})
    if returned_ms is not None and (attempt.records_out or attempt.records_dead_lettered):
        stats.update(txn=attempt.identity.decode(), committed_at_s=returned_ms / 1000.0)
    now_ms = time.time() * 1000.0 if returned_ms is None else returned_ms
    latencies.append(now_ms - np.asarray(attempt.input_timestamps, dtype=np.float64))


def run_transaction(plan: TaskPlan, txn_id: str, slices: list[SourceSlice], offsets_to_commit: dict,
                    slot: int | None = None) -> dict:
    """Steps 1-5 for one transactional id over its slices; return the task's statistics row.

    `offsets_to_commit` maps (topic, partition) to the offset to commit, or to KEEP_COMMITTED to
    re-commit the offset Step 2 reads. The row's `committed_partitions` lists what was committed.
    Slices too large for one transaction (`records_per_transaction`) commit in several. `slot`
    is slot scope's k, recorded in each commit's offset metadata.
    """
    kafka = clients.kafka_module()
    key = clients.producer_key(plan, txn_id)
    topic = next(iter(offsets_to_commit))[0]
    timings = dict.fromkeys(PHASES, 0.0)
    stats = {"records_in": sum(len(records) for records in slices), "records_out": 0, "records_dead_lettered": 0,
             "records_skipped": 0, "retries": 0, "fenced": 0, "aborted": 0, "outcome": "committed",
             "transactions": 0, "register_round_trips": 0, "first_send_after_begin_s": 0.0, "committed_partitions": [],
             "txn": "", "committed_at_s": 0.0, "txn_id": txn_id, "writer": ""}
    latencies: list[np.ndarray] = []
    unsure: _Attempt | None = None  # the last attempt whose commit_transaction failed
    transactions = attempt = 0  # transactions committed; failed attempts since the last commit
    while True:
        if attempt > plan.max_retries:
            raise SinkTaskFailed(f"{txn_id}: no commit after {plan.max_retries + 1} attempts")
        attempt_started = phase_started = time.perf_counter()
        phase, begun, attempted = "init", None, 0
        try:
            reused = clients.has_producer(key)
            producer = clients.cached_producer(plan, key, timings)                    # Step 1
            started = time.perf_counter()
            partitions = [p for _, p in offsets_to_commit]
            try:                                                                      # Step 2
                committed = clients.group_offsets_of(plan, topic, partitions, held_s=HELD_OPEN_S if reused else None)
            except OffsetsHeldOpen as held:
                # In this batch only T commits these partitions, so what holds them is an attempt
                # of T that this worker's cached producer never saw: a task that failed on another
                # worker after sending its offsets (Spark retries a task on whichever worker is
                # free). Nothing else fences it: the read waited its minute, or the broker's
                # transaction.timeout.ms, before Step 5 made the new producer that this makes now.
                SINK_LOG.info("%s: %s; a new producer fences the attempt that holds them", txn_id, held)
                timings["init"] += time.perf_counter() - started
                clients.drop_producer(key)
                producer = clients.cached_producer(plan, key, timings)
                reused, started = False, time.perf_counter()
                committed = clients.group_offsets_of(plan, topic, partitions)
            if plan.run and not reused:  # a producer made by this attempt: is this run still the pipeline's owner?
                check_owner(clients.owner_of(plan), plan.run, plan.app_id)
            check_scope(committed, topic, plan.app_id, plan.txn_scope)
            check_no_skip(plan, topic, committed, offsets_to_commit)
            if plan.replayed:
                check_replay_has_its_offsets(plan, topic, committed, offsets_to_commit)
            timings["init"] += time.perf_counter() - started
            if unsure:
                landed, unsure = unsure, None
                if all(committed[p].token == landed.token for _, p in landed.to_commit):
                    # The commit landed although commit_transaction failed (a timeout on the way back).
                    SINK_LOG.info("%s: attempt %d found the commit of an earlier attempt landed", txn_id, attempt + 1)
                    _count_commit(stats, landed, latencies, returned_ms=None)
                    transactions, attempt = transactions + 1, 0
                    if landed.whole:
                        break
                    continue
            pending = [(records, committed[records.partition].offset) for records in slices]  # Step 3
            chosen, rest = sizing.take_records(pending, sizing.records_per_transaction(plan))
            to_commit = sizing.offsets_for(offsets_to_commit, committed, rest)
            if not to_commit:
                if not transactions:
                    stats["outcome"] = "skipped_replay"
                break
            phase, phase_started = "produce", time.perf_counter()
            kept_slices = [sizing.kept_records(records, keep_from) for records, keep_from in chosen]
            results = [_process(plan, records) for records in kept_slices]
            covered = {"partition": next(iter(to_commit))[1], "slot": f"slot{slot}"}.get(plan.txn_scope)
            identity = transaction_identity(plan.app_id, covered, plan.batch_id)
            txn_headers = _transaction_headers(plan, identity, results)
            token = new_commit_token()
            tag = offset_tag(plan.txn_scope, plan.input_partitions, token, plan.run,
                             None if slot is None else (slot, plan.txn_slots))
            producer.begin_transaction()                                              # Step 4
            in_flight(True)
            begun = time.perf_counter()
            timings["produce"] += begun - phase_started
            if plan.pre_register:
                phase, phase_started = "register", begun
                by_input = plan.output_partitioning == "input"  # then dead letters are named by partition
                dead_keys = [records.partition if by_input else record_key
                             for records, kept in zip(kept_slices, results)
                             for record_key, result in zip(records.keys, kept) if result is POISON]
                stats["register_round_trips"] += producer.pre_register(
                    plan.output_topic, to_commit, tag, dead_letter=(plan.dead_letter_topic, dead_keys),
                    input_partitioned=by_input)
                timings["register"] += time.perf_counter() - phase_started
            phase, phase_started = "produce", time.perf_counter()
            stats["first_send_after_begin_s"] = phase_started - begun
            out = dead = 0
            kept_ts: list[int] = []
            for records, kept in zip(kept_slices, results):
                attempted += len(kept)
                o, d, ts = _produce_slice(producer, plan, records, kept, txn_headers)
                out, dead = out + o, dead + d
                kept_ts.extend(ts)
            undelivered = producer.flush(FLUSH_TIMEOUT_S)
            if undelivered:  # a producer stuck after a broker restart: replace it (Step 5, indefinite)
                raise kafka.KafkaException(kafka.KafkaError(
                    kafka.KafkaError._TIMED_OUT, f"{undelivered} records undelivered after {FLUSH_TIMEOUT_S:g} s"))
            flushed = time.perf_counter()
            timings["produce"] += flushed - phase_started
            sizing.learn_rate(plan, attempted, flushed - begun, overran=flushed - begun > sizing.produce_budget_s(plan))
            in_flight(False)
            phase, phase_started = "send_offsets", flushed
            clients.send_offsets(producer, key, [kafka.TopicPartition(t, p, offset, metadata=tag)
                                          for (t, p), offset in to_commit.items()], plan.group_metadata)
            timings["send_offsets"] += time.perf_counter() - phase_started
            _maybe_fault(plan, "fail-task-before-commit", [p for _, p in offsets_to_commit])
            phase, phase_started = "commit", time.perf_counter()
            unsure = _Attempt(to_commit, token, identity, out, dead, kept_ts, whole=not rest)
            producer.commit_transaction(60)
            commit_ms = time.time() * 1000.0
            timings["commit"] += time.perf_counter() - phase_started
            done, unsure = unsure, None
            _count_commit(stats, done, latencies, returned_ms=commit_ms)
            transactions, attempt = transactions + 1, 0
            if done.whole:
                break
        except Exception as exc:                                                      # Step 5
            in_flight(False)
            kind, failed_after = clients.classify(exc), time.perf_counter() - attempt_started
            if phase != "init":  # Step 1 counts its own time, and only when it succeeds
                timings[phase] += time.perf_counter() - phase_started
            if begun is not None and time.perf_counter() - begun > sizing.produce_budget_s(plan):
                sizing.learn_rate(plan, attempted, time.perf_counter() - begun, overran=True)
            # Spark runs a partition's task on whichever Python worker is free, so a cached producer
            # is routinely found fenced by its successor on another worker at once: that is not news.
            SINK_LOG.log(logging.INFO if kind == "fenced" and failed_after < 1.0 else logging.WARNING,
                         "%s: attempt %d of %d failed in %s after %.1f s (%s): %s", txn_id, attempt + 1,
                         plan.max_retries + 1, phase, failed_after, kind or "not Kafka's, failing the task", exc)
            attempt += 1
            stats["retries"] += 1
            if kind is None:
                # Abort, not only drop: Spark may retry the task on another worker whose cached
                # producer of T knows nothing of this attempt, and its transaction would hold the
                # partitions' offsets and the outputs' stable end until transaction.timeout.ms.
                clients.abort_and_drop(key)
                raise
            if kind == "denied":  # no retry can grant an ACL: abort what this attempt began, and stop
                clients.abort_and_drop(key)
                if isinstance(exc, AuthorizationFailure):
                    raise
                raise _denial(plan, txn_id, topic, exc) from exc
            if kind == "fenced":
                stats["fenced"] += 1
                clients.drop_producer(key)
            elif kind == "abortable":
                stats["aborted"] += 1
                clients.abort_or_drop(key)
            else:  # indefinite, such as a timeout: re-initialise
                clients.drop_producer(key)
        except BaseException:
            in_flight(False)
            clients.drop_producer(key)
            raise
    stats["transactions"], stats["writer"] = transactions, clients.writer_of(key)
    if stats["outcome"] == "skipped_replay":
        stats["records_skipped"] = stats["records_in"]
    else:
        stats["records_skipped"] = stats["records_in"] - stats["records_out"] - stats["records_dead_lettered"]
    stats.update({f"phase_{phase}_s": seconds for phase, seconds in timings.items()})
    stats["latency_counts"] = latency_histogram(np.concatenate(latencies) if latencies else np.empty(0)).tolist()
    return stats


def _denial(plan: TaskPlan, txn_id: str, input_topic: str, exc: Exception) -> AuthorizationFailure:
    """The one-line failure of a refused transaction, naming the transactional id, group or topic whose ACL is missing."""
    name = authorization_error_name(exc)
    if name == "TRANSACTIONAL_ID_AUTHORIZATION_FAILED":
        resource = txn_id
    elif name == "GROUP_AUTHORIZATION_FAILED":
        resource = plan.app_id
    else:  # AddPartitionsToTxn (output, dead letters) or TxnOffsetCommit (input): ask which one
        wanted = [(plan.output_topic, "WRITE"), (plan.dead_letter_topic, "WRITE"), (input_topic, "READ")]
        resource = unauthorized_topic(connection_of(plan.producer_config).librdkafka(), wanted) or ", ".join(t for t, _ in wanted)
    return authorization_failure(exc, resource)


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
        _check_whole_range(plan, topic, partition, columns)
        row = run_transaction(plan, transactional_id(plan.app_id, topic, partition), columns,
                              {(topic, partition): end})
        row.update(topic=topic, partition=partition, end_offset=end)
        yield pa.RecordBatch.from_pylist([row], schema=stats_arrow_schema())

    return task


def _check_whole_range(plan: TaskPlan, topic: str, partition: int, columns: list[SourceSlice]) -> None:
    """The task-side split guard: refuse, before Step 1, a slice that is not its partition's whole range.

    A slice commits its partition's batch end, so a slice that Spark cut out of a longer range
    (minPartitions, maxRecordsPerPartition) would commit the other slices' records unwritten.
    What Spark planned this Spark partition to read comes from the driver (`planned_ranges`); what
    the range must be comes from the query's offset log.
    """
    from pyspark import TaskContext

    context = TaskContext.get()
    planned = plan.planned_ranges
    planned = planned[context.partitionId()] if planned and context and context.partitionId() < len(planned) else None
    # A partition new to the query starts where the source planned it (its log start when data was
    # lost and failOnDataLoss=false let the source go on).
    start = plan.start_offsets.get(partition, planned[2] if planned and planned[1] == partition else 0)
    whole = (topic, partition, start, plan.end_offsets[partition])
    outside = [o for records in columns for o in (records.offsets[0], records.offsets[-1]) if not whole[2] <= o < whole[3]]
    if planned != whole or outside:
        raise SinkPreconditionError(
            f"batch {plan.batch_id}: a sink task was planned to read {topic}[{partition}] offsets"
            f" {'?' if planned is None else f'{planned[2]}..{planned[3]}'} of the batch's {whole[2]}..{whole[3]}:"
            " partition scope needs one Spark partition per Kafka partition (no minPartitions or"
            " maxRecordsPerPartition split); use --txn-scope batch for those")


# ----------------------------------------------------------------------------- slot scope


def slot_task(plan: TaskPlan, topic: str):
    """Return the mapInArrow function that runs one transaction per slot: all the partitions of one coalesced task.

    Slot k is the task's Spark partition index in the coalesced batch (on the grouped source, in
    the batch itself); the driver read which input partitions it holds from the very RDD the task
    runs on, and ships that map. A
    record of any other partition, or outside its partition's range in this batch, is refused
    before Step 1: only T(k) may commit the slot's partitions in this batch.
    """

    def task(batches: Iterator) -> Iterator:
        import pyarrow as pa
        import pyarrow.compute as pc
        from pyspark import TaskContext

        slot = TaskContext.get().partitionId()
        mine = plan.slot_partitions[slot] if slot < len(plan.slot_partitions) else ()
        columns = []
        for batch in batches:
            for partition in pc.unique(batch.column("partition")).to_pylist():
                columns.append(arrow_columns(batch.filter(pc.equal(batch.column("partition"), partition))))
        _check_slot_records(plan, topic, slot, mine, columns)
        # In offset order per partition, as Step 3 and a slice's cut into transactions need; a
        # partition that minPartitions split arrives in pieces in Spark's order.
        columns.sort(key=lambda records: (records.partition, records.offsets[0]))
        if not mine:
            return
        row = run_transaction(plan, slot_transactional_id(plan.app_id, slot), columns,
                              {(topic, p): plan.end_offsets[p] for p in mine}, slot=slot)
        row.update(topic=topic, partition=-1, end_offset=-1)
        yield pa.RecordBatch.from_pylist([row], schema=stats_arrow_schema())

    return task


def _check_slot_records(plan: TaskPlan, topic: str, slot: int, mine: tuple[int, ...],
                        columns: list[SourceSlice]) -> None:
    """Refuse, before Step 1, records of a partition outside the slot or outside its range in this batch."""
    for records in columns:
        partition = records.partition
        if records.topic != topic or partition not in mine:
            raise SinkPreconditionError(
                f"batch {plan.batch_id}: the task of slot {slot} received records of {records.topic}[{partition}],"
                f" which the driver's slot map gives to another slot ({topic} {list(mine)} are this slot's):"
                " Spark grouped the batch differently from the plan")
        start, end = plan.start_offsets.get(partition, 0), plan.end_offsets[partition]
        if not (start <= records.offsets[0] and records.offsets[-1] < end):
            raise SinkPreconditionError(
                f"batch {plan.batch_id}: the task of slot {slot} received {topic}[{partition}] offsets"
                f" {records.offsets[0]}..{records.offsets[-1]} outside the batch's {start}..{end}")
