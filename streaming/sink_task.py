"""The transactional sink's task side (`--sink kafka-eos`), as DESIGN.md specifies it.

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

Every offset the sink commits carries metadata naming its scope, and Step 2 refuses offsets that
the other scope wrote (the two scopes' transactional ids never fence each other). A partition
scope batch runs only if each Kafka partition with new offsets is read by exactly one Spark
partition: the driver counts them before any task starts, and each task checks, before Step 1,
that Spark planned it the partition's whole range. Between batches the driver re-commits the
offsets of partitions no batch committed lately, so that none expires (`OffsetKeeper`).

This module holds what runs in the tasks (and in the driver's own transactions): the TaskPlan
shipped to them, the producer cache, one transaction (`run_transaction`), the partition-scope
task and its guards. The driver side, which plans batches and runs the tasks, is
`streaming/eos_sink.py`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from bisect import bisect_left
from dataclasses import dataclass, field, fields, replace

import numpy as np

from conf.client_config import connection_of
from conf.client_log import CLIENT_LOG
from conf.failures import (AuthorizationFailure, RunFailed, authorization_error_name, authorization_failure,
                           unauthorized_topic)
from conf.headers import IN_TS_HEADER, SRC_HEADER, transaction_identity, txn_header
from streaming.process import POISON, TRANSFORMS, Poison, SourceSlice, arrow_columns
from streaming.sink_group import (
    CommittedOffset,
    SinkPreconditionError,
    check_scope,
    new_commit_token,
    offset_tag,
    read_committed_offsets,
)
from streaming.stats import PHASES, latency_histogram, stats_arrow_schema


# A retried attempt is one line on the task's stderr, which is the executor's log (the driver's in
# local mode), in Spark's own format; without it a slow batch after a fault looks clean.
SINK_LOG = logging.getLogger("eosbench.sink")
if not SINK_LOG.handlers:
    _stderr = logging.StreamHandler()
    _stderr.setFormatter(logging.Formatter("%(asctime)s %(levelname)s eosbench sink: %(message)s", "%y/%m/%d %H:%M:%S"))
    SINK_LOG.addHandler(_stderr)

# Per Python worker: Spark reuses workers across tasks, so producers and consumers live on. They
# are keyed by their whole client configuration too: a process that runs sinks against several
# clusters in turn (a sweep over broker counts) must never reuse a client of a stopped one.
_PRODUCERS: dict[tuple, object] = {}
_OFFSET_READERS: dict[tuple, object] = {}
# In offsets_to_commit: commit the offset Step 2 reads, unchanged (the keeper's refresh).
KEEP_COMMITTED = None


class ExactlyOnceViolation(RunFailed):
    """An invariant of the protocol broke; the job stops rather than write twice or lose."""


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
    txn_scope: str = "partition"
    start_offsets: dict = field(default_factory=dict)  # each partition's range start in this batch
    # (topic, partition, from, until) of each Spark partition, as Spark planned it; None if unknown
    planned_ranges: tuple | None = None
    # A batch the previous run may have committed before it died: Spark runs it again at a restart.
    replayed: bool = False
    sink_client: str = "librdkafka"  # or "kafka-python", the client pre-registration needs
    input_partitions: int = 0  # the input's partition count, recorded in each commit's offset metadata


# ----------------------------------------------------------------------------- clients


def _kafka():
    import confluent_kafka

    return confluent_kafka


def transactional_id(app_id: str, topic: str, partition: int) -> str:
    """T(p) for partition scope."""
    return f"{app_id}.{topic}.{partition}"


def producer_key(plan: TaskPlan, txn_id: str) -> tuple:
    """The cache key of T(p)'s producer: the id and everything the client is built from."""
    return txn_id, tuple(sorted(plan.producer_config.items())), plan.sink_client


def _producer(plan: TaskPlan, key: tuple, timings: dict[str, float]):
    """Step 1: the cached producer for T(p), or a new one that has fenced its predecessors."""
    txn_id = key[0]
    producer = _PRODUCERS.get(key)
    if producer is None:
        started = time.perf_counter()
        if plan.sink_client == "kafka-python":
            from streaming.preregister import PreRegisteringProducer

            producer = PreRegisteringProducer(plan.producer_config, txn_id, plan.app_id)
        else:
            producer = _kafka().Producer({**plan.producer_config, "transactional.id": txn_id}, logger=CLIENT_LOG)
            _await_learned_broker(producer, plan.output_topic)
        producer.init_transactions(60)
        timings["init"] += time.perf_counter() - started
        _PRODUCERS[key] = producer
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


def _drop_producer(key: tuple) -> None:
    """Forget a producer; the next one's init_transactions aborts whatever it left open."""
    producer = _PRODUCERS.pop(key, None)
    if producer is not None:
        try:
            producer.purge()
            producer.flush(0)
        except Exception:  # a fenced or fatal producer refuses even this; it is gone either way
            pass


def _classify(exc: Exception) -> str | None:
    """Step 5's cases: 'denied' (an ACL is missing), 'fenced' (or fatal), 'abortable', 'indefinite', or None for not Kafka's."""
    if isinstance(exc, AuthorizationFailure) or authorization_error_name(exc):
        return "denied"
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


def group_offsets_of(plan: TaskPlan, topic: str, partitions: list[int]) -> dict[int, CommittedOffset]:
    """Step 2: the group's committed offsets of these partitions (stable), with the scope that wrote them."""
    cluster = connection_of(plan.producer_config)
    reader = _OFFSET_READERS.get((plan.app_id, cluster))
    if reader is None:
        reader = _kafka().Consumer(cluster.librdkafka(**{
            "group.id": plan.app_id, "isolation.level": "read_committed", "enable.auto.commit": False,
        }), logger=CLIENT_LOG)
        _OFFSET_READERS[(plan.app_id, cluster)] = reader
    return read_committed_offsets(reader, topic, partitions, plan.app_id)


def _maybe_fault(plan: TaskPlan, where: str, partition: int) -> None:
    """Test-only fault hook (EOSBENCH_FAULT), off unless the job was started with one."""
    if plan.fault != f"{where}:{plan.batch_id}:{partition}":
        return
    from pyspark import TaskContext

    context = TaskContext.get()
    if context is None or context.attemptNumber() == 0:
        raise RuntimeError(f"injected fault {plan.fault}")


# ----------------------------------------------------------------------------- one transaction


def _process(plan: TaskPlan, records: SourceSlice, keep_from: int) -> list[bytes | None | Poison]:
    """process(S') for one slice: a result per record at or above keep_from, POISON for a poison record.

    None is a tombstone, carried to the output as one.
    """
    transform = TRANSFORMS[plan.process]
    return [transform(key, value) for key, value, offset in zip(records.keys, records.values, records.offsets)
            if offset >= keep_from]


def _kept_keys(records: SourceSlice, keep_from: int) -> Iterator:
    """The keys of the records at or above keep_from, in order (they line up with `_process`'s results)."""
    return (key for key, offset in zip(records.keys, records.offsets) if offset >= keep_from)


def _transaction_headers(plan: TaskPlan, identity: bytes,
                         results: list[list[bytes | None | Poison]]) -> dict[str, tuple]:
    """Per target topic, the eos.txn header of one attempt: its identity and its size in that topic."""
    dead = sum(result is POISON for kept in results for result in kept)
    out = sum(len(kept) for kept in results) - dead
    return {plan.output_topic: txn_header(identity, out), plan.dead_letter_topic: txn_header(identity, dead)}


def _produce_slice(producer, plan: TaskPlan, records: SourceSlice, keep_from: int, results: list[bytes | None | Poison],
                   txn_headers: dict[str, tuple]) -> tuple[int, int, list[int]]:
    """Produce one slice's results; return (records out, dead-lettered, input timestamps of those out).

    `txn_headers` holds, per target topic, the transaction's eos.txn header (`conf/headers.py`),
    built once per attempt: a record costs its own two header values and nothing more.
    """
    produce, poll = producer.produce, producer.poll
    output, dead_letter = plan.output_topic, plan.dead_letter_topic
    out_txn, dead_txn = txn_headers[output], txn_headers[dead_letter]
    out = dead = 0
    kept_timestamps: list[int] = []
    rows = zip(records.keys, records.values, records.offsets, records.timestamps, records.src, records.in_ts)
    kept = ((key, value, ts, src, in_ts) for key, value, offset, ts, src, in_ts in rows if offset >= keep_from)
    for (key, value, ts, src, in_ts), result in zip(kept, results):
        if result is POISON:
            target, payload, txn = dead_letter, value, dead_txn
            dead += 1
        else:
            target, payload, txn = output, result, out_txn
            out += 1
            kept_timestamps.append(ts)
        while True:
            try:
                produce(target, payload, key, headers=[(SRC_HEADER, src), (IN_TS_HEADER, in_ts), txn])
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


def _send_offsets(producer, key: tuple, offsets: list, group_metadata) -> None:
    """send_offsets_to_transaction, bounded even where librdkafka ignores the timeout."""
    failure: list[BaseException] = []

    def call() -> None:
        try:
            producer.send_offsets_to_transaction(offsets, group_metadata, SEND_OFFSETS_TIMEOUT_S)
        except BaseException as exc:  # handed to the task's thread, which classifies it (Step 5)
            failure.append(exc)
    thread = threading.Thread(target=call, name=f"send-offsets {key[0]}", daemon=True)
    thread.start()
    thread.join(SEND_OFFSETS_TIMEOUT_S + 5)
    _ABANDONED[:] = [(old, blocked) for old, blocked in _ABANDONED if blocked.is_alive()]
    if thread.is_alive():
        _PRODUCERS.pop(key, None)
        _ABANDONED.append((producer, thread))
        kafka = _kafka()
        raise kafka.KafkaException(kafka.KafkaError(
            kafka.KafkaError._TIMED_OUT, f"send_offsets_to_transaction still blocked after {SEND_OFFSETS_TIMEOUT_S + 5:g} s"))
    if failure:
        raise failure[0]


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


# A transaction must commit within transaction.timeout.ms, or the coordinator aborts it and every
# retry repeats it. So once a worker has seen how fast it produces, a transaction takes only the
# records it can produce and flush in this share of the timeout (the rest is for the commit), and
# a slice larger than that commits in several transactions, each with the offset of its last
# record's successor: Step 3 of the next one starts there. An attempt that overran halves what
# the next one takes, so a slowdown the estimate missed converges within the retries.
TXN_TIMEOUT_SHARE = 0.5
DEFAULT_TRANSACTION_TIMEOUT_MS = 60_000  # librdkafka's and kafka-python's transaction.timeout.ms
_RECORDS_PER_SECOND: dict[str, float] = {}  # per output topic, on this worker
_RECORDS_CAP: dict[str, int] = {}  # per output topic, set when an attempt overran


def produce_budget_s(plan: TaskPlan) -> float:
    """How long a transaction may spend producing and flushing its records."""
    timeout_ms = float(plan.producer_config.get("transaction.timeout.ms", DEFAULT_TRANSACTION_TIMEOUT_MS))
    return timeout_ms / 1000.0 * TXN_TIMEOUT_SHARE


def records_per_transaction(plan: TaskPlan) -> int | None:
    """The most records one transaction takes on this worker (None: no limit learnt yet)."""
    rate, cap = _RECORDS_PER_SECOND.get(plan.output_topic), _RECORDS_CAP.get(plan.output_topic)
    limits = [limit for limit in (cap, None if rate is None else int(rate * produce_budget_s(plan))) if limit]
    return max(1, min(limits)) if limits else None


def _learn_rate(plan: TaskPlan, records: int, seconds: float, overran: bool) -> None:
    """Note how fast this worker produced; an overrun also halves what the next transaction takes."""
    if records and seconds > 0:
        _RECORDS_PER_SECOND[plan.output_topic] = records / seconds
    if overran:
        _RECORDS_CAP[plan.output_topic] = max(1, records // 2)
    elif plan.output_topic in _RECORDS_CAP and records >= _RECORDS_CAP[plan.output_topic]:
        del _RECORDS_CAP[plan.output_topic]  # the rate alone bounds it again


def _cut(records: SourceSlice, start: int, stop: int) -> SourceSlice:
    """Records [start, stop) of a slice, as a slice of their own."""
    return replace(records, **{f.name: getattr(records, f.name)[start:stop] for f in fields(records)
                               if isinstance(getattr(records, f.name), list)})


def _first_kept(records: SourceSlice, keep_from: int) -> int:
    """The index of the slice's first record at or above keep_from (offsets ascend)."""
    return bisect_left(records.offsets, keep_from)


def take_records(pending: list[tuple[SourceSlice, int]], cap: int | None
                 ) -> tuple[list[tuple[SourceSlice, int]], list[tuple[SourceSlice, int]]]:
    """Split Step 3's (slice, keep_from) pairs into what one transaction writes (at most `cap` kept records) and the rest."""
    if cap is None:
        return pending, []
    taken: list[tuple[SourceSlice, int]] = []
    room = cap
    for index, (records, keep_from) in enumerate(pending):
        first = _first_kept(records, keep_from)
        if len(records) - first <= room:
            taken.append((records, keep_from))
            room -= len(records) - first
            continue
        cut = first + room
        if room:
            taken.append((_cut(records, 0, cut), keep_from))
        return taken, [(_cut(records, cut, len(records)), keep_from), *pending[index + 1:]]
    return taken, []


def offsets_for(offsets_to_commit: dict, committed: dict[int, CommittedOffset],
                rest: list[tuple[SourceSlice, int]]) -> dict:
    """Step 3's offsets to commit: each batch end above c, or, where records are left for a later
    transaction, the offset of the first of them; KEEP_COMMITTED commits c itself."""
    resume_at: dict[int, int] = {}
    for records, keep_from in rest:
        first = _first_kept(records, keep_from)
        if first < len(records) and records.partition not in resume_at:
            resume_at[records.partition] = records.offsets[first]
    to_commit = {}
    for (t, p), end in offsets_to_commit.items():
        c = committed[p].offset
        if end is KEEP_COMMITTED:
            if c >= 0:
                to_commit[(t, p)] = c
        elif resume_at.get(p, end) > c:
            to_commit[(t, p)] = resume_at.get(p, end)
    return to_commit


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


def run_transaction(plan: TaskPlan, txn_id: str, slices: list[SourceSlice], offsets_to_commit: dict) -> dict:
    """Steps 1-5 for one transactional id over its slices; return the task's statistics row.

    `offsets_to_commit` maps (topic, partition) to the offset to commit, or to KEEP_COMMITTED to
    re-commit the offset Step 2 reads. The row's `committed_partitions` lists what was committed.
    Slices too large for one transaction (`records_per_transaction`) commit in several.
    """
    kafka = _kafka()
    key = producer_key(plan, txn_id)
    topic = next(iter(offsets_to_commit))[0]
    timings = dict.fromkeys(PHASES, 0.0)
    stats = {"records_in": sum(len(records) for records in slices), "records_out": 0, "records_dead_lettered": 0,
             "records_skipped": 0, "retries": 0, "fenced": 0, "aborted": 0, "outcome": "committed",
             "transactions": 0, "register_round_trips": 0, "first_send_after_begin_s": 0.0, "committed_partitions": [],
             "txn": "", "committed_at_s": 0.0}
    latencies: list[np.ndarray] = []
    unsure: _Attempt | None = None  # the last attempt whose commit_transaction failed
    transactions = attempt = 0  # transactions committed; failed attempts since the last commit
    while True:
        if attempt > plan.max_retries:
            raise SinkTaskFailed(f"{txn_id}: no commit after {plan.max_retries + 1} attempts")
        attempt_started = phase_started = time.perf_counter()
        phase, begun, attempted = "init", None, 0
        try:
            producer = _producer(plan, key, timings)                                  # Step 1
            started = time.perf_counter()
            committed = group_offsets_of(plan, topic, [p for _, p in offsets_to_commit])  # Step 2
            check_scope(committed, topic, plan.app_id, plan.txn_scope)
            if plan.replayed:
                _check_replay_has_its_offsets(plan, topic, committed, offsets_to_commit)
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
            chosen, rest = take_records(pending, records_per_transaction(plan))
            to_commit = offsets_for(offsets_to_commit, committed, rest)
            if not to_commit:
                if not transactions:
                    stats["outcome"] = "skipped_replay"
                break
            phase, phase_started = "produce", time.perf_counter()
            results = [_process(plan, records, keep_from) for records, keep_from in chosen]
            identity = transaction_identity(next(iter(to_commit))[1] if plan.txn_scope == "partition" else None,
                                            plan.batch_id)
            txn_headers = _transaction_headers(plan, identity, results)
            token = new_commit_token()
            tag = offset_tag(plan.txn_scope, plan.input_partitions, token)
            producer.begin_transaction()                                              # Step 4
            begun = time.perf_counter()
            timings["produce"] += begun - phase_started
            if plan.pre_register:
                phase, phase_started = "register", begun
                dead_keys = [record_key for (records, keep_from), kept in zip(chosen, results)
                             for record_key, result in zip(_kept_keys(records, keep_from), kept) if result is POISON]
                stats["register_round_trips"] += producer.pre_register(
                    plan.output_topic, to_commit, tag, dead_letter=(plan.dead_letter_topic, dead_keys))
                timings["register"] += time.perf_counter() - phase_started
            phase, phase_started = "produce", time.perf_counter()
            stats["first_send_after_begin_s"] = phase_started - begun
            out = dead = 0
            kept_ts: list[int] = []
            for (records, keep_from), kept in zip(chosen, results):
                attempted += len(kept)
                o, d, ts = _produce_slice(producer, plan, records, keep_from, kept, txn_headers)
                out, dead = out + o, dead + d
                kept_ts.extend(ts)
            undelivered = producer.flush(FLUSH_TIMEOUT_S)
            if undelivered:  # a producer stuck after a broker restart: replace it (Step 5, indefinite)
                raise kafka.KafkaException(kafka.KafkaError(
                    kafka.KafkaError._TIMED_OUT, f"{undelivered} records undelivered after {FLUSH_TIMEOUT_S:g} s"))
            flushed = time.perf_counter()
            timings["produce"] += flushed - phase_started
            _learn_rate(plan, attempted, flushed - begun, overran=flushed - begun > produce_budget_s(plan))
            phase, phase_started = "send_offsets", flushed
            _send_offsets(producer, key, [kafka.TopicPartition(t, p, offset, metadata=tag)
                                          for (t, p), offset in to_commit.items()], plan.group_metadata)
            timings["send_offsets"] += time.perf_counter() - phase_started
            _maybe_fault(plan, "fail-task-before-commit", next(iter(offsets_to_commit))[1])
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
            kind, failed_after = _classify(exc), time.perf_counter() - attempt_started
            if phase != "init":  # Step 1 counts its own time, and only when it succeeds
                timings[phase] += time.perf_counter() - phase_started
            if begun is not None and time.perf_counter() - begun > produce_budget_s(plan):
                _learn_rate(plan, attempted, time.perf_counter() - begun, overran=True)
            # Spark runs a partition's task on whichever Python worker is free, so a cached producer
            # is routinely found fenced by its successor on another worker at once: that is not news.
            SINK_LOG.log(logging.INFO if kind == "fenced" and failed_after < 1.0 else logging.WARNING,
                         "%s: attempt %d of %d failed in %s after %.1f s (%s): %s", txn_id, attempt + 1,
                         plan.max_retries + 1, phase, failed_after, kind or "not Kafka's, failing the task", exc)
            attempt += 1
            stats["retries"] += 1
            if kind is None:
                _drop_producer(key)  # never leave a worker with a producer inside a transaction
                raise
            if kind == "denied":  # no retry can grant an ACL: abort what this attempt began, and stop
                _abort_and_drop(key)
                if isinstance(exc, AuthorizationFailure):
                    raise
                raise _denial(plan, txn_id, topic, exc) from exc
            if kind == "fenced":
                stats["fenced"] += 1
                _drop_producer(key)
            elif kind == "abortable":
                stats["aborted"] += 1
                try:
                    _PRODUCERS[key].abort_transaction(60)
                except Exception:
                    _drop_producer(key)  # a new producer's init aborts the transaction instead
            else:  # indefinite, such as a timeout: re-initialise
                _drop_producer(key)
        except BaseException:
            _drop_producer(key)
            raise
    stats["transactions"] = transactions
    if stats["outcome"] == "skipped_replay":
        stats["records_skipped"] = stats["records_in"]
    else:
        stats["records_skipped"] = stats["records_in"] - stats["records_out"] - stats["records_dead_lettered"]
    stats.update({f"phase_{phase}_s": seconds for phase, seconds in timings.items()})
    stats["latency_counts"] = latency_histogram(np.concatenate(latencies) if latencies else np.empty(0)).tolist()
    return stats


def _abort_and_drop(key: tuple) -> None:
    """Abort the producer's transaction if it can, so that nothing stays open on the outputs, then forget it."""
    producer = _PRODUCERS.get(key)
    if producer is not None:
        try:
            producer.abort_transaction(30)
        except Exception:  # not in a transaction, or refused: the next init of this id aborts it
            pass
    _drop_producer(key)


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


def _check_replay_has_its_offsets(plan: TaskPlan, topic: str, committed: dict[int, CommittedOffset],
                                  offsets_to_commit: dict) -> None:
    """Refuse a replayed batch whose partition's group offset is below the batch's start.

    The previous batch ended in the sink's commits, so every partition's offset was at least the
    batch's start. Lower (none at all, mostly) means the offset expired or was deleted while the
    job was down, and then nothing tells whether the run that died committed this batch's slice:
    Step 3 would write it again.
    """
    below = [p for (_, p), end in offsets_to_commit.items()
             if end is not KEEP_COMMITTED and committed[p].offset < plan.start_offsets.get(p, -1)]
    if below:
        p = below[0]
        raise SinkPreconditionError(
            f"batch {plan.batch_id} is run again after a restart, but group {plan.app_id!r} has offset"
            f" {committed[p].offset} for {topic}[{p}], below the batch's start {plan.start_offsets[p]}: it expired"
            " (offsets.retention.minutes) or was deleted, and the sink cannot tell which of the batch's records it"
            " already wrote. Delete the query's checkpoint and start with --starting-offsets output, which resumes"
            " each partition after the last record the output and dead-letter topics hold from it")


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
        del row["committed_partitions"]
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
    whole = (topic, partition, plan.start_offsets.get(partition, 0), plan.end_offsets[partition])
    outside = [o for records in columns for o in (records.offsets[0], records.offsets[-1]) if not whole[2] <= o < whole[3]]
    if planned != whole or outside:
        raise SinkPreconditionError(
            f"batch {plan.batch_id}: a sink task was planned to read {topic}[{partition}] offsets"
            f" {'?' if planned is None else f'{planned[2]}..{planned[3]}'} of the batch's {whole[2]}..{whole[3]}:"
            " partition scope needs one Spark partition per Kafka partition (no minPartitions or"
            " maxRecordsPerPartition split); use --txn-scope batch for those")
