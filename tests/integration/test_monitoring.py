"""A real Prometheus scrapes a real producer, stream and broker; every dashboard query and every
recording rule must then return plausible, non-empty results through Prometheus's HTTP API."""

from __future__ import annotations

import math
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
import urllib.request

import pytest
import yaml

from conf.settings import CONF_DIR
from conf.stream_settings import StreamSettings
from eosbench.local.kafka_admin import create_topic
from eosbench.local.prometheus_server import LocalPrometheus
from streaming import job
from streaming.metrics import StreamMetrics
from streaming.quiet_stop import stop_quietly
from streaming.verify.verifier import read_index, stable_and_end_offsets, verify
from tests.integration.dashboard_queries import assert_plausible, dashboard_queries
from tests.integration.produce_helpers import produce
from tests.integration.stream_checks import assert_exactly_once

PROMETHEUS_PORT = 19090
PRODUCER_METRICS_PORT = 19410
STREAM_METRICS_PORT = 19411
REALTIME_METRICS_PORT = 19412


def query(expr: str) -> list[dict]:
    """Run an instant query; return its result vector."""
    return LocalPrometheus(port=PROMETHEUS_PORT).query(expr)


def value(expr: str) -> float:
    """The single value of a query that must return exactly one series."""
    result = query(expr)
    assert len(result) == 1, (expr, result)
    return float(result[0]["value"][1])


@pytest.fixture(scope="module")
def prometheus(kafka_cluster, tmp_path_factory):
    """The real Prometheus (Debian's), scraping this test run's ports every second."""
    server = LocalPrometheus(tmp_path_factory.mktemp("prometheus"), port=PROMETHEUS_PORT, interval="1s", targets={
        "eosbench-producer": PRODUCER_METRICS_PORT, "eosbench-stream": STREAM_METRICS_PORT,
        "eosbench-stream-realtime": REALTIME_METRICS_PORT,
        "kafka": kafka_cluster.settings.nodes()[0].jmx_exporter})
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def monitored_run(prometheus, bootstrap, spark, tmp_path_factory):
    """Producer (abort ratio 0.5) then stream, both serving /metrics, scraped to the end."""
    folder = tmp_path_factory.mktemp("monitored")
    source, sink = "monitored-in", "monitored-out"
    for topic, partitions in ((source, 2), (sink, 2), (f"{sink}.dlq", 1)):
        create_topic(bootstrap, topic, partitions, 1)
    produced = produce(bootstrap, source, 8_000, records_per_transaction=200, abort_ratio=0.5, seed=8,
                       metrics_port=PRODUCER_METRICS_PORT, throughput=2_000)
    settings = StreamSettings(input_topic=source, output_topic=sink, bootstrap_server=bootstrap, app_id="monitored",
                              checkpoint=folder / "checkpoint", max_offsets_per_trigger=1_000,
                              metrics_port=STREAM_METRICS_PORT, observe_visibility=True)
    metrics = StreamMetrics(settings.app_id, settings.sink)
    metrics.serve(STREAM_METRICS_PORT, "127.0.0.1")
    streamed = job.run(spark, settings, metrics=metrics)
    report = verify(bootstrap, source, sink, "monitored", f"{sink}.dlq")
    metrics.verified(len(report.violations), report.input_committed)
    # The same input through real-time mode, for the overview's commit-interval panel. It runs until
    # Prometheus has scraped both streams' final counts, then stops: on a quiet machine its first
    # epoch (5 s) takes the whole backlog, on a busy one (a load of 17) the first epoch's tasks
    # started too late to, and a fixed 7 s cut the stream short of its input.
    realtime = StreamSettings(input_topic=source, output_topic=f"{sink}-realtime", bootstrap_server=bootstrap,
                              app_id="monitored-realtime", checkpoint=folder / "checkpoint-realtime",
                              trigger="realtime:5 seconds", timeout_s=300.0, metrics_port=REALTIME_METRICS_PORT)
    for topic, partitions in ((realtime.output_topic, 2), (realtime.dead_letter, 1)):
        create_topic(bootstrap, topic, partitions, 1)
    running = ThreadPoolExecutor(1, thread_name_prefix="monitored-realtime")
    realtime_run = running.submit(job.run, spark, realtime, echo=False)
    try:
        deadline = time.monotonic() + 240
        while len(query(f"eosbench_stream_output_records_total == {report.output_committed}")) < 2:
            assert time.monotonic() < deadline, "Prometheus never scraped both streams' final counts"
            assert not realtime_run.done(), realtime_run.exception()
            time.sleep(0.5)
    finally:
        for active in spark.streams.active:
            stop_quietly(spark, active)
        running.shutdown()
    realtime_run.result()
    assert_exactly_once(bootstrap, realtime)
    time.sleep(2)  # two more evaluations of the recording rules
    return produced, streamed, report, settings


def test_commit_interval_panel_sets_each_mode_beside_what_it_asked_for(monitored_run):
    settings = monitored_run[3]
    assert value('eosbench_stream_commit_wait_target_seconds{app_id="monitored-realtime"}') == 0.1
    assert not query(f'eosbench_stream_commit_wait_target_seconds{{app_id="{settings.app_id}"}}'), "available-now asks none"
    assert value('eosbench_stream_input_partitions{app_id="monitored-realtime"}') == 2
    assert value(f'eosbench_stream_input_partitions{{app_id="{settings.app_id}"}}') == 2
    assert value('eosbench_stream_output_records_total{app_id="monitored-realtime"}') == monitored_run[2].output_committed, \
        "its epochs took the whole backlog"


def recording_rules(renamed: bool) -> list[str]:
    """Every recording rule over a producer, stream or broker (the soak's are checked in test_soak):
    eosbench's own, or the old names kept for one release (group eosbench-renamed)."""
    rules = yaml.safe_load((CONF_DIR / "prometheus" / "recording_rules.yml").read_text())
    return [rule["record"] for group in rules["groups"] if (group["name"] == "eosbench-renamed") == renamed
            for rule in group["rules"] if "eosbench_soak_" not in rule["expr"]]


# The soak dashboard is checked against a soak's own Prometheus, in test_soak.
@pytest.mark.parametrize("board,title,expr", dashboard_queries("overview.json", "producer.json", "broker.json"))
def test_every_dashboard_query_returns_plausible_values(monitored_run, board, title, expr):
    assert_plausible(query(expr), f"{board} / {title}: {expr}")


@pytest.mark.parametrize("record", recording_rules(renamed=False))
def test_every_recording_rule_has_a_value(monitored_run, record):
    # Prometheus evaluated each rule every second during the run; its recorded series must hold
    # real numbers (a rate-based rule goes to NaN a minute after the run, hence the window).
    result = query(f"max_over_time({record}[10m])")
    assert result and all(not math.isnan(float(series["value"][1])) for series in result), record


@pytest.mark.parametrize("record", recording_rules(renamed=True))
def test_every_renamed_metric_still_answers_under_its_old_name(monitored_run, record):
    # Their values are the new series' (a broker's windowed averages are NaN once their window
    # has passed without a sample), so only that the old name answers is checked here.
    assert query(f"last_over_time({record}[10m])"), record


def test_counts_in_prometheus_equal_what_verify_counted(monitored_run):
    produced, streamed, report, _ = monitored_run
    assert value('max_over_time(eosbench_stream_output_records_total{app_id="monitored"}[10m])') == report.output_committed
    assert value('max_over_time(eosbench_stream_input_records_total{app_id="monitored"}[10m])') == report.input_committed
    committed = value(f'eosbench_producer_records_total{{run_id="{produced.run_id}",outcome="committed"}}')
    assert committed == produced.records_committed == report.input_committed
    # The rate the dashboards chart, integrated over the run, covers every record the verifier saw.
    # increase() extrapolates a series that starts and ends inside the window by up to one scrape
    # interval at each end, so over a series of n samples (n - 1 intervals) it is an estimate within
    # 2 / (n - 1) of the truth: a tenth for the usual ~30 s run, more for a faster one.
    increase = value('sum(increase(eosbench_stream_output_records_total{app_id="monitored"}[10m]))')
    samples = value('count_over_time(eosbench_stream_output_records_total{app_id="monitored"}[10m])')
    assert increase == pytest.approx(report.output_committed, rel=max(0.1, 2 / max(samples - 1, 1)))


def test_abort_overhead_gauges_agree_with_independent_read_committed_and_uncommitted_counts(monitored_run, bootstrap):
    produced, _, _, settings = monitored_run
    committed = read_index(bootstrap, settings.input_topic, "read_committed", with_src=False).seq.size
    everything = read_index(bootstrap, settings.input_topic, "read_uncommitted", with_src=False).seq.size
    offsets = sum(end for _, end in stable_and_end_offsets(bootstrap, settings.input_topic).values())
    assert produced.transaction_abort_ratio == 0.5
    producer_side = value(f'eosbench_abort_overhead_ratio{{run_id="{produced.run_id}"}}')
    assert producer_side == pytest.approx(everything / committed - 1, abs=1e-9)
    assert value(f'eosbench:producer_abort_overhead:ratio{{run_id="{produced.run_id}"}}') == pytest.approx(producer_side)
    stream_side = value('eosbench_stream_aborted_ratio{app_id="monitored"}')
    assert stream_side == pytest.approx(1 - committed / offsets, abs=1e-9)
    assert value('eosbench:stream_aborted:ratio{app_id="monitored"}') == pytest.approx(stream_side)


def test_verify_result_is_published_and_no_alert_fires(monitored_run):
    _, _, report, _ = monitored_run
    assert report.ok
    assert value('eosbench_verify_violations{app_id="monitored"}') == 0
    assert value('eosbench_verify_records_checked{app_id="monitored"}') == report.input_committed
    assert query('ALERTS{alertname=~"EosbenchVerifyFailed|EosbenchHangingTransaction"}') == []


def test_promtool_accepts_every_metrics_endpoint(monitored_run, kafka_cluster):
    # The broker's scrape too: after a transactional run its JMX exporter serves the request,
    # log-flush and transaction-coordinator metrics whose percentiles and milliseconds promtool
    # used to reject (`quantile` labels on gauges, `_ms` names).
    for port in (PRODUCER_METRICS_PORT, STREAM_METRICS_PORT, REALTIME_METRICS_PORT,
                 kafka_cluster.settings.nodes()[0].jmx_exporter):
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
        checked = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True)
        assert checked.returncode == 0, (port, checked.stdout + checked.stderr)
    assert "kafka_network_requestmetrics_totaltime_seconds{" in text and "kafka_log_flush_time_seconds{" in text
