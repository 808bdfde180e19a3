"""`eosbench bench peers`: the Spark job beside Kafka Streams and Flink, exactly-once and at-least-once.

Every arm drains the same pre-filled input (per partition count) as a process of its own, started
cold, as a user would start it: the Spark job as `eosbench stream --trigger available-now`, the
peers as eosbench/local/peers.py runs them. One observer times them all alike from outside: it
looks at the output's last stable offsets (one ListOffsets read_committed a look, five a second),
so what it sees is what a read_committed reader could read. From that timeline each arm gets the
time to its first visible output, its whole-run rate (committed input over the time from its
launch to its last visible output) and its steady rate (the records made visible between the
timeline's 10 % and 90 % marks over the time between them, start-up and the tail left out). CPU
seconds are every process of the arm's session, from /proc, just before it is stopped. Afterwards
the verifier judges each arm's output: the exactly-once arms must be exact, and the at-least-once
arms' duplicates are counted. Kafka's consumer perf test and one librdkafka consumer read the same
input beside them: the anchor. Arms rotate over the rounds; medians are printed.
"""

from __future__ import annotations

import json
import os
import signal
import statistics
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path

from confluent_kafka import IsolationLevel, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import OffsetSpec

from conf.client_config import Connection, connection
from eosbench.bench.consumer_anchor import anchors
from eosbench.bench.inputs import fill_input
from eosbench.console.errors import EnvironmentProblem
from eosbench.local.kafka_admin import admin_client, create_topic
from eosbench.local.peers import PeerSettings, peer_command
from eosbench.local.processes import Child, descendants, process_name
from streaming.verify.verifier import verify

PROCESS = "checksum"
# The Spark job's trigger, and so the peers' commit and checkpoint interval (eosbench/local/peers.py).
COMMIT_INTERVAL_MS = 1000
# Five looks a second: a peer drains 400,000 records in about 4 s, and its 10 % to 90 % span needs
# more than a handful of looks.
LOOK_EVERY_S = 0.2
# A drain is over once the output holds every committed input record and has not moved for this long.
SETTLED_S = 3.0
DRAIN_TIMEOUT_S = 600.0
# A look that meets one of these finds a partition whose leader the metadata does not know yet.
LEADER_MOVING = (KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE, KafkaError.UNKNOWN_TOPIC_OR_PART)
# engine, guarantee: what each arm runs. The Spark job's best exactly-once arm is slot scope on the
# grouped source (docs/benchmarks.md); its at-least-once arm is Spark's own Kafka sink, on the same source.
ARMS = {
    "spark-eos": ("spark", "exactly-once"),
    "spark-alo": ("spark", "at-least-once"),
    "kafka-streams-eos": ("kafka-streams", "exactly-once"),
    "kafka-streams-alo": ("kafka-streams", "at-least-once"),
    "flink-eos": ("flink", "exactly-once"),
    "flink-alo": ("flink", "at-least-once"),
}


@dataclass
class Drain:
    """One arm's drain of one input, as the observer and /proc saw it."""

    arm: str
    partitions: int
    round: int
    records: int  # committed input records the arm had to copy
    first_output_s: float | None = None  # launch to its first visible output
    wall_s: float | None = None  # launch to its last visible output
    records_per_s: float | None = None  # whole run
    steady_records_per_s: float | None = None  # between the 10 % and 90 % marks
    cpu_s: float | None = None
    cpu_s_by_command: dict[str, float] = field(default_factory=dict)  # the JVM's and Python's shares of cpu_s
    records_per_cpu_s: float | None = None
    duplicates: int = 0
    exact: bool = False
    load_average: float = 0.0
    violations: list[str] = field(default_factory=list)

    def take_cpu_sample(self, by_command: dict[str, float]) -> None:
        """Keep the largest CPU total sampled: a child that has exited but is not yet reaped counts nowhere for a
        moment (a Spark arm's JVM as its Python driver ends), and CPU time only grows."""
        if sum(by_command.values()) >= (self.cpu_s or 0.0):
            self.cpu_s_by_command, self.cpu_s = by_command, sum(by_command.values())


class VisibleOutput:
    """The sum of an output's last stable offsets over time, looked at from a thread of its own."""

    def __init__(self, bootstrap: str | Connection, topics: list[str]):
        self._admin = admin_client(bootstrap)
        self._topics = topics
        self._partitions: list[TopicPartition] = []
        self.timeline: list[tuple[float, int]] = []
        self.failed: str | None = None  # the error of the last look, while looks fail
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        """Begin looking; each look appends (monotonic time, visible offsets)."""
        metadata = self._admin.list_topics(timeout=30)
        self._partitions = [TopicPartition(topic, p) for topic in self._topics
                            for p in metadata.topics[topic].partitions]
        self._thread.start()

    def look(self) -> int:
        """The output's visible offsets now: what a read_committed reader could read, markers included."""
        requests = {tp: OffsetSpec.latest() for tp in self._partitions}
        futures = self._admin.list_offsets(requests, isolation_level=IsolationLevel.READ_COMMITTED, request_timeout=30)
        return sum(future.result().offset for future in futures.values())

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.timeline.append((time.monotonic(), self.look()))
                self.failed = None
            except KafkaException as exc:
                # A new topic's leaders reach the admin's metadata a moment after it is created
                # (NOT_LEADER_FOR_PARTITION, which librdkafka's ListOffsets does not mark retriable):
                # that look is skipped, and only a lasting failure counts.
                if not (exc.args[0].retriable() or exc.args[0].code() in LEADER_MOVING):
                    self.failed = str(exc.args[0])
                    return
                self.failed = self.failed or str(exc.args[0])
            self._stop.wait(LOOK_EVERY_S)

    def looking(self) -> bool:
        """Tell whether the looks go on (a failure that is not retriable ends them)."""
        return self._thread.is_alive()

    def stop(self) -> None:
        """Stop looking."""
        self._stop.set()
        self._thread.join(timeout=30)

    def settled_at(self, at_least: int) -> float | None:
        """When the output last moved, if it holds `at_least` offsets and has not moved for SETTLED_S."""
        if not self.timeline or self.timeline[-1][1] < at_least:
            return None
        looked_at, last = self.timeline[-1]
        changed_at = looked_at
        for t, visible in reversed(self.timeline):
            if visible != last:
                break
            changed_at = t
        return changed_at if looked_at - changed_at >= SETTLED_S else None


def cpu_seconds_by_command(pid: int) -> dict[str, float]:
    """User and system CPU seconds of a process and every descendant still running (reaped children included),
    summed by command name (`java`, `python`…): where an arm's CPU goes, the JVM's or Python's."""
    ticks = os.sysconf("SC_CLK_TCK")
    by_command: dict[str, float] = {}
    for each in [pid, *descendants(pid)]:
        try:
            fields = Path(f"/proc/{each}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        command = process_name(each) or "?"
        name = "python" if command.startswith("python") else command
        by_command[name] = by_command.get(name, 0.0) + sum(int(v) for v in fields[11:15]) / ticks  # utime…cstime
    return by_command


def spark_command(bootstrap: str | Connection, arm: str, input_topic: str, output_topic: str, app_id: str,
                  checkpoint: Path, max_offsets: int, trigger: str = "available-now") -> list[str]:
    """`eosbench stream` on the grouped source from the input's start, available-now (a drain) or at a trigger (live):
    slot scope, or Spark's Kafka sink."""
    target = connection(bootstrap)
    # Both on the grouped source, so that the two differ only in their sink: on Spark's own source a
    # batch costs about 40 ms a partition, which at 64 partitions took the at-least-once arm 77 s.
    sink = ["--sink", "kafka-eos", "--txn-scope", "slot"] if arm == "spark-eos" else ["--sink", "kafka-alo"]
    return [sys.executable, "-m", "eosbench.cli", "stream", "--bootstrap-server", target.bootstrap,
            *target.tool_arguments(), "--input-topic", input_topic, "--output-topic", output_topic,
            "--app-id", app_id, "--checkpoint", str(checkpoint), "--trigger", trigger,
            "--max-offsets-per-trigger", str(max_offsets), "--process", PROCESS, "--source", "grouped", *sink]


def arm_command(bootstrap: str | Connection, arm: str, input_topic: str, output_topic: str, app_id: str, scratch: Path,
                max_offsets: int, threads: int, trigger: str = "available-now") -> list[str]:
    """The command line of one arm reading `input_topic` from its start: the Spark job's (at `trigger`), or a peer's."""
    engine, guarantee = ARMS[arm]
    if engine == "spark":
        return spark_command(bootstrap, arm, input_topic, output_topic, app_id, scratch / "checkpoint", max_offsets,
                             trigger)
    return peer_command(PeerSettings(engine, guarantee, input_topic, output_topic, app_id, scratch / "state",
                                     process=PROCESS, threads=threads, commit_interval_ms=COMMIT_INTERVAL_MS), bootstrap)


def fill(bootstrap: str | Connection, topic: str, records: int, partitions: int, abort_ratio: float) -> int:
    """The input: `records` of 100 B in 100 ms transactions, `abort_ratio` of them aborted; returns the committed count."""
    committed = fill_input(bootstrap, topic, records, partitions, transaction_duration_ms=100,
                           transaction_abort_ratio=abort_ratio, seed=7)
    print(f"filled {topic}: {committed:,} committed records ({records:,} produced) in {partitions} partitions",
          flush=True)
    return committed


def marks(timeline: list[tuple[float, int]], start: float) -> tuple[float | None, float | None]:
    """(first visible output, steady rate in offsets/s between the 10 % and 90 % marks) of a timeline from `start`."""
    base = timeline[0][1] if timeline else 0
    moved = [(t, visible - base) for t, visible in timeline if visible > base]
    if not moved:
        return None, None
    final = moved[-1][1]
    low = next(entry for entry in moved if entry[1] >= 0.1 * final)
    high = next(entry for entry in moved if entry[1] >= 0.9 * final)
    steady = (high[1] - low[1]) / (high[0] - low[0]) if high[0] > low[0] else None
    return moved[0][0] - start, steady


def drain(bootstrap: str | Connection, arm: str, input_topic: str, committed: int, partitions: int, round_number: int,
          scratch: Path, max_offsets: int, threads: int) -> Drain:
    """Run one arm over the whole input in a process of its own, time it from outside, then verify its output."""
    tag = f"{arm}-p{partitions}-r{round_number}-{uuid.uuid4().hex[:6]}"
    output, app_id = f"{input_topic}-{tag}", f"bench-peers-{tag}"
    create_topic(bootstrap, output, partitions, 1)
    create_topic(bootstrap, f"{output}.dlq", partitions, 1)
    command = arm_command(bootstrap, arm, input_topic, output, app_id, scratch / tag, max_offsets, threads)
    result = Drain(arm, partitions, round_number, committed)
    watch = VisibleOutput(bootstrap, [output, f"{output}.dlq"])
    child = Child(arm, scratch / "logs")
    watch.start()
    started = time.monotonic()
    child.start(command)
    try:
        deadline = started + DRAIN_TIMEOUT_S
        while (settled := watch.settled_at(committed)) is None:
            if time.monotonic() > deadline:
                raise EnvironmentProblem(f"{arm} did not drain {committed:,} records in {DRAIN_TIMEOUT_S:g} s"
                                         f" (log: {child.log_path}; the output's offsets: {watch.failed or 'read'})")
            if not watch.looking():
                raise EnvironmentProblem(f"cannot read {output}'s offsets: {watch.failed}")
            if child.alive():
                # Sampled as it runs: the Spark arm ends by itself once it has drained (available-now),
                # and its last half second is all this misses.
                result.take_cpu_sample(cpu_seconds_by_command(child.pid))
            elif child.exit_code() != 0:
                raise EnvironmentProblem(f"{arm} exited {child.exit_code()}: {child.last_lines(1)[:300]}"
                                         f" (log: {child.log_path})")
            time.sleep(LOOK_EVERY_S)
        if child.alive():
            result.take_cpu_sample(cpu_seconds_by_command(child.pid))
        result.load_average = os.getloadavg()[0]
    finally:
        child.kill(signal.SIGKILL)
        watch.stop()
    result.wall_s = settled - started
    result.records_per_s = committed / result.wall_s
    first, steady_offsets = marks(watch.timeline, started)
    final_offsets = watch.timeline[-1][1] - watch.timeline[0][1]
    # The timeline counts transaction markers too; the records share the offsets' rate in proportion.
    result.first_output_s = first
    report = verify(bootstrap, input_topic, output, None, f"{output}.dlq", process=PROCESS)
    delivered = report.output_committed + report.dead_lettered
    result.steady_records_per_s = steady_offsets * delivered / final_offsets if steady_offsets and final_offsets else None
    result.records_per_cpu_s = committed / result.cpu_s if result.cpu_s else None
    result.duplicates = report.duplicates
    result.violations = list(report.violations)
    result.exact = not report.violations and report.duplicates == report.lost == 0 and delivered == committed
    return result


def run(bootstrap: str | Connection, records: int, partition_counts: list[int], rounds: int, arms: list[str],
        abort_ratio: float, output_dir: Path, threads: int) -> dict:
    """Fill an input per partition count, drain it with every arm over the rounds, print and return the report."""
    run_id = uuid.uuid4().hex[:8]
    scratch = Path(tempfile.mkdtemp(prefix="eosbench-bench-peers-"))
    drains: list[Drain] = []
    anchor_reads: dict[int, dict] = {}
    for partitions in partition_counts:
        source = f"eosbench-peers-{run_id}-p{partitions}"
        committed = fill(bootstrap, source, records, partitions, abort_ratio)
        # About twenty micro-batches a drain, the cap every Spark arm reads with.
        max_offsets = max(1, committed // 20)
        anchor_reads[partitions] = anchors(bootstrap, source)
        for reader, read in anchor_reads[partitions].items():
            print(f"{partitions:>4} partitions anchor {reader:<25} {read['records_per_sec']:>10,.0f} records/s"
                  f" (load average {os.getloadavg()[0]:.2f})", flush=True)
        for round_number in range(1, rounds + 1):
            shift = (round_number - 1) % len(arms)
            for arm in arms[shift:] + arms[:shift]:  # rotated, so that no arm always goes first
                done = drain(bootstrap, arm, source, committed, partitions, round_number, scratch, max_offsets, threads)
                drains.append(done)
                print(_line(done), flush=True)
    report = {"run_id": run_id, "records": records, "abort_ratio": abort_ratio, "rounds": rounds, "threads": threads,
              "commit_interval_ms": COMMIT_INTERVAL_MS, "process": PROCESS, "drains": [asdict(d) for d in drains],
              "anchors": {str(p): reads for p, reads in anchor_reads.items()},
              "settings": {engine: PeerSettings(engine, "exactly-once", "<in>", "<out>", "<app>", Path("<state>"),
                                                threads=threads, commit_interval_ms=COMMIT_INTERVAL_MS).chosen_settings()
                           for engine in ("kafka-streams", "flink")},
              "medians": medians(drains)}
    output_dir.mkdir(parents=True, exist_ok=True)
    report["results_table"] = record_rows(drain_rows(report), output_dir)
    path = output_dir / f"peers-bench-{run_id}.json"
    path.write_text(json.dumps(report, indent=2))
    _print(report, path)
    print(f"plot: {plot_drains(drains, output_dir / f'peers-bench-{run_id}.png')}")
    print(f"results table: {report['results_table']}; `eosbench report --run-id {run_id}` plots it")
    return report


def common_row(report: dict) -> dict:
    """The results-table columns every row of a `bench peers` run shares."""
    from eosbench.bench import results

    return dict(run_id=report["run_id"], bench="peers", workload=None, git_revision=results.git_revision(),
                machine_json=json.dumps(results.machine_facts()), brokers=None, record_size=100)


def drain_rows(report: dict) -> list[dict]:
    """The results table's rows of a drain run: one per arm and partition count (its medians), and the anchors."""
    from eosbench.bench import results

    common = {**common_row(report), "abort_ratio": report["abort_ratio"], "records": report["records"]}
    rows = []
    for partitions, by_arm in report["medians"].items():
        for arm, figures in by_arm.items():
            engine, guarantee = ARMS[arm]
            baseline = f"{engine}-alo" if guarantee == "exactly-once" else None
            base = by_arm.get(baseline, {}).get("steady_records_per_s") if baseline else None
            rows.append(results.new_row(
                **common, cell=f"{arm}-p{partitions}", sink=arm, seconds=figures["wall_s"],
                throughput_rps=figures["steady_records_per_s"], goodput_rps=figures["records_per_s"],
                baseline=baseline if base else None,
                overhead_ratio=base / figures["steady_records_per_s"] if base and figures["steady_records_per_s"] else None,
                config_json=json.dumps({"mode": "drain", "partitions": int(partitions), "rounds": report["rounds"],
                                        "threads": report["threads"], "process": report["process"],
                                        "settings": report["settings"].get(engine, {})}),
                figures_json=json.dumps(figures)))
    for partitions, reads in report["anchors"].items():
        for reader, read in reads.items():
            rows.append(results.new_row(
                **{**common, "bench": "anchor"}, cell=f"anchor-{reader}-p{partitions}", sink=reader,
                throughput_rps=read["records_per_sec"], goodput_rps=read["records_per_sec"],
                config_json=json.dumps({"mode": "read_committed, whole input", "partitions": int(partitions)}),
                figures_json=json.dumps(read)))
    return rows


def record_rows(rows: list[dict], results_dir: Path) -> str:
    """Append rows to the Delta results table (a Spark session of this process's); say where and how many."""
    from eosbench.bench import results
    from eosbench.local.spark import spark_session

    return f"{results.append_rows(spark_session('eosbench-results'), rows, results_dir)} ({len(rows)} rows)"


def plot_drains(drains: list[Drain], path: Path) -> Path:
    """Each arm's steady records/s per partition count, the median bar with the rounds' lowest and highest as whiskers."""
    from eosbench.console.plots import bars_png

    rates: dict[str, dict[str, list[float]]] = {}
    for done in drains:
        if done.steady_records_per_s is not None:
            rates.setdefault(f"{done.partitions} partitions", {}).setdefault(done.arm, []).append(done.steady_records_per_s)
    return bars_png({group: {arm: statistics.median(values) for arm, values in arms.items()}
                     for group, arms in rates.items()}, path,
                    "steady records/s of each arm draining one input (median of the rounds; whiskers: lowest and"
                    " highest)", "records/s",
                    spread={group: {arm: (min(values), max(values)) for arm, values in arms.items()}
                            for group, arms in rates.items()})


def medians(drains: list[Drain]) -> dict[str, dict[str, dict[str, float | None]]]:
    """{partitions: {arm: {figure: median over rounds}}}, with each arm's exact rounds and duplicates summed."""
    rounds: dict[tuple[str, str], list[Drain]] = {}
    for done in drains:
        rounds.setdefault((str(done.partitions), done.arm), []).append(done)
    out: dict[str, dict[str, dict[str, float | None]]] = {}
    for (partitions, arm), mine in rounds.items():
        figures = {}
        for figure in ("steady_records_per_s", "records_per_s", "wall_s", "first_output_s", "records_per_cpu_s"):
            values = [getattr(d, figure) for d in mine if getattr(d, figure) is not None]
            figures[figure] = statistics.median(values) if values else None
        out.setdefault(partitions, {})[arm] = {**figures, "exact_rounds": sum(d.exact for d in mine),
                                               "duplicates": sum(d.duplicates for d in mine)}
    return out


def _figure(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def _cpu_shares(done: Drain) -> str:
    """The JVM's and Python's shares of an arm's CPU seconds, where both ran: ' (java 61 %, python 39 %)'."""
    if len(done.cpu_s_by_command) < 2 or not done.cpu_s:
        return ""
    shares = sorted(done.cpu_s_by_command.items(), key=lambda item: -item[1])
    return " (" + ", ".join(f"{command} {seconds / done.cpu_s * 100:.0f} %" for command, seconds in shares if seconds) + ")"


def _line(done: Drain) -> str:
    return (f"{done.partitions:>4} partitions round {done.round} {done.arm:<18} steady"
            f" {_figure(done.steady_records_per_s, ',.0f'):>9} records/s, whole {_figure(done.records_per_s, ',.0f'):>9}"
            f" records/s in {_figure(done.wall_s, '.1f')} s, first output {_figure(done.first_output_s, '.1f')} s,"
            f" {_figure(done.records_per_cpu_s, ',.0f')} records/CPU-s{_cpu_shares(done)},"
            f" {'exact' if done.exact else 'NOT EXACT: ' + (done.violations or ['short of the input'])[0][:120]}"
            f"{f', {done.duplicates:,} duplicates' if done.duplicates else ''} (load average {done.load_average:.2f})")


def _print(report: dict, path: Path) -> None:
    print(f"\npeers bench {report['run_id']}: medians of {report['rounds']} round(s), {report['threads']} threads,"
          f" commit interval {report['commit_interval_ms']} ms")
    for partitions, by_arm in report["medians"].items():
        print(f"{partitions} partitions:")
        for arm, figures in by_arm.items():
            print(f"  {arm:<18} steady {_figure(figures['steady_records_per_s'], ',.0f'):>9} records/s,"
                  f" whole {_figure(figures['records_per_s'], ',.0f'):>9} records/s,"
                  f" wall {_figure(figures['wall_s'], '.1f')} s, first output {_figure(figures['first_output_s'], '.1f')} s,"
                  f" {_figure(figures['records_per_cpu_s'], ',.0f')} records/CPU-s,"
                  f" exact {figures['exact_rounds']}/{report['rounds']}, duplicates {figures['duplicates']:,}")
    for engine, chosen in report["settings"].items():
        print(f"{engine} settings: " + ", ".join(f"{name}={value}" for name, value in chosen.items()))
    print(f"report: {path}")
