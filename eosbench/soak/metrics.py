"""The soak's own Prometheus series (`eosbench_soak_*`), beside the producer's and the stream's."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Gauge
from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

from conf.metrics_endpoint import serve_metrics
from eosbench.console.errors import EnvironmentProblem
from eosbench.soak.faults import FAULT_KINDS

if TYPE_CHECKING:
    from eosbench.soak.progress import ProgressSampler
    from eosbench.soak.report import FaultRecord


class CommittedOffsets(Collector):
    """The sink group's committed input offsets, summed over partitions, as a counter (`rate()` charts it).

    It only grows: progress made exactly once, across every restart. A read from a coordinator
    that has not caught up yet can be lower for a moment; the counter keeps its highest value.
    """

    def __init__(self, labels: dict[str, str]):
        self.labels, self.sampler, self.highest = labels, None, 0

    def collect(self):
        """Yield the counter at the sampler's latest total."""
        if self.sampler is not None:
            self.highest = max(self.highest, self.sampler.processed())
        family = CounterMetricFamily("eosbench_soak_committed_offsets", "The sink group's committed input offsets,"
                                     " summed over partitions: progress made exactly once", labels=list(self.labels))
        family.add_metric(list(self.labels.values()), self.highest)
        yield family


class SoakMetrics:
    """The soak's own series, beside the producer's and the stream's."""

    def __init__(self, run_id: str):
        self.registry = CollectorRegistry()
        labels = {"run_id": run_id}
        self.faults = Counter("eosbench_soak_faults", "Faults injected, by kind and whether they were survived",
                              [*labels, "kind", "outcome"], registry=self.registry)
        self.recovery = Gauge("eosbench_soak_recovery_seconds", "Seconds until throughput was back to 90 % after"
                              " the last fault of this kind", [*labels, "kind"], registry=self.registry)
        self.violations = Gauge("eosbench_soak_verify_violations", "Violations found by the soak's verifications",
                                list(labels), registry=self.registry)
        self.checked = Gauge("eosbench_soak_records_verified", "Committed input records the last verify checked",
                             list(labels), registry=self.registry)
        self.restarts = Counter("eosbench_soak_restarts", "Unplanned restarts of a supervised process",
                                [*labels, "process"], registry=self.registry)
        self.injected_at = Gauge("eosbench_soak_fault_injected_timestamp_seconds", "Unix time the last fault of"
                                 " this kind was injected (the soak dashboard's fault markers)", [*labels, "kind"],
                                 registry=self.registry)
        self.committed = CommittedOffsets(labels)
        self.registry.register(self.committed)
        self.labels = labels
        for kind in FAULT_KINDS:
            for outcome in ("survived", "failed"):
                self.faults.labels(**labels, kind=kind, outcome=outcome)
        for process in ("producer", "stream"):
            self.restarts.labels(**labels, process=process)
        self.verified(0, 0)

    def serve(self, port: int) -> None:
        """Serve /metrics on loopback."""
        try:
            serve_metrics(self.registry, port)
        except OSError as exc:
            raise EnvironmentProblem(f"cannot serve the soak's metrics on 127.0.0.1:{port}: {exc.strerror}") from exc

    def fault_injected(self, kind: str) -> None:
        """Mark the moment a fault goes in."""
        self.injected_at.labels(**self.labels, kind=kind).set(time.time())

    def follow(self, sampler: ProgressSampler) -> None:
        """Export the sampler's committed total on every scrape."""
        self.committed.sampler = sampler

    def restarted(self, process: str) -> None:
        """Count one unplanned restart of a supervised process."""
        self.restarts.labels(**self.labels, process=process).inc()

    def fault_done(self, fault: FaultRecord, total_violations: int) -> None:
        """Count one round."""
        self.faults.labels(**self.labels, kind=fault.kind, outcome="survived" if fault.survived else "failed").inc()
        if fault.recovery_s is not None:
            self.recovery.labels(**self.labels, kind=fault.kind).set(fault.recovery_s)
        self.verified(total_violations, fault.records_checked)

    def verified(self, total_violations: int, records_checked: int) -> None:
        """Export the violations found so far and the records the last verify checked."""
        self.violations.labels(**self.labels).set(total_violations)
        self.checked.labels(**self.labels).set(records_checked)
