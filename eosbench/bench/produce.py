"""`eosbench bench produce`: eosbench produce beside Java's ProducerPerformance, same broker, same run.

Both tools print the same final line, so both are parsed by one regular expression; eosbench's
JSON summary adds what Java cannot report (committed goodput under aborts). Runs alternate
between the tools so that drift of the machine hits both alike, each on a fresh topic.
"""

from __future__ import annotations

import json
import re
import statistics
import subprocess
import sys
import tempfile
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

from conf.settings import console_log4j_config
from eosbench.local.environment import check_java
from eosbench.console.errors import CheckFailed
from eosbench.local.jars import resolve_bundle
from eosbench.bench.report import GOODPUT_TARGET
from eosbench.local.kafka_admin import cluster_metadata, create_topic, delete_topics

FINAL_LINE = re.compile(
    r"^(?P<records>\d+) records sent, (?P<rps>[\d.]+) records/sec \((?P<mbps>[\d.]+) MB/sec\),"
    r" (?P<avg>[\d.]+) ms avg latency, (?P<max>[\d.]+) ms max latency, (?P<p50>\d+) ms 50th,"
    r" (?P<p95>\d+) ms 95th, (?P<p99>\d+) ms 99th, (?P<p999>\d+) ms 99.9th\.$",
    re.MULTILINE,
)
ABORT_RATIOS = (0.1, 0.5, 0.9)


@dataclass
class ToolRun:
    """One run of one tool in one mode."""

    tool: str
    mode: str
    records_per_sec: float
    goodput_records_per_sec: float
    avg_ms: float
    p50_ms: float
    p99_ms: float
    max_ms: float
    abort_ratio: float = 0.0
    aborted_record_fraction: float = 0.0


def _final_line(output: str, tool: str) -> re.Match:
    match = FINAL_LINE.search(output)
    if not match:
        raise CheckFailed(f"{tool} printed no final line; last output: {output.strip().splitlines()[-1:]}")
    return match


def _common_flags(topic: str, num_records: int, record_size: int, duration_ms: int | None) -> list[str]:
    flags = ["--topic", topic, "--num-records", str(num_records), "--record-size", str(record_size),
             "--throughput", "-1"]
    return flags + (["--transaction-duration-ms", str(duration_ms)] if duration_ms else [])


def run_java(bootstrap: str, topic: str, num_records: int, record_size: int, duration_ms: int | None,
             mode: str) -> ToolRun:
    """Run Java's ProducerPerformance from the cached kafka-tools jar."""
    classpath = str(resolve_bundle("kafka")[0].parent / "*")
    command = [check_java(), "-Xmx512m", f"-Dlog4j2.configurationFile={console_log4j_config()}",
               "-cp", classpath, "org.apache.kafka.tools.ProducerPerformance",
               *_common_flags(topic, num_records, record_size, duration_ms),
               "--command-property", "acks=all", f"bootstrap.servers={bootstrap}"]
    completed = subprocess.run(command, capture_output=True, text=True)
    m = _final_line(completed.stdout, "Java ProducerPerformance")
    return ToolRun("java", mode, float(m["rps"]), float(m["rps"]), float(m["avg"]), float(m["p50"]),
                   float(m["p99"]), float(m["max"]))


def run_eosbench(bootstrap: str, topic: str, num_records: int, record_size: int, duration_ms: int | None,
                 mode: str, abort_ratio: float = 0.0, records_per_transaction: int | None = None) -> ToolRun:
    """Run `eosbench produce` in its own process, as a user would."""
    with tempfile.TemporaryDirectory() as scratch:
        summary_file = Path(scratch) / "summary.json"
        command = [sys.executable, "-m", "eosbench.cli", "produce",
                   *_common_flags(topic, num_records, record_size, duration_ms),
                   "--producer-props", "acks=all", "--bootstrap-server", bootstrap,
                   "--output-json", str(summary_file)]
        if abort_ratio:
            command += ["--transaction-abort-ratio", str(abort_ratio)]
        if records_per_transaction:
            command += ["--records-per-transaction", str(records_per_transaction)]
        completed = subprocess.run(command, capture_output=True, text=True)
        if completed.returncode != 0:
            raise CheckFailed(f"eosbench produce failed: {completed.stderr.strip()[-300:]}")
        _final_line(completed.stdout, "eosbench produce")
        summary = json.loads(summary_file.read_text())
    total = summary["total"]
    ended = summary["records_committed"] + summary["records_aborted"]
    return ToolRun("eosbench", mode, total["records_per_sec"], summary["goodput_records_per_sec"],
                   total["avg_ms"], total["p50_ms"], total["p99_ms"], total["max_ms"], abort_ratio,
                   summary["records_aborted"] / ended if ended else 0.0)


def run(bootstrap: str, num_records: int, record_size: int, duration_ms: int, repeat: int, output_dir: Path) -> dict:
    """Run the side-by-side matrix and the abort sweep `repeat` times; print and return the report."""
    brokers = len(cluster_metadata(bootstrap).brokers)
    tx_mode = f"transactions {duration_ms} ms"

    def fresh_topic() -> str:
        name = f"eosbench-produce-bench-{uuid.uuid4().hex[:8]}"
        create_topic(bootstrap, name, partitions=1, replication_factor=min(3, brokers))
        return name

    def once(tool, mode: str, duration: int | None, **kwargs) -> ToolRun:
        topic = fresh_topic()
        try:
            result = tool(bootstrap, topic, num_records, record_size, duration, mode, **kwargs)
        finally:
            delete_topics(bootstrap, [topic])
        _print_run(result)
        return result

    runs: list[ToolRun] = []
    for round_number in range(1, repeat + 1):
        print(f"round {round_number} of {repeat}", flush=True)
        for mode, duration in (("no transactions", None), (tx_mode, duration_ms)):
            runs += [once(run_java, mode, duration), once(run_eosbench, mode, duration)]
        for ratio in ABORT_RATIOS:
            runs.append(once(run_eosbench, f"{tx_mode}, abort {ratio}", duration_ms, abort_ratio=ratio))

    def median(tool: str, mode: str, figure: str) -> float:
        return statistics.median(getattr(r, figure) for r in runs if r.tool == tool and r.mode == mode)

    goodput_zero = median("eosbench", tx_mode, "goodput_records_per_sec")
    report = {
        "bootstrap": bootstrap, "brokers": brokers, "num_records": num_records, "record_size": record_size,
        "acks": "all", "transaction_duration_ms": duration_ms, "repeat": repeat,
        "runs": [asdict(r) for r in runs],
        "eosbench_over_java": {
            mode: median("eosbench", mode, "records_per_sec") / median("java", mode, "records_per_sec")
            for mode in ("no transactions", tx_mode)
        },
        "abort_goodput": {},
    }
    for ratio in ABORT_RATIOS:
        mode = f"{tx_mode}, abort {ratio}"
        goodput = median("eosbench", mode, "goodput_records_per_sec")
        realized = median("eosbench", mode, "aborted_record_fraction")
        report["abort_goodput"][str(ratio)] = {
            "goodput": goodput,
            "ratio_to_ideal": goodput / ((1 - ratio) * goodput_zero),
            "realized_aborted_fraction": realized,
            # With ~30 transactions a run, the coin's luck moves goodput by +-10 %; dividing by
            # the fraction that really was aborted leaves the cost of aborting itself.
            "ratio_to_realized": goodput / ((1 - realized) * goodput_zero) if realized < 1 else None,
        }
    output_dir.mkdir(parents=True, exist_ok=True)
    path = output_dir / f"produce-bench-{uuid.uuid4().hex[:8]}.json"
    path.write_text(json.dumps(report, indent=2))
    _print_report(report, path)
    return report


def _print_run(r: ToolRun) -> None:
    print(f"  {r.tool:<9} {r.mode:<38} {r.records_per_sec:>12,.0f} rec/s  goodput {r.goodput_records_per_sec:>12,.0f}"
          f"  avg {r.avg_ms:8.2f} ms  p99 {r.p99_ms:6.0f} ms", flush=True)


def _print_report(report: dict, path: Path) -> None:
    for mode, ratio in report["eosbench_over_java"].items():
        verdict = "meets" if ratio >= 1.0 else "misses"
        print(f"eosbench / Java records/sec, {mode}: {ratio:.2f} ({verdict} the >= 1.0 target)")
    for ratio, figures in report["abort_goodput"].items():
        verdict = "meets" if figures["ratio_to_ideal"] >= GOODPUT_TARGET else "misses"
        realized = figures["ratio_to_realized"]
        print(f"abort ratio {ratio}: goodput {figures['goodput']:,.0f} rec/s = {figures['ratio_to_ideal']:.2f}"
              f" x (1 - r) x goodput(0) ({verdict} the >= {GOODPUT_TARGET} target);"
              f" {figures['realized_aborted_fraction']:.2f} of records really aborted, so"
              f" {realized:.2f} x (1 - realized) x goodput(0)" if realized is not None else "")
    print(f"json: {path}")
