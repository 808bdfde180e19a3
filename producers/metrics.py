"""Prometheus metrics of the seeded producer (names from docs/design.md, section "Metrics").

The send-latency histogram is fed in bulk from numpy arrays of latencies: a per-record
`Histogram.observe()` costs about a microsecond under its lock, which is the whole per-record
budget of a producer aiming at Java's throughput.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import HistogramMetricFamily
from prometheus_client.registry import Collector

from conf.metrics_endpoint import MetricsTls, serve_metrics

# Seconds. Dense below 50 ms, where a healthy loopback broker lives, then up to a KIP-91 timeout.
SEND_LATENCY_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 120.0)
TRANSACTION_DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class BulkHistogram(Collector):
    """A Prometheus histogram whose observations arrive as numpy arrays."""

    def __init__(self, name: str, documentation: str, buckets: tuple[float, ...], labels: dict[str, str]):
        self.name = name
        self.documentation = documentation
        self.upper_bounds = np.array(buckets, dtype=np.float64)
        self.labels = labels
        self.bucket_counts = np.zeros(len(buckets) + 1, dtype=np.int64)  # last one is +Inf
        self.total = 0.0

    def observe_many(self, values: np.ndarray) -> None:
        """Add every value of an array (in base units) to the histogram."""
        if values.size == 0:
            return
        self.bucket_counts += np.bincount(
            np.searchsorted(self.upper_bounds, values, side="left"), minlength=self.bucket_counts.size
        )
        self.total += float(values.sum())

    def collect(self) -> Iterator[HistogramMetricFamily]:
        """Yield the histogram in Prometheus's cumulative form."""
        family = HistogramMetricFamily(self.name, self.documentation, labels=list(self.labels))
        cumulative = np.cumsum(self.bucket_counts)
        buckets = [(repr(float(bound)), int(count)) for bound, count in zip(self.upper_bounds, cumulative[:-1])]
        buckets.append(("+Inf", int(cumulative[-1])))
        family.add_metric(list(self.labels.values()), buckets, self.total)
        yield family


class ProducerMetrics:
    """Every producer metric, in its own registry, labelled with the run id."""

    def __init__(self, run_id: str, configured_abort_ratio: float):
        self.registry = CollectorRegistry()
        labels = {"run_id": run_id}
        self._labels = labels
        self.records = Counter("eosbench_producer_records", "Records acknowledged, by the outcome of their transaction",
                               ["run_id", "outcome"], registry=self.registry)
        self.transactions = Counter("eosbench_producer_transactions", "Transactions ended, by outcome",
                                    ["run_id", "outcome"], registry=self.registry)
        self.transaction_duration = Histogram(
            "eosbench_producer_transaction_duration_seconds", "From begin_transaction to the end of commit or abort",
            ["run_id"], buckets=TRANSACTION_DURATION_BUCKETS, registry=self.registry)
        self.delivery_timeouts = Counter("eosbench_producer_delivery_timeouts",
                                         "Records expired by delivery.timeout.ms (KIP-91)", ["run_id"],
                                         registry=self.registry)
        self.abort_overhead = Gauge("eosbench_abort_overhead_ratio",
                                    "Producer side: records sent / records committed - 1", ["run_id"],
                                    registry=self.registry)
        self.configured_abort_ratio = Gauge("eosbench_producer_configured_abort_ratio",
                                            "The --transaction-abort-ratio of this run", ["run_id"],
                                            registry=self.registry)
        self.configured_abort_ratio.labels(**labels).set(configured_abort_ratio)
        self.send_latency = BulkHistogram("eosbench_producer_send_latency_seconds",
                                          "From the intended send time to the acknowledgement",
                                          SEND_LATENCY_BUCKETS, labels)
        self.registry.register(self.send_latency)
        for outcome in ("committed", "aborted"):
            self.records.labels(run_id=run_id, outcome=outcome)
            self.transactions.labels(run_id=run_id, outcome=outcome)
        self.delivery_timeouts.labels(**labels)
        self.abort_overhead.labels(**labels)

    def transaction_ended(self, outcome: str, records: int, seconds: float) -> None:
        """Count one finished transaction and its records."""
        self.transactions.labels(run_id=self._labels["run_id"], outcome=outcome).inc()
        self.records.labels(run_id=self._labels["run_id"], outcome=outcome).inc(records)
        self.transaction_duration.labels(**self._labels).observe(seconds)

    def records_committed_without_transactions(self, records: int) -> None:
        """Count records acknowledged by a non-transactional run (visible, so 'committed')."""
        self.records.labels(run_id=self._labels["run_id"], outcome="committed").inc(records)

    def expired(self, records: int) -> None:
        """Count records expired by the delivery timeout."""
        self.delivery_timeouts.labels(**self._labels).inc(records)

    def set_abort_overhead(self, sent: int, committed: int) -> None:
        """Producer-side abort overhead: records sent / records committed - 1."""
        if committed:
            self.abort_overhead.labels(**self._labels).set(sent / committed - 1.0)

    def serve(self, port: int, host: str, tls: MetricsTls | None = None) -> None:
        """Serve /metrics on host:port in a daemon thread (over TLS when `tls` is given)."""
        serve_metrics(self.registry, port, host, tls)
