"""`eosbench bench recovery`: each engine SIGKILLed while fed live, relaunched at once, and timed alike.

Each engine (the Spark job in slot scope on the grouped source, Kafka Streams, Flink) runs as
`eosbench soak --pipeline <engine> --faults kill-driver` runs it, one engine after the other on the
same broker, input rate and partition count: the seeded producer feeds it, and each round SIGKILLs
the processing side (the driver's session, or the peer's JVM) and relaunches it at once. The soak's
sampler of the group's committed offsets times every engine from outside the same way: to the
first commit after the kill, and to throughput back at 90 % of its rate before the kill. Every
round is verified (live, then in full at the end), so a fast recovery that broke exactly-once
would show. For the Spark job, the relaunched driver's start timeline (streaming/start_timeline.py)
splits its time into steps: the JVM up to the Python driver, its imports, the session, the sink's
start checks and fences, the source, the query's start, Spark planning the first batch, and that
batch.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from typing import TYPE_CHECKING

from streaming.start_timeline import START_TIMELINE

if TYPE_CHECKING:
    from eosbench.soak.options import SoakOptions

ENGINES = ("spark", "kafka-streams", "flink")
# The steps of a relaunched Spark driver, each ending at a mark of streaming/start_timeline.py's StartTimeline.
SPARK_STEPS = ("python", "main", "session", "sink", "source", "query", "first_batch", "first_commit")
# The Spark job's best exactly-once arm (docs/benchmarks.md), as `bench peers` runs it.
SPARK_SCOPE, SPARK_SOURCE = "slot", "grouped"
METRICS_PORT = 9400  # the soak's own default: each engine's soak takes its three ports 10 apart from there


@dataclass
class EngineRecovery:
    """One engine's rounds: each kill's times, and for the Spark job each relaunch's steps."""

    engine: str
    first_commit_s: list[float] = field(default_factory=list)
    recovery_s: list[float] = field(default_factory=list)
    steps_s: list[dict[str, float]] = field(default_factory=list)  # Spark: seconds per step, per relaunch
    violations: list[str] = field(default_factory=list)
    records_verified: int = 0
    load_average: float = 0.0

    def summary(self) -> dict:
        """Median and worst of each time, and the median of each Spark step."""
        def spread(values: list[float]) -> dict:
            return {"median": statistics.median(values) if values else None, "max": max(values, default=None)}
        steps = {step: statistics.median([s[step] for s in self.steps_s if step in s])
                 for step in SPARK_STEPS if any(step in s for s in self.steps_s)}
        return {"first_commit_s": spread(self.first_commit_s), "recovery_s": spread(self.recovery_s),
                "spark_steps_median_s": steps, "rounds": len(self.first_commit_s), "violations": self.violations,
                "records_verified": self.records_verified, "load_average": self.load_average}


def start_timelines(log_dir: Path) -> list[dict[str, float]]:
    """Every launch's start timeline (streaming/start_timeline.py) in the soak's stream logs, in the order they began."""
    timelines = []
    for log in log_dir.glob("stream-*.log"):
        for line in log.read_text(errors="replace").splitlines():
            if line.startswith(START_TIMELINE):
                timelines.append(json.loads(line[len(START_TIMELINE):]))
                break
    return sorted(timelines, key=lambda marks: marks.get("python", marks.get("main", 0.0)))


def relaunch_steps(timelines: list[dict[str, float]], killed_at: float) -> dict[str, float] | None:
    """Seconds each step of the first launch after a kill took, from the kill on; None if no launch followed it."""
    marks = next((m for m in timelines if m.get("python", m.get("main", 0.0)) >= killed_at), None)
    if marks is None:
        return None
    steps, before = {}, killed_at
    for step in SPARK_STEPS:
        if step in marks:
            steps[step] = round(marks[step] - before, 2)
            before = marks[step]
    return steps


def soak_options(engine: str, rounds: int, partitions: int, rate: float, port: int, state_dir: Path | None,
                 output_dir: Path) -> SoakOptions:
    """The soak that measures one engine: kill-driver only, `rounds` times, at `rate` records/s.

    Each engine's soak serves its metrics on ports of its own: the last one's server lives on in this process.
    """
    from eosbench.soak.options import SoakOptions

    return SoakOptions(duration_s=3600, faults=("kill-driver",), pipeline=engine, max_faults=rounds,
                       throughput=rate, partitions=partitions, records_per_transaction=max(1, int(rate // 10)),
                       # The next kill waits for forty seconds' worth of records: a kill's backlog (under 20 s
                       # of input) drained, the engine has run at the offered rate for 20 s or more.
                       gate_records=int(rate * 40), max_offsets_per_trigger=max(20_000, int(rate * 5)),
                       port=port, state_dir=state_dir, output_dir=output_dir,
                       metrics_port=METRICS_PORT + 10 * ENGINES.index(engine),
                       **({"txn_scope": SPARK_SCOPE, "source": SPARK_SOURCE} if engine == "spark" else {}))


def measure(engine: str, options: SoakOptions) -> EngineRecovery:
    """Run one engine's soak and read its rounds (and, for the Spark job, each relaunched driver's log)."""
    from eosbench.soak.runner import Soak

    soak = Soak(options)
    report = soak.run()
    measured = EngineRecovery(engine, load_average=os.getloadavg()[0])
    measured.violations = list(report.violations)
    measured.records_verified = report.final.get("input_committed", 0)
    timelines = start_timelines(soak.output_dir / "logs") if engine == "spark" else []
    for fault in report.faults:
        if fault.first_commit_s is not None:
            measured.first_commit_s.append(fault.first_commit_s)
        if fault.recovery_s is not None:
            measured.recovery_s.append(fault.recovery_s)
        steps = relaunch_steps(timelines, report.started_at + fault.at_s) if timelines else None
        if steps:
            measured.steps_s.append(steps)
    return measured


def run(engines: list[str], rounds: int, partitions: int, rate: float, port: int, state_dir: Path | None,
        results_dir: Path) -> dict:
    """Measure every engine's recovery in turn on one broker, print the table and write the JSON."""
    run_id = time.strftime("%Y%m%d-%H%M%S")
    out = results_dir / "recovery" / run_id
    measured, measured_options = [], []
    for engine in engines:
        print(f"recovery of {engine}: {rounds} SIGKILLs at {rate:,.0f} records/s into {partitions} partitions"
              f" (load average {os.getloadavg()[0]:.2f})", flush=True)
        measured_options.append(soak_options(engine, rounds, partitions, rate, port, state_dir, out / engine))
        measured.append(measure(engine, measured_options[-1]))
    report = {"run_id": run_id, "rounds": rounds, "partitions": partitions, "rate": rate,
              "spark": {"txn_scope": SPARK_SCOPE, "source": SPARK_SOURCE, "trigger": measured_options[0].trigger},
              "engines": {m.engine: {**m.summary(), "rounds_s": asdict(m)} for m in measured}}
    out.mkdir(parents=True, exist_ok=True)
    path = out / "recovery.json"
    path.write_text(json.dumps(report, indent=2))
    print_table(report)
    print(f"report: {path}")
    print(f"plot: {plot(measured, out / 'recovery.png', rate, partitions)}")
    return report


def plot(measured: list[EngineRecovery], path: Path, rate: float, partitions: int) -> Path:
    """Each engine's median time to the first commit and to 90 % throughput after a SIGKILL, whiskers the rounds' spread."""
    from eosbench.console.plots import bars_png

    groups = {"first commit": {m.engine: m.first_commit_s for m in measured if m.first_commit_s},
              "90 % throughput": {m.engine: m.recovery_s for m in measured if m.recovery_s}}
    return bars_png({group: {engine: statistics.median(times) for engine, times in by_engine.items()}
                     for group, by_engine in groups.items()}, path,
                    f"seconds from a SIGKILL of the processing side, fed at {rate:,.0f} records/s into {partitions}"
                    " partitions (median; whiskers: best and worst round)", "seconds",
                    spread={group: {engine: (min(times), max(times)) for engine, times in by_engine.items()}
                            for group, by_engine in groups.items()})


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def print_table(report: dict) -> None:
    """The engines side by side: first commit and 90 % throughput after a SIGKILL, median and worst; Spark's steps."""
    print(f"\nrecovery after SIGKILL, {report['rounds']} rounds at {report['rate']:,.0f} records/s into"
          f" {report['partitions']} partitions (seconds from the kill; median / worst)")
    for engine, figures in report["engines"].items():
        first, back = figures["first_commit_s"], figures["recovery_s"]
        verdict = "exact" if not figures["violations"] else "VIOLATIONS: " + "; ".join(figures["violations"])[:160]
        print(f"  {engine:<14} first commit {_seconds(first['median'])} / {_seconds(first['max'])},"
              f" 90 % throughput {_seconds(back['median'])} / {_seconds(back['max'])}; {figures['rounds']} rounds,"
              f" {figures['records_verified']:,} records {verdict} (load average {figures['load_average']:.2f})")
    steps = report["engines"].get("spark", {}).get("spark_steps_median_s")
    if steps:
        print("  spark's relaunch, median seconds per step: " + ", ".join(f"{step} {seconds:.1f}"
                                                                         for step, seconds in steps.items()))
