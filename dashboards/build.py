"""Build the Grafana dashboards with Grafana's grafana-foundation-sdk (`python dashboards/build.py`).

The JSON files beside this script are its output and are committed, so that Grafana can
provision them as they are; the unit tests check that they are current and valid, and the
integration tests run every panel's query on a real Prometheus.
"""

from __future__ import annotations

import json
from pathlib import Path

# The classic dashboard model (panels with targets), not dashboardv2: Grafana 12 reads schema v2 only
# behind its dynamic-dashboards and kubernetesDashboards feature toggles, while every Grafana
# provisions the classic one from files. The SDK warns about that choice on import; pyproject
# filters the warning in the tests.
from grafana_foundation_sdk.builders import common as common_builders
from grafana_foundation_sdk.builders import dashboard, prometheus, timeseries
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import common, units
from grafana_foundation_sdk.models.dashboard import DashboardCursorSync, VariableOption, VariableRefresh

HERE = Path(__file__).resolve().parent
DATASOURCE_VARIABLE = "DS_PROMETHEUS"
DATASOURCE = common.DataSourceRef(type_val="prometheus", uid=f"${{{DATASOURCE_VARIABLE}}}")
# Grafana widens $__rate_interval with the graph's step and keeps it at four scrape intervals or more
# (the provisioned datasource's timeInterval): a fixed [1m] skipped the samples between two points
# once the step outgrew a minute, and held too few samples for a rate under a slower scrape.
RATE = "$__rate_interval"
RUN = 'run_id=~"$run_id"'
APP = 'app_id=~"$app_id"'
APP_ID = ("app_id", "label_values(eosbench_stream_input_records_total, app_id)")
RUN_ID = ("run_id", "label_values(eosbench_producer_records_total, run_id)")


def panel(title: str, targets: list[tuple[str, str]], unit: str, stacked: bool = False,
          description: str = "") -> timeseries.Panel:
    """A half-width time-series panel; targets are (legend, PromQL), unit one of the SDK's `units`."""
    built = (timeseries.Panel().title(title).datasource(DATASOURCE).unit(unit).height(8).span(12)
             .fill_opacity(30 if stacked else 10)
             .stacking(common_builders.StackingConfig().mode(common.StackingMode.NORMAL if stacked else common.StackingMode.NONE))
             # The SDK's default legend is hidden, and the legend is what names each series.
             .legend(common_builders.VizLegendOptions().show_legend(True).display_mode(common.LegendDisplayMode.LIST)
                     .placement(common.LegendPlacement.BOTTOM))
             .tooltip(common_builders.VizTooltipOptions().mode(common.TooltipDisplayMode.MULTI).sort(common.SortOrder.DESCENDING)))
    if description:
        built.description(description)
    for index, (legend, expr) in enumerate(targets):
        built.with_target(prometheus.Dataquery().ref_id(chr(ord("A") + index)).datasource(DATASOURCE)
                          .expr(expr).legend_format(legend))
    return built


def variable(name: str, query: str) -> dashboard.QueryVariable:
    """A multi-value query variable over label values, 'All' by default."""
    return (dashboard.QueryVariable(name).datasource(DATASOURCE).query(query).refresh(VariableRefresh.ON_TIME_RANGE_CHANGED)
            .include_all(True).multi(True).all_value(".*").current(VariableOption(selected=True, text="All", value="$__all")))


def board(uid: str, title: str, panels: list[timeseries.Panel], variables: list[dashboard.QueryVariable],
          annotations: list[dashboard.AnnotationQuery] | None = None) -> dashboard.Dashboard:
    """A dashboard: the datasource variable, then the filters, and the panels two per row."""
    built = (dashboard.Dashboard(title).uid(uid).tags(["eosbench"]).editable().refresh("5s").time("now-15m", "now")
             .tooltip(DashboardCursorSync.CROSSHAIR)
             # No current value: Grafana then picks the default Prometheus datasource, whatever its name.
             .with_variable(dashboard.DatasourceVariable(DATASOURCE_VARIABLE).label("Prometheus").type("prometheus")))
    for each in variables:
        built.with_variable(each)
    for index, each in enumerate(panels, 1):
        built.with_panel(each.id(index))
    return built.annotations(annotations or [])


def end_to_end_throughput() -> timeseries.Panel:
    """Records per second into the stream, out of its sink, and committed by the producer."""
    return panel("End-to-end throughput", [
        ("in {{app_id}} ({{sink}})", f"sum by (app_id, sink) (rate(eosbench_stream_input_records_total{{{APP}}}[{RATE}]))"),
        ("out {{app_id}} ({{sink}})", f"sum by (app_id, sink) (rate(eosbench_stream_output_records_total{{{APP}}}[{RATE}]))"),
        ("produced, committed {{run_id}}", f'sum by (run_id) (rate(eosbench_producer_records_total{{{RUN},outcome="committed"}}[{RATE}]))'),
    ], units.RecordsPerSecond, description="Records per second: read by the stream (visible input), written by its sink, and committed by the producer.")


def overview() -> dashboard.Dashboard:
    """End-to-end throughput, latency, visibility, commits and aborts, abort overhead, lag, sink phases."""
    return board("eosbench-overview", "eosbench: exactly-once overview", [
        end_to_end_throughput(),
        panel("End-to-end latency (input CreateTime to output commit)", [
            ("p50 {{app_id}}", f"histogram_quantile(0.5, sum by (app_id, le) (rate(eosbench_stream_end_to_end_latency_seconds_bucket{{{APP}}}[{RATE}])))"),
            ("p99 {{app_id}}", f"histogram_quantile(0.99, sum by (app_id, le) (rate(eosbench_stream_end_to_end_latency_seconds_bucket{{{APP}}}[{RATE}])))"),
        ], units.Seconds, description="Merged from every task's histogram (5 % buckets)."),
        panel("Commit interval: seconds between a partition's commits", [
            ("measured {{app_id}}", f"sum by (app_id) (eosbench_stream_input_partitions{{{APP}}})"
                                    f' / sum by (app_id) (rate(eosbench_sink_transactions_total{{{APP},outcome="committed"}}[{RATE}]))'),
            ("asked for {{app_id}}", f"eosbench_stream_commit_wait_target_seconds{{{APP}}}"),
        ], units.Seconds, description="Input partitions over committed sink transactions per second: each partition's commit interval"
                            " under partition scope and in real-time mode (slot and batch scope commit several partitions"
                            " at once, so it reads as their share). Asked for: --commit-interval-ms in real-time mode, the"
                            " trigger interval in micro-batches. A record waits up to this long for its commit."),
        panel("Visibility latency (commit returned to read_committed sees it)", [
            ("p50 {{app_id}}", f"histogram_quantile(0.5, sum by (app_id, le) (rate(eosbench_stream_visibility_seconds_bucket{{{APP}}}[{RATE}])))"),
            ("p99 {{app_id}}", f"histogram_quantile(0.99, sum by (app_id, le) (rate(eosbench_stream_visibility_seconds_bucket{{{APP}}}[{RATE}])))"),
        ], units.Seconds, description="How long committed data stays invisible: from a sink transaction's commit_transaction"
                            " returning to a read_committed reader first seeing its records (the last stable offset's"
                            " advance). Needs --observe-visibility; the soak turns it on."),
        panel("Commits and aborts per second", [
            ("sink {{outcome}}", f"sum by (outcome) (rate(eosbench_sink_transactions_total{{{APP}}}[{RATE}]))"),
            ("producer {{outcome}}", f"sum by (outcome) (rate(eosbench_producer_transactions_total{{{RUN}}}[{RATE}]))"),
        ], units.OpsPerSecond, description="Sink outcomes: committed, aborted, skipped_replay (a replayed batch), fenced, idle (a partition with"
                                   " nothing new, whose offset is already at the batch end: no transaction)."),
        panel("Abort overhead", [
            ("producer: sent / committed - 1 ({{run_id}})", f"eosbench_abort_overhead_ratio{{{RUN}}}"),
            ("stream: 1 - visible / offset span ({{app_id}})", f"eosbench_stream_aborted_ratio{{{APP}}}"),
            ("producer, PromQL ({{run_id}})", f"eosbench:producer_abort_overhead:ratio{{{RUN}}}"),
            ("stream, PromQL ({{app_id}})", f"eosbench:stream_aborted:ratio{{{APP}}}"),
        ], units.PercentUnit, description="The gauges the engines export beside the same figures derived by recording rules."),
        panel("Consumer lag of the sink's group", [
            ("{{app_id}}", f"eosbench_stream_consumer_lag_records{{{APP}}}"),
        ], units.Short, description="Input end offsets minus the group's committed offsets."),
        panel("Verify: exactly-once violations found", [
            ("violations {{app_id}}", f"eosbench_verify_violations{{{APP}}}"),
            ("records checked {{app_id}}", f"eosbench_verify_records_checked{{{APP}}}"),
        ], units.Short, description="From the last verify (the demo and the soak publish it); any violation fires EosbenchVerifyFailed."),
        panel("Sink phase time per transaction", [
            ("{{phase}}", f"sum by (phase) (rate(eosbench_sink_transaction_phase_seconds_sum{{{APP}}}[{RATE}]))"
                          f" / sum by (phase) (rate(eosbench_sink_transaction_phase_seconds_count{{{APP}}}[{RATE}]))"),
        ], units.Seconds, stacked=True, description="init, register, produce, send_offsets and commit, stacked: the cost of one transaction."),
    ], [variable(*APP_ID), variable(*RUN_ID)])


def producer() -> dashboard.Dashboard:
    """The seeded producer: records and transactions by outcome, durations, latency, timeouts."""
    return board("eosbench-producer", "eosbench: producer", [
        panel("Records per second by outcome", [
            ("{{outcome}}", f"sum by (outcome) (rate(eosbench_producer_records_total{{{RUN}}}[{RATE}]))")], units.RecordsPerSecond),
        panel("Transactions per second by outcome", [
            ("{{outcome}}", f"sum by (outcome) (rate(eosbench_producer_transactions_total{{{RUN}}}[{RATE}]))")], units.OpsPerSecond),
        panel("Transaction duration", [
            ("p50", f"histogram_quantile(0.5, sum by (le) (rate(eosbench_producer_transaction_duration_seconds_bucket{{{RUN}}}[{RATE}])))"),
            ("p99", f"histogram_quantile(0.99, sum by (le) (rate(eosbench_producer_transaction_duration_seconds_bucket{{{RUN}}}[{RATE}])))"),
        ], units.Seconds),
        panel("Send latency (from the intended send time)", [
            ("p50", f"histogram_quantile(0.5, sum by (le) (rate(eosbench_producer_send_latency_seconds_bucket{{{RUN}}}[{RATE}])))"),
            ("p99", f"histogram_quantile(0.99, sum by (le) (rate(eosbench_producer_send_latency_seconds_bucket{{{RUN}}}[{RATE}])))"),
        ], units.Seconds),
        panel("Delivery timeouts (KIP-91)", [
            ("expired records {{run_id}}", f"eosbench_producer_delivery_timeouts_total{{{RUN}}}")], units.Short),
        panel("Abort ratio: configured and paid", [
            ("configured {{run_id}}", f"eosbench_producer_configured_abort_ratio{{{RUN}}}"),
            ("overhead {{run_id}}", f"eosbench_abort_overhead_ratio{{{RUN}}}"),
        ], units.PercentUnit),
    ], [variable(*RUN_ID)])


def broker() -> dashboard.Dashboard:
    """The brokers, from the JMX exporter: traffic, transactional request latency, health."""
    txn_requests = "Produce|AddPartitionsToTxn|AddOffsetsToTxn|TxnOffsetCommit|EndTxn|InitProducerId"
    return board("eosbench-broker", "eosbench: brokers", [
        panel("Messages in per second", [
            ("{{instance}}", f"sum by (instance) (rate(kafka_server_brokertopicmetrics_messagesinpersec_total[{RATE}]))")], units.MessagesPerSecond),
        panel("Request latency p99 by request", [
            ("{{request}}", f'max by (request) (kafka_network_requestmetrics_totaltime_seconds{{percentile="99",request=~"{txn_requests}"}})'),
        ], units.Seconds),
        panel("Transactional requests per second", [
            ("{{request}}", f'sum by (request) (rate(kafka_network_requestmetrics_requests_total{{request=~"{txn_requests}"}}[{RATE}]))'),
        ], units.RequestsPerSecond),
        panel("Last stable offset behind the end (open transactions)", [
            ("max over partitions", "max(kafka_cluster_partition_laststableoffsetlag)")], units.Short),
        panel("Replication and controller health", [
            ("under-replicated {{instance}}", "kafka_server_replicamanager_underreplicatedpartitions"),
            ("under min ISR {{instance}}", "kafka_server_replicamanager_underminisrpartitioncount"),
            ("active controllers", "sum(kafka_controller_activecontrollercount)"),
        ], units.Short),
        panel("Log flush latency", [
            ("p99 {{instance}}", 'kafka_log_flush_time_seconds{percentile="99"}')], units.Seconds),
    ], [])


def soak() -> dashboard.Dashboard:
    """A soak run: exactly-once progress with every fault marked, faults by kind, recovery, verifies."""
    soak_run = 'run_id=~"$soak_run"'
    fault_markers = (
        dashboard.AnnotationQuery().name("faults").enable(True).icon_color("red").datasource(DATASOURCE)
        # One marker per injection, at the moment the soak recorded (the gauge's value), not at a scrape.
        .expr(f"max by (kind) (eosbench_soak_fault_injected_timestamp_seconds{{{soak_run}}}) * 1000")
        .use_value_for_time(True).step("5s").title_format("{{kind}}").tag_keys("kind"))
    return board("eosbench-soak", "eosbench: soak", [
        panel("Exactly-once progress (the sink group's committed offsets)", [
            ("offsets/s {{run_id}}", f"rate(eosbench_soak_committed_offsets_total{{{soak_run}}}[{RATE}])"),
        ], units.CountsPerSecond, description="What the soak's recovery times are measured on: it moves only when a sink transaction"
                              " commits, and keeps counting across restarts of the driver. Red markers are faults."),
        end_to_end_throughput(),
        panel("Faults by kind and outcome", [
            ("{{kind}} {{outcome}}", f"sum by (kind, outcome) (eosbench_soak_faults_total{{{soak_run}}})"),
        ], units.Short, stacked=True, description="Counted when a round ends: recovered, verified, and no transaction left open."),
        panel("Recovery to 90 % throughput, last fault of each kind", [
            ("{{kind}}", f"eosbench_soak_recovery_seconds{{{soak_run}}}"),
        ], units.Seconds, description="From the fault until the committed-offsets rate is back to 90 % of the rate before it."),
        panel("Soak verifies: records checked and violations", [
            ("records verified", f"eosbench_soak_records_verified{{{soak_run}}}"),
            ("violations", f"eosbench_soak_verify_violations{{{soak_run}}}"),
        ], units.Short, description="After every fault and at the end; any violation fails the soak and fires EosbenchVerifyFailed."),
        panel("Unplanned restarts of supervised processes", [
            ("{{process}}", f"sum by (process) (eosbench_soak_restarts_total{{{soak_run}}})"),
        ], units.Short, description="A producer or stream that died without a fault and was restarted (with --resume or from its checkpoint)."),
    ], [variable("soak_run", "label_values(eosbench_soak_faults_total, run_id)"),
        variable(*APP_ID), variable(*RUN_ID)], [fault_markers])


DASHBOARDS = {"overview.json": overview, "producer.json": producer, "broker.json": broker, "soak.json": soak}


def render() -> dict[str, str]:
    """Every dashboard's JSON text, by file name."""
    return {name: json.dumps(build().build(), cls=JSONEncoder, indent=2) + "\n" for name, build in DASHBOARDS.items()}


if __name__ == "__main__":
    for name, text in render().items():
        (HERE / name).write_text(text)
        print(f"wrote dashboards/{name}")
