"""`eosbench bench streaming`: EOSPerformance, poll-process-produce with the plain client, base and tx side by side.

Both modes read the same input (each with its own consumer group) and run interleaved in blocks,
so drift of the machine hits both alike. The figures are the ceiling the Spark sink is compared
against; the seed's TxStreamingBench found 40-120x for one-record transactions on Kafka 2.7.

With --observe-visibility, every tx mode also gets a VisibilityObserver (streaming/verify/visibility.py)
on its output topic, started before the warmup so that its first second (left out) falls there;
each block's commits are handed to it between blocks, outside the measured loop, and the report
gives the p50/p99 from `commit_transaction` returning to the observer first seeing the records.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
import uuid
from pathlib import Path

import numpy as np

from conf.client_config import Connection
from conf.secrets import masked
from conf.settings import load_properties
from eosbench.bench import results
from eosbench.bench.produce import run_eosbench as fill_topic
from eosbench.local.kafka_admin import cluster_metadata, create_topic, describe_topic
from eosbench.bench.writes import latency_table
from eosbench.console.plots import latency_cdf_png
from eosbench.console.progress import progress_callback
from eosbench.bench.report import SEED_STREAMING_TX_OVER_BASE
from producers.streaming_bench import StreamingBench, StreamingBenchResult

BLOCK_UNITS = 50
# With --pre-register-partitions, tx mode runs three ways: librdkafka (tx) and kafka-python with
# pre-registration off and on, so that on / off compares one client with itself.
KAFKA_PYTHON_TX_MODES = ("tx-kafka-python", "tx-prereg")


def run(bootstrap: str | Connection, args: argparse.Namespace) -> dict:
    """Run the bench as the flags say; print the table and return the report."""
    run_id = uuid.uuid4().hex[:8]
    brokers = len(cluster_metadata(bootstrap).brokers)
    replication = min(3, brokers)
    modes = ["base", "tx"] if args.mode == "both" else [args.mode]
    per_unit = args.records_per_transaction
    input_topic = args.input_topic
    if input_topic:
        describe_topic(bootstrap, input_topic)
    else:
        input_topic = f"eosbench-streaming-bench-{run_id}"
        create_topic(bootstrap, input_topic, args.partitions, replication)
        records = (args.warmup + args.iterations) * per_unit
        print(f"filling {input_topic} with {records:,} records of {args.record_size} B", flush=True)
        fill_topic(bootstrap, input_topic, records, args.record_size, 100, "fill")
    partitions = len(describe_topic(bootstrap, input_topic).partitions)
    consumer_config = load_properties(args.consumer_config) if args.consumer_config else {}
    producer_config = load_properties(args.producer_config) if args.producer_config else {}
    if args.pre_register_partitions and "tx" in modes:
        modes += list(KAFKA_PYTHON_TX_MODES)  # judged on one client: kafka-python with it on and off
    benches: dict[str, StreamingBench] = {}
    for mode in modes:
        output = args.output_topic or f"{input_topic}-{mode}-{run_id}"
        if output not in cluster_metadata(bootstrap).topics:
            create_topic(bootstrap, output, partitions, replication)
        factory = None
        if mode in KAFKA_PYTHON_TX_MODES:
            # built as factory(config, txn id, group id)
            from streaming.sink.preregister import PreRegisteringProducer as factory
        benches[mode] = StreamingBench(
            bootstrap, input_topic, output, "base" if mode == "base" else "tx",
            group_id=args.group_id or f"eosbench-streaming-{run_id}-{mode}",
            records_per_transaction=per_unit, poll_timeout_s=args.poll_timeout / 1000, consumer_config=consumer_config,
            producer_config=producer_config, producer_factory=factory, pre_register=mode == "tx-prereg",
            mark_transactions=args.observe_visibility)
    observers = {}
    try:
        if args.observe_visibility:
            from streaming.verify.visibility import VisibilityObserver

            for mode, bench in benches.items():
                if bench.marking:
                    observers[mode] = VisibilityObserver(bootstrap, [bench.output_topic]).start()
        for bench in benches.values():
            bench.warm(args.warmup)
            bench.take_commits()  # the warmup's transactions are not timed
        measured = {mode: ([], 0, 0.0) for mode in modes}
        with progress_callback("streaming bench units") as progress:
            done = 0
            while done < args.iterations:
                size = min(BLOCK_UNITS, args.iterations - done)
                for mode, bench in benches.items():
                    latencies, records, seconds = bench.measure(size)
                    before = measured[mode]
                    measured[mode] = (before[0] + latencies, before[1] + records, before[2] + seconds)
                    if mode in observers:
                        observers[mode].committed(bench.take_commits())
                done += size
                if progress:
                    progress(done * len(modes), args.iterations * len(modes))
        outcome = {mode: StreamingBenchResult(mode, np.asarray(lat), rec, sec, benches[mode].register_round_trips)
                   for mode, (lat, rec, sec) in measured.items()}
        # popped as stopped, so that the cleanup below stops only what a failure left reading
        visibility = {mode: dataclasses.asdict(observers.pop(mode).stop()) for mode in list(observers)}
    finally:
        for observer in observers.values():
            observer.stop(wait_s=0)
        for bench in benches.values():
            bench.close()
    report = {"run_id": run_id, "bootstrap": str(bootstrap), "brokers": brokers, "input_topic": input_topic,
              "records_per_transaction": per_unit, "warmup": args.warmup, "iterations": args.iterations,
              "pre_register_partitions": args.pre_register_partitions, "producer_config": producer_config,
              "modes": {mode: r.percentiles_ms() for mode, r in outcome.items()}}
    if visibility:
        report["visibility"] = visibility
    if "base" in outcome and "tx" in outcome:
        base, tx = report["modes"]["base"], report["modes"]["tx"]
        report["tx_over_base"] = {"mean_latency": tx["mean"] / base["mean"], "p99_latency": tx["p99"] / base["p99"],
                                  "throughput_base_over_tx": base["records_per_sec"] / tx["records_per_sec"]}
        report["seed_tx_over_base"] = SEED_STREAMING_TX_OVER_BASE
    if "tx-prereg" in outcome:
        on, off = report["modes"]["tx-prereg"], report["modes"]["tx-kafka-python"]
        report["prereg_on_over_off"] = {"client": "kafka-python",
                                        "throughput": on["records_per_sec"] / off["records_per_sec"],
                                        "mean_latency": on["mean"] / off["mean"]}
        report["register_round_trips_per_transaction"] = (outcome["tx-prereg"].register_round_trips
                                                          / max(1, len(benches["tx-prereg"].first_send_after_begin_s)))
        report["ms_to_first_send"] = {mode: 1e3 * float(np.mean(benches[mode].first_send_after_begin_s))
                                      for mode in ("tx", *KAFKA_PYTHON_TX_MODES)}
    args.results_dir.mkdir(parents=True, exist_ok=True)
    report["plot"] = str(latency_cdf_png({mode: r.latencies_s * 1e3 for mode, r in outcome.items()},
                                         args.results_dir / f"streaming-{run_id}.png",
                                         f"poll-process-produce, {per_unit} record(s) per unit, {brokers} broker(s)"))
    report["json"] = str(args.results_dir / f"streaming-{run_id}.json")
    Path(report["json"]).write_text(json.dumps(report, indent=2))
    _append_rows(report, outcome, brokers, args)
    _print(report)
    return report


def _append_rows(report: dict, outcome: dict[str, StreamingBenchResult], brokers: int, args) -> None:
    from eosbench.local.spark import spark_session

    common = dict(run_id=report["run_id"], bench="streaming", workload=None, git_revision=results.git_revision(),
                  machine_json=json.dumps(results.machine_facts()), brokers=brokers, record_size=args.record_size,
                  abort_ratio=0.0, records_per_transaction=args.records_per_transaction)
    def visibility_of(mode: str) -> dict:
        return {"visibility": report["visibility"][mode]} if mode in report.get("visibility", {}) else {}

    rows = []
    for mode, r in outcome.items():
        p = report["modes"][mode]
        sink = f"plain-{mode}"
        rows.append(results.new_row(
            **common, cell=f"{sink}-b{brokers}-n{args.records_per_transaction}", sink=sink, records=r.records,
            seconds=r.seconds, throughput_rps=r.records_per_sec, goodput_rps=r.records_per_sec,
            latency_p50_ms=p["p50"], latency_p90_ms=p["p90"], latency_p99_ms=p["p99"], latency_p999_ms=p["p99.9"],
            latency_max_ms=p["max"], latency_kind="write path per unit",
            latency_quantiles_ms=results.quantiles_ms(r.latencies_s),
            baseline={"tx": "plain-base", "tx-prereg": "plain-tx-kafka-python"}.get(mode),
            overhead_ratio=(report.get("tx_over_base", {}).get("throughput_base_over_tx") if mode == "tx" else
                            1 / report["prereg_on_over_off"]["throughput"] if mode == "tx-prereg" else None),
            config_json=json.dumps(masked({k: str(v) for k, v in vars(args).items()})),
            figures_json=json.dumps({**report["modes"][mode], **visibility_of(mode)})))
    started = time.monotonic()
    path = results.append_rows(spark_session("eosbench-results"), rows, args.results_dir)
    report["results_table"] = f"{path} ({len(rows)} rows, {time.monotonic() - started:.1f} s)"


def _print(report: dict) -> None:
    print(f"poll-process-produce on {report['brokers']} broker(s), {report['records_per_transaction']} record(s) per"
          f" unit, {report['warmup']} warmup + {report['iterations']} measured units per mode")
    print(latency_table(report["modes"], with_rate=True))
    if "tx_over_base" in report:
        ratio = report["tx_over_base"]
        print(f"tx/base: mean latency {ratio['mean_latency']:.2f}x, p99 {ratio['p99_latency']:.2f}x;"
              f" throughput base/tx {ratio['throughput_base_over_tx']:.2f}x   (seed: {report['seed_tx_over_base']})")
    if "prereg_on_over_off" in report:
        ratio, first_send = report["prereg_on_over_off"], report["ms_to_first_send"]
        print(f"pre-registration on / off, both on kafka-python: throughput {ratio['throughput']:.2f}x,"
              f" mean latency {ratio['mean_latency']:.2f}x; {report['register_round_trips_per_transaction']:.2f}"
              f" registration round trips per transaction; begin to first send: "
              + ", ".join(f"{mode} {ms:.2f} ms" for mode, ms in first_send.items())
              + f"; librdkafka (tx) {report['modes']['tx']['records_per_sec']:,.0f} records/s")
    for mode, seen in report.get("visibility", {}).items():
        print(f"visibility {mode} (commit returned to read_committed sees it), {seen['samples']:,} transactions:"
              f" p50 {seen['p50_ms']:.1f} ms, p99 {seen['p99_ms']:.1f} ms, max {seen['max_ms']:.1f} ms;"
              f" {seen['unseen']} never seen, {seen['left_out']} left out")
    print(f"plot: {report['plot']}\njson: {report['json']}\nresults: {report['results_table']}")
