"""`eosbench bench spark`: the streaming job's sinks side by side on one pre-filled input.

Throughput: each sink drains the same input (available-now, same maxOffsetsPerTrigger) in one
SparkSession, the sinks interleaved over rounds. At a 1 s trigger: kafka-eos and kafka-alo read
the same backlog again with a processing-time trigger of one second, every micro-batch capped at
one second of kafka-alo's measured drain rate, so each sink's fixed cost per batch shows in the
rate it sustains (from the query's progress, start-up excluded). Latency: the transactional sink
runs at a 1 s trigger while `eosbench produce` feeds it at half the sink's measured maximum, and
the end-to-end histogram (input CreateTime to output commit) comes from the tasks, and the
visibility latency (commit returned to read_committed sees it) from the observer's reader process.
Every figure is also appended to the Delta results table, one row per sink and mode.

Scaling: around each drain run the brokers' JMX exporters give the transaction coordinators'
request counts, so each run also reports transactions per second, each request's rate, the
producers created per batch (InitProducerId) and the share of the sink's transaction time in
init, send_offsets and commit. With `--master spark://…` the runs go to a standalone cluster, with
`--master yarn` to a YARN in client mode, whose executors run the environment `eosbench package`
packs, as `eosbench stream --master` does.

Sources (`--source spark grouped`): every sink that the grouped source can run (all but partition
scope) runs again as `<sink>@grouped` on it, an arm like the source arms below.

Source arms (`--source-arm LABEL:K=V,...`): every sink runs again beside itself as `<sink>@LABEL`,
its Spark Kafka source given those options over the job's own, in the drain rounds, the 1 s
trigger rounds and the latency run, so that a source setting is measured before and after in one
run on one input: `--source-arm kafka-default:kafka.fetch.max.wait.ms=500` sets Kafka's own fetch
wait against the job's 1 ms.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import uuid
from collections import Counter
from pathlib import Path

import numpy as np

from conf.client_config import Connection, connection
from conf.stream_settings import SOURCE_OPTION_DEFAULTS, StreamSettings
from eosbench.bench import results
from eosbench.bench.consumer_anchor import anchors
from eosbench.bench.inputs import fill_input
from eosbench.bench.latency import fed_input
from eosbench.bench.protocol import exporter_urls, request_counts
from eosbench.bench.spark_figures import (ARM, COORDINATOR_REQUESTS, SOURCE_REQUESTS, arm_of, consumers_created,
                                          scaling_figures, scaling_line, sink_of, source_line,
                                          source_requests_per_batch, trigger_steps)
from eosbench.console.errors import BadInput, EnvironmentProblem
from eosbench.local.kafka_admin import cluster_metadata, create_topic
from eosbench.bench.report import EOS_OVER_ALO_TARGET
from eosbench.local.spark import cluster_spark_conf, spark_session
from streaming import job
from streaming.session import consumer_cache_defaults
from streaming.stats import STARTUP_BATCHES, histogram_percentile
from streaming.verify.verifier import stable_and_end_offsets

TRIGGER = "1 second"
VARIANTS = {
    # Partition scope by name: each arm's group is new, where the default (auto) would choose slot scope.
    "kafka-eos": {"sink": "kafka-eos", "txn_scope": "partition"},
    # Pre-registration needs kafka-python, so it is judged against kafka-python without it.
    "kafka-eos+kafka-python": {"sink": "kafka-eos", "txn_scope": "partition", "sink_client": "kafka-python"},
    "kafka-eos+prereg": {"sink": "kafka-eos", "txn_scope": "partition", "sink_client": "kafka-python",
                         "pre_register_partitions": True},
    "kafka-alo": {"sink": "kafka-alo"},
    "delta": {"sink": "delta"},
    # One driver-side transaction per micro-batch: what partition scope's transactions cost beside it.
    "kafka-eos+batch": {"sink": "kafka-eos", "txn_scope": "batch"},
    # One transaction per coalesced task (G of them a batch), keyed and co-partitioned output.
    "kafka-eos+slot": {"sink": "kafka-eos", "txn_scope": "slot"},
    "kafka-eos+slot+input": {"sink": "kafka-eos", "txn_scope": "slot", "output_partitioning": "input"},
}
# The arm of `--source grouped`: every sink again on the grouped source, as <sink>@grouped, beside
# itself on Spark's (its source options are the job's own, as the plain variants'). The arm of
# `--source auto` runs every sink as the job's default does, so the default is timed beside both.
GROUPED_ARM = "grouped"
AUTO_ARM = "auto"
SOURCE_ARMS = (GROUPED_ARM, AUTO_ARM)


def arm_variants(variants: list[str], arms: dict[str, tuple[str, ...]]) -> list[str]:
    """The variants as given, then each again in every arm, arm by arm (on the grouped arm, those it can run)."""
    return [*variants, *(f"{variant}{ARM}{label}" for label in arms for variant in variants
                         if runs_on_arm(variant, label))]


def runs_on_arm(variant: str, label: str) -> bool:
    """False for a partition-scope sink on the grouped arm: a grouped task holds several Kafka partitions."""
    fields = VARIANTS[sink_of(variant)]
    return label != GROUPED_ARM or fields.get("txn_scope") != "partition"


def variant_fields(variant: str, arms: dict[str, tuple[str, ...]]) -> dict:
    """The StreamSettings fields of a variant: its sink's, and its arm's --source-options (or the grouped source)."""
    sink, _, label = variant.partition(ARM)
    if label in SOURCE_ARMS:
        return {**VARIANTS[sink], "source": label}
    return {**VARIANTS[sink], "source": "spark", **({"source_options": arms[label]} if label else {})}


def variant_tag(variant: str) -> str:
    """A variant as a part of topic names and app ids (no `+` or `@`, and no arm's tag equal to a sink's)."""
    return variant.replace("+", "-").replace(ARM, "-arm-")


def _fill(bootstrap: str | Connection, topic: str, records: int, partitions: int) -> None:
    committed = fill_input(bootstrap, topic, records, partitions, transaction_duration_ms=100)
    print(f"filled {topic}: {committed:,} records in {partitions} partitions", flush=True)


def run(bootstrap: str | Connection, records: int, partitions: int, max_offsets: int, rounds: int, latency_seconds: int,
        variants: list[str], output_dir: Path, trigger_seconds: int = 30, master: str | None = None,
        most_partitions: int | None = None, observe_visibility: bool = True, yarn_state_dir: Path | None = None,
        source_arms: dict[str, tuple[str, ...]] | None = None, latency_variant: str = "kafka-eos") -> dict:
    """Run the throughput rounds, the 1 s trigger rounds and the latency run; print, record and return the report.

    `source_arms` ({label: ("K=V", ...)}) runs every variant again with those source options, as `<variant>@label`.
    """
    arms = dict(source_arms or {})
    brokers = len(cluster_metadata(bootstrap).brokers)
    urls = exporter_urls(bootstrap)
    try:
        request_counts(urls, COORDINATOR_REQUESTS)
    except EnvironmentProblem as exc:
        print(f"no coordinator request rates: {exc}", flush=True)
        urls = []
    run_id = uuid.uuid4().hex[:8]
    source = f"eosbench-spark-bench-{run_id}"
    _fill(bootstrap, source, records, partitions)
    warmup_topic = f"{source}-warmup"
    # What warms up is the JVM, the Python workers and Arrow, not the partitions: a few serve, and a
    # warm-up of every arm at 1,000 partitions would take longer than the runs it prepares.
    _fill(bootstrap, warmup_topic, min(records, 50_000), min(partitions, 8))
    # The first run's session serves the later ones: its consumer pool is sized for the most partitions.
    # Each of Spark's Kafka consumers holds the topic's metadata: past 256 partitions the local
    # driver, which runs the executors' tasks too, ran out of 1 GB with a thousand of them.
    memory = {"spark.driver.memory": "3g"} if (most_partitions or partitions) > 256 else {}
    spark = spark_session("eosbench-bench-spark", master=master, conf=cluster_spark_conf(master, memory, yarn_state_dir),
                          defaults=consumer_cache_defaults(most_partitions or partitions))
    scratch = Path(tempfile.mkdtemp(prefix="eosbench-bench-spark-"))

    def settings_for(variant: str, tag: str, **extra) -> StreamSettings:
        output = f"{source}-{tag}"
        create_topic(bootstrap, output, partitions, 1)
        # Co-partitioned output needs dead letters shaped like the output; elsewhere one partition will do.
        co_partitioned = VARIANTS[sink_of(variant)].get("output_partitioning") == "input"
        create_topic(bootstrap, f"{output}.dlq", partitions if co_partitioned else 1, 1)
        fields = dict(input_topic=source, output_topic=output, bootstrap_server=str(bootstrap),
                      client_config=connection(bootstrap).client_config,
                      app_id=f"bench-{run_id}-{tag}", checkpoint=scratch / tag / "checkpoint",
                      delta_path=scratch / tag / "table", max_offsets_per_trigger=max_offsets)
        return StreamSettings(**{**fields, **variant_fields(variant, arms), **extra})

    # Warm the JVM, the Python workers and Arrow on a small input first, every arm: whichever sink ran
    # first in a cold session lost 30-40 % to start-up in measured runs, and the first arm on the
    # grouped source paid its classes and generated code in its first batch.
    measured = arm_variants(variants, arms)
    for variant in measured:
        job.run(spark, settings_for(variant, f"warmup-{variant_tag(variant)}",
                                    max_offsets_per_trigger=max(1, max_offsets // 10)).model_copy(
            update={"input_topic": warmup_topic}), on_batch=lambda _: None)
    throughput: dict[str, list[float]] = {variant: [] for variant in measured}
    batch_seconds: dict[str, list[float]] = {variant: [] for variant in measured}
    phases: dict[str, dict] = {}
    scaling: dict[str, list[dict]] = {}
    anchor_reads: dict[str, list[dict]] = {}
    for round_number in range(1, rounds + 1):
        for reader, read in anchors(bootstrap, source).items():  # each round: the anchor shares its load
            anchor_reads.setdefault(reader, []).append(read)
            print(f"round {round_number} anchor {reader:<25} {read['records']:>10,} records in {read['seconds']:6.2f} s"
                  f" = {read['records_per_sec']:>10,.0f} records/s (load average {os.getloadavg()[0]:.2f})", flush=True)
        shift = (round_number - 1) % len(measured)
        for variant in measured[shift:] + measured[:shift]:  # rotate so no sink always goes first
            settings = settings_for(variant, f"{variant_tag(variant)}-r{round_number}")
            before = _request_counts_or_none(urls)
            consumers_before, first_batch = consumers_created(spark), len(batch_seconds[variant])
            summary = job.run(spark, settings, on_batch=lambda batch, v=variant: batch_seconds[v].append(batch.duration_s))
            after = _request_counts_or_none(urls) if before is not None else None
            # The source as the run settled it: an @auto arm's settings say "auto", the summary what it chose.
            consumers = consumers_created(spark)[summary.source] - consumers_before[summary.source] \
                if consumers_before else None
            markers = 0  # only the transactional sink writes markers (and counts the records it wrote)
            if settings.sink == "kafka-eos":
                ends = stable_and_end_offsets(bootstrap, settings.output_topic)
                markers = sum(end for _, end in ends.values()) - summary.records_out
            rate = summary.input_rows / summary.seconds
            throughput[variant].append(rate)
            transactions = summary.outcomes.get("committed", 0)
            phases[variant] = {"phase_seconds": summary.phase_seconds,
                               "register_round_trips_per_transaction":
                                   summary.register_round_trips / transactions if transactions else 0,
                               "ms_to_first_send_per_transaction":
                                   1000 * summary.first_send_after_begin_s / transactions if transactions else 0,
                               "transactions": transactions}
            figures = scaling_figures(transactions, summary.batches, summary.seconds, summary.phase_seconds,
                                      markers, before or Counter(), after)
            # After the first two batches: Spark's Kafka source creates a consumer per partition in the
            # first batch (about 0.26 s each here), which at 256 partitions is most of a short run.
            figures.update(slots_fenced=summary.slots_fenced, records_per_s=rate, load_average=os.getloadavg()[0],
                           steady_records_per_s=summary.steady_input_rows_per_s, consumers_created=consumers,
                           first_batch_s=batch_seconds[variant][first_batch] if summary.batches else None,
                           trigger_ms=summary.trigger_ms)
            if after is not None:
                figures["source_requests_per_batch"] = source_requests_per_batch(before, after, summary.batches)
            scaling.setdefault(variant, []).append(figures)
            print(f"round {round_number} {variant:<18} {summary.input_rows:>10,} records in {summary.seconds:6.1f} s"
                  f" = {rate:>10,.0f} records/s, {summary.steady_input_rows_per_s or 0:,.0f} after the first two"
                  f" batches (load average {figures['load_average']:.2f})", flush=True)
            print(f"  {source_line(figures)}", flush=True)
            if transactions:
                print(f"  {scaling_line(figures)}", flush=True)
            if "source_requests_per_batch" in figures:
                print("  source requests per batch: " + ", ".join(
                    f"{name} {count:,.1f}" for name, count in figures["source_requests_per_batch"].items()), flush=True)

    medians = {variant: statistics.median(rates) for variant, rates in throughput.items()}
    report = {"run_id": run_id, "brokers": brokers, "records": records, "partitions": partitions,
              "max_offsets_per_trigger": max_offsets, "rounds": rounds, "throughput": throughput,
              "median_records_per_sec": medians, "phases": phases, "scaling": scaling, "master": master or "local",
              "source_option_defaults": SOURCE_OPTION_DEFAULTS,
              "source_arms": {label: list(options) for label, options in arms.items()},
              "anchors": anchor_reads,
              "median_anchor_records_per_sec": {reader: statistics.median(read["records_per_sec"] for read in reads)
                                                for reader, reads in anchor_reads.items()}}
    if "kafka-eos" in medians and "kafka-alo" in medians:
        report["eos_over_alo"] = medians["kafka-eos"] / medians["kafka-alo"]
    if "kafka-eos+prereg" in medians and "kafka-eos+kafka-python" in medians:
        report["prereg_on_over_off"] = medians["kafka-eos+prereg"] / medians["kafka-eos+kafka-python"]
    if trigger_seconds and "kafka-eos" in medians and "kafka-alo" in medians:
        report["at_trigger"] = _trigger_rounds(bootstrap, spark, settings_for, source, partitions,
                                               int(medians["kafka-alo"]), rounds, trigger_seconds, arms)
    if latency_seconds and latency_variant in medians:
        # The visibility observer reads every output record on the cores the pipeline runs on: beside
        # the end-to-end run it put 20-30 % on its p50 and half on its p99 (docs/benchmarks.md), so
        # end-to-end comes from a run without it and visibility from a second run of its own.
        # Every arm is offered the same rate: half the slowest arm's measured maximum.
        rate = min(medians[variant] for variant in arm_variants([latency_variant], arms) if variant in medians) / 2
        report["latency"] = _latency_run(bootstrap, settings_for, rate, latency_seconds, spark, partitions,
                                         observe_visibility=False, variant=latency_variant)
        if observe_visibility:
            report["latency"]["visibility"] = _latency_run(bootstrap, settings_for, rate, latency_seconds, spark,
                                                           partitions, observe_visibility=True,
                                                           variant=latency_variant)["visibility"]
        for label in (label for label in arms if runs_on_arm(latency_variant, label)):
            report.setdefault("latency_arms", {})[label] = _latency_run(
                bootstrap, settings_for, rate, latency_seconds, spark, partitions, observe_visibility=False,
                variant=f"{latency_variant}{ARM}{label}")
    output_dir.mkdir(parents=True, exist_ok=True)
    path = output_dir / f"spark-bench-{run_id}.json"
    path.write_text(json.dumps(report, indent=2))
    report["results_table"] = _append_rows(spark, report, batch_seconds, output_dir)
    _print(report, path)
    if "at_trigger" in report and (problem := trigger_comparison_problem(report["at_trigger"], rounds)):
        raise BadInput(f"{problem} (the other figures are in {path})")
    return report


def trigger_comparison_problem(at_trigger: dict, rounds: int) -> str | None:
    """Why the 1 s trigger rounds cannot set kafka-eos against kafka-alo (a sink with no round measured), or None."""
    measured = {variant: len(at_trigger["throughput"][variant]) for variant in ("kafka-alo", "kafka-eos")}
    if all(measured.values()):
        return None
    counts = ", ".join(f"{variant} {count} of {rounds}" for variant, count in measured.items())
    return (f"the {at_trigger['trigger']} trigger rounds had too few batches in {at_trigger['seconds']} s to compare"
            f" kafka-eos with kafka-alo (rounds measured: {counts}); raise --trigger-seconds, or skip them with"
            " --trigger-seconds 0")
def _trigger_rounds(bootstrap: str | Connection, spark, settings_for, source: str, partitions: int, batch_offsets: int,
                    rounds: int, seconds: int, arms: dict[str, tuple[str, ...]] | None = None) -> dict:
    """kafka-alo and kafka-eos, and each in every source arm, at a 1 s trigger on one backlog, every batch capped at
    `batch_offsets`.

    The backlog holds `batch_offsets` x (`seconds` + 3) records, more than a run of `seconds` can
    read at one batch a second, so every batch measured is a full one. Spark aims its triggers
    at whole seconds of the clock, and a batch that crosses one starts the next at once, so a
    short run can beat one batch a second by up to a second in all: hence runs of tens of seconds.
    """
    backlog = f"{source}-trigger"
    _fill(bootstrap, backlog, batch_offsets * (seconds + 3), partitions)
    variants = arm_variants(["kafka-alo", "kafka-eos"], arms or {})
    throughput: dict[str, list[float]] = {variant: [] for variant in variants}
    batch_seconds: dict[str, list[float]] = {variant: [] for variant in variants}
    for round_number in range(1, rounds + 1):
        order = variants if round_number % 2 else variants[::-1]
        for variant in order:
            durations: list[float] = []
            settings = settings_for(variant, f"{variant_tag(variant)}-trigger-r{round_number}", trigger=TRIGGER,
                                    max_offsets_per_trigger=batch_offsets, timeout_s=float(seconds))
            summary = job.run(spark, settings.model_copy(update={"input_topic": backlog}),
                              on_batch=lambda batch: durations.append(batch.duration_s), echo=False)
            if summary.steady_input_rows_per_s is None:
                print(f"{TRIGGER} trigger, round {round_number} {variant}: too few batches in {seconds} s", flush=True)
                continue
            throughput[variant].append(summary.steady_input_rows_per_s)
            batch_seconds[variant] += durations[2:]
            print(f"{TRIGGER} trigger, round {round_number} {variant:<10} {summary.batches} batches,"
                  f" {summary.steady_input_rows_per_s:>10,.0f} records/s steady", flush=True)
    medians = {variant: statistics.median(rates) for variant, rates in throughput.items() if rates}
    outcome = {"trigger": TRIGGER, "input_topic": backlog, "max_offsets_per_trigger": batch_offsets,
               "seconds": seconds, "throughput": throughput, "median_records_per_sec": medians,
               "batch_seconds": batch_seconds}
    if "kafka-eos" in medians and "kafka-alo" in medians:
        outcome["eos_over_alo"] = medians["kafka-eos"] / medians["kafka-alo"]
    return outcome


def _append_rows(spark, report: dict, batch_seconds: dict[str, list[float]], results_dir: Path) -> str:
    """One results-table row per sink and mode (available-now drain, 1 s trigger) and per anchor; returns where they went."""
    common = dict(run_id=report["run_id"], bench="spark", workload=None, git_revision=results.git_revision(),
                  machine_json=json.dumps(results.machine_facts()), brokers=report["brokers"], record_size=100,
                  abort_ratio=0.0, records=report["records"], latency_kind="micro-batch")
    modes = [("available-now", report["max_offsets_per_trigger"], report["throughput"], report["median_records_per_sec"],
              batch_seconds)]
    if report.get("at_trigger"):
        trigger = report["at_trigger"]
        modes.append(("trigger-1s", trigger["max_offsets_per_trigger"], trigger["throughput"],
                      trigger["median_records_per_sec"], trigger["batch_seconds"]))
    rows = []
    for mode, batch_offsets, rates, medians, durations in modes:
        for variant, rate in medians.items():
            quantiles = results.quantiles_ms(durations.get(variant, []))
            baseline = "kafka-alo" + arm_of(variant) if sink_of(variant) != "kafka-alo" else None
            rows.append(results.new_row(
                **common, cell=f"{variant}-{mode}", sink=variant, throughput_rps=rate, goodput_rps=rate,
                latency_p50_ms=quantiles[50] if quantiles else None, latency_p99_ms=quantiles[99] if quantiles else None,
                latency_max_ms=quantiles[100] if quantiles else None, latency_quantiles_ms=quantiles,
                baseline=baseline if baseline in medians else None,
                overhead_ratio=medians[baseline] / rate if baseline in medians and rate else None,
                config_json=json.dumps({"mode": mode, "max_offsets_per_trigger": batch_offsets,
                                        **variant_fields(variant, report.get("source_arms", {}))}),
                figures_json=json.dumps({"throughput": rates[variant]})))
    for reader, rate in report["median_anchor_records_per_sec"].items():  # as the sweep's anchors: bench "anchor"
        rows.append(results.new_row(
            **{**common, "bench": "anchor"}, cell=f"anchor-{reader}", sink=reader, throughput_rps=rate,
            goodput_rps=rate, config_json=json.dumps({"mode": "read_committed, whole input"}),
            figures_json=json.dumps({"throughput": [read["records_per_sec"] for read in report["anchors"][reader]]})))
    path = results.append_rows(spark, rows, results_dir)
    return f"{path} ({len(rows)} rows)"


def _request_counts_or_none(urls: list[str]) -> Counter | None:
    """The brokers' coordinator and source request counts, or None (said in one line) when an exporter does not answer.

    A run's records/s and markers stand without them, so an exporter that fails mid-bench costs
    that run its request figures, not the bench.
    """
    if not urls:
        return None
    try:
        return request_counts(urls, (*COORDINATOR_REQUESTS, *SOURCE_REQUESTS))
    except EnvironmentProblem as exc:
        print(f"no coordinator request counts for this run: {exc}", flush=True)
        return None


def _latency_run(bootstrap: str | Connection, settings_for, rate: float, seconds: int, spark, partitions: int,
                 observe_visibility: bool, variant: str = "kafka-eos") -> dict:
    """A transactional sink (kafka-eos unless told, or one of its source arms) at a 1 s trigger on `partitions`
    partitions, fed at `rate` records/s by a separate producer process."""
    tag = ("visibility" if observe_visibility else "latency") + variant_tag(variant).removeprefix("kafka-eos")
    settings = settings_for(variant, tag, trigger=TRIGGER, starting_offsets="latest", max_offsets_per_trigger=None,
                            timeout_s=float(seconds), observe_visibility=observe_visibility)
    live = f"{settings.input_topic}-{tag}-live"
    create_topic(bootstrap, live, partitions, 1)
    settings = settings.model_copy(update={"input_topic": live})
    batches = []
    with fed_input(connection(bootstrap), live, rate, int(rate * (seconds + 15))):
        summary = job.run(spark, settings, on_batch=batches.append)
    steady = [b.latency_counts for b in batches[STARTUP_BATCHES:]] or [b.latency_counts for b in batches]
    counts = np.sum(steady, axis=0)
    return {"variant": variant, "trigger": TRIGGER, "offered_records_per_sec": rate, "seconds": seconds,
            "partitions": partitions, "batches": len(batches), "records": int(counts.sum()),
            "p50_ms": histogram_percentile(counts, 0.5), "p99_ms": histogram_percentile(counts, 0.99),
            "max_batch_s": max(b.duration_s for b in batches),
            "median_batch_s": statistics.median(b.duration_s for b in batches[STARTUP_BATCHES:] or batches),
            "records_in": summary.records_in, "visibility": summary.visibility, "trigger_ms": summary.trigger_ms,
            "driver_ms": summary.driver_ms, "load_average": os.getloadavg()[0]}


def _print(report: dict, path: Path) -> None:
    for variant, rate in report["median_records_per_sec"].items():
        print(f"{variant:<18} median {rate:>10,.0f} records/s")
    anchor_rates = report["median_anchor_records_per_sec"]
    if anchor_rates:
        readers = ", ".join(f"{reader} {rate:,.0f}" for reader, rate in anchor_rates.items())
        tool = anchor_rates["kafka-consumer-perf-test"]
        shares = ", ".join(f"{variant} {rate / tool:.2f}" for variant, rate in report["median_records_per_sec"].items())
        print(f"anchor, one plain read_committed reader of the same input: {readers} records/s;"
              f" each variant / kafka-consumer-perf-test: {shares}")
    for label, options in report.get("source_arms", {}).items():
        defaults = " ".join(f"{name}={value}" for name, value in SOURCE_OPTION_DEFAULTS.items())
        what = {GROUPED_ARM: "the grouped source (--source grouped), the job's own options",
                AUTO_ARM: "the job's default (--source auto), the job's own options"}.get(label, " ".join(options))
        print(f"source arm @{label}: {what}; the arms without @ have the job's own ({defaults})")
    medians = report["median_records_per_sec"]
    for variant in [v for v in medians if v.startswith("kafka-eos") and medians.get("kafka-alo" + arm_of(v))]:
        baseline = "kafka-alo" + arm_of(variant)  # kafka-alo with the same source options
        alo = medians[baseline]
        runs = report["scaling"].get(variant) or [{}]
        figures = runs[-1]
        steady, steady_alo = figures.get("steady_records_per_s"), (report["scaling"].get(baseline) or [{}])[-1].get(
            "steady_records_per_s")
        after_start = f" ({steady / steady_alo:.2f} after the first two batches)" if steady and steady_alo else ""
        print(f"{variant} / {baseline}: {medians[variant] / alo:.2f}{after_start} at"
              f" {report['partitions']} partitions; {figures.get('transactions_per_batch', 0):.1f} transactions and"
              f" {figures.get('markers_per_batch', 0):,.0f} markers per batch"
              f" ({figures.get('output_markers_per_batch', 0):,.0f} on the output),"
              f" {figures.get('producers_created_per_batch', float('nan')):.2f} producers created per batch")
    if "eos_over_alo" in report:
        verdict = "meets" if report["eos_over_alo"] >= EOS_OVER_ALO_TARGET else "misses"
        print(f"kafka-eos / kafka-alo throughput: {report['eos_over_alo']:.2f} ({verdict} the >= {EOS_OVER_ALO_TARGET}"
              " target)")
    if "prereg_on_over_off" in report:
        medians, phases = report["median_records_per_sec"], report["phases"]
        librdkafka = f"; librdkafka {medians['kafka-eos']:,.0f} records/s" if "kafka-eos" in medians else ""
        print(f"pre-registration on / off, both on kafka-python: {report['prereg_on_over_off']:.2f}"
              f" ({medians['kafka-eos+prereg']:,.0f} / {medians['kafka-eos+kafka-python']:,.0f} records/s{librdkafka});"
              f" begin to first send {phases['kafka-eos+prereg']['ms_to_first_send_per_transaction']:.1f} /"
              f" {phases['kafka-eos+kafka-python']['ms_to_first_send_per_transaction']:.1f} ms")
    if report.get("at_trigger", {}).get("eos_over_alo") is not None:
        at = report["at_trigger"]
        share = at["eos_over_alo"]
        verdict = "meets" if share >= EOS_OVER_ALO_TARGET else "misses"
        rates = ", ".join(f"{v} {r:,.0f}" for v, r in at["median_records_per_sec"].items())
        print(f"at a {at['trigger']} trigger, batches of {at['max_offsets_per_trigger']:,} offsets ({rates} records/s):"
              f" kafka-eos / kafka-alo {share:.2f} ({verdict} the >= {EOS_OVER_ALO_TARGET} target)")
    for label, lat in [("", report.get("latency")), *((f"@{label}", lat) for label, lat in
                                                      report.get("latency_arms", {}).items())]:
        if lat is None:
            continue
        verdict = "meets" if lat["p99_ms"] <= 2000 else "misses"
        print(f"end-to-end at 1 s trigger ({lat['variant']}),"
              f" {lat['offered_records_per_sec']:,.0f} records/s offered on {lat['partitions']} partitions: p50"
              f" {lat['p50_ms']:.0f} ms, p99 {lat['p99_ms']:.0f} ms ({verdict} the p99 <= trigger + 1 s target);"
              f" batches {lat['median_batch_s']:.2f} s median, {lat['max_batch_s']:.2f} s max")
        steps = trigger_steps(lat["trigger_ms"])
        driver = ", ".join(f"{step} {ms:,.1f}" for step, ms in sorted(lat["driver_ms"].items(), key=lambda kv: -kv[1]))
        print(f"  median ms per batch: Spark's trigger {steps}; the sink's driver {driver}"
              f" (load average {lat['load_average']:.2f})")
        seen = lat["visibility"]
        if seen:
            print(f"visibility (commit returned to read_committed sees it), {seen['samples']:,} transactions: p50"
                  f" {seen['p50_ms']:.1f} ms, p99 {seen['p99_ms']:.1f} ms, max {seen['max_ms']:.1f} ms")
    print(f"json: {path}\nresults: {report['results_table']}")
