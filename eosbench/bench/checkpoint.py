"""`eosbench bench checkpoint`: what a checkpoint on S3 costs per batch, beside HDFS and the local disk.

Every arm runs `eosbench stream` (kafka-eos, partition scope) over the same pre-filled input,
drained in batches of `--max-offsets-per-trigger`, with its checkpoint in one store: a local
folder, the local HDFS, the local S3. The stores are rotated from round to round. Spark times
each batch's steps (its progress' durationMs); the checkpoint's are `walCommit` (the offsets log
entry, written before the batch runs) and `commitOffsets` (the commit log entry, after it).
Their medians over the steady batches (start-up excluded, as the job's summary does) are the
figure, beside the whole batch (`triggerExecution`). The load average at each arm's start and
end is printed with it: on a loaded machine the figure is noise.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

from conf.client_config import Connection, connection
from conf.local_servers import HdfsSettings, S3Settings
from eosbench.bench.latency import feed_command, wait_for_quiet
from eosbench.console.errors import EnvironmentProblem
from eosbench.local.kafka_admin import create_topic

STORES = ("local", "hdfs", "s3")
CHECKPOINT_STEPS = ("walCommit", "commitOffsets")


def store_roots(results_dir: Path, hdfs_uri: str | None, s3_bucket_uri: str | None) -> dict[str, str]:
    """Each store's folder for the run's checkpoints: a local folder, the HDFS's and the bucket's."""
    return {"local": str((results_dir / "checkpoint-bench").resolve()),
            "hdfs": f"{hdfs_uri or HdfsSettings().uri}/eosbench/checkpoint-bench",
            "s3": f"{s3_bucket_uri or S3Settings().bucket_uri}/checkpoint-bench"}


def checkpoint_ms(trigger_ms: dict[str, float]) -> float:
    """A batch's checkpoint writes in ms: its offsets log entry and its commit log entry."""
    return sum(trigger_ms.get(step, 0.0) for step in CHECKPOINT_STEPS)


def _arm(bootstrap: Connection, source: str, partitions: int, store: str, checkpoint: str, max_offsets: int,
         s3a_config: Path | None, scratch: Path) -> dict:
    """One `eosbench stream` draining the input with its checkpoint at `checkpoint`; its summary's median steps."""
    sink = f"{source}-{store}-{uuid.uuid4().hex[:6]}"
    create_topic(bootstrap, sink, partitions, 1)
    create_topic(bootstrap, f"{sink}.dlq", 1, 1)
    summary = scratch / f"{sink}.json"
    command = [sys.executable, "-m", "eosbench.cli", "stream", "--bootstrap-server", str(bootstrap),
               *bootstrap.tool_arguments(), "--input-topic", source, "--output-topic", sink, "--app-id", sink,
               "--checkpoint", checkpoint, "--max-offsets-per-trigger", str(max_offsets),
               "--output-json", str(summary),
               *(["--s3a-config", str(s3a_config)] if store == "s3" and s3a_config else [])]
    load_before = os.getloadavg()[0]
    completed = subprocess.run(command, capture_output=True, text=True)
    if completed.returncode != 0:
        last = (completed.stderr.strip() or completed.stdout.strip() or "no output").splitlines()[-1]
        raise EnvironmentProblem(f"bench checkpoint: the {store} arm's stream failed: {last[:300]}")
    result = json.loads(summary.read_text())
    steps = result["trigger_ms"]
    return {"store": store, "checkpoint": checkpoint, "batches": result["batches"],
            "records_in": result["records_in"], "checkpoint_ms": round(checkpoint_ms(steps), 1),
            **{f"{step}_ms": steps.get(step, 0.0) for step in (*CHECKPOINT_STEPS, "triggerExecution")},
            "load_before": round(load_before, 2), "load_after": round(os.getloadavg()[0], 2)}


def run(bootstrap: Connection | str, records: int, partitions: int, max_offsets: int, rounds: int, stores: list[str],
        results_dir: Path, hdfs_uri: str | None, s3_bucket_uri: str | None, s3a_config: Path | None,
        settle_load: float = 2.0) -> dict:
    """Fill one input, run each store's arm `rounds` times in rotated order; print, save and return the report."""
    bootstrap = connection(bootstrap)
    run_id = uuid.uuid4().hex[:8]
    scratch = results_dir / f"checkpoint-{run_id}"
    scratch.mkdir(parents=True, exist_ok=True)
    source = f"checkpoint-bench-{run_id}"
    create_topic(bootstrap, source, partitions, 1)
    subprocess.run(feed_command(bootstrap, source, records, None), stdout=subprocess.DEVNULL, check=True)
    roots = store_roots(results_dir, hdfs_uri, s3_bucket_uri)
    rows = []
    for round_index in range(rounds):
        order = stores[round_index % len(stores):] + stores[:round_index % len(stores)]
        for store in order:
            wait_for_quiet(settle_load)
            started = time.monotonic()
            row = _arm(bootstrap, source, partitions, store, f"{roots[store]}/{run_id}/{store}-{round_index}",
                       max_offsets, s3a_config, scratch)
            rows.append({**row, "round": round_index, "seconds": round(time.monotonic() - started, 1)})
            print(f"round {round_index + 1} {store:5}: {row['batches']} batches, checkpoint {row['checkpoint_ms']:g} ms"
                  f" a batch (walCommit {row['walCommit_ms']:g}, commitOffsets {row['commitOffsets_ms']:g}),"
                  f" batch {row['triggerExecution_ms']:g} ms; load {row['load_before']} -> {row['load_after']}",
                  flush=True)
    report = {"run_id": run_id, "records": records, "partitions": partitions, "max_offsets_per_trigger": max_offsets,
              "rounds": rounds, "rows": rows, "summary": summarise(rows, stores)}
    path = scratch / "report.json"
    path.write_text(json.dumps(report, indent=2))
    print("\n".join(table(report["summary"])))
    # matplotlib costs every `eosbench` command line half a second if imported with the module:
    # bench/commands.py reads STORES from here to build the parser.
    from eosbench.console.plots import bars_png

    plot = bars_png({store: {step: figures[f"{step}_ms"] for step in (*CHECKPOINT_STEPS, "triggerExecution")}
                     for store, figures in report["summary"].items()}, scratch / "checkpoint-cost.png",
                    f"Checkpoint writes per batch by store ({partitions} partitions, {max_offsets:,} offsets a batch;"
                    " median ms over rounds)", "ms per batch")
    print(f"report: {path}\nplot: {plot}")
    return report


def summarise(rows: list[dict], stores: list[str]) -> dict[str, dict]:
    """Each store's median over rounds of each figure, and its checkpoint cost against the local disk's."""
    summary = {store: {key: round(statistics.median([row[key] for row in rows if row["store"] == store]), 1)
                       for key in ("checkpoint_ms", "walCommit_ms", "commitOffsets_ms", "triggerExecution_ms")}
               for store in stores}
    local = summary.get("local", {}).get("checkpoint_ms")
    for figures in summary.values():
        figures["vs_local"] = round(figures["checkpoint_ms"] / local, 2) if local else None
    return summary


def table(summary: dict[str, dict]) -> list[str]:
    """The summary as a Markdown table."""
    lines = ["| store | checkpoint ms/batch | walCommit | commitOffsets | whole batch | checkpoint vs local |",
             "|---|---|---|---|---|---|"]
    for store, f in summary.items():
        ratio = f"{f['vs_local']:.2f}x" if f["vs_local"] is not None else "-"
        lines.append(f"| {store} | {f['checkpoint_ms']:g} | {f['walCommit_ms']:g} | {f['commitOffsets_ms']:g} |"
                     f" {f['triggerExecution_ms']:g} | {ratio} |")
    return lines
