"""`eosbench bench peers --live`: every arm fed at one rate, its end-to-end latency timed as `bench latency` times it.

Each arm (eosbench/bench/peers.py's) reads a new input that `eosbench produce` feeds from 3 s
before the arm's launch; one read_committed reader in a process of its own takes each record's
readable time minus its input CreateTime, counted once the arm has caught up (`SteadyWindow`).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import tempfile
import time
import uuid
from pathlib import Path

from conf.client_config import Connection, connection
from eosbench.bench.latency import SteadyWindow, arm_lines, fed_input, observe_output, wait_for_quiet, window_figures
from eosbench.bench.peers import COMMIT_INTERVAL_MS, PROCESS, arm_command, common_row, record_rows
from eosbench.local.kafka_admin import create_topic
from eosbench.local.processes import Child


def live_arm(bootstrap: Connection, arm: str, rate: float, seconds: int, partitions: int, scratch: Path,
         threads: int) -> dict:
    """One arm fed at `rate` from its launch on a new input: end-to-end latency as `bench latency` times it.

    The feeder runs 3 s before the arm starts, so every arm meets a backlog first; the observer (a
    read_committed reader in a process of its own) counts a record's latency, its readable time
    minus its input CreateTime, once the arm's lag has first fallen to what one commit interval
    brings (`SteadyWindow`).
    """
    tag = f"{arm}-live-p{partitions}-{uuid.uuid4().hex[:6]}"
    source, output = f"eosbench-peers-{tag}-in", f"eosbench-peers-{tag}-out"
    for topic in (source, output, f"{output}.dlq"):
        create_topic(bootstrap, topic, partitions, 1)
    command = arm_command(bootstrap, arm, source, output, f"bench-peers-{tag}", scratch / tag,
                          max(20_000, int(rate * 5)), threads, trigger=f"{COMMIT_INTERVAL_MS} milliseconds")
    spawn = multiprocessing.get_context("spawn")
    results = spawn.Queue()
    child = Child(arm, scratch / "logs")
    with fed_input(bootstrap, source, rate, int(rate * (seconds + 60))):
        window = SteadyWindow(rate, COMMIT_INTERVAL_MS / 1000, time.time())
        observer = spawn.Process(target=observe_output, daemon=True,
                                 args=(bootstrap.bootstrap, source, output, partitions, seconds, window, results))
        observer.start()
        child.start(command)
        try:
            measured = results.get(timeout=seconds + 120)
        finally:
            child.kill(signal.SIGKILL)
            observer.join(timeout=10)
    return {"arm": arm, "partitions": partitions, "offered_records_per_sec": rate, **window_figures(measured),
            "load_average": os.getloadavg()[0]}


def run_live(bootstrap: str | Connection, rate: float, seconds: int, partition_counts: list[int], arms: list[str],
             output_dir: Path, threads: int) -> dict:
    """Every arm fed at one rate on a new input per partition count, one after the other; print and return the report."""
    run_id = uuid.uuid4().hex[:8]
    scratch = Path(tempfile.mkdtemp(prefix="eosbench-bench-peers-live-"))
    rows = []
    for partitions in partition_counts:
        for arm in arms:
            wait_for_quiet(2.0)  # the last arm's load is not the next one's
            print(f"{partitions:>4} partitions {arm} at {rate:,.0f} records/s offered ({seconds} s, load average"
                  f" {os.getloadavg()[0]:.2f} at start)", flush=True)
            rows.append(live_arm(connection(bootstrap), arm, rate, seconds, partitions, scratch, threads))
            print("\n".join(arm_lines(rows[-1], seconds)), flush=True)
    report = {"run_id": run_id, "rate": rate, "seconds": seconds, "threads": threads,
              "commit_interval_ms": COMMIT_INTERVAL_MS, "process": PROCESS, "live": rows}
    output_dir.mkdir(parents=True, exist_ok=True)
    report["results_table"] = record_rows(live_rows(report), output_dir)
    path = output_dir / f"peers-live-{run_id}.json"
    path.write_text(json.dumps(report, indent=2))
    print(f"\npeers live {run_id}: {rate:,.0f} records/s offered, {seconds} s an arm")
    for row in rows:
        latency = (f"p50 {row['p50_ms']:,.0f} ms, p99 {row['p99_ms']:,.0f} ms" if row["p50_ms"] is not None
                   else "never caught up")
        print(f"  {row['partitions']:>4} partitions {row['arm']:<18} {latency},"
              f" {row['read_records_per_sec']:,.0f} records/s read (load average {row['load_average']:.2f})")
    print(f"report: {path}")
    print(f"plot: {plot_live(rows, output_dir / f'peers-live-{run_id}.png', rate)}")
    print(f"results table: {report['results_table']}; `eosbench report --run-id {run_id}` plots it")
    return report


def plot_live(rows: list[dict], path: Path, rate: float) -> Path:
    """Each arm's p50 and p99 end-to-end latency per partition count (an arm that never caught up has no bar)."""
    from eosbench.console.plots import bars_png

    groups: dict[str, dict[str, float]] = {}
    for row in rows:
        for figure in ("p50_ms", "p99_ms"):
            if row[figure] is not None:
                groups.setdefault(f"{row['partitions']} partitions, {figure[:3]}", {})[row["arm"]] = row[figure]
    return bars_png(groups, path, f"end-to-end latency, input CreateTime to readable read_committed, fed at"
                                  f" {rate:,.0f} records/s", "ms")


def live_rows(report: dict) -> list[dict]:
    """The results table's rows of a live run: one per arm and partition count, its end-to-end latency."""
    from eosbench.bench import results

    return [results.new_row(
        **common_row(report), cell=f"{row['arm']}-p{row['partitions']}-live", sink=row["arm"],
        throughput_rps=row["read_records_per_sec"], latency_p50_ms=row["p50_ms"], latency_p99_ms=row["p99_ms"],
        latency_kind="end to end", seconds=row["window_s"],
        config_json=json.dumps({"mode": "live", "partitions": row["partitions"], "rate": report["rate"],
                                "seconds": report["seconds"], "threads": report["threads"]}),
        figures_json=json.dumps(row)) for row in report["live"]]
