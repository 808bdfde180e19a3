"""Java ProducerPerformance's `Stats`, fed in bulk: the same window and total lines, from numpy.

Java records each acknowledgement in its callback; here acknowledgements are collected in a
ring buffer (`AckRing`) by the delivery callback and handed over in batches, so that the per-record Python
work stays a few array stores. The lines printed are Java's, format for format, so that scripts
that parse `kafka-producer-perf-test` output parse these too.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from typing import TextIO

import numpy as np
from confluent_kafka import KafkaError

from conf.failures import RunFailed

MAX_LATENCY_SAMPLES = 500_000  # Java keeps at most this many latencies for percentiles
_PURGED = {KafkaError._PURGE_QUEUE, KafkaError._PURGE_INFLIGHT}


def now_ms() -> int:
    """Wall-clock milliseconds, as Java's System.currentTimeMillis()."""
    return time.time_ns() // 1_000_000


@dataclass(frozen=True)
class LatencySummary:
    """The figures of Java's final line, with latencies in milliseconds."""

    records: int
    records_per_sec: float
    mb_per_sec: float
    avg_ms: float
    max_ms: float
    p50_ms: float
    p95_ms: float
    p99_ms: float
    p999_ms: float
    elapsed_s: float


class AckRing:
    """Delivery-callback state: per-record latency and sequence number in preallocated rings.

    The rings are Python lists, not numpy arrays: storing one Python int into a list costs about
    half of storing it into an ndarray, and this runs once per record.
    """

    __slots__ = ("mask", "sent_ns", "latency_ns", "acked_seq", "acked", "drained",
                 "expired", "failed", "purged", "first_error")

    def __init__(self, capacity_pow2: int):
        size = 1 << capacity_pow2
        self.mask = size - 1
        self.sent_ns = [0] * size  # intended send time, by seq & mask
        self.latency_ns = [0] * size  # by ack number & mask
        self.acked_seq = [0] * size
        self.acked = 0
        self.drained = 0
        self.expired = 0
        self.failed = 0
        self.purged = 0
        self.first_error: str | None = None

    def on_delivery(self, error, message) -> None:
        """confluent-kafka delivery callback: a few array stores per record, nothing more."""
        if error is None:
            seq = int(message.key())
            slot = self.acked & self.mask
            self.latency_ns[slot] = time.perf_counter_ns() - self.sent_ns[seq & self.mask]
            self.acked_seq[slot] = seq
            self.acked += 1
            return
        code = error.code()
        if code in _PURGED:
            self.purged += 1  # unsent records of an aborted transaction: Java drops them too
            return
        if code == KafkaError._MSG_TIMED_OUT:
            self.expired += 1
        else:
            self.failed += 1
        if self.first_error is None:
            self.first_error = error.str()

    def take(self) -> tuple[np.ndarray, np.ndarray]:
        """Return (latencies in ns, sequence numbers) acknowledged since the last take."""
        start, end = self.drained, self.acked
        self.drained = end
        if end - start > self.mask:
            raise RunFailed("acknowledgement ring overflowed; raise the ring size")
        lo, hi = start & self.mask, end & self.mask
        if lo <= hi and end - start < self.mask + 1:
            latency, seqs = self.latency_ns[lo:hi], self.acked_seq[lo:hi]
        else:
            latency = self.latency_ns[lo:] + self.latency_ns[:hi]
            seqs = self.acked_seq[lo:] + self.acked_seq[:hi]
        return np.array(latency, dtype=np.int64), np.array(seqs, dtype=np.int64)



class PerfStats:
    """Counts, window lines and sampled percentiles for one phase (all records, or steady state)."""

    def __init__(self, num_records: int, reporting_interval_ms: int, steady_state: bool,
                 out: TextIO = sys.stdout):
        self.start_ms = now_ms()
        self.window_start_ms = self.start_ms
        self.sampling = num_records // min(num_records, MAX_LATENCY_SAMPLES)
        self.samples = np.empty(num_records // self.sampling + 1, dtype=np.float64)
        self.sample_count = 0
        self.iteration = 0
        self.count = 0
        self.bytes = 0
        self.total_latency_ms = 0.0
        self.max_latency_ms = 0.0
        self.reporting_interval_ms = reporting_interval_ms
        self.steady_state = steady_state
        self.suppress_print = False
        self.out = out
        self._new_window()

    def _new_window(self) -> None:
        self.window_start_ms = now_ms()
        self.window_count = 0
        self.window_bytes = 0
        self.window_total_latency_ms = 0.0
        self.window_max_latency_ms = 0.0

    def record_many(self, latencies_ms: np.ndarray, record_bytes: int, at_ms: int) -> None:
        """Record a batch of acknowledged records (latencies in ms, their total bytes)."""
        n = int(latencies_ms.size)
        if n == 0:
            return
        total = float(latencies_ms.sum())
        peak = float(latencies_ms.max())
        self.count += n
        self.bytes += record_bytes
        self.total_latency_ms += total
        self.max_latency_ms = max(self.max_latency_ms, peak)
        self.window_count += n
        self.window_bytes += record_bytes
        self.window_total_latency_ms += total
        self.window_max_latency_ms = max(self.window_max_latency_ms, peak)
        # Java samples iteration 0, s, 2s, ...; keep exactly those positions of this batch.
        first = (-self.iteration) % self.sampling
        picked = latencies_ms[first::self.sampling]
        room = self.samples.size - self.sample_count
        picked = picked[:room]
        self.samples[self.sample_count:self.sample_count + picked.size] = picked
        self.sample_count += picked.size
        self.iteration += n
        self.maybe_report(at_ms)

    def maybe_report(self, at_ms: int) -> None:
        """Print and reset the window once the reporting interval has passed."""
        if at_ms - self.window_start_ms < self.reporting_interval_ms:
            return
        if self.steady_state and self.count == self.window_count:
            print("In steady state.", file=self.out, flush=True)
        if not self.suppress_print and self.window_count:
            self.print_window()
        self._new_window()

    def print_window(self) -> None:
        """Java's window line."""
        elapsed = max(1, now_ms() - self.window_start_ms)
        print(
            f"{self.window_count} records sent, {1000.0 * self.window_count / elapsed:.1f} records/sec"
            f" ({1000.0 * self.window_bytes / elapsed / (1024.0 * 1024.0):.2f} MB/sec),"
            f" {self.window_total_latency_ms / self.window_count:.1f} ms avg latency,"
            f" {self.window_max_latency_ms:.1f} ms max latency.",
            file=self.out, flush=True,
        )

    def summary(self) -> LatencySummary:
        """The figures of the final line."""
        elapsed_ms = max(1, now_ms() - self.start_ms)
        samples = np.sort(self.samples[: self.sample_count])

        def percentile(p: float) -> float:
            return float(samples[int(p * samples.size)]) if samples.size else 0.0

        return LatencySummary(
            records=self.count,
            records_per_sec=1000.0 * self.count / elapsed_ms,
            mb_per_sec=1000.0 * self.bytes / elapsed_ms / (1024.0 * 1024.0),
            avg_ms=self.total_latency_ms / self.count if self.count else 0.0,
            max_ms=self.max_latency_ms,
            p50_ms=percentile(0.5),
            p95_ms=percentile(0.95),
            p99_ms=percentile(0.99),
            p999_ms=percentile(0.999),
            elapsed_s=elapsed_ms / 1000.0,
        )

    def print_total(self) -> LatencySummary:
        """Java's final line (percentiles as whole milliseconds, as Java prints them)."""
        s = self.summary()
        label = " steady state" if self.steady_state else ""
        print(
            f"{s.records}{label} records sent, {s.records_per_sec:f} records/sec ({s.mb_per_sec:.2f} MB/sec),"
            f" {s.avg_ms:.2f} ms avg latency, {s.max_ms:.2f} ms max latency, {int(s.p50_ms)} ms 50th,"
            f" {int(s.p95_ms)} ms 95th, {int(s.p99_ms)} ms 99th, {int(s.p999_ms)} ms 99.9th.",
            file=self.out, flush=True,
        )
        return s
