"""`eosbench demo`: the quick start's main job on the embedded local broker.

The pipeline: start the broker, fill a topic with `eosbench produce` (seeded, a share of its
transactions aborted), read it back through Spark with read_committed (and read_uncommitted, to
show that the aborted data existed) and compare the ids as multisets, then stream it through
the transactional sink into an output topic and run `verify` on the result.
"""

from __future__ import annotations

import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

from conf.client_config import Connection
from conf.local_servers import ClusterSettings
from eosbench.local.broker import LocalCluster
from eosbench.local.kafka_admin import cluster_metadata, create_topic, delete_topics
from eosbench.local.prometheus_server import LocalPrometheus
from eosbench.local.spark import spark_session
from conf.produce_settings import ProduceSettings
from conf.stream_settings import StreamSettings
from producers.perf import ProducerPerformance
from streaming import job
from streaming.metrics import StreamMetrics
from streaming.verify.verifier import verify
from streaming.reader import read_topic, sequence_number_counts

DEMO_TOPIC_PREFIX = "eosbench-demo-"
PRODUCER_METRICS_PORT = 9400  # the ports conf/prometheus/prometheus.yml scrapes
STREAM_METRICS_PORT = 9401


@dataclass(frozen=True)
class DemoOptions:
    """The demo's knobs, one field per flag."""

    bootstrap: Connection | None  # None: the local broker, started if need be
    records: int = 20_000
    records_per_transaction: int = 1_000
    abort_ratio: float = 0.3
    partitions: int = 4
    seed: int = 0
    monitor: bool = False


@dataclass(frozen=True)
class DemoResult:
    """Everything the demo measured; `ok` is the exactly-once verdict."""

    bootstrap: str
    committed_records: int
    aborted_records: int
    read_committed_records: int
    read_uncommitted_records: int
    ok: bool


def run_demo(options: DemoOptions, console: Console) -> DemoResult:
    """Run the demo pipeline and print a summary; the result says whether the ids matched."""
    run_id = uuid.uuid4().hex[:8]
    timings: dict[str, float] = {}

    clock = time.monotonic()
    if options.bootstrap:
        bootstrap = options.bootstrap
        cluster_metadata(bootstrap)
    else:
        default = ClusterSettings()
        cluster = LocalCluster.from_state_dir(default.state_dir) or LocalCluster(default)
        console.print(f"[dim]starting the local broker in {default.state_dir} (if not running)…[/]")
        cluster.start()
        bootstrap = cluster.connection
    timings["broker ready"] = time.monotonic() - clock

    prometheus = None
    if options.monitor:
        prometheus = LocalPrometheus()
        console.print(f"[dim]starting Prometheus ({prometheus.url}, scraping every 5 s)…[/]")
        prometheus.start()

    _delete_old_demo_topics(bootstrap)
    topic = f"{DEMO_TOPIC_PREFIX}{run_id}"
    replication = min(3, len(cluster_metadata(bootstrap).brokers))
    create_topic(bootstrap, topic, options.partitions, replication)

    clock = time.monotonic()
    console.print(f"[dim]eosbench produce: {options.records:,} records in transactions of"
                  f" {options.records_per_transaction:,}, abort ratio {options.abort_ratio}…[/]")
    produce_fields = dict(
        topic=topic, bootstrap_server=str(bootstrap), command_config=bootstrap.client_config.path,
        num_records=options.records, record_size=100, throughput=-1,
        records_per_transaction=options.records_per_transaction, transaction_abort_ratio=options.abort_ratio,
        seed=options.seed, transactional_id=f"eosbench.demo.{run_id}", run_id=run_id, producer_props=("acks=all",))
    if options.monitor:  # a paced run that Prometheus can watch, with a /metrics to scrape
        produce_fields.update(throughput=2_000.0, metrics_port=PRODUCER_METRICS_PORT)
    produced = ProducerPerformance(ProduceSettings(**produce_fields)).run()
    committed_ids = [seq for first, count, outcome in produced.transactions if outcome == "committed"
                     for seq in range(first, first + count)]
    timings["transactional writes"] = time.monotonic() - clock

    clock = time.monotonic()
    console.print("[dim]starting Spark (local[2])…[/]")
    spark = spark_session("eosbench-demo", monitoring=options.monitor)
    timings["spark start"] = time.monotonic() - clock

    clock = time.monotonic()
    committed_view = sequence_number_counts(read_topic(spark, bootstrap, topic, "read_committed"))
    uncommitted_count = read_topic(spark, bootstrap, topic, "read_uncommitted").count()
    timings["spark reads"] = time.monotonic() - clock

    clock = time.monotonic()
    output = f"{topic}-out"
    create_topic(bootstrap, output, options.partitions, replication)
    create_topic(bootstrap, f"{output}.dlq", 1, replication)
    console.print(f"[dim]streaming {topic} -> {output} through the transactional sink…[/]")
    with tempfile.TemporaryDirectory(prefix="eosbench-demo-") as scratch:
        stream_fields = dict(
            input_topic=topic, output_topic=output, bootstrap_server=str(bootstrap),
            client_config=bootstrap.client_config, app_id=f"eosbench-demo-{run_id}",
            checkpoint=Path(scratch) / "checkpoint", max_offsets_per_trigger=max(1, options.records // 4))
        stream_metrics = None
        if options.monitor:  # small batches, so the dashboards have a run to draw
            stream_fields.update(metrics_port=STREAM_METRICS_PORT, max_offsets_per_trigger=1_000)
            stream_metrics = StreamMetrics(stream_fields["app_id"], "kafka-eos", visibility_observed=False)
            stream_metrics.serve(STREAM_METRICS_PORT, "127.0.0.1")
        streamed = job.run(spark, StreamSettings(**stream_fields), metrics=stream_metrics)
    timings["exactly-once stream"] = time.monotonic() - clock
    verified = verify(bootstrap, topic, output, f"eosbench-demo-{run_id}", f"{output}.dlq")
    if stream_metrics:
        stream_metrics.verified(len(verified.violations), verified.input_committed)
    console.print(f"stream ({streamed.txn_scope} scope): {streamed.batches} batches,"
                  f" {streamed.records_out:,} records out, transactions {streamed.outcomes},"
                  f" end-to-end p50 {streamed.latency_p50_ms:.0f} ms;"
                  f" verify: {'ok' if verified.ok else 'FAILED: ' + '; '.join(verified.violations)}")

    expected = Counter(committed_ids)
    ok = (committed_view == expected and uncommitted_count == produced.records_committed + produced.records_aborted
          and verified.ok)
    result = DemoResult(
        bootstrap=str(bootstrap),
        committed_records=produced.records_committed,
        aborted_records=produced.records_aborted,
        read_committed_records=sum(committed_view.values()),
        read_uncommitted_records=uncommitted_count,
        ok=ok,
    )
    _print_summary(console, topic, options, produced.transactions_committed, produced.transactions_aborted,
                   result, committed_view, expected, timings)
    if prometheus:
        _wait_for_final_scrape(prometheus, f"eosbench-demo-{run_id}", streamed.records_out)
        _print_monitoring(console, prometheus, bootstrap)
    return result


def _wait_for_final_scrape(prometheus: LocalPrometheus, app_id: str, records_out: int, timeout_s: float = 20) -> None:
    """Keep this process's /metrics up until Prometheus has scraped the run's final counts."""
    deadline = time.monotonic() + timeout_s
    expr = f'eosbench_stream_output_records_total{{app_id="{app_id}"}} == {records_out}'
    while not prometheus.query(expr) and time.monotonic() < deadline:
        time.sleep(0.5)


def _print_monitoring(console: Console, prometheus: LocalPrometheus, bootstrap: Connection) -> None:
    console.print(f"""
[bold]Monitoring[/]
  Prometheus      {prometheus.url}   (Graph: eosbench:stream_output_records:rate1m, eosbench:stream_aborted:ratio)
  alerts          {prometheus.url}/alerts
  producer        http://127.0.0.1:{PRODUCER_METRICS_PORT}/metrics   (while this command runs)
  stream driver   http://127.0.0.1:{STREAM_METRICS_PORT}/metrics
  Spark           http://127.0.0.1:4040/metrics/prometheus  and  /metrics/executors/prometheus
  brokers         the JMX exporter on each broker's port + 200 (9292 for {str(bootstrap).split(',')[0]})
  Grafana         provision dashboards/provisioning/ and open "eosbench: exactly-once overview"
Prometheus keeps running with the run's data: stop it with `eosbench prometheus stop`.""")


def _delete_old_demo_topics(bootstrap: Connection) -> None:
    old = [name for name in cluster_metadata(bootstrap).topics if name.startswith(DEMO_TOPIC_PREFIX)]
    if old:
        delete_topics(bootstrap, old)


def _print_summary(console: Console, topic: str, options: DemoOptions, txn_committed: int,
                   txn_aborted: int, result: DemoResult, seen: Counter[int], expected: Counter[int],
                   timings: dict[str, float]) -> None:
    table = Table(title=f"eosbench demo: {topic} ({options.partitions} partitions) at {result.bootstrap}")
    table.add_column("what")
    table.add_column("records", justify="right")
    table.add_column("note")
    table.add_row("written, committed", f"{result.committed_records:,}", f"{txn_committed} transactions")
    table.add_row("written, aborted", f"{result.aborted_records:,}",
                  f"{txn_aborted} transactions (abort ratio {options.abort_ratio}, seed {options.seed})")
    table.add_row("Spark read_committed", f"{result.read_committed_records:,}",
                  f"{len(seen):,} distinct ids")
    table.add_row("Spark read_uncommitted", f"{result.read_uncommitted_records:,}",
                  "aborted records are in the log, hidden from read_committed")
    console.print(table)
    duplicates = sum(count - 1 for count in seen.values() if count > 1)
    lost = len(expected - seen)
    leaked = len(seen - expected)
    verdict = "[green]PASS[/]" if result.ok else "[red]FAIL[/]"
    console.print(
        f"{verdict} read_committed ids == committed ids as multisets:"
        f" duplicates={duplicates} lost={lost} aborted-or-unknown read={leaked}"
    )
    console.print("timings: " + ", ".join(f"{name} {seconds:.1f} s" for name, seconds in timings.items()))
    console.print("[dim]the broker keeps running; stop it with `eosbench broker stop`[/]")
