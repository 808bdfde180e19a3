"""What one `bench spark` run's figures mean side by side: per-batch request rates and phase shares, the scaling
table across partition counts, and its plots.

`eosbench/bench/spark.py` runs the arms and measures; this reads its reports. A variant is a sink
of `spark.VARIANTS`, optionally in a source arm (`<sink>@<label>`, --source-arm).
"""

from __future__ import annotations

import statistics
from collections import Counter
from pathlib import Path

from eosbench.bench.protocol import TXN_REQUESTS
from eosbench.console.plots import lines_png

# What lands on the transaction coordinators (and FindCoordinator, on any broker) per transaction.
COORDINATOR_REQUESTS = (*TXN_REQUESTS, "InitProducerId", "FindCoordinator")
# What Spark's Kafka source asks the brokers: its consumers' fetches, and its offset look-ups (two
# after every poll on the executors, the driver's each trigger). Counted per batch around each drain
# run, so that a source arm shows what a setting costs the brokers (a shorter fetch wait: nothing more).
SOURCE_REQUESTS = ("FetchConsumer", "ListOffsets")
# Reported in this order: AddPartitionsToTxn split as `bench protocol` splits it.
REQUEST_NAMES = ("AddPartitionsToTxn_client", "AddPartitionsToTxn_broker", *COORDINATOR_REQUESTS[1:])
# The transaction's fixed costs, against the time spent producing records.
FIXED_COST_PHASES = ("init", "send_offsets", "commit")
# Every other transactional variant is partition scope.
SCOPES = {"kafka-eos+batch": "batch scope", "kafka-eos+slot": "slot scope",
          "kafka-eos+slot+input": "slot scope, co-partitioned"}
PROJECT_TO_PARTITIONS = 1_000  # the scaling plot's model line runs on to here
# `<sink>@<label>`: the sink with the source options of the arm `label` (--source-arm).
ARM = "@"


def sink_of(variant: str) -> str:
    """The VARIANTS name of a variant, without its arm."""
    return variant.partition(ARM)[0]


def arm_of(variant: str) -> str:
    """The arm's suffix of a variant (`@label`), or "" for the job's own source options."""
    return variant[len(sink_of(variant)):]


def request_rates(before: Counter, after: Counter, seconds: float, transactions: int, batches: int) -> dict[str, dict]:
    """Each coordinator request's count between two readings, per second, per transaction and per batch."""
    rates = {}
    for name in REQUEST_NAMES:
        count = after[name] - before[name]
        rates[name] = {"count": count, "per_s": count / seconds if seconds else 0.0,
                       "per_txn": count / transactions if transactions else 0.0,
                       "per_batch": count / batches if batches else 0.0}
    return rates


def phase_shares(phase_seconds: dict[str, float]) -> dict[str, float]:
    """The share of the sink's transaction time (every phase summed) in init, send_offsets and commit."""
    total = sum(phase_seconds.values())
    return {phase: phase_seconds.get(phase, 0.0) / total if total else 0.0 for phase in FIXED_COST_PHASES}


def source_requests_per_batch(before: Counter, after: Counter, batches: int) -> dict[str, float]:
    """Each of SOURCE_REQUESTS between two readings of the brokers' counters, per batch."""
    return {name: (after[name] - before[name]) / batches if batches else 0.0 for name in SOURCE_REQUESTS}


def scaling_figures(transactions: int, batches: int, seconds: float, phase_seconds: dict[str, float], markers: int,
                    before: Counter, after: Counter | None) -> dict:
    """One run's scaling figures: transactions/s, phase shares, markers and, with request counts, rates and producers created.

    `markers` is the output's offsets that no committed record took: one commit marker per output
    partition a transaction wrote to (and an aborted attempt's records and marker, none in a clean
    run). Each committed transaction also writes one marker on the group's `__consumer_offsets`
    partition; the markers per batch count both. Each is a write the coordinator asks a partition
    leader for.

    Every new producer sends one InitProducerId, so its count is the producers created (librdkafka
    also repeats it while the coordinator still completes a fenced predecessor's transaction, rare
    here: a cached producer is idle between batches). The cache hit rate is the share of
    transactions that found their producer cached.
    """
    figures = {"transactions": transactions, "batches": batches, "seconds": seconds,
               "transactions_per_s": transactions / seconds if seconds else 0.0,
               "transactions_per_batch": transactions / batches if batches else 0.0,
               "markers": markers + transactions, "output_markers": markers,
               "markers_per_batch": (markers + transactions) / batches if batches else 0.0,
               "output_markers_per_batch": markers / batches if batches else 0.0,
               "phase_shares": phase_shares(phase_seconds)}
    if after is not None:
        requests = request_rates(before, after, seconds, transactions, batches)
        created = requests["InitProducerId"]["count"]
        figures.update(requests=requests, producers_created=created,
                       producers_created_per_batch=created / batches if batches else 0.0,
                       producer_cache_hit_rate=max(0.0, 1 - created / transactions) if transactions else 0.0)
    return figures


def scaling_line(figures: dict) -> str:
    """One run's scaling figures on one line."""
    shares = ", ".join(f"{phase} {share:.0%}" for phase, share in figures["phase_shares"].items())
    line = (f"{figures['transactions']:,} transactions in {figures['batches']} batches,"
            f" {figures['transactions_per_s']:.1f}/s, {figures['markers_per_batch']:,.0f} markers per batch;"
            f" time in {shares}")
    if "requests" in figures:
        per_txn = ", ".join(f"{name} {rate['per_s']:.1f}/s ({rate['per_txn']:.2f}/txn)"
                            for name, rate in figures["requests"].items() if rate["count"])
        line += (f"; {figures['producers_created_per_batch']:.2f} producers created per batch"
                 f" (cache hit {figures['producer_cache_hit_rate']:.0%}); requests {per_txn}")
    return line


def scaling_series(reports: list[dict]) -> dict[str, dict[float, float]]:
    """Per-batch costs against input partitions, one series per transactional sink and figure, plus the P² + P model.

    Each report is one `run` at one partition count. A sink's figures are the median over its
    rounds; coordinator requests are the six of COORDINATOR_REQUESTS summed (present only where
    the JMX exporter answered).
    """
    series: dict[str, dict[float, float]] = {}
    for report in reports:
        partitions = report["partitions"]
        for variant, runs in report.get("scaling", {}).items():
            runs = [run for run in runs if run["transactions"]]
            if not runs:
                continue
            scope = f"{SCOPES.get(sink_of(variant), 'partition scope')} ({variant})"
            figures = {"transactions": [run["transactions_per_batch"] for run in runs],
                       "commit markers": [run["markers_per_batch"] for run in runs if run["markers"]]}
            if all("requests" in run for run in runs):
                figures["coordinator requests"] = [sum(rate["per_batch"] for rate in run["requests"].values())
                                                   for run in runs]
            for figure, values in figures.items():
                if values:
                    series.setdefault(f"{scope}: {figure}", {})[partitions] = statistics.median(values)
    counts = sorted({report["partitions"] for report in reports} | {PROJECT_TO_PARTITIONS})
    # Partition scope's model: a marker per output partition and one on __consumer_offsets per transaction.
    series["ideal P² + P markers (partition scope)"] = {p: float(p * p + p) for p in counts}
    return series


def plot_scaling(reports: list[dict], results_dir: Path) -> Path:
    """Draw the per-batch costs of runs at several partition counts, with the P² model projected to 1,000."""
    counts = ", ".join(str(report["partitions"]) for report in reports)
    return lines_png(scaling_series(reports), results_dir / f"spark-scaling-{reports[-1]['run_id']}.png",
                     f"bench spark at {counts} input partitions ({reports[-1]['master']}): what each micro-batch"
                     f" costs, measured, and the P² model of commit markers to {PROJECT_TO_PARTITIONS:,}",
                     "input partitions (= output partitions)", "per micro-batch", log_x=True, log_y=True)


def scaling_table(reports: list[dict]) -> list[str]:
    """A Markdown table of every sink at every partition count: rate, ratio to kafka-alo and per-batch costs (last round)."""
    rows = ["| partitions | sink | records/s | ÷ kafka-alo | after the first two batches | ÷ kafka-alo"
            " | transactions per batch | markers per batch (output) | coordinator requests per batch"
            " | producers created per batch | init | send_offsets | commit | load average |", "|" + "---|" * 14]
    for report in reports:
        medians = report["median_records_per_sec"]
        for variant, rate in medians.items():
            baseline = "kafka-alo" + arm_of(variant)  # a sink's ratio is to kafka-alo with the same source options
            alo = medians.get(baseline)
            steady_alo = ((report.get("scaling", {}).get(baseline) or [{}])[-1]).get("steady_records_per_s")
            runs = report.get("scaling", {}).get(variant) or []
            last = runs[-1] if runs else {}
            shares = last.get("phase_shares", {})
            requests = sum(r["per_batch"] for r in last["requests"].values()) if "requests" in last else None
            transactional = bool(last.get("transactions"))
            steady = last.get("steady_records_per_s")
            cells = [f"{report['partitions']:,}", variant, f"{rate:,.0f}", f"{rate / alo:.2f}" if alo else "—",
                     f"{steady:,.0f}" if steady else "—", f"{steady / steady_alo:.2f}" if steady and steady_alo else "—",
                     f"{last['transactions_per_batch']:,.1f}" if transactional else "—",
                     f"{last['markers_per_batch']:,.0f} ({last['output_markers_per_batch']:,.0f})" if transactional else "—",
                     f"{requests:,.0f}" if transactional and requests is not None else "—",
                     f"{last['producers_created_per_batch']:.2f}" if transactional and "producers_created" in last else "—",
                     *(f"{shares[phase]:.0%}" if transactional else "—" for phase in FIXED_COST_PHASES),
                     f"{last['load_average']:.2f}" if "load_average" in last else "—"]
            rows.append("| " + " | ".join(cells) + " |")
    return rows


def throughput_series(reports: list[dict]) -> dict[str, dict[float, float]]:
    """Each sink's median records/s against input partitions."""
    series: dict[str, dict[float, float]] = {}
    for report in reports:
        for variant, rate in report["median_records_per_sec"].items():
            scope = SCOPES.get(sink_of(variant))
            series.setdefault(f"{scope} ({variant})" if scope else variant, {})[report["partitions"]] = rate
    return series


def plot_throughput(reports: list[dict], results_dir: Path) -> Path:
    """Draw each sink's records/s against input partitions, from runs at several partition counts."""
    return lines_png(throughput_series(reports), results_dir / f"spark-throughput-{reports[-1]['run_id']}.png",
                     f"bench spark ({reports[-1]['master']}): records/s of each sink against input partitions",
                     "input partitions (= output partitions)", "records/s", log_x=True, log_y=True)


def consumers_created(spark) -> dict[str, int] | None:
    """Kafka consumers the driver's JVM has created so far, per source, or None on a cluster master.

    Spark's source: its consumer pool's created count (commons-pool's, so a consumer evicted and
    made again counts twice); the grouped source: its own counter. Both live in the JVM that runs
    the tasks, which only a local master shares with the driver.
    """
    if not spark.sparkContext.master.startswith("local"):
        return None
    jvm = spark._jvm
    pool_class = jvm.org.apache.spark.util.Utils.classForName(
        "org.apache.spark.sql.kafka010.consumer.KafkaDataConsumer$", True, False)
    pool = pool_class.getField("MODULE$").get(None).consumerPool().pool()
    return {"spark": pool.getCreatedCount(), "grouped": jvm.eosbench.spark.GroupedKafkaProvider.consumersCreated()}


def trigger_steps(trigger_ms: dict[str, float]) -> str:
    """Spark's median milliseconds per trigger step, the longest first, leaving out those under 1 ms."""
    return ", ".join(f"{step} {ms:,.0f}" for step, ms in sorted(trigger_ms.items(), key=lambda kv: -kv[1]) if ms >= 1)


def source_line(figures: dict) -> str:
    """What one drain run's reading cost: its first batch, Spark's median trigger steps and the consumers it made."""
    steps = trigger_steps(figures["trigger_ms"])
    first = figures["first_batch_s"]
    made = figures["consumers_created"]
    return (f"first batch {first:.2f} s" if first is not None else "no batch") + \
        f"; median ms per batch after the first two: {steps or 'none'}" + \
        (f"; {made:,} consumers created" if made is not None else "")
