"""`eosbench produce`: Java ProducerPerformance's loop, transactional, seeded and abortable.

The loop is Java's, step for step: draw the payload, begin a transaction if none is open, send,
and reach a commit point when the transaction duration has passed (or, with eosbench's
`--records-per-transaction`, when the transaction is full), then once more after the loop. At
each commit point a non-zero `--transaction-abort-ratio` draws `next_double()` from the same
SplittableRandom that drew the payloads and aborts when it is below the ratio (KIP-1260); a zero
ratio draws nothing, so such a run's payloads are byte-identical to Java's.

Latency is measured as Java measures it, from the send to the acknowledgement. Java's callback
runs on the client's I/O thread the moment the response arrives; librdkafka queues the delivery
report and the callback runs inside `poll()`. So the loop polls while it waits for its next send
(with the wait as the timeout, in slices where the wait is shorter than poll's millisecond), and
while it is sending at full speed it polls at least every POLL_INTERVAL_NS: a record's latency
includes at most that much wait for the next poll, far below the millisecond Java prints.

Differences from Java, each deliberate:
- Latency runs from the *intended* send time (start + i / throughput when throttled), measured
  with perf_counter_ns, so a stalled producer cannot hide its stall (coordinated omission).
- Each record's key is its sequence number in ASCII and it carries an `eos.run_id` header, so
  every downstream check is multiset arithmetic over integers.
- An expired record (KIP-91) inside a transaction aborts that transaction, and the summary says
  so; nothing is dropped silently.
- A transaction chosen for abort is flushed first, so its records reach the log and are then
  aborted, as in a real failure; Java's abortTransaction drops whatever is still unsent.

This module is the loop and its transactions. What each record carries is drawn in
`payloads.py`, acknowledgements are gathered and turned into Java's lines in `perf_stats.py`, and
`--resume` finds where an interrupted load stands in `resume.py`.
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import TextIO

import numpy as np
from confluent_kafka import KafkaError, KafkaException, Producer

from conf.client_log import CLIENT_LOG
from conf.failures import RunFailed, SettingsError, authorization_failure, bind_failure, kafka_failure, kafka_reason
from conf.produce_settings import ProduceSettings
from producers.metrics import ProducerMetrics
from producers.payloads import PAYLOAD_CHUNK_RECORDS, PayloadSource
from producers.perf_stats import AckRing, LatencySummary, PerfStats, now_ms
from producers.resume import RUN_ID_HEADER, find_resume_point
from producers.splittable_random import SplittableRandom

# Serve delivery reports at least this often while sending: polling costs about 0.5 us, so this
# is ~1 % of an unthrottled run's time, and bounds the wait a latency can include to 0.05 ms.
POLL_INTERVAL_NS = 50_000
# poll() waits in whole milliseconds; a shorter wait for the next send sleeps in slices this long,
# polling between them.
WAIT_SLICE_NS = 200_000
DRAIN_EVERY_RECORDS = 256  # hand acknowledgements to the statistics (numpy work) this often
# librdkafka's statistics: how the run learns that an idempotent producer has its producer id,
# and what --print-metrics prints. Kept as text until read, so a statistics report costs a copy.
STATISTICS_INTERVAL_MS = 100
READY_TIMEOUT_S = 30.0
TRANSACTION_CALL_TIMEOUT_S = 60.0


class ProduceFailed(RunFailed):
    """The run cannot go on: fenced by a newer producer, or a fatal client error.

    What the input or the environment did wrong is raised as their kinds (conf/failures.py):
    a property librdkafka rejects as SettingsError, a taken metrics port or a broker that
    does not answer as EnvironmentFailure.
    """


# ----------------------------------------------------------------------------- summary


@dataclass
class TransactionTally:
    """Transactions and their records, by outcome."""

    committed: int = 0
    aborted: int = 0
    aborted_by_ratio: int = 0
    aborted_by_expiry: int = 0
    records_committed: int = 0
    records_aborted: int = 0
    decisions: list[bool] = field(default_factory=list)  # True = aborted, in commit-point order
    log: list[tuple[int, int, str]] = field(default_factory=list)  # (first seq, records, outcome)


@dataclass
class ProduceSummary:
    """The machine-readable result of one run (`--output-json`)."""

    run_id: str
    topic: str
    bootstrap: str
    transactional_id: str | None
    seed: int
    transaction_abort_ratio: float
    first_seq: int
    records_sent: int
    records_acked: int
    records_committed: int
    records_aborted: int
    records_expired: int
    records_failed: int
    transactions_committed: int
    transactions_aborted: int
    transactions_aborted_by_ratio: int
    transactions_aborted_by_expiry: int
    abort_overhead_ratio: float | None
    goodput_records_per_sec: float
    total: LatencySummary
    steady_state: LatencySummary | None
    abort_decisions: list[bool]
    transactions: list[tuple[int, int, str]]
    first_error: str | None

    def to_json(self) -> str:
        """Serialise as indented JSON."""
        return json.dumps(asdict(self), indent=2)


# ----------------------------------------------------------------------------- the run


class ProducerPerformance:
    """One run of `eosbench produce`."""

    def __init__(self, settings: ProduceSettings, out: TextIO = sys.stdout,
                 metrics: ProducerMetrics | None = None,
                 progress: Callable[[int, int], None] | None = None,
                 producer_factory: Callable[..., Producer] = Producer):
        self.settings = settings
        self.producer_factory = producer_factory  # visible for testing: a fake client needs no broker
        self.out = out
        self.progress = progress
        self.client_config = settings.client_config()
        self.transactional = settings.transactions_enabled
        self.duration_ms = settings.effective_transaction_duration_ms
        self.records_per_transaction = settings.records_per_transaction
        queue_limit = int(self.client_config.get("queue.buffering.max.messages", 100_000))
        self.acks = AckRing(max(20, int(np.ceil(np.log2(max(2, queue_limit) * 4)))))
        self.tally = TransactionTally()
        self.run_id = settings.run_id or uuid.uuid4().hex[:12]
        self.metrics = metrics or (
            ProducerMetrics(self.run_id, settings.transaction_abort_ratio) if settings.metrics_port else None
        )
        self.client_config.setdefault("statistics.interval.ms", str(STATISTICS_INTERVAL_MS))
        self._client_stats_json = "{}"
        self._client_stats_reports = 0
        self._producer: Producer | None = None

    # .................................................................. client

    def _new_producer(self) -> Producer:
        try:
            return self.producer_factory(self.client_config, logger=CLIENT_LOG, stats_cb=self._keep_client_stats)
        except KafkaException as exc:
            raise SettingsError(f"invalid producer configuration: {kafka_reason(exc)}") from exc

    def _keep_client_stats(self, stats_json: str) -> None:
        self._client_stats_json = stats_json
        self._client_stats_reports += 1

    @property
    def client_stats(self) -> dict:
        """librdkafka's latest statistics report."""
        return json.loads(self._client_stats_json)

    def _fresh_client_stats(self, producer: Producer) -> dict:
        """Wait for a statistics report made after this call, so that it counts everything done so far."""
        interval_s = int(self.client_config["statistics.interval.ms"]) / 1000
        seen, deadline = self._client_stats_reports, time.monotonic() + 2 * interval_s + 1
        while interval_s > 0 and self._client_stats_reports == seen and time.monotonic() < deadline:
            producer.poll(min(interval_s, 0.1))
        return self.client_stats

    def _wait_until_ready(self, producer: Producer) -> None:
        """Return once the producer can send: the topic's metadata is in and, when idempotent, its producer id.

        Java's first send() blocks until the topic's metadata has arrived, and its sender asks for a
        producer id as soon as it connects. librdkafka's produce() never blocks and its idempotent
        producer may retry for its id on a 500 ms timer, so a clock started at once would charge
        the first half second's records with the client's start-up. (A transactional run got its
        id from init_transactions already.)
        """
        deadline = time.monotonic() + READY_TIMEOUT_S
        try:
            producer.list_topics(self.settings.topic, timeout=READY_TIMEOUT_S)
        except KafkaException:
            return  # the run itself reports what is wrong
        idempotent = self.client_config.get("enable.idempotence", "false").lower() in ("true", "1")
        if self.transactional or not idempotent or int(self.client_config["statistics.interval.ms"]) <= 0:
            return
        while time.monotonic() < deadline:
            producer.poll(0.01)
            if self.client_stats.get("eos", {}).get("idemp_state") == "Assigned":
                return

    def _refused_resource(self, error: KafkaError) -> str:
        """The resource an authorization refusal is about: the transactional id, else the topic."""
        if error.code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
            return self.client_config["transactional.id"]
        return self.settings.topic

    def _end_transaction(self, producer: Producer, commit: bool) -> bool:
        """Commit or abort; return True if it committed. An expiry turns a commit into an abort."""
        if not commit:
            # Write the transaction's records before aborting it, so that an abort costs what a
            # real one does (records in the log, then an abort marker). librdkafka would
            # otherwise purge still-queued records and the abort would cost almost nothing.
            producer.flush(TRANSACTION_CALL_TIMEOUT_S)
        call = producer.commit_transaction if commit else producer.abort_transaction
        deadline = time.monotonic() + 10 * TRANSACTION_CALL_TIMEOUT_S
        while True:
            try:
                call(TRANSACTION_CALL_TIMEOUT_S)
                return commit
            except KafkaException as exc:
                error: KafkaError = exc.args[0]
                denied = authorization_failure(error, self._refused_resource(error))
                if denied is not None:  # no retry helps; abort so that nothing stays open, then stop
                    if commit:
                        try:
                            producer.abort_transaction(TRANSACTION_CALL_TIMEOUT_S)
                        except KafkaException:
                            pass  # the next init_transactions of this id aborts it
                    raise denied from exc
                if error.fatal():
                    raise ProduceFailed(
                        f"transactional.id {self.client_config['transactional.id']}: {error.str()}"
                        " (fenced by a newer producer, or a fatal client error)"
                    ) from exc
                if commit and error.txn_requires_abort():
                    call, commit = producer.abort_transaction, False
                    continue
                if error.retriable() and time.monotonic() < deadline:
                    continue  # e.g. the broker is paused: the same call resumes where it was
                raise kafka_failure(error, f"cannot {'commit' if commit else 'abort'} a transaction: {error.str()}") from exc

    # .................................................................. loop

    def open(self) -> None:
        """Serve /metrics and create the client, so that a taken port or a rejected property fails before any broker is asked."""
        s = self.settings
        if self._producer is not None:
            return
        if self.metrics and s.metrics_port:
            try:
                self.metrics.serve(s.metrics_port, s.metrics_host, s.metrics_tls)
            except OSError as exc:
                raise bind_failure(exc, s.metrics_host, s.metrics_port) from exc
        self._producer = self._new_producer()

    def run(self) -> ProduceSummary:
        """Produce every record, print Java's lines, and return the summary."""
        s = self.settings
        self.open()
        producer = self._producer
        if self.transactional:
            try:
                producer.init_transactions(TRANSACTION_CALL_TIMEOUT_S)
            except KafkaException as exc:
                raise (authorization_failure(exc, self._refused_resource(exc.args[0]))
                       or kafka_failure(exc, f"init_transactions failed at {s.bootstrap}: {kafka_reason(exc)}")) from exc

        self._wait_until_ready(producer)
        first_seq = 0
        if s.resume:
            # init_transactions above fenced the interrupted producer and aborted its open
            # transaction, so the committed tail is now final.
            first_seq, found_run_id = find_resume_point(s.connection, s.topic, s.run_id)
            self.run_id = found_run_id or self.run_id
            print(f"Resuming run {self.run_id} at sequence number {first_seq}.", file=self.out, flush=True)
        num_records = max(0, s.num_records - first_seq)
        warmup = max(0, s.warmup_records - first_seq)

        chunk = PAYLOAD_CHUNK_RECORDS if not self.records_per_transaction else min(PAYLOAD_CHUNK_RECORDS, self.records_per_transaction)
        payloads = PayloadSource(s, SplittableRandom(s.seed), chunk)
        payload_bytes = payloads.mean_payload_bytes()
        headers = [(RUN_ID_HEADER, str(self.run_id).encode())]
        topic = s.topic
        acks = self.acks
        on_delivery = acks.on_delivery
        mask = acks.mask
        sent_ns = acks.sent_ns
        produce = producer.produce
        poll = producer.poll
        clock_ns = time.perf_counter_ns
        sleep = time.sleep

        def wait_until(intended_ns: int) -> None:
            """Serve delivery reports until the intended send time, as Java's callbacks run while it waits."""
            while True:
                ahead = intended_ns - clock_ns()
                if ahead <= 0:
                    return
                if ahead >= 1_000_000:
                    poll((ahead // 1_000_000) / 1000)  # returns as soon as a report has been served
                else:
                    poll(0)
                    sleep(min(ahead, WAIT_SLICE_NS) / 1e9)

        if warmup > 0:
            print(f"Warmup first {warmup} records. Steady state results will print after the complete test summary.",
                  file=self.out, flush=True)
        stats = PerfStats(max(1, num_records), s.reporting_interval, steady_state=False, out=self.out)
        steady: PerfStats | None = None
        steady_first_seq = first_seq + warmup

        def drain() -> None:
            latency_ns, seqs = acks.take()
            if latency_ns.size == 0:
                stats.maybe_report(now_ms())
                if steady:
                    steady.maybe_report(now_ms())
                return
            latency_ms = latency_ns / 1e6
            at = now_ms()
            stats.record_many(latency_ms, int(latency_ms.size * payload_bytes), at)
            if steady is not None:
                in_steady = latency_ms[seqs >= steady_first_seq]
                steady.record_many(in_steady, int(in_steady.size * payload_bytes), at)
            if self.metrics:
                self.metrics.send_latency.observe_many(latency_ns / 1e9)
            if self.progress:
                self.progress(acks.acked, num_records)

        throttled = s.throughput > 0
        interval_ns = int(1e9 / s.throughput) if throttled else 0
        txn_records = 0
        txn_start_ns = 0
        txn_failures_at_begin = 0
        duration_ns = self.duration_ms * 1_000_000 if self.duration_ms is not None else None
        per_transaction = self.records_per_transaction
        transactional = self.transactional
        sent = 0

        def commit_point() -> None:
            nonlocal txn_records
            abort = s.transaction_abort_ratio > 0.0 and payloads.next_double() < s.transaction_abort_ratio
            committed = self._end_transaction(producer, commit=not abort)
            self.tally.decisions.append(abort)
            outcome = "committed" if committed else "aborted"
            self.tally.log.append((first_seq + sent - txn_records, txn_records, outcome))
            if committed:
                self.tally.committed += 1
                self.tally.records_committed += txn_records
            else:
                self.tally.aborted += 1
                self.tally.records_aborted += txn_records
                if abort:
                    self.tally.aborted_by_ratio += 1
                elif acks.expired + acks.failed > txn_failures_at_begin:
                    self.tally.aborted_by_expiry += 1
            if self.metrics:
                self.metrics.transaction_ended(outcome, txn_records, (time.perf_counter_ns() - txn_start_ns) / 1e9)
                self.metrics.set_abort_overhead(sent, self.tally.records_committed)
            txn_records = 0

        start_ns = last_poll_ns = time.perf_counter_ns()
        for i in range(num_records):
            payload = payloads.payload(first_seq + i)
            if transactional and txn_records == 0:
                producer.begin_transaction()
                txn_start_ns = time.perf_counter_ns()
                txn_failures_at_begin = acks.expired + acks.failed
            if i == warmup and warmup > 0:
                steady = PerfStats(num_records - warmup, s.reporting_interval, steady_state=True, out=self.out)
                stats.suppress_print = True
            seq = first_seq + i
            now = clock_ns()
            if throttled:
                intended = start_ns + i * interval_ns
                if intended > now:
                    wait_until(intended)
                    now = last_poll_ns = intended
            else:
                intended = now
            sent_ns[seq & mask] = intended
            while True:
                try:
                    produce(topic, payload, str(seq).encode(), headers=headers, on_delivery=on_delivery)
                    break
                except BufferError:
                    poll(0.005)  # the local queue is full: serve callbacks until there is room
            sent += 1
            txn_records += 1
            # Java compares the send time with the transaction's start after each send.
            if transactional and (
                (per_transaction is not None and txn_records >= per_transaction)
                or (duration_ns is not None and intended - txn_start_ns >= duration_ns)
            ):
                commit_point()
            if now - last_poll_ns >= POLL_INTERVAL_NS:
                poll(0)
                last_poll_ns = now
            if i % DRAIN_EVERY_RECORDS == 0:
                drain()

        if self.transactional and txn_records:
            commit_point()
        producer.flush(TRANSACTION_CALL_TIMEOUT_S * 10)
        drain()
        if not self.transactional:
            self.tally.records_committed = acks.acked
            if self.metrics:
                self.metrics.records_committed_without_transactions(acks.acked)
        if self.metrics:
            self.metrics.expired(acks.expired)
            self.metrics.set_abort_overhead(sent, self.tally.records_committed)

        # eosbench's own lines go first: the last line is Java's (the summary, or with
        # --warmup-records the steady-state line after it), so scripts that `tail -1` it still work.
        self._report_outcomes(sent)
        total = stats.print_total()
        steady_total = steady.print_total() if steady is not None else None
        if s.print_metrics:
            self._print_client_metrics(producer)
        return ProduceSummary(
            run_id=str(self.run_id), topic=topic, bootstrap=s.bootstrap,
            transactional_id=self.client_config.get("transactional.id"), seed=s.seed,
            transaction_abort_ratio=s.transaction_abort_ratio, first_seq=first_seq,
            records_sent=sent, records_acked=acks.acked,
            records_committed=self.tally.records_committed, records_aborted=self.tally.records_aborted,
            records_expired=acks.expired, records_failed=acks.failed,
            transactions_committed=self.tally.committed, transactions_aborted=self.tally.aborted,
            transactions_aborted_by_ratio=self.tally.aborted_by_ratio,
            transactions_aborted_by_expiry=self.tally.aborted_by_expiry,
            abort_overhead_ratio=(sent / self.tally.records_committed - 1.0) if self.tally.records_committed else None,
            goodput_records_per_sec=self.tally.records_committed / total.elapsed_s if total.elapsed_s else 0.0,
            total=total, steady_state=steady_total, abort_decisions=self.tally.decisions,
            transactions=self.tally.log, first_error=acks.first_error,
        )

    def _report_outcomes(self, sent: int) -> None:
        t = self.tally
        if self.transactional:
            print(f"{t.committed} transactions committed ({t.records_committed} records),"
                  f" {t.aborted} aborted ({t.records_aborted} records): {t.aborted_by_ratio} by"
                  f" --transaction-abort-ratio, {t.aborted_by_expiry} by delivery failures.",
                  file=self.out, flush=True)
        if self.acks.expired or self.acks.failed:
            print(f"{self.acks.expired} records expired (delivery.timeout.ms), {self.acks.failed} failed:"
                  f" {self.acks.first_error}. "
                  + ("Their transactions were aborted; nothing partial is visible." if self.transactional
                     else "They were not written."),
                  file=self.out, flush=True)

    def _print_client_metrics(self, producer: Producer) -> None:
        """Print librdkafka's counters, in the two-column spirit of Java's --print-metrics."""
        stats = self._fresh_client_stats(producer)
        rows = {f"producer-metrics:{key}": float(stats[key]) for key in
                ("txmsgs", "txmsg_bytes", "tx", "txretries", "txerrs", "msg_cnt", "msg_max") if key in stats}
        rows["producer-metrics:record-expired-total"] = float(self.acks.expired)
        rows["producer-metrics:record-error-total"] = float(self.acks.failed)
        for broker in stats.get("brokers", {}).values():
            if broker.get("nodeid", -1) < 0:
                continue
            for window in ("rtt", "int_latency", "outbuf_latency"):
                for figure in ("avg", "p99"):
                    value = broker.get(window, {}).get(figure)
                    if value is not None:
                        rows[f"producer-node-metrics:{window}-{figure}-us:node-{broker['nodeid']}"] = float(value)
        print(f"{'Metric Name':<70}Value", file=self.out)
        for name, value in sorted(rows.items()):
            print(f"{name:<70}: {value:.3f}", file=self.out)
