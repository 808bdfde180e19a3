"""Generate the Grafana dashboards from one compact description (`python dashboards/build.py`).

The JSON files beside this script are its output and are committed, so that Grafana can
provision them as they are; the tests check that they are current and valid.
"""

from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATASOURCE = {"type": "prometheus", "uid": "${DS_PROMETHEUS}"}
RUN = 'run_id=~"$run_id"'
APP = 'app_id=~"$app_id"'


def panel(title: str, targets: list[tuple[str, str]], unit: str = "short", stacked: bool = False,
          description: str = "") -> dict:
    """A time-series panel; targets are (legend, PromQL)."""
    return {
        "type": "timeseries", "title": title, "description": description, "datasource": DATASOURCE,
        "fieldConfig": {"defaults": {"unit": unit, "custom": {"stacking": {"mode": "normal" if stacked else "none"},
                                                              "fillOpacity": 30 if stacked else 10}},
                        "overrides": []},
        "targets": [{"refId": chr(ord("A") + i), "datasource": DATASOURCE, "expr": expr, "legendFormat": legend}
                    for i, (legend, expr) in enumerate(targets)],
    }


def variable(name: str, query: str) -> dict:
    """A multi-value query variable over label values, 'All' by default."""
    return {"name": name, "type": "query", "datasource": DATASOURCE, "query": query, "refresh": 2,
            "includeAll": True, "multi": True, "allValue": ".*",
            "current": {"selected": True, "text": "All", "value": "$__all"}}


APP_ID_VARIABLE = variable("app_id", "label_values(eosbench_stream_input_records_total, app_id)")
RUN_ID_VARIABLE = variable("run_id", "label_values(eosbench_producer_records_total, run_id)")


def dashboard(uid: str, title: str, panels: list[dict], variables: list[dict],
              annotations: list[dict] | None = None) -> dict:
    """A dashboard with a datasource variable and panels laid out two per row."""
    for index, p in enumerate(panels):
        p["id"] = index + 1
        p["gridPos"] = {"h": 8, "w": 12, "x": 12 * (index % 2), "y": 8 * (index // 2)}
    datasource = {"name": "DS_PROMETHEUS", "type": "datasource", "query": "prometheus", "label": "Prometheus",
                  "current": {"text": "Prometheus", "value": "Prometheus"}}
    return {"uid": uid, "title": title, "tags": ["eosbench"], "schemaVersion": 39, "version": 1,
            "editable": True, "refresh": "5s", "time": {"from": "now-15m", "to": "now"},
            "templating": {"list": [datasource, *variables]}, "annotations": {"list": annotations or []},
            "panels": panels}


def end_to_end_throughput() -> dict:
    """Records per second into the stream, out of its sink, and committed by the producer."""
    return panel("End-to-end throughput", [
        ("in {{app_id}} ({{sink}})", f"sum by (app_id, sink) (rate(eosbench_stream_input_records_total{{{APP}}}[1m]))"),
        ("out {{app_id}} ({{sink}})", f"sum by (app_id, sink) (rate(eosbench_stream_output_records_total{{{APP}}}[1m]))"),
        ("produced, committed {{run_id}}", f'sum by (run_id) (rate(eosbench_producer_records_total{{{RUN},outcome="committed"}}[1m]))'),
    ], "rps", description="Records per second: read by the stream (visible input), written by its sink, and committed by the producer.")


def overview() -> dict:
    """End-to-end throughput, latency, visibility, commits and aborts, abort overhead, lag, sink phases."""
    return dashboard("eosbench-overview", "eosbench: exactly-once overview", [
        end_to_end_throughput(),
        panel("End-to-end latency (input CreateTime to output commit)", [
            ("p50 {{app_id}}", f"histogram_quantile(0.5, sum by (app_id, le) (rate(eosbench_stream_end_to_end_latency_seconds_bucket{{{APP}}}[1m])))"),
            ("p99 {{app_id}}", f"histogram_quantile(0.99, sum by (app_id, le) (rate(eosbench_stream_end_to_end_latency_seconds_bucket{{{APP}}}[1m])))"),
        ], "s", description="Merged from every task's histogram (5 % buckets)."),
        panel("Commit interval: seconds between a partition's commits", [
            ("measured {{app_id}}", f"sum by (app_id) (eosbench_stream_input_partitions{{{APP}}})"
                                    f' / sum by (app_id) (rate(eosbench_sink_transactions_total{{{APP},outcome="committed"}}[1m]))'),
            ("asked for {{app_id}}", f"eosbench_stream_commit_wait_target_seconds{{{APP}}}"),
        ], "s", description="Input partitions over committed sink transactions per second: each partition's commit interval"
                            " under partition scope and in real-time mode (slot and batch scope commit several partitions"
                            " at once, so it reads as their share). Asked for: --commit-interval-ms in real-time mode, the"
                            " trigger interval in micro-batches. A record waits up to this long for its commit."),
        panel("Visibility latency (commit returned to read_committed sees it)", [
            ("p50 {{app_id}}", f"histogram_quantile(0.5, sum by (app_id, le) (rate(eosbench_stream_visibility_seconds_bucket{{{APP}}}[1m])))"),
            ("p99 {{app_id}}", f"histogram_quantile(0.99, sum by (app_id, le) (rate(eosbench_stream_visibility_seconds_bucket{{{APP}}}[1m])))"),
        ], "s", description="How long committed data stays invisible: from a sink transaction's commit_transaction"
                            " returning to a read_committed reader first seeing its records (the last stable offset's"
                            " advance). Needs --observe-visibility; the soak turns it on."),
        panel("Commits and aborts per second", [
            ("sink {{outcome}}", f"sum by (outcome) (rate(eosbench_sink_transactions_total{{{APP}}}[1m]))"),
            ("producer {{outcome}}", f"sum by (outcome) (rate(eosbench_producer_transactions_total{{{RUN}}}[1m]))"),
        ], "ops", description="Sink outcomes: committed, aborted, skipped_replay (a replayed batch), fenced, idle (a partition with"
                                   " nothing new, whose offset is already at the batch end: no transaction)."),
        panel("Abort overhead", [
            ("producer: sent / committed - 1 ({{run_id}})", f"eosbench_abort_overhead_ratio{{{RUN}}}"),
            ("stream: 1 - visible / offset span ({{app_id}})", f"eosbench_stream_aborted_ratio{{{APP}}}"),
            ("producer, PromQL ({{run_id}})", f"eosbench:producer_abort_overhead:ratio{{{RUN}}}"),
            ("stream, PromQL ({{app_id}})", f"eosbench:stream_aborted:ratio{{{APP}}}"),
        ], "percentunit", description="The gauges the engines export beside the same figures derived by recording rules."),
        panel("Consumer lag of the sink's group", [
            ("{{app_id}}", f"eosbench_stream_consumer_lag_records{{{APP}}}"),
        ], "short", description="Input end offsets minus the group's committed offsets."),
        panel("Verify: exactly-once violations found", [
            ("violations {{app_id}}", f"eosbench_verify_violations{{{APP}}}"),
            ("records checked {{app_id}}", f"eosbench_verify_records_checked{{{APP}}}"),
        ], "short", description="From the last verify (the demo and the soak publish it); any violation fires EosbenchVerifyFailed."),
        panel("Sink phase time per transaction", [
            ("{{phase}}", f"sum by (phase) (rate(eosbench_sink_transaction_phase_seconds_sum{{{APP}}}[1m]))"
                          f" / sum by (phase) (rate(eosbench_sink_transaction_phase_seconds_count{{{APP}}}[1m]))"),
        ], "s", stacked=True, description="init, register, produce, send_offsets and commit, stacked: the cost of one transaction."),
    ], [APP_ID_VARIABLE, RUN_ID_VARIABLE])


def producer() -> dict:
    """The seeded producer: records and transactions by outcome, durations, latency, timeouts."""
    return dashboard("eosbench-producer", "eosbench: producer", [
        panel("Records per second by outcome", [
            ("{{outcome}}", f"sum by (outcome) (rate(eosbench_producer_records_total{{{RUN}}}[1m]))")], "rps"),
        panel("Transactions per second by outcome", [
            ("{{outcome}}", f"sum by (outcome) (rate(eosbench_producer_transactions_total{{{RUN}}}[1m]))")], "ops"),
        panel("Transaction duration", [
            ("p50", f"histogram_quantile(0.5, sum by (le) (rate(eosbench_producer_transaction_duration_seconds_bucket{{{RUN}}}[1m])))"),
            ("p99", f"histogram_quantile(0.99, sum by (le) (rate(eosbench_producer_transaction_duration_seconds_bucket{{{RUN}}}[1m])))"),
        ], "s"),
        panel("Send latency (from the intended send time)", [
            ("p50", f"histogram_quantile(0.5, sum by (le) (rate(eosbench_producer_send_latency_seconds_bucket{{{RUN}}}[1m])))"),
            ("p99", f"histogram_quantile(0.99, sum by (le) (rate(eosbench_producer_send_latency_seconds_bucket{{{RUN}}}[1m])))"),
        ], "s"),
        panel("Delivery timeouts (KIP-91)", [
            ("expired records {{run_id}}", f"eosbench_producer_delivery_timeouts_total{{{RUN}}}")], "short"),
        panel("Abort ratio: configured and paid", [
            ("configured {{run_id}}", f"eosbench_producer_configured_abort_ratio{{{RUN}}}"),
            ("overhead {{run_id}}", f"eosbench_abort_overhead_ratio{{{RUN}}}"),
        ], "percentunit"),
    ], [RUN_ID_VARIABLE])


def broker() -> dict:
    """The brokers, from the JMX exporter: traffic, transactional request latency, health."""
    txn_requests = "Produce|AddPartitionsToTxn|AddOffsetsToTxn|TxnOffsetCommit|EndTxn|InitProducerId"
    return dashboard("eosbench-broker", "eosbench: brokers", [
        panel("Messages in per second", [
            ("{{instance}}", "sum by (instance) (rate(kafka_server_brokertopicmetrics_messagesinpersec_total[1m]))")], "rps"),
        panel("Request latency p99 by request", [
            ("{{request}}", f'max by (request) (kafka_network_requestmetrics_totaltime_seconds{{percentile="99",request=~"{txn_requests}"}})'),
        ], "s"),
        panel("Transactional requests per second", [
            ("{{request}}", f'sum by (request) (rate(kafka_network_requestmetrics_requests_total{{request=~"{txn_requests}"}}[1m]))'),
        ], "ops"),
        panel("Last stable offset behind the end (open transactions)", [
            ("max over partitions", "max(kafka_cluster_partition_laststableoffsetlag)")], "short"),
        panel("Replication and controller health", [
            ("under-replicated {{instance}}", "kafka_server_replicamanager_underreplicatedpartitions"),
            ("under min ISR {{instance}}", "kafka_server_replicamanager_underminisrpartitioncount"),
            ("active controllers", "sum(kafka_controller_activecontrollercount)"),
        ], "short"),
        panel("Log flush latency", [
            ("p99 {{instance}}", 'kafka_log_flush_time_seconds{percentile="99"}')], "s"),
    ], [])


def soak() -> dict:
    """A soak run: exactly-once progress with every fault marked, faults by kind, recovery, verifies."""
    soak_run = 'run_id=~"$soak_run"'
    fault_markers = {
        "name": "faults", "enable": True, "iconColor": "red", "datasource": DATASOURCE,
        # One marker per injection, at the moment the soak recorded (the gauge's value), not at a scrape.
        "expr": f"max by (kind) (eosbench_soak_fault_injected_timestamp_seconds{{{soak_run}}}) * 1000",
        "useValueForTime": True, "step": "5s", "titleFormat": "{{kind}}", "tagKeys": "kind"}
    return dashboard("eosbench-soak", "eosbench: soak", [
        panel("Exactly-once progress (the sink group's committed offsets)", [
            ("offsets/s {{run_id}}", f"rate(eosbench_soak_committed_offsets_total{{{soak_run}}}[1m])"),
        ], "rps", description="What the soak's recovery times are measured on: it moves only when a sink transaction"
                              " commits, and keeps counting across restarts of the driver. Red markers are faults."),
        end_to_end_throughput(),
        panel("Faults by kind and outcome", [
            ("{{kind}} {{outcome}}", f"sum by (kind, outcome) (eosbench_soak_faults_total{{{soak_run}}})"),
        ], "short", stacked=True, description="Counted when a round ends: recovered, verified, and no transaction left open."),
        panel("Recovery to 90 % throughput, last fault of each kind", [
            ("{{kind}}", f"eosbench_soak_recovery_seconds{{{soak_run}}}"),
        ], "s", description="From the fault until the committed-offsets rate is back to 90 % of the rate before it."),
        panel("Soak verifies: records checked and violations", [
            ("records verified", f"eosbench_soak_records_verified{{{soak_run}}}"),
            ("violations", f"eosbench_soak_verify_violations{{{soak_run}}}"),
        ], "short", description="After every fault and at the end; any violation fails the soak and fires EosbenchVerifyFailed."),
        panel("Unplanned restarts of supervised processes", [
            ("{{process}}", f"sum by (process) (eosbench_soak_restarts_total{{{soak_run}}})"),
        ], "short", description="A producer or stream that died without a fault and was restarted (with --resume or from its checkpoint)."),
    ], [variable("soak_run", "label_values(eosbench_soak_faults_total, run_id)"),
        APP_ID_VARIABLE, RUN_ID_VARIABLE], [fault_markers])


DASHBOARDS = {"overview.json": overview, "producer.json": producer, "broker.json": broker, "soak.json": soak}


def render() -> dict[str, str]:
    """Every dashboard's JSON text, by file name."""
    return {name: json.dumps(build(), indent=2) + "\n" for name, build in DASHBOARDS.items()}


if __name__ == "__main__":
    for name, text in render().items():
        (HERE / name).write_text(text)
        print(f"wrote dashboards/{name}")
