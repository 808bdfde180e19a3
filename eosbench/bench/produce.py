"""`eosbench bench produce`: eosbench produce beside Java's ProducerPerformance, same broker, same run.

Both tools print the same final line, so both are parsed by one regular expression; eosbench's
JSON summary adds what Java cannot report (committed goodput under aborts). Runs alternate
between the tools so that drift of the machine hits both alike, each on a fresh topic.

Three parts: the unthrottled throughput matrix (without and with transactions), the abort sweep
(goodput against `(1 - r) x` goodput(0)), and the throttled latency pair: at each
`--throttled-rates` rate, both tools with the same flags (`acks=all linger.ms=0`, the way people
measure latency with `kafka-producer-perf-test`), their p50, p99 and average side by side.
"""

from __future__ import annotations

import json
import math
import re
import statistics
import subprocess
import sys
import tempfile
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

from conf.client_config import Connection, connection
from eosbench.bench.report import GOODPUT_TARGET
from eosbench.console.errors import CheckFailed
from eosbench.local.jars import kafka_tools_command
from eosbench.local.kafka_admin import cluster_metadata, create_topic, delete_topics

FINAL_LINE = re.compile(
    r"^(?P<records>\d+) records sent, (?P<rps>[\d.]+) records/sec \((?P<mbps>[\d.]+) MB/sec\),"
    r" (?P<avg>[\d.]+) ms avg latency, (?P<max>[\d.]+) ms max latency, (?P<p50>\d+) ms 50th,"
    r" (?P<p95>\d+) ms 95th, (?P<p99>\d+) ms 99th, (?P<p999>\d+) ms 99.9th\.$",
    re.MULTILINE,
)
ABORT_RATIOS = (0.1, 0.5, 0.9)
THROTTLED_RATES = (500, 5_000)
THROTTLED_SECONDS = 6  # 3,000 records at 500 records/s, against Java's tool
LATENCY_PROPS = ("acks=all", "linger.ms=0")
# eosbench's throttled p50 may exceed Java's by 2 ms or by half, whichever is larger.
P50_SLACK_MS = 2.0
P50_SLACK_FACTOR = 1.5


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


def _common_flags(topic: str, num_records: int, record_size: int, duration_ms: int | None,
                  throughput: float) -> list[str]:
    flags = ["--topic", topic, "--num-records", str(num_records), "--record-size", str(record_size),
             "--throughput", f"{throughput:g}"]
    return flags + (["--transaction-duration-ms", str(duration_ms)] if duration_ms else [])


def run_java(bootstrap: str | Connection, topic: str, num_records: int, record_size: int, duration_ms: int | None,
             mode: str, throughput: float = -1, props: tuple[str, ...] = ("acks=all",)) -> ToolRun:
    """Run Java's ProducerPerformance from the cached kafka-tools jar."""
    command = [*kafka_tools_command("ProducerPerformance"),
               *_common_flags(topic, num_records, record_size, duration_ms, throughput),
               "--command-property", *props, f"bootstrap.servers={bootstrap}", *connection(bootstrap).tool_arguments()]
    completed = subprocess.run(command, capture_output=True, text=True)
    m = _final_line(completed.stdout, "Java ProducerPerformance")
    return ToolRun("java", mode, float(m["rps"]), float(m["rps"]), float(m["avg"]), float(m["p50"]),
                   float(m["p99"]), float(m["max"]))


def run_eosbench(bootstrap: str | Connection, topic: str, num_records: int, record_size: int, duration_ms: int | None,
                 mode: str, abort_ratio: float = 0.0, records_per_transaction: int | None = None,
                 throughput: float = -1, props: tuple[str, ...] = ("acks=all",)) -> ToolRun:
    """Run `eosbench produce` in its own process, as a user would."""
    with tempfile.TemporaryDirectory() as scratch:
        summary_file = Path(scratch) / "summary.json"
        command = [sys.executable, "-m", "eosbench.cli", "produce",
                   *_common_flags(topic, num_records, record_size, duration_ms, throughput),
                   "--producer-props", *props, "--bootstrap-server", str(bootstrap),
                   *connection(bootstrap).tool_arguments(),
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


def run(bootstrap: str | Connection, num_records: int, record_size: int, duration_ms: int, repeat: int, output_dir: Path,
        throttled_rates: tuple[float, ...] = THROTTLED_RATES, latency_only: bool = False) -> dict:
    """Run the matrix, the abort sweep and the throttled latency pair `repeat` times; print and return the report."""
    brokers = len(cluster_metadata(bootstrap).brokers)
    tx_mode = f"transactions {duration_ms} ms"

    def fresh_topic() -> str:
        name = f"eosbench-produce-bench-{uuid.uuid4().hex[:8]}"
        create_topic(bootstrap, name, partitions=1, replication_factor=min(3, brokers))
        return name

    def once(tool, mode: str, duration: int | None, records: int = num_records, **kwargs) -> ToolRun:
        topic = fresh_topic()
        try:
            result = tool(bootstrap, topic, records, record_size, duration, mode, **kwargs)
        finally:
            delete_topics(bootstrap, [topic])
        _print_run(result)
        return result

    runs: list[ToolRun] = []
    for round_number in range(1, repeat + 1):
        print(f"round {round_number} of {repeat}", flush=True)
        if not latency_only:
            for mode, duration in (("no transactions", None), (tx_mode, duration_ms)):
                runs += [once(run_java, mode, duration), once(run_eosbench, mode, duration)]
            for ratio in ABORT_RATIOS:
                runs.append(once(run_eosbench, f"{tx_mode}, abort {ratio}", duration_ms, abort_ratio=ratio))
        for rate in throttled_rates:
            # Which tool goes first alternates by round, so a warming broker favours neither.
            for tool in (run_java, run_eosbench) if round_number % 2 else (run_eosbench, run_java):
                runs.append(once(tool, throttled_mode(rate), None, records=max(1, round(rate * THROTTLED_SECONDS)),
                                 throughput=rate, props=LATENCY_PROPS))

    def median(tool: str, mode: str, figure: str) -> float:
        return statistics.median(getattr(r, figure) for r in runs if r.tool == tool and r.mode == mode)

    report = {
        "bootstrap": str(bootstrap), "brokers": brokers, "num_records": num_records, "record_size": record_size,
        "acks": "all", "transaction_duration_ms": duration_ms, "repeat": repeat,
        "runs": [asdict(r) for r in runs],
    }
    if not latency_only:
        goodput_zero = median("eosbench", tx_mode, "goodput_records_per_sec")
        report["eosbench_over_java"] = {
            mode: median("eosbench", mode, "records_per_sec") / median("java", mode, "records_per_sec")
            for mode in ("no transactions", tx_mode)
        }
        report["abort_goodput"] = {}
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
    report["throttled_latency"] = {
        f"{rate:g}": throttled_pair([r for r in runs if r.mode == throttled_mode(rate)]) for rate in throttled_rates
    }
    output_dir.mkdir(parents=True, exist_ok=True)
    path = output_dir / f"produce-bench-{uuid.uuid4().hex[:8]}.json"
    path.write_text(json.dumps(report, indent=2))
    _print_report(report, path)
    return report


def throttled_mode(rate: float) -> str:
    """The mode label of the throttled latency pair at one rate."""
    return f"throttled {rate:g} records/s, {' '.join(LATENCY_PROPS)}"


def p50_bound_ms(java_p50_ms: float) -> float:
    """The largest eosbench p50 that counts as Java's: 2 ms or 1.5 x more, whichever is larger."""
    return max(java_p50_ms + P50_SLACK_MS, P50_SLACK_FACTOR * java_p50_ms)


def throttled_pair(runs: list[ToolRun]) -> dict:
    """Medians of p50, p99 and avg for each tool at one rate, and eosbench's p50 judged against Java's.

    Percentiles are compared in whole milliseconds, floored, the resolution Java prints.
    """
    figures = {tool: {"p50_ms": statistics.median(math.floor(r.p50_ms) for r in mine),
                      "p99_ms": statistics.median(math.floor(r.p99_ms) for r in mine),
                      "avg_ms": statistics.median(r.avg_ms for r in mine), "runs": len(mine)}
               for tool in ("java", "eosbench") if (mine := [r for r in runs if r.tool == tool])}
    bound = p50_bound_ms(figures["java"]["p50_ms"])
    return {**figures, "p50_bound_ms": bound, "p50_within_bound": figures["eosbench"]["p50_ms"] <= bound}


def _print_run(r: ToolRun) -> None:
    print(f"  {r.tool:<9} {r.mode:<38} {r.records_per_sec:>12,.0f} rec/s  goodput {r.goodput_records_per_sec:>12,.0f}"
          f"  avg {r.avg_ms:8.2f} ms  p99 {r.p99_ms:6.0f} ms", flush=True)


def _print_report(report: dict, path: Path) -> None:
    for mode, ratio in report.get("eosbench_over_java", {}).items():
        verdict = "meets" if ratio >= 1.0 else "misses"
        print(f"eosbench / Java records/sec, {mode}: {ratio:.2f} ({verdict} the >= 1.0 target)")
    for ratio, figures in report.get("abort_goodput", {}).items():
        verdict = "meets" if figures["ratio_to_ideal"] >= GOODPUT_TARGET else "misses"
        realized = figures["ratio_to_realized"]
        print(f"abort ratio {ratio}: goodput {figures['goodput']:,.0f} rec/s = {figures['ratio_to_ideal']:.2f}"
              f" x (1 - r) x goodput(0) ({verdict} the >= {GOODPUT_TARGET} target);"
              f" {figures['realized_aborted_fraction']:.2f} of records really aborted, so"
              f" {realized:.2f} x (1 - realized) x goodput(0)" if realized is not None else "")
    if report["throttled_latency"]:
        print(f"throttled latency, {' '.join(LATENCY_PROPS)}, median of {report['repeat']} (ms; percentiles floored,"
              " as Java prints them):")
        print(f"  {'rate/s':>8}  {'tool':<9} {'p50':>6} {'p99':>6} {'avg':>9}")
    for rate, pair in report["throttled_latency"].items():
        for tool in ("java", "eosbench"):
            f = pair[tool]
            print(f"  {rate:>8}  {tool:<9} {f['p50_ms']:>6.0f} {f['p99_ms']:>6.0f} {f['avg_ms']:>9.2f}")
    for rate, pair in report["throttled_latency"].items():
        verdict = "meets" if pair["p50_within_bound"] else "misses"
        print(f"throttled {rate} records/s: eosbench p50 {pair['eosbench']['p50_ms']:.0f} ms, Java"
              f" {pair['java']['p50_ms']:.0f} ms ({verdict} the <= max(Java + {P50_SLACK_MS:g} ms,"
              f" {P50_SLACK_FACTOR:g} x Java) = {pair['p50_bound_ms']:g} ms target)")
    print(f"json: {path}")
