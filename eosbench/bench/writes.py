"""`eosbench bench writes`: the kafka-tx-performance write benches, base and tx side by side."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

from conf.client_config import Connection
from eosbench.local.kafka_admin import cluster_metadata, create_topic
from eosbench.console.plots import latency_cdf_png
from eosbench.console.progress import progress_callback
from producers.write_bench import Mode, run_write_benches

# kafka-tx-performance, Kafka 2.7 on three i3.large nodes: transactional writes cost 30-50x.
SEED_TX_OVER_BASE = "30-50x (kafka-tx-performance, Kafka 2.7, 3 nodes)"


def run(bootstrap: str | Connection, modes: list[Mode], warmup: int, iterations: int, output_dir: Path) -> dict:
    """Run the benches, write JSON and a latency-CDF PNG, print a table, and return the report."""
    brokers = len(cluster_metadata(bootstrap).brokers)
    run_id = uuid.uuid4().hex[:8]
    topics = (f"eosbench-writes-{run_id}-1", f"eosbench-writes-{run_id}-2")
    for topic in topics:
        create_topic(bootstrap, topic, partitions=1, replication_factor=min(3, brokers))
    started = time.monotonic()
    with progress_callback("write bench iterations") as progress:
        results = run_write_benches(bootstrap, topics, modes, warmup, iterations, run_id=run_id, progress=progress)
    report = {
        "run_id": run_id, "bootstrap": str(bootstrap), "brokers": brokers, "warmup": warmup,
        "iterations": iterations, "elapsed_s": round(time.monotonic() - started, 1),
        "modes": {mode: result.percentiles_ms() for mode, result in results.items()},
    }
    if "base" in results and "tx" in results:
        base, tx = report["modes"]["base"], report["modes"]["tx"]
        report["tx_over_base"] = {"mean": tx["mean"] / base["mean"], "p50": tx["p50"] / base["p50"],
                                  "p99": tx["p99"] / base["p99"]}
        report["seed_tx_over_base"] = SEED_TX_OVER_BASE
    output_dir.mkdir(parents=True, exist_ok=True)
    report["plot"] = str(latency_cdf_png(
        {mode: result.latencies_s * 1e3 for mode, result in results.items()},
        output_dir / f"writes-{run_id}.png",
        f"write bench: 2 records to 2 topics per iteration, {brokers} broker(s)"))
    report["json"] = str(output_dir / f"writes-{run_id}.json")
    Path(report["json"]).write_text(json.dumps(report, indent=2))
    _print(report)
    return report


def latency_table(modes: dict[str, dict], with_rate: bool = False) -> str:
    """One line per mode: p50/p90/p99/p99.9/mean/max in ms (and records/s when asked), under a header."""
    width = max(6, *(len(mode) + 1 for mode in modes))
    header = f"{'mode':<{width}}{'p50 ms':>10}{'p90 ms':>10}{'p99 ms':>10}{'p99.9 ms':>10}{'mean ms':>10}{'max ms':>10}"
    lines = [header + (f"{'records/s':>12}" if with_rate else "")]
    for mode, p in modes.items():
        lines.append(f"{mode:<{width}}{p['p50']:>10.3f}{p['p90']:>10.3f}{p['p99']:>10.3f}{p['p99.9']:>10.3f}"
                     f"{p['mean']:>10.3f}{p['max']:>10.3f}" + (f"{p['records_per_sec']:>12,.0f}" if with_rate else ""))
    return "\n".join(lines)


def _print(report: dict) -> None:
    print(f"write bench on {report['brokers']} broker(s), {report['warmup']} warmup + {report['iterations']}"
          f" measured iterations per mode, {report['elapsed_s']} s")
    print(latency_table(report["modes"]))
    if "tx_over_base" in report:
        ratio = report["tx_over_base"]
        print(f"tx/base: mean {ratio['mean']:.2f}x, p50 {ratio['p50']:.2f}x, p99 {ratio['p99']:.2f}x"
              f"   (seed: {report['seed_tx_over_base']})")
    print(f"plot: {report['plot']}\njson: {report['json']}")
