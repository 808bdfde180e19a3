"""Statistics that sink tasks return to the driver: counts, phase timings and a latency histogram.

The histogram has fixed log-spaced buckets (5 % wide, HdrHistogram-style), so histograms from
any number of tasks merge by adding their counts, and the driver never touches a record.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

# Upper bounds in milliseconds: 1 ms * 1.05^k up to about 28 hours.
LATENCY_BOUNDS_MS = np.concatenate(([0.0], 1.05 ** np.arange(0, 350)))
PHASES = ("init", "register", "produce", "send_offsets", "commit")
# idle: a partition with no new offsets whose group offset is already at the batch end (no transaction).
OUTCOMES = ("committed", "aborted", "skipped_replay", "fenced", "idle")

# One row per sink task: (name, Spark DDL type). Built by hand for the executors, which have no
# JVM to parse a DDL string with.
STATS_FIELDS: tuple[tuple[str, str], ...] = (
    ("topic", "string"), ("partition", "int"), ("end_offset", "bigint"), ("records_in", "bigint"),
    ("records_out", "bigint"), ("records_dead_lettered", "bigint"), ("records_skipped", "bigint"),
    ("outcome", "string"), ("transactions", "int"), ("retries", "int"), ("fenced", "int"), ("aborted", "int"),
    *((f"phase_{phase}_s", "double") for phase in PHASES),
    ("register_round_trips", "int"), ("first_send_after_begin_s", "double"),
    ("latency_counts", "array<bigint>"),
    ("txn", "string"), ("committed_at_s", "double"),  # identity of a commit with records, and when it returned
    ("committed_partitions", "array<bigint>"),  # the input partitions whose offsets it committed
)
STATS_SCHEMA = ", ".join(f"{name} {ddl}" for name, ddl in STATS_FIELDS)


def stats_arrow_schema():
    """The Arrow schema of a task's statistics row (matches STATS_SCHEMA)."""
    import pyarrow as pa

    arrow_types = {"string": pa.string(), "int": pa.int32(), "bigint": pa.int64(), "double": pa.float64(),
                   "array<bigint>": pa.list_(pa.int64())}
    return pa.schema([(name, arrow_types[ddl]) for name, ddl in STATS_FIELDS])


def latency_histogram(latencies_ms: np.ndarray) -> np.ndarray:
    """Bucket latencies (ms) into the shared log-spaced bounds."""
    counts = np.bincount(np.searchsorted(LATENCY_BOUNDS_MS, latencies_ms, side="left"),
                         minlength=LATENCY_BOUNDS_MS.size + 1)
    return counts[: LATENCY_BOUNDS_MS.size + 1].astype(np.int64)


def empty_histogram() -> np.ndarray:
    """A histogram with no observations."""
    return np.zeros(LATENCY_BOUNDS_MS.size + 1, dtype=np.int64)


def histogram_percentile(counts: np.ndarray, fraction: float) -> float:
    """The upper bound (ms) of the bucket holding the given fraction of observations."""
    total = int(counts.sum())
    if total == 0:
        return 0.0
    index = int(np.searchsorted(np.cumsum(counts), fraction * total, side="left"))
    bounds = np.append(LATENCY_BOUNDS_MS, np.inf)
    return float(bounds[min(index, bounds.size - 1)])


@dataclass
class BatchStats:
    """What one micro-batch's tasks returned, merged on the driver."""

    batch_id: int
    tasks: int = 0
    records_in: int = 0
    records_out: int = 0
    records_dead_lettered: int = 0
    records_skipped: int = 0
    retries: int = 0
    fenced: int = 0
    outcomes: dict[str, int] = field(default_factory=lambda: dict.fromkeys(OUTCOMES, 0))
    phase_seconds: dict[str, float] = field(default_factory=lambda: dict.fromkeys(PHASES, 0.0))
    register_round_trips: int = 0
    first_send_after_begin_s: float = 0.0  # summed over transactions: registration's cost
    latency_counts: np.ndarray = field(default_factory=empty_histogram)
    task_phases: list[dict[str, float]] = field(default_factory=list)  # per transaction, for histograms
    # (identity, wall-clock seconds when commit_transaction returned) per commit that wrote records
    commits: list[tuple[str, float]] = field(default_factory=list)
    slots_fenced: int = 0  # slot scope: slot ids the driver fenced before the batch's tasks (a changed slot map)
    duration_s: float = 0.0
    # The sink driver's own steps (waiting for the keeper, the plan, the guards, the tasks' Spark job,
    # the empty slices), seconds each: where a batch's time goes besides the tasks' transactions.
    driver_seconds: dict[str, float] = field(default_factory=dict)

    @contextmanager
    def timing(self, step: str) -> Iterator[None]:
        """Add the time spent inside the block to driver_seconds[step]."""
        started = time.perf_counter()
        try:
            yield
        finally:
            self.driver_seconds[step] = self.driver_seconds.get(step, 0.0) + time.perf_counter() - started

    def add_task(self, row) -> None:
        """Merge one task's statistics row."""
        self.tasks += 1
        self.records_in += row["records_in"]
        self.records_out += row["records_out"]
        self.records_dead_lettered += row["records_dead_lettered"]
        self.records_skipped += row["records_skipped"]
        self.retries += row["retries"]
        self.fenced += row["fenced"]
        # A task whose slice outgrew one transaction committed several (sink_task.records_per_transaction).
        counted = row.get("transactions", 1) if row["outcome"] == "committed" else 1
        self.outcomes[row["outcome"]] = self.outcomes.get(row["outcome"], 0) + counted
        self.outcomes["fenced"] += row["fenced"]
        self.outcomes["aborted"] += row["aborted"]
        for phase in PHASES:
            self.phase_seconds[phase] += row[f"phase_{phase}_s"]
        if row["outcome"] == "committed":
            self.task_phases.append({phase: row[f"phase_{phase}_s"] for phase in PHASES})
            if row["txn"]:
                self.commits.append((row["txn"], row["committed_at_s"]))
        self.register_round_trips += row["register_round_trips"]
        self.first_send_after_begin_s += row["first_send_after_begin_s"]
        self.latency_counts = self.latency_counts + np.asarray(row["latency_counts"], dtype=np.int64)
