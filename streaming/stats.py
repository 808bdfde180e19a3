"""Statistics that sink tasks return to the driver (counts, phase timings, a latency histogram), and a run's totals.

The histogram has fixed log-spaced buckets (5 % wide, HdrHistogram-style), so histograms from
any number of tasks merge by adding their counts, and the driver never touches a record. The
driver folds each batch's BatchStats into the run's StreamSummary.
"""

from __future__ import annotations

import json
import statistics
import time
from collections import deque
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
    ("txn_id", "string"), ("writer", "string"),  # the transactional id and its producer's writer token
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


def writers_of(rows) -> dict[str, str]:
    """Per transactional id, the writer token the rows report for it (rows without a token report none)."""
    return {row["txn_id"]: row["writer"] for row in rows if row.get("writer")}


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
    writers: dict[str, str] = field(default_factory=dict)  # per transactional id, the token of the producer that used it
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
        self.writers.update(writers_of([row]))
        self.register_round_trips += row["register_round_trips"]
        self.first_send_after_begin_s += row["first_send_after_begin_s"]
        self.latency_counts = self.latency_counts + np.asarray(row["latency_counts"], dtype=np.int64)


# Batches a run's steady figures leave out: the first creates Spark's Kafka consumers and the
# sink's producers, the second still meets some (a task landing on another Python worker).
STARTUP_BATCHES = 2


def median_ms(steps: list[dict[str, float]], scale: float = 1.0) -> dict[str, float]:
    """The median of each step over a list of {step: duration} (times `scale`), a step missing from one counting 0."""
    names = sorted({name for durations in steps for name in durations})
    return {name: statistics.median(durations.get(name, 0.0) for durations in steps) * scale for name in names}


def steady_input_rate(progress: list, skip: int = STARTUP_BATCHES) -> float | None:
    """Input rows per second between the starts of the batches after the first `skip`.

    The span from one batch's start to the next is what a trigger of any kind really costs (a
    processing-time trigger waits out the interval, a slower batch delays the next), so this is
    the rate a running query sustains, without its start-up and without its last batch, which a
    stop may cut short. None when fewer than two batches follow the skipped ones.
    """
    from datetime import datetime

    starts, rows, seen = [], [], set()
    for report in progress:
        if report.batchId in seen:  # an idle trigger repeats the last batch's id
            continue
        seen.add(report.batchId)
        starts.append(datetime.fromisoformat(report.timestamp).timestamp())
        rows.append(report.numInputRows)
    starts, rows = starts[skip:], rows[skip:]
    if len(starts) < 2 or starts[-1] <= starts[0]:
        return None
    return sum(rows[:-1]) / (starts[-1] - starts[0])


@dataclass
class StreamSummary:
    """Totals over every batch of one run."""

    batches: int = 0
    input_rows: int = 0  # from the query's progress: what the source handed over, for every sink
    records_in: int = 0
    records_out: int = 0
    records_dead_lettered: int = 0
    records_skipped: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    retries: int = 0
    seconds: float = 0.0
    steady_input_rows_per_s: float | None = None  # from the query's progress, start-up excluded
    latency_p50_ms: float = 0.0
    latency_p99_ms: float = 0.0
    phase_seconds: dict[str, float] = field(default_factory=dict)
    register_round_trips: int = 0
    first_send_after_begin_s: float = 0.0
    slots_fenced: int = 0  # slot scope: slot ids the driver fenced (at start, and for each changed slot map)
    # Median ms per batch, start-up excluded: Spark's trigger steps (durationMs) and the sink driver's own
    # steps (BatchStats.driver_seconds), which is where a batch's time goes before and after the tasks.
    trigger_ms: dict[str, float] = field(default_factory=dict)
    driver_ms: dict[str, float] = field(default_factory=dict)
    visibility: dict | None = None  # with --observe-visibility: streaming/verify/visibility.py's VisibilitySummary
    python: dict | None = None  # with --report-python: streaming/job.py's python_locations()
    txn_scope: str | None = None  # the transactional sink's scope as it ran (None for the other sinks)
    txn_scope_chosen: str | None = None  # with --txn-scope auto: the scope it chose, and why
    source: str | None = None  # the Kafka source it read with (--source auto chooses one)
    _latency: object = None
    _driver_seconds: deque = field(default_factory=lambda: deque(maxlen=1000))  # the last batches': a soak runs for days

    def add(self, batch: BatchStats) -> None:
        """Fold one batch in."""
        self.batches += 1
        self.records_in += batch.records_in
        self.records_out += batch.records_out
        self.records_dead_lettered += batch.records_dead_lettered
        self.records_skipped += batch.records_skipped
        self.retries += batch.retries
        self.register_round_trips += batch.register_round_trips
        self.first_send_after_begin_s += batch.first_send_after_begin_s
        self.slots_fenced += batch.slots_fenced
        for outcome, count in batch.outcomes.items():
            self.outcomes[outcome] = self.outcomes.get(outcome, 0) + count
        for phase, seconds in batch.phase_seconds.items():
            self.phase_seconds[phase] = self.phase_seconds.get(phase, 0.0) + seconds
        self._latency = batch.latency_counts if self._latency is None else self._latency + batch.latency_counts
        self._driver_seconds.append(batch.driver_seconds)
        self.latency_p50_ms = histogram_percentile(self._latency, 0.5)
        self.latency_p99_ms = histogram_percentile(self._latency, 0.99)

    def settle(self, progress: list) -> None:
        """Fill in the figures read at the end of the run: the steady rate and the median steps."""
        self.input_rows = sum(report.numInputRows for report in progress)
        self.steady_input_rows_per_s = steady_input_rate(progress)
        steps: dict[int, dict] = {}
        for report in progress:  # an idle trigger repeats the last batch's id: the batch's own report comes first
            steps.setdefault(report.batchId, report.durationMs)
        ordered = [steps[batch] for batch in sorted(steps)]
        self.trigger_ms = median_ms(ordered[STARTUP_BATCHES:] or ordered)
        driver = list(self._driver_seconds)
        if self.batches == len(driver):  # the start-up batches are still held
            driver = driver[STARTUP_BATCHES:] or driver
        self.driver_ms = median_ms(driver, scale=1000)

    def to_json(self) -> str:
        """Serialise without the raw histogram."""
        return json.dumps({k: v for k, v in self.__dict__.items() if not k.startswith("_")}, indent=2)
