"""The benchmark suite end to end on the session broker: the plain-client streaming bench copies
exactly, and the smoke sweep leaves sane rows in the Delta table plus every plot and a summary.

The benches that use Spark run in this process, on the session's SparkSession: as subprocesses
each started a Python and a JVM of its own, 10-15 s a start on two cores, and `report` was little
more than that. The interrupted sweep stays a process of its own: what it checks is a real SIGTERM.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter

import pytest

from eosbench.bench import results
from eosbench.cli import main
from eosbench.console.errors import EXIT_INTERRUPTED
from eosbench.local.environment import port_accepts_connections
from tests.integration.kafka_reads import read_all, sequence_numbers


def run_in_process(capfd, *args: str) -> subprocess.CompletedProcess:
    """Run one eosbench command in this process, capturing what it and Spark's JVM print; pytest keeps its signals."""
    # A sweep turns SIGTERM into KeyboardInterrupt for its own clean-up; the session must not inherit that.
    handlers = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    capfd.readouterr()
    try:
        code = main(list(args))
    finally:
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
    out, err = capfd.readouterr()
    return subprocess.CompletedProcess(["eosbench", *args], code, out, err)


WARMUP_UNITS, MEASURED_UNITS = 10, 20


def test_streaming_bench_copies_every_record_once_in_every_mode_and_times_every_transaction_visible(
        bootstrap, spark, capfd, tmp_path):
    producer_properties = tmp_path / "producer.properties"
    producer_properties.write_text("# back off less after CONCURRENT_TRANSACTIONS\nretry.backoff.ms=5\n")
    completed = run_in_process(capfd, "bench", "streaming", "--bootstrap-server", bootstrap, "--warmup",
                               str(WARMUP_UNITS), "--iterations", str(MEASURED_UNITS), "--records-per-transaction",
                               "3", "--partitions", "2", "--pre-register-partitions", "--observe-visibility",
                               "--producer-config", str(producer_properties), "--results-dir", str(tmp_path))
    assert completed.returncode == 0, completed.stderr[-2000:]
    report = json.loads(next(tmp_path.glob("streaming-*.json")).read_text())
    input_ids = Counter(sequence_numbers(read_all(bootstrap, report["input_topic"])))
    assert sum(input_ids.values()) == (WARMUP_UNITS + MEASURED_UNITS) * 3
    assert report["producer_config"] == {"retry.backoff.ms": "5"}
    # tx runs on librdkafka; tx-kafka-python and tx-prereg on kafka-python, pre-registration off and on.
    assert list(report["modes"]) == ["base", "tx", "tx-kafka-python", "tx-prereg"]
    for mode in report["modes"]:
        assert report["modes"][mode]["iterations"] == MEASURED_UNITS
        output = f"{report['input_topic']}-{mode}-{report['run_id']}"
        assert Counter(sequence_numbers(read_all(bootstrap, output))) == input_ids, mode
    assert report["tx_over_base"]["mean_latency"] > 0
    on, off = report["modes"]["tx-prereg"], report["modes"]["tx-kafka-python"]
    assert report["prereg_on_over_off"] == {"client": "kafka-python",
                                            "throughput": on["records_per_sec"] / off["records_per_sec"],
                                            "mean_latency": on["mean"] / off["mean"]}
    # Each transaction registers its partitions and group before its first send: at least one round trip.
    assert report["register_round_trips_per_transaction"] >= 1
    assert "pre-registration on / off, both on kafka-python: throughput" in completed.stdout
    assert (tmp_path / f"streaming-{report['run_id']}.png").stat().st_size > 0
    assert "results:" in completed.stdout and (tmp_path / results.TABLE / "_delta_log").is_dir()
    # Every tx mode, on either client, stamps eos.txn; the observer pairs each measured commit with its records.
    assert sorted(report["visibility"]) == ["tx", "tx-kafka-python", "tx-prereg"]
    for mode, seen in report["visibility"].items():
        assert (seen["samples"] + seen["left_out"], seen["unseen"]) == (MEASURED_UNITS, 0), (mode, seen)
        assert seen["samples"] > 0 and 0 <= seen["p50_ms"] <= seen["p99_ms"] <= seen["max_ms"], (mode, seen)
        assert f"visibility {mode} (commit returned to read_committed sees it), {seen['samples']:,} transactions:" \
            in completed.stdout


def test_smoke_sweep_writes_rows_plots_and_a_summary(bootstrap, spark, capfd, tmp_path):
    completed = run_in_process(capfd, "bench", "sweep", "--workload", "conf/workloads/smoke.yaml",
                               "--bootstrap-server", bootstrap, "--results-dir", str(tmp_path))
    assert completed.returncode == 0, completed.stderr[-2000:]
    rows = results.read_rows(spark, tmp_path)
    run_id = rows[0]["run_id"]
    assert {r["run_id"] for r in rows} == {run_id}
    cells = [r for r in rows if r["bench"] == "sweep" and r["records_per_transaction"] is not None]
    # Spark cells with 10 records per transaction would need 200 micro-batches: skipped by design.
    assert sorted((r["sink"], r["records_per_transaction"], r["abort_ratio"]) for r in cells) == sorted(
        [(sink, 10, ratio) for sink in ("plain-base", "plain-tx") for ratio in (0.0, 0.5)]
        + [(sink, 1000, ratio) for sink in ("plain-base", "plain-tx", "kafka-alo", "kafka-eos") for ratio in (0.0, 0.5)])
    machine = json.loads(rows[0]["machine_json"])
    assert machine["cpus"] == os.cpu_count() and rows[0]["git_revision"] not in ("", None)
    for r in cells:
        assert 0 < r["records"] <= 2000 and r["throughput_rps"] > 0 and r["seconds"] > 0, r["cell"]
        assert 0 < r["latency_p50_ms"] <= r["latency_p99_ms"] <= r["latency_max_ms"], r["cell"]
        assert len(r["latency_quantiles_ms"]) == 101
        assert json.loads(r["config_json"])["sink"] == r["sink"]
        if r["sink"] in ("plain-tx", "kafka-eos"):
            assert r["overhead_ratio"] == pytest.approx(
                next(b["throughput_rps"] for b in cells if b["sink"] == r["baseline"]
                     and b["records_per_transaction"] == r["records_per_transaction"]
                     and b["abort_ratio"] == r["abort_ratio"]) / r["throughput_rps"])
    fills = {r["abort_ratio"]: r for r in rows if r["sink"] == "eosbench-produce" and r["bench"] == "sweep"}
    assert set(fills) == {0.0, 0.5}
    assert fills[0.0]["abort_overhead"] == 0 and 0.3 < fills[0.5]["abort_overhead"] < 3
    assert fills[0.5]["goodput_rps"] < fills[0.5]["throughput_rps"]
    anchors = Counter((r["sink"], json.loads(r["config_json"])["mode"]) for r in rows if r["bench"] == "anchor")
    assert anchors == Counter({(tool, mode): 1 for tool in ("java-producer-perf", "eosbench-produce")
                               for mode in ("no transactions", "transactions")})
    plots = tmp_path / "plots"
    for prefix in ("latency-cdf", "overhead-vs-transaction-size", "goodput-vs-abort-ratio", "eos-vs-alos"):
        found = list(plots.glob(f"{prefix}-{run_id}*.png"))
        assert found and all(p.read_bytes()[:4] == b"\x89PNG" for p in found), prefix
    summary = (plots / f"summary-{run_id}.md").read_text()
    assert summary.startswith(f"# Sweep {run_id} (smoke)") and "## Targets" in summary
    assert "kafka-eos / kafka-alo, 1,000/txn, r=0.0" in summary and "producer goodput at r=0.5" in summary

    again = run_in_process(capfd, "report", "--results-dir", str(tmp_path), "--run-id", run_id)
    assert again.returncode == 0, again.stderr[-1000:]
    assert (plots / "summary.md").read_text() == summary


INTERRUPTED_SWEEP_PORT = 29500
PLAIN_ONLY_WORKLOAD = """
name: interrupted
records: 2000
partitions: 2
warmup_units: 2
plain_max_units: 40
fill_records_per_transaction: 40
anchors: false
producer_config: {retry.backoff.ms: 5}
grid: {brokers: [1], record_size: [100], abort_ratio: [0.0], records_per_transaction: [10, 50],
       sink: [plain-base, plain-tx]}
"""


def test_sigterm_stops_the_sweeps_broker_and_keeps_the_cells_it_finished(spark, tmp_path):
    workload = tmp_path / "interrupted.yaml"
    workload.write_text(PLAIN_ONLY_WORKLOAD)
    sweep = subprocess.Popen([sys.executable, "-m", "eosbench.cli", "bench", "sweep", "--workload", str(workload),
                              "--port", str(INTERRUPTED_SWEEP_PORT), "--results-dir", str(tmp_path)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    progress = []
    for line in sweep.stderr:  # the sweep's progress lines go to stderr, as the producer tools' do
        progress.append(line)
        if "records/s over" in line:
            sweep.send_signal(signal.SIGTERM)
            break
    _, errors = sweep.communicate(timeout=180)
    errors = "".join(progress) + errors
    assert sweep.returncode == EXIT_INTERRUPTED, errors[-2000:]
    assert "stopped early; " in errors and errors.strip().splitlines()[-1] == "eosbench: interrupted", errors[-2000:]
    rows = results.read_rows(spark, tmp_path)
    # The fill's row, and each cell that ended before the signal (the one it followed, perhaps one more).
    assert [r["sink"] for r in rows if r["sink"] == "eosbench-produce"] == ["eosbench-produce"]
    cells = [r for r in rows if r["records_per_transaction"] is not None]
    assert 1 <= len(cells) <= 2 and all(r["throughput_rps"] > 0 for r in cells), cells
    assert not port_accepts_connections(INTERRUPTED_SWEEP_PORT), "the sweep left its broker running"


SPARK_BENCH_RECORDS = 2000


def test_spark_bench_runs_both_sinks_available_now_and_at_a_1s_trigger(bootstrap, spark, capfd, tmp_path):
    # Two batches a drain: the bench warms each sink up on ten times as many batches of a tenth the size.
    completed = run_in_process(capfd, "bench", "spark", "--bootstrap-server", bootstrap, "--records",
                               str(SPARK_BENCH_RECORDS), "--partitions", "2", "--max-offsets-per-trigger",
                               str(SPARK_BENCH_RECORDS // 2), "--rounds", "1", "--sink", "kafka-eos", "kafka-alo",
                               "--latency-seconds", "0", "--trigger-seconds", "6", "--results-dir", str(tmp_path))
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert "StackOverflowError" not in completed.stderr  # the timed stops end cleanly (capfd holds the JVM's stderr)
    report = json.loads(next(tmp_path.glob("spark-bench-*.json")).read_text())
    source = f"eosbench-spark-bench-{report['run_id']}"
    input_ids = Counter(sequence_numbers(read_all(bootstrap, source)))
    assert sum(input_ids.values()) == SPARK_BENCH_RECORDS
    for variant in ("kafka-eos", "kafka-alo"):  # a fault-free drain: both sinks copy the input exactly
        assert Counter(sequence_numbers(read_all(bootstrap, f"{source}-{variant}-r1"))) == input_ids, variant
        assert report["median_records_per_sec"][variant] > 0
    # The broker's counters: one AddOffsetsToTxn, TxnOffsetCommit and EndTxn per committed transaction.
    scaling = report["scaling"]["kafka-eos"][0]
    # What reading cost each drain: Spark's source made a consumer per partition for the arm's own group.
    assert scaling["consumers_created"] >= 2 and scaling["first_batch_s"] > 0 and scaling["trigger_ms"]["addBatch"] > 0
    assert "consumers created" in completed.stdout
    assert scaling["transactions"] == report["phases"]["kafka-eos"]["transactions"] > 0
    assert {name: scaling["requests"][name]["count"] for name in ("AddOffsetsToTxn", "TxnOffsetCommit", "EndTxn")} == \
        dict.fromkeys(("AddOffsetsToTxn", "TxnOffsetCommit", "EndTxn"), scaling["transactions"])
    at = report["at_trigger"]
    assert at["trigger"] == "1 second" and at["max_offsets_per_trigger"] == int(report["median_records_per_sec"]["kafka-alo"])
    assert at["eos_over_alo"] == at["median_records_per_sec"]["kafka-eos"] / at["median_records_per_sec"]["kafka-alo"] > 0
    # The timed run stops mid-stream: what kafka-eos committed is a duplicate-free part of the backlog.
    backlog = set(sequence_numbers(read_all(bootstrap, at["input_topic"])))
    written = sequence_numbers(read_all(bootstrap, f"{source}-kafka-eos-trigger-r1"))
    assert written and len(written) == len(set(written)) and set(written) <= backlog
    # The anchor: Kafka's own consumer perf tool and one librdkafka consumer read the same committed input.
    assert sorted(report["anchors"]) == ["kafka-consumer-perf-test", "librdkafka-consumer"]
    assert [[(read["records"], read["records_per_sec"] > 0) for read in reads] for reads in report["anchors"].values()] \
        == [[(SPARK_BENCH_RECORDS, True)]] * 2, report["anchors"]
    assert "anchor, one plain read_committed reader of the same input: kafka-consumer-perf-test" in completed.stdout
    rows = [r for r in results.read_rows(spark, tmp_path) if r["run_id"] == report["run_id"]]
    anchor_rows = sorted(r["cell"] for r in rows if r["bench"] == "anchor")
    assert anchor_rows == ["anchor-kafka-consumer-perf-test", "anchor-librdkafka-consumer"]
    rows = [r for r in rows if r["bench"] == "spark"]
    assert sorted(r["cell"] for r in rows) == ["kafka-alo-available-now", "kafka-alo-trigger-1s",
                                               "kafka-eos-available-now", "kafka-eos-trigger-1s"]
    for r in rows:
        assert r["bench"] == "spark" and r["throughput_rps"] > 0 and r["latency_p50_ms"] > 0, r["cell"]
        if r["sink"] == "kafka-eos":
            assert r["baseline"] == "kafka-alo" and r["overhead_ratio"] > 0
    assert f"kafka-eos / kafka-alo {at['eos_over_alo']:.2f}" in completed.stdout
