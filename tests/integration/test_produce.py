"""`eosbench produce` against the real broker: committed counts, KIP-91 expiry, SIGKILL + --resume."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from pathlib import Path

from conf.produce_settings import ProduceSettings
from producers.perf import ProducerPerformance
from tests.integration.kafka_reads import read_all, sequence_numbers
from tests.integration.produce_helpers import committed_ids


def committed_sequence_numbers(summary: dict) -> Counter:
    """The sequence numbers of every transaction a JSON summary reports as committed."""
    return committed_ids(summary["transactions"])


def start_produce(*flags: str) -> subprocess.Popen:
    """Start `eosbench produce` in its own process, line-buffered stdout."""
    return subprocess.Popen([sys.executable, "-m", "eosbench.cli", "produce", *flags],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1)


def wait_for_window_lines(process: subprocess.Popen, count: int, timeout_s: float = 60) -> list[str]:
    """Read stdout until `count` window lines have appeared (progress, not a sleep, gates the fault)."""
    lines: list[str] = []
    deadline = time.monotonic() + timeout_s
    while sum(" records sent, " in line for line in lines) < count:
        assert time.monotonic() < deadline, f"no progress from the producer: {lines}"
        line = process.stdout.readline()
        assert line, f"producer ended early: {process.stderr.read()}"
        lines.append(line)
    return lines


def test_read_committed_count_equals_the_committed_count_the_tool_reports(bootstrap, new_topic):
    topic = new_topic(partitions=3)
    settings = ProduceSettings(topic=topic, bootstrap_server=bootstrap, num_records=30_000, record_size=100,
                               throughput=-1, records_per_transaction=500, transaction_abort_ratio=0.5, seed=3,
                               metrics_port=19400, producer_props=("acks=all",))
    run = ProducerPerformance(settings, out=io.StringIO())
    summary = json.loads(run.run().to_json())
    assert 0 < summary["transactions_aborted"] < 60

    visible = Counter(sequence_numbers(read_all(bootstrap, topic)))
    assert sum(visible.values()) == summary["records_committed"]
    assert visible == committed_sequence_numbers(summary)

    metrics = urllib.request.urlopen("http://127.0.0.1:19400/metrics", timeout=5).read().decode()
    checked = subprocess.run(["promtool", "check", "metrics"], input=metrics, capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f'eosbench_producer_records_total{{outcome="committed",run_id="{run.run_id}"}} {summary["records_committed"]}.0' in metrics
    assert f'eosbench_producer_transactions_total{{outcome="aborted",run_id="{run.run_id}"}} {summary["transactions_aborted"]}.0' in metrics
    assert f'eosbench_producer_configured_abort_ratio{{run_id="{run.run_id}"}} 0.5' in metrics


def test_broker_paused_past_the_delivery_timeout_aborts_the_transaction_and_shows_nothing_partial(
        kafka_cluster, bootstrap, new_topic, tmp_path: Path):
    topic = new_topic()
    summary_file = tmp_path / "summary.json"
    producer = start_produce(
        "--bootstrap-server", bootstrap, "--topic", topic, "--num-records", "6000", "--record-size", "50",
        "--throughput", "1000", "--records-per-transaction", "500", "--transactional-id", f"{topic}.tx",
        "--reporting-interval", "500", "--output-json", str(summary_file),
        "--producer-props", "acks=all", "delivery.timeout.ms=3000", "request.timeout.ms=2000", "linger.ms=5")
    broker_pid = kafka_cluster.status()[0].pid
    try:
        wait_for_window_lines(producer, 2)
        os.kill(broker_pid, signal.SIGSTOP)
        time.sleep(6)  # the fault's length is the point here: twice delivery.timeout.ms
    finally:
        os.kill(broker_pid, signal.SIGCONT)
    stdout, stderr = producer.communicate(timeout=240)
    assert producer.returncode == 0, stderr
    summary = json.loads(summary_file.read_text())
    assert summary["records_expired"] > 0
    assert summary["transactions_aborted_by_expiry"] >= 1
    assert summary["transactions_aborted_by_ratio"] == 0
    assert "by delivery failures" in stdout and "records expired (delivery.timeout.ms)" in stdout
    assert Counter(sequence_numbers(read_all(bootstrap, topic))) == committed_sequence_numbers(summary)
    assert summary["records_committed"] + summary["records_aborted"] == 6000


def test_sigkill_mid_load_then_resume_commits_every_sequence_number_exactly_once(bootstrap, new_topic, tmp_path):
    topic = new_topic(partitions=2)
    flags = ["--bootstrap-server", bootstrap, "--topic", topic, "--num-records", "20000", "--record-size", "100",
             "--records-per-transaction", "1000", "--transactional-id", f"{topic}.load",
             "--reporting-interval", "300", "--producer-props", "acks=all"]
    first = start_produce(*flags, "--throughput", "4000")
    wait_for_window_lines(first, 3)
    first.kill()
    first.wait(30)
    interrupted = sequence_numbers(read_all(bootstrap, topic))
    assert 0 < len(interrupted) < 20000, "the kill must land mid-load"

    summary_file = tmp_path / "resumed.json"
    resumed = subprocess.run([sys.executable, "-m", "eosbench.cli", "produce", *flags, "--throughput", "-1",
                              "--resume", "--output-json", str(summary_file)], capture_output=True, text=True, timeout=240)
    assert resumed.returncode == 0, resumed.stderr
    assert f"at sequence number {max(interrupted) + 1}." in resumed.stdout
    assert Counter(sequence_numbers(read_all(bootstrap, topic))) == Counter(range(20000))
    assert json.loads(summary_file.read_text())["first_seq"] == max(interrupted) + 1


def test_metrics_stay_up_after_the_run_with_the_final_values(bootstrap, new_topic):
    # Prometheus scrapes on an interval: an endpoint that vanished with the process would lose
    # the run's last values, so --metrics-linger keeps it up after the final line.
    topic = new_topic()
    process = start_produce("--topic", topic, "--num-records", "5000", "--record-size", "100", "--throughput", "-1",
                            "--bootstrap-server", bootstrap, "--transactional-id", f"{topic}.linger",
                            "--records-per-transaction", "1000", "--run-id", "lingering",
                            "--metrics-port", "19402", "--metrics-linger", "6")
    try:
        final = ""
        while not final.startswith("5000 records sent, "):
            final = process.stdout.readline()
            assert final, f"producer ended early: {process.stderr.read()}"
        metrics = urllib.request.urlopen("http://127.0.0.1:19402/metrics", timeout=5).read().decode()
        assert 'eosbench_producer_records_total{outcome="committed",run_id="lingering"} 5000.0' in metrics
        assert process.poll() is None, "the producer exited before lingering"
        assert process.wait(timeout=30) == 0
        assert "for 6 s (--metrics-linger)" in process.stderr.read()
    finally:
        process.kill()
