"""`eosbench report`: plots and a Markdown summary from the Delta results table.

For a `bench peers` run (`--run-id`) it draws each arm's steady records/s per partition count (a
drain run) or its end-to-end p50 and p99 (a live run) and tabulates them. For one sweep run (the
latest by default) it draws: latency CDFs per sink; overhead against
transaction size (the seed's chart, on this machine); goodput against abort ratio with the ideal
1 - r line; and exactly-once against at-least-once throughput per sink. The summary names the
command and revision that produced every figure and judges each target: kafka-eos at >= 0.9 of kafka-alo's
throughput, and goodput(r) >= 0.95 (1 - r) goodput(0).
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import numpy as np

from eosbench.console.plots import bars_png, latency_cdf_png, lines_png

SEED_STREAMING_TX_OVER_BASE = "40-120x (kafka-tx-performance TxStreamingBench, Kafka 2.7, 3 nodes, 1 record/txn)"
SEED_WRITES_TX_OVER_BASE = "30-50x (kafka-tx-performance TxWritesBench, Kafka 2.7, 3 nodes)"
GOODPUT_TARGET = 0.95  # goodput(r) >= 0.95 * (1 - r) * goodput(0)
EOS_OVER_ALO_TARGET = 0.9
KNEE_SHARE = 1.2  # the knee: the smallest transaction where overhead is within 20 % of its large-transaction value


def latest_run(rows: list[dict]) -> str | None:
    """The newest sweep's run id."""
    sweeps = [r for r in rows if r["bench"] == "sweep"]
    return max(sweeps, key=lambda r: r["recorded_at"])["run_id"] if sweeps else None


def knee(points: dict[int, float]) -> int | None:
    """Smallest transaction size whose overhead is within KNEE_SHARE of the largest size's."""
    if len(points) < 2:
        return None
    floor = points[max(points)]
    return min(n for n, overhead in points.items() if overhead <= KNEE_SHARE * floor)


def build_report(rows: list[dict], run_id: str, plots_dir: Path) -> tuple[str, list[Path]]:
    """Draw the plots of one run and return (Markdown summary, plot paths)."""
    run = [r for r in rows if r["run_id"] == run_id]
    if any(r["bench"] == "peers" for r in run):
        return peers_report(run, run_id, plots_dir)
    cells = [r for r in run if r["bench"] == "sweep" and r["records_per_transaction"] is not None]
    fills = [r for r in run if r["bench"] == "sweep" and r["sink"] == "eosbench-produce"]
    anchors = [r for r in run if r["bench"] == "anchor"]
    plots: list[Path] = []
    plots_dir.mkdir(parents=True, exist_ok=True)
    lowest_ratio = min((r["abort_ratio"] for r in cells), default=0.0)

    for (brokers, n), group in sorted(_group(cells, "brokers", "records_per_transaction").items()):
        series = {r["sink"]: np.asarray(r["latency_quantiles_ms"]) for r in group
                  if r["abort_ratio"] == lowest_ratio and r["latency_quantiles_ms"]}
        if series:
            plots.append(latency_cdf_png(series, plots_dir / f"latency-cdf-{run_id}-b{brokers}-n{n}.png",
                                         f"per-transaction latency, {n:,} record{'s' if n != 1 else ''} per"
                                         f" transaction, {brokers} broker(s)"
                                         " (plain: write path; Spark: micro-batch)"))

    index = by_cell(cells)
    overhead_lines, overhead_spread = {}, {}
    for (sink, brokers), group in sorted(_group(cells, "sink", "brokers").items()):
        chosen = [r for r in group if r["overhead_ratio"] is not None and r["abort_ratio"] == lowest_ratio]
        if chosen:
            label = f"{sink} / {group[0]['baseline']}, {brokers} broker(s)"
            overhead_lines[label] = {r["records_per_transaction"]: r["overhead_ratio"] for r in chosen}
            overhead_spread[label] = {}
            for r in chosen:
                base = index.get((r["baseline"], brokers, r["record_size"], r["abort_ratio"], r["records_per_transaction"]))
                ratios = [b / own for b, own in zip(repeat_throughputs(base), repeat_throughputs(r)) if own]
                if len(ratios) > 1:
                    overhead_spread[label][r["records_per_transaction"]] = (min(ratios), max(ratios))
    if overhead_lines:
        plots.append(lines_png(overhead_lines, plots_dir / f"overhead-vs-transaction-size-{run_id}.png",
                               "overhead of exactly-once against transaction size (baseline throughput / own;"
                               " whiskers: the repeats)", "records per transaction", "overhead (x, 1 = free)",
                               log_x=True, log_y=True, reference={"no overhead": 1.0}, spread=overhead_spread))

    goodput_lines = {}
    for (sink, brokers, n), group in _group(cells + fills, "sink", "brokers", "records_per_transaction").items():
        by_ratio = {r["abort_ratio"]: r["goodput_rps"] for r in group if r["goodput_rps"]}
        if 0.0 in by_ratio and len(by_ratio) > 1:
            label = f"{sink}, {brokers} broker(s)" + (f", {n}/txn" if n else "")
            goodput_lines[label] = {r: g / by_ratio[0.0] for r, g in sorted(by_ratio.items())}
    if goodput_lines:
        ratios = sorted({r for points in goodput_lines.values() for r in points})
        goodput_lines["ideal 1 - r"] = {r: 1 - r for r in ratios}
        plots.append(lines_png(goodput_lines, plots_dir / f"goodput-vs-abort-ratio-{run_id}.png",
                               "goodput against abort ratio (committed records/s over the same at r = 0), one panel"
                               " per sink", "transaction abort ratio r", "goodput(r) / goodput(0)",
                               facet=lambda label: label.split(",")[0]))

    throughput_bars: dict[str, dict[str, float]] = {}
    throughput_spread: dict[str, dict[str, tuple[float, float]]] = defaultdict(dict)
    for r in sorted(cells, key=lambda r: (r["brokers"], r["records_per_transaction"])):
        if r["abort_ratio"] == lowest_ratio:
            group = f"{r['records_per_transaction']:,}/txn, {r['brokers']}b"
            throughput_bars.setdefault(group, {})[r["sink"]] = r["throughput_rps"]
            repeats = repeat_throughputs(r)
            if len(repeats) > 1:
                throughput_spread[group][r["sink"]] = (min(repeats), max(repeats))
    if throughput_bars:
        plots.append(bars_png(throughput_bars, plots_dir / f"eos-vs-alos-{run_id}.png",
                              "throughput per sink: exactly-once beside its at-least-once baseline (median of the"
                              " repeats; whiskers: lowest and highest)", "records/s", spread=throughput_spread))
    return _summary(run, cells, fills, anchors, run_id, plots, plots_dir, lowest_ratio), plots


def peers_report(run: list[dict], run_id: str, plots_dir: Path) -> tuple[str, list[Path]]:
    """A `bench peers` run: its arms side by side per partition count, plotted and tabulated."""
    arms = sorted((r for r in run if r["bench"] == "peers"),
                  key=lambda r: (json.loads(r["config_json"])["partitions"], r["sink"]))
    live = json.loads(arms[0]["config_json"])["mode"] == "live"
    plots_dir.mkdir(parents=True, exist_ok=True)
    bars: dict[str, dict[str, float]] = defaultdict(dict)
    for r in arms:
        partitions = json.loads(r["config_json"])["partitions"]
        if live:
            for figure, value in (("p50", r["latency_p50_ms"]), ("p99", r["latency_p99_ms"])):
                if value is not None:
                    bars[f"{partitions} partitions, {figure}"][r["sink"]] = value
        elif r["throughput_rps"]:
            bars[f"{partitions} partitions"][r["sink"]] = r["throughput_rps"]
    plots = [bars_png(dict(bars), plots_dir / f"peers-{run_id}.png",
                      "end-to-end latency of each arm fed live (ms)" if live else
                      "steady records/s of each arm draining one input (median of the rounds)",
                      "ms" if live else "records/s")] if bars else []
    first = arms[0]
    lines = [f"# Peers {run_id} ({'live' if live else 'drains'})", "",
             f"- command: `eosbench bench peers{' --live …' if live else ''}` then `eosbench report --run-id {run_id}`",
             f"- recorded {first['recorded_at']} at revision `{first['git_revision']}`", ""]
    if live:
        lines += ["| partitions | arm | p50 ms | p99 ms | records/s read |", "|---|---|---|---|---|"]
        lines += [f"| {json.loads(r['config_json'])['partitions']} | {r['sink']} | {_fmt(r['latency_p50_ms'])} |"
                  f" {_fmt(r['latency_p99_ms'])} | {_fmt(r['throughput_rps'])} |" for r in arms]
    else:
        lines += ["| partitions | arm | steady records/s | whole run records/s | at-least-once / this |",
                  "|---|---|---|---|---|"]
        lines += [f"| {json.loads(r['config_json'])['partitions']} | {r['sink']} | {_fmt(r['throughput_rps'])} |"
                  f" {_fmt(r['goodput_rps'])} | {_fmt(r['overhead_ratio'], 2)} |" for r in arms]
    lines += ["", "## Plots", ""] + [f"![{p.stem}]({p.relative_to(plots_dir)})" for p in plots]
    return "\n".join(lines) + "\n", plots


def by_cell(cells: list[dict]) -> dict[tuple, dict]:
    """Cells by (sink, brokers, record size, abort ratio, records per transaction)."""
    return {(r["sink"], r["brokers"], r["record_size"], r["abort_ratio"], r["records_per_transaction"]): r for r in cells}


def repeat_throughputs(row: dict | None) -> list[float]:
    """The throughput of each repeat behind a cell's median (empty where the row has none)."""
    if row is None:
        return []
    try:
        repeats = json.loads(row.get("figures_json") or "{}").get("repeats", [])
    except (ValueError, AttributeError):
        return []
    return [float(repeat["throughput_rps"]) for repeat in repeats if repeat.get("throughput_rps")]


def _group(rows: list[dict], *keys: str) -> dict[tuple, list[dict]]:
    grouped: dict[tuple, list[dict]] = defaultdict(list)
    for r in rows:
        grouped[tuple(r[k] for k in keys) if len(keys) > 1 else r[keys[0]]].append(r)
    return grouped


def _fmt(value, digits: int = 0) -> str:
    if value is None:
        return "–"
    return f"{value:,.{digits}f}"


def _summary(run: list[dict], cells: list[dict], fills: list[dict], anchors: list[dict], run_id: str,
             plots: list[Path], plots_dir: Path, lowest_ratio: float) -> str:
    first = run[0]
    machine = json.loads(first["machine_json"] or "{}")
    workload = first["workload"]
    lines = [f"# Sweep {run_id} ({workload})", "",
             f"- command: `eosbench bench sweep --workload conf/workloads/{workload}.yaml` then `eosbench report"
             f" --run-id {run_id}`",
             f"- recorded {first['recorded_at']} at revision `{first['git_revision']}`",
             f"- machine: {machine.get('cpus')} CPUs, {machine.get('memory_gib')} GiB, Python {machine.get('python')},"
             f" PySpark {machine.get('pyspark')}, Kafka {machine.get('kafka')}, librdkafka {machine.get('librdkafka')}",
             f"- published anchors: transactional writes {SEED_WRITES_TX_OVER_BASE}; transactional streaming"
             f" {SEED_STREAMING_TX_OVER_BASE}", "",
             "## Cells", "",
             "| sink | brokers | record B | abort r | records/txn | throughput rec/s | goodput rec/s | p50 ms | p99 ms"
             " | latency of | overhead x | abort overhead |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in sorted(cells, key=lambda r: (r["brokers"], r["record_size"], r["abort_ratio"], r["records_per_transaction"],
                                          r["sink"])):
        lines.append(f"| {r['sink']} | {r['brokers']} | {r['record_size']} | {r['abort_ratio']} |"
                     f" {r['records_per_transaction']:,} | {_fmt(r['throughput_rps'])} | {_fmt(r['goodput_rps'])} |"
                     f" {_fmt(r['latency_p50_ms'], 2)} | {_fmt(r['latency_p99_ms'], 2)} | {r['latency_kind']} |"
                     f" {_fmt(r['overhead_ratio'], 2)} | {_fmt(r['abort_overhead'], 3)} |")
    lines += ["", "## Targets", ""]
    index = by_cell(cells)
    for (sink, brokers, size, ratio, n), r in sorted(index.items(), key=lambda kv: str(kv[0])):
        if sink != "kafka-eos":
            continue
        alo, plain = index.get(("kafka-alo", brokers, size, ratio, n)), index.get(("plain-tx", brokers, size, ratio, n))
        if alo and alo["throughput_rps"]:
            share = r["throughput_rps"] / alo["throughput_rps"]
            lines.append(f"- kafka-eos / kafka-alo, {n:,}/txn, r={ratio}, {brokers}b: **{share:.2f}**"
                         f" ({'meets' if share >= EOS_OVER_ALO_TARGET else 'misses'} >= {EOS_OVER_ALO_TARGET})")
        if plain and plain["throughput_rps"]:
            lines.append(f"- kafka-eos / plain-client tx, {n:,}/txn, r={ratio}, {brokers}b:"
                         f" **{r['throughput_rps'] / plain['throughput_rps']:.2f}**")
    by_input = {(f["brokers"], f["record_size"]): {} for f in fills}
    for f in fills:
        by_input[(f["brokers"], f["record_size"])][f["abort_ratio"]] = f["goodput_rps"]
    for (brokers, size), goodputs in sorted(by_input.items()):
        for ratio, goodput in sorted(goodputs.items()):
            if ratio > 0 and goodputs.get(0.0):
                share = goodput / ((1 - ratio) * goodputs[0.0])
                lines.append(f"- producer goodput at r={ratio} ({brokers}b, {size} B): **{share:.2f}** x (1 - r) x"
                             f" goodput(0) ({'meets' if share >= GOODPUT_TARGET else 'misses'} >= {GOODPUT_TARGET})")
    for (sink, brokers), group in sorted(_group(cells, "sink", "brokers").items()):
        points = {r["records_per_transaction"]: r["overhead_ratio"] for r in group
                  if r["overhead_ratio"] is not None and r["abort_ratio"] == lowest_ratio}
        found = knee(points)
        if found is not None:
            curve = ", ".join(f"{n:,}: {o:.2f}x" for n, o in sorted(points.items()))
            lines.append(f"- knee of {sink}'s overhead on {brokers} broker(s): **{found:,} records/transaction**"
                         f" (within {KNEE_SHARE}x of the largest size's overhead; curve {curve})")
    java = {json.loads(a["config_json"])["mode"]: a for a in anchors if a["sink"] == "java-producer-perf"}
    ours = {json.loads(a["config_json"])["mode"]: a for a in anchors if a["sink"] == "eosbench-produce"}
    for mode in sorted(m for m in set(java) & set(ours) if java[m]["throughput_rps"]):
        lines.append(f"- eosbench produce / Java ProducerPerformance, {mode}:"
                     f" **{ours[mode]['throughput_rps'] / java[mode]['throughput_rps']:.2f}**"
                     f" ({_fmt(ours[mode]['throughput_rps'])} vs {_fmt(java[mode]['throughput_rps'])} records/s)")
    lines += ["", "## Plots", ""] + [f"![{p.stem}]({p.relative_to(plots_dir)})" for p in plots]
    return "\n".join(lines) + "\n"


def write_report(rows: list[dict], run_id: str | None, plots_dir: Path) -> tuple[Path, list[Path]]:
    """Write the plots and summary-<run>.md (and summary.md, the latest) into plots_dir."""
    run_id = run_id or latest_run(rows)
    if run_id is None or not any(r["run_id"] == run_id for r in rows):
        raise LookupError(f"no run {run_id!r} in the results table" if run_id else "the results table has no sweep yet")
    markdown, plots = build_report(rows, run_id, plots_dir)
    path = plots_dir / f"summary-{run_id}.md"
    path.write_text(markdown)
    (plots_dir / "summary.md").write_text(markdown)
    return path, plots
