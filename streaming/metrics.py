"""Prometheus metrics of the streaming driver (names from docs/design.md, section "Metrics").

Everything is updated once per micro-batch from what the tasks returned and from the query's
progress; the driver never touches a record. The end-to-end latency histogram arrives already
bucketed (5 % buckets, merged from the tasks) and is exposed at a coarser, fixed set of bounds
that are themselves bucket edges, so the cumulative counts are exact.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import numpy as np
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import HistogramMetricFamily
from prometheus_client.registry import Collector

from conf.metrics_endpoint import MetricsTls, serve_metrics
from streaming.stats import LATENCY_BOUNDS_MS, OUTCOMES, PHASES, BatchStats

# Seconds; each is a 5 %-bucket edge (1.05^k ms) within 0.5 % of a round value.
E2E_BOUNDS_S = tuple(float(LATENCY_BOUNDS_MS[int(np.argmin(np.abs(LATENCY_BOUNDS_MS - ms)))]) / 1000
                     for ms in (10, 25, 50, 100, 250, 500, 1000, 1500, 2000, 3000, 5000, 10000, 30000, 60000))
BATCH_BUCKETS = (0.1, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0, 30.0, 60.0)
VISIBILITY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
PHASE_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class BucketedHistogram(Collector):
    """A Prometheus histogram fed with counts over LATENCY_BOUNDS_MS (the tasks' buckets)."""

    def __init__(self, name: str, documentation: str, labels: dict[str, str]):
        self.name, self.documentation, self.labels = name, documentation, labels
        self.counts = np.zeros(LATENCY_BOUNDS_MS.size + 1, dtype=np.int64)
        self.total_s = 0.0
        # index i of the task histogram counts values <= LATENCY_BOUNDS_MS[i]
        self._edge_index = [int(np.searchsorted(LATENCY_BOUNDS_MS, bound * 1000 - 1e-9)) for bound in E2E_BOUNDS_S]

    def add(self, counts: np.ndarray) -> None:
        """Merge a histogram of the tasks' shape."""
        self.counts += counts
        # Each bucket's upper bound stands for its values: an over-estimate of at most 5 %.
        self.total_s += float(np.dot(counts[: LATENCY_BOUNDS_MS.size], LATENCY_BOUNDS_MS)) / 1000

    def collect(self) -> Iterator[HistogramMetricFamily]:
        """Yield cumulative counts at E2E_BOUNDS_S."""
        cumulative = np.cumsum(self.counts)
        family = HistogramMetricFamily(self.name, self.documentation, labels=list(self.labels))
        buckets = [(repr(bound), int(cumulative[index])) for bound, index in zip(E2E_BOUNDS_S, self._edge_index)]
        buckets.append(("+Inf", int(cumulative[-1])))
        family.add_metric(list(self.labels.values()), buckets, self.total_s)
        yield family


class StreamMetrics:
    """The streaming driver's metrics in their own registry, labelled with the app id."""

    def __init__(self, app_id: str, sink: str, visibility_observed: bool = True):
        self.registry = CollectorRegistry()
        self.labels = {"app_id": app_id, "sink": sink}
        names = list(self.labels)

        def counter(name: str, doc: str, extra: tuple[str, ...] = ()) -> Counter:
            return Counter(name, doc, names + list(extra), registry=self.registry)

        self.input_records = counter("eosbench_stream_input_records", "Visible records the source read (read_committed)")
        self.output_records = counter("eosbench_stream_output_records", "Records committed to the output topic")
        self.dead_lettered = counter("eosbench_stream_dead_lettered_records", "Records sent to the dead-letter topic")
        self.offset_span = counter("eosbench_stream_offset_span",
                                   "Input offsets consumed, counting aborted records and transaction markers")
        self.batches = counter("eosbench_stream_batches", "Micro-batches completed")
        self.sink_transactions = counter("eosbench_sink_transactions", "Sink transactions by outcome", ("outcome",))
        self.batch_duration = Histogram("eosbench_stream_batch_duration_seconds", "Sink time per micro-batch",
                                        names, buckets=BATCH_BUCKETS, registry=self.registry)
        self.phase = Histogram("eosbench_sink_transaction_phase_seconds", "Time per transaction in each phase",
                               names + ["phase"], buckets=PHASE_BUCKETS, registry=self.registry)
        self.visibility = Histogram("eosbench_stream_visibility_seconds",
                                    "From a sink transaction's commit returning to a read_committed reader first seeing"
                                    " its records (the last stable offset's advance)",
                                    names, buckets=VISIBILITY_BUCKETS, registry=self.registry)
        self.aborted_ratio = Gauge("eosbench_stream_aborted_ratio",
                                   "1 - visible records / offset span, over the run", names, registry=self.registry)
        self.lag = Gauge("eosbench_stream_consumer_lag_records", "Input end offsets minus the sink group's offsets",
                         names, registry=self.registry)
        self.verify_violations = Gauge("eosbench_verify_violations", "Violations the last verify found (0 = none)",
                                       names, registry=self.registry)
        self.verify_records = Gauge("eosbench_verify_records_checked", "Committed input records the last verify checked",
                                    names, registry=self.registry)
        self.commit_wait_target = Gauge("eosbench_stream_commit_wait_target_seconds",
                                        "The longest a record is meant to wait for its commit: --commit-interval-ms in"
                                        " real-time mode, the trigger interval in micro-batches", names,
                                        registry=self.registry)
        self.input_partitions = Gauge("eosbench_stream_input_partitions", "Input partitions the query reads", names,
                                      registry=self.registry)
        self.end_to_end = BucketedHistogram("eosbench_stream_end_to_end_latency_seconds",
                                            "Input CreateTime to output commit", self.labels)
        self.registry.register(self.end_to_end)
        for outcome in OUTCOMES:
            self.sink_transactions.labels(**self.labels, outcome=outcome)
        # Every series exists from the first scrape, at zero, so rate() and increase() see the
        # whole run rather than starting at the first batch's count. Visibility only where it is
        # observed: an empty histogram would chart as a NaN percentile.
        for series in (self.input_records, self.output_records, self.dead_lettered, self.offset_span, self.batches,
                       self.aborted_ratio, self.lag) + ((self.visibility,) if visibility_observed else ()):
            series.labels(**self.labels)
        self._visible = 0
        self._span = 0
        self._spans_seen: set[int] = set()

    def batch_done(self, batch: BatchStats) -> None:
        """Fold in one micro-batch's statistics."""
        self.batches.labels(**self.labels).inc()
        self.output_records.labels(**self.labels).inc(batch.records_out)
        self.dead_lettered.labels(**self.labels).inc(batch.records_dead_lettered)
        self.batch_duration.labels(**self.labels).observe(batch.duration_s)
        for outcome, count in batch.outcomes.items():
            if count:
                self.sink_transactions.labels(**self.labels, outcome=outcome).inc(count)
        for phases in batch.task_phases:
            for phase in PHASES:
                if phase != "register" or phases[phase] > 0:
                    self.phase.labels(**self.labels, phase=phase).observe(phases[phase])
        self.end_to_end.add(batch.latency_counts)

    def progress(self, progress_json: str, initial: dict | None = None) -> None:
        """Fold in one query-progress report: its visible input rows and the offset span they took."""
        progress = json.loads(progress_json)
        batch_id = progress.get("batchId")
        if batch_id in self._spans_seen or not progress.get("sources"):
            return
        self._spans_seen.add(batch_id)
        span = partitions_read = 0
        for source in progress["sources"]:
            start = _offsets(source.get("startOffset")) or (initial or {})
            end = _offsets(source.get("endOffset"))
            partitions_read += sum(len(partitions) for partitions in end.values())
            for topic, partitions in end.items():
                for partition, offset in partitions.items():
                    span += max(0, int(offset) - int(start.get(topic, {}).get(partition, offset)))
        self.input_partitions.labels(**self.labels).set(partitions_read)
        visible = int(progress.get("numInputRows", 0))
        self._span += span
        self._visible += visible
        self.offset_span.labels(**self.labels).inc(span)
        self.input_records.labels(**self.labels).inc(visible)
        self._update_aborted_ratio()

    def configured(self, commit_wait_s: float | None) -> None:
        """Publish the commit wait the job was asked for (StreamSettings.commit_wait_s; None exports nothing)."""
        if commit_wait_s is not None:
            self.commit_wait_target.labels(**self.labels).set(commit_wait_s)

    def visible(self, _txn: str, seconds: float) -> None:
        """One transaction's visibility latency (a VisibilityObserver's on_sample)."""
        self.visibility.labels(**self.labels).observe(seconds)

    def verified(self, violations: int, records_checked: int) -> None:
        """Publish a verify report's outcome (the verify-failure alert watches it)."""
        self.verify_violations.labels(**self.labels).set(violations)
        self.verify_records.labels(**self.labels).set(records_checked)

    def set_lag(self, records: int) -> None:
        """The sink group's lag behind the input's end."""
        self.lag.labels(**self.labels).set(records)

    def _update_aborted_ratio(self) -> None:
        if self._span:
            self.aborted_ratio.labels(**self.labels).set(max(0.0, 1.0 - self._visible / self._span))

    def serve(self, port: int, host: str, tls: MetricsTls | None = None) -> None:
        """Serve /metrics on host:port in a daemon thread (over TLS when `tls` is given)."""
        serve_metrics(self.registry, port, host, tls)


def _offsets(value) -> dict:
    if not value:
        return {}
    return json.loads(value) if isinstance(value, str) else value
