"""The soak's measure of progress: the sink group's committed offsets, sampled, and the gate built on them.

Progress, never a sleep, decides when the next fault lands (the gate), what throughput a fault is
judged against (the baseline) and when the pipeline has recovered from it.
"""

from __future__ import annotations

import threading
import time

from confluent_kafka import Consumer, TopicPartition

from conf.client_config import Connection, connection
from conf.client_log import CLIENT_LOG
from streaming.group import commit_run

RATE_WINDOW_S = 3.0  # the throughput window; recovery times are resolved to about this
SAMPLE_EVERY_S = 0.5
RECOVERED_SHARE = 0.9
BASELINE_WINDOW_S = 20.0
STALE_AFTER_S = 5.0  # a sampler whose figure has not moved for this long reconnects


def committed_total(committed: list[TopicPartition]) -> int:
    """The group's committed offsets summed over its partitions, a partition without one counting 0."""
    return sum(max(0, tp.offset) for tp in committed)


class ProgressSampler:
    """Samples the sink group's committed offsets (summed over partitions) twice a second.

    The group's offsets move only when the sink commits a transaction, so they count records
    processed exactly once, across every restart of the driver (and a lost checkpoint).
    """

    def __init__(self, bootstrap: str | Connection, group: str, topic: str, partitions: int, started: float):
        self.samples: list[tuple[float, int]] = []
        self._config = connection(bootstrap).librdkafka(**{"group.id": group, "enable.auto.commit": False,
                                                           "socket.timeout.ms": 2000})
        self._consumer = Consumer(self._config, logger=CLIENT_LOG)
        self._last_change = time.monotonic()
        self._partitions = [TopicPartition(topic, p) for p in range(partitions)]
        self._uncommitted = list(range(partitions))
        self._by_run: dict[int, tuple[int, str | None]] = {}
        self._started = started
        self._stop = threading.Event()
        self._renew = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="eosbench-soak-sampler", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(SAMPLE_EVERY_S):
            if self._renew.is_set():
                self._renew.clear()
                self._reconnect()
            try:
                with self._lock:
                    partitions = list(self._partitions)
                committed = self._consumer.committed(partitions, timeout=2)
            except Exception:  # the broker is down or paused: a gap in the timeline, not an error
                continue
            total = committed_total(committed)
            uncommitted = [tp.partition for tp in committed if tp.offset < 0]
            by_run = {tp.partition: (tp.offset, commit_run(tp)) for tp in committed}
            if not self.samples or total != self.samples[-1][1]:
                self._last_change = time.monotonic()
            elif time.monotonic() - self._last_change > STALE_AFTER_S:
                self._reconnect()
            with self._lock:
                self.samples.append((time.monotonic() - self._started, total))
                self._uncommitted = uncommitted
                self._by_run = by_run

    def watch_partitions(self, count: int) -> None:
        """Sample the first `count` partitions of the input from now on (it has grown)."""
        with self._lock:
            self._partitions = [TopicPartition(self._partitions[0].topic, p) for p in range(count)]

    def _reconnect(self) -> None:
        # After the group coordinator's broker is killed, a long-lived client kept answering
        # with the old offsets; a new one finds the new coordinator.
        self._consumer.close()
        self._consumer = Consumer(self._config, logger=CLIENT_LOG)
        self._last_change = time.monotonic()

    def renew(self) -> None:
        """Have the next sample read by a new consumer: a fault that moved the coordinator leaves the old one stale."""
        self._renew.set()

    def processed(self) -> int:
        """The latest committed total (0 before the first sample)."""
        with self._lock:
            return self.samples[-1][1] if self.samples else 0

    def committed_now(self) -> int | None:
        """The committed total read at this moment, by a consumer of its own; None if the cluster does not answer."""
        consumer = Consumer(self._config, logger=CLIENT_LOG)
        try:
            return committed_total(consumer.committed(self._partitions, timeout=5))
        except Exception:  # a broker restarting: the caller falls back on the latest sample
            return None
        finally:
            consumer.close()

    def first_move(self, after_s: float, above: int) -> float | None:
        """When the first sample taken after `after_s` (seconds since the start) found the total above `above`."""
        with self._lock:
            return next((at for at, total in self.samples if at > after_s and total > above), None)

    def offsets_and_runs(self) -> dict[int, tuple[int, str | None]]:
        """Per partition, the committed offset and the run that committed it (slot scope), at the latest sample."""
        with self._lock:
            return dict(self._by_run)

    def uncommitted_partitions(self) -> list[int]:
        """The input partitions on which the sink group has no committed offset yet (at the latest sample)."""
        with self._lock:
            return list(self._uncommitted)

    def rate(self, since_s: float, until_s: float) -> float | None:
        """Records per second between two moments (None without two samples in between)."""
        with self._lock:
            inside = [s for s in self.samples if since_s <= s[0] <= until_s]
        if len(inside) < 2 or inside[-1][0] - inside[0][0] < RATE_WINDOW_S / 2:
            return None
        return (inside[-1][1] - inside[0][1]) / (inside[-1][0] - inside[0][0])

    def baseline(self, now_s: float, offered: float) -> float:
        """The rate a fault is judged against: the last 20 s, capped at the offered rate.

        A stream still catching up runs faster than it can keep up.
        """
        return min(self.rate(now_s - BASELINE_WINDOW_S, now_s) or offered, offered)

    def recovered(self, fault_at_s: float, now_s: float, baseline: float) -> bool:
        """Tell whether a full window has passed since the fault and throughput is back to 90 % of the baseline."""
        rate = self.rate(max(fault_at_s, now_s - RATE_WINDOW_S), now_s)
        return now_s - fault_at_s >= RATE_WINDOW_S and rate is not None and rate >= RECOVERED_SHARE * baseline

    def snapshot(self) -> list[tuple[float, int]]:
        """A copy of every sample so far."""
        with self._lock:
            return list(self.samples)

    def stop(self) -> None:
        """Stop sampling and close the consumer."""
        self._stop.set()
        self._thread.join(timeout=5)
        self._consumer.close()


class ProgressGate:
    """Opens once the sink group has committed `records` more input offsets than at its mark."""

    def __init__(self, sampler: ProgressSampler, records: int, mark: int = 0):
        self.sampler, self.records, self.mark = sampler, records, mark

    def is_open(self) -> bool:
        """Tell whether enough progress has been made since the mark."""
        return self.sampler.processed() >= self.mark + self.records

    def close(self) -> None:
        """Set the mark to the progress made so far, so that the next fault waits for new progress."""
        self.mark = self.sampler.processed()
