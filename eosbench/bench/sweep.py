"""`eosbench bench sweep` and `eosbench bench streaming`: what does exactly-once cost, side by side.

A sweep reads a workload (conf/workloads/*.yaml) whose grid spans broker count, record size,
abort ratio, records per transaction and sink. For each broker count it runs its own cluster;
for each (record size, abort ratio) it fills one input with `eosbench produce` (the producer's
goodput under that abort ratio is itself a row). Every cell of that input then reads the same
records, the plain-client cells through producers/streaming_bench.py and the Spark cells
through the streaming job in one SparkSession. The cells run interleaved and, over repeats,
rotated, so that drift of the machine hits each alike. Java ProducerPerformance runs beside
`eosbench produce` as the anchor. Each cell's medians become one row of the Delta results table.
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from conf.client_config import Connection, connection
from conf.local_servers import ClusterSettings
from conf.settings import eosbench_home
from conf.stream_settings import StreamSettings
from conf.workload_settings import BASELINE_OF, SPARK_SINKS, Workload
from eosbench.bench import results
from eosbench.bench.produce import run_eosbench as run_eosbench_produce
from eosbench.bench.produce import run_java as run_java_produce
from eosbench.local.broker import LocalCluster
from eosbench.console.errors import BadInput
from eosbench.local.kafka_admin import cluster_metadata, create_topic
from producers.streaming_bench import StreamingBench

SWEEP_PORT = 9500  # the sweep's own clusters (controllers +100, JMX exporters +200), apart from 9092


def plain_cell(bootstrap: str | Connection, input_topic: str, sink: str, records_per_transaction: int, workload: Workload,
               partitions: int, tag: str, committed: int, progress: Callable[[int, int], None] | None = None,
               pre_register: bool = False, poll_timeout_s: float = 0.1,
               consumer_config: dict[str, str] | None = None) -> dict:
    """One plain-client cell: copy the input unit by unit; figures from the measured units."""
    output = f"{input_topic}-{tag}"
    create_topic(bootstrap, output, partitions, min(3, len(cluster_metadata(bootstrap).brokers)))
    factory = None
    if pre_register:
        # built as factory(config, txn id, group id)
        from streaming.sink.preregister import PreRegisteringProducer as factory
    bench = StreamingBench(bootstrap, input_topic, output, "tx" if sink == "plain-tx" else "base",
                           group_id=f"bench-{tag}", records_per_transaction=records_per_transaction,
                           poll_timeout_s=poll_timeout_s, consumer_config=consumer_config,
                           producer_config=dict(workload.producer_config), producer_factory=factory,
                           pre_register=pre_register)
    try:
        # Warm up on at most a tenth of the input, so large transactions still leave units to measure.
        warmup = min(workload.warmup_units, committed // (10 * records_per_transaction))
        result = bench.run(warmup, workload.plain_max_units, progress)
    finally:
        bench.close()
    figures = result.percentiles_ms()
    return {"records": result.records, "seconds": result.seconds, "throughput_rps": result.records_per_sec,
            "goodput_rps": result.records_per_sec, "latencies_ms": results.quantiles_ms(result.latencies_s),
            "latency_kind": "write path per transaction" if sink == "plain-tx" else "write path per unit",
            "register_round_trips": result.register_round_trips, **{f"unit_{k}": v for k, v in figures.items()}}


def spark_cell(spark, bootstrap: str | Connection, input_topic: str, sink: str, records_per_transaction: int,
               partitions: int, scratch: Path, tag: str, progress: Callable[[int, int], None] | None = None,
               expected_records: int = 0) -> dict:
    """One Spark cell: the job drains the input, available-now, a transaction per partition per batch."""
    from streaming import job

    output = f"{input_topic}-{tag}"
    replication = min(3, len(cluster_metadata(bootstrap).brokers))
    create_topic(bootstrap, output, partitions, replication)
    create_topic(bootstrap, f"{output}.dlq", 1, replication)
    settings = StreamSettings(input_topic=input_topic, output_topic=output, bootstrap_server=str(bootstrap),
                              client_config=connection(bootstrap).client_config, sink=sink,
                              app_id=f"bench-{tag}", checkpoint=scratch / tag / "checkpoint",
                              delta_path=scratch / tag / "table",
                              max_offsets_per_trigger=records_per_transaction * partitions)
    batches = []

    def on_batch(batch) -> None:
        batches.append(batch)
        if progress:
            progress(sum(b.records_in for b in batches), expected_records)

    summary = job.run(spark, settings, on_batch=on_batch, echo=False)
    # The source reads read_committed, so every input row is a visible record: throughput is goodput.
    rate = summary.input_rows / summary.seconds if summary.seconds else 0.0
    durations = np.array([b.duration_s for b in batches], dtype=np.float64)
    return {"records": summary.input_rows, "seconds": summary.seconds, "throughput_rps": rate,
            "goodput_rps": rate,
            "latencies_ms": results.quantiles_ms(durations), "latency_kind": "micro-batch duration",
            "batches": summary.batches, "outcomes": summary.outcomes, "phase_seconds": summary.phase_seconds}


def _median_figures(runs: list[dict]) -> dict:
    """Medians of the numeric figures over repeats; the run closest to the median throughput for the rest."""
    middle = sorted(runs, key=lambda r: r["throughput_rps"])[len(runs) // 2]
    merged = dict(middle)
    for key in ("throughput_rps", "goodput_rps", "seconds"):
        merged[key] = statistics.median(r[key] for r in runs)
    merged["repeats"] = [{k: r[k] for k in ("throughput_rps", "seconds", "records")} for r in runs]
    return merged


class Sweep:
    """One sweep over a workload's grid."""

    def __init__(self, workload: Workload, workload_name: str, results_dir: Path, bootstrap: str | Connection | None = None,
                 port: int = SWEEP_PORT, console: Console | None = None):
        self.workload, self.workload_name, self.results_dir = workload, workload_name, results_dir
        self.bootstrap, self.port = bootstrap, port
        self.console = console or Console(stderr=True)
        self.run_id = uuid.uuid4().hex[:8]
        self.rows: list[dict] = []
        self.skipped: list[str] = []
        self._spark = None
        if bootstrap:
            brokers = len(cluster_metadata(bootstrap).brokers)
            if set(workload.grid.brokers) != {brokers}:
                raise BadInput(f"--bootstrap-server has {brokers} broker(s) but the workload's grid asks for"
                               f" {list(workload.grid.brokers)}; drop --bootstrap-server to let the sweep run its own")

    def spark_session(self):
        """The sweep's one SparkSession, started on first use."""
        if self._spark is None:
            from eosbench.local.spark import spark_session

            self._spark = spark_session("eosbench-sweep")
        return self._spark

    def run(self) -> list[dict]:
        """Run every cell of the grid, append the rows to the Delta table and return them."""
        w = self.workload
        cells = w.cells()
        total = len(cells) * w.repeats
        machine = json.dumps(results.machine_facts())
        revision = results.git_revision()
        self._common = dict(run_id=self.run_id, bench="sweep", workload=self.workload_name, git_revision=revision,
                            machine_json=machine)
        started = time.monotonic()
        finished = False
        try:
            with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                          TimeRemainingColumn(), console=self.console, transient=False,
                          disable=not self.console.is_terminal) as bars:
                grid_task = bars.add_task(f"sweep {self.run_id} ({self.workload_name})", total=total)
                for brokers in w.grid.brokers:
                    with self._cluster(brokers) as bootstrap:
                        self._run_broker_group(bootstrap, brokers, [c for c in cells if c["brokers"] == brokers],
                                               bars, grid_task)
            finished = True
        finally:
            # An interrupted sweep (Ctrl-C, SIGTERM, a failed cell) still keeps the cells it finished.
            if self.rows:
                results.append_rows(self.spark_session(), self.rows, self.results_dir)
            self.console.print(f"sweep {self.run_id}: {'' if finished else 'stopped early; '}{len(self.rows)} of"
                               f" {total} rows in {time.monotonic() - started:.0f} s, appended to"
                               f" {results.table_path(self.results_dir)}")
        return self.rows

    @contextmanager
    def _cluster(self, brokers: int):
        """Yield the bootstrap servers for this broker count: --bootstrap-server, or a cluster of our own."""
        if self.bootstrap:
            yield self.bootstrap
            return
        cluster = LocalCluster(ClusterSettings(brokers=brokers, port=self.port,
                                               state_dir=eosbench_home() / f"sweep-cluster-{brokers}"))
        self._say(f"starting {brokers} broker(s) on port {self.port} for the sweep")
        cluster.start(fresh=True)
        try:
            yield cluster.settings.bootstrap_servers
        finally:
            cluster.stop()

    def _say(self, line: str) -> None:
        self.console.print(f"[dim]{line}[/]")

    def _run_broker_group(self, bootstrap: str | Connection, brokers: int, cells: list[dict], bars, grid_task) -> None:
        w = self.workload
        replication = min(3, brokers)
        if w.anchors:
            for size in w.grid.record_size:
                self._anchor_rows(bootstrap, brokers, size, replication)
        inputs: dict[tuple[int, float], tuple[str, int]] = {}
        for size in w.grid.record_size:
            for ratio in w.grid.abort_ratio:
                inputs[(size, ratio)] = self._fill(bootstrap, brokers, size, ratio, replication)
        if any(c["sink"] in SPARK_SINKS for c in cells):
            self._warm_spark(bootstrap, next(iter(inputs.values()))[0])
        runs: dict[int, list[dict]] = {i: [] for i in range(len(cells))}
        order = list(range(len(cells)))
        try:
            with tempfile.TemporaryDirectory(prefix="eosbench-sweep-") as scratch:
                for repeat in range(w.repeats):
                    shift = (repeat * max(1, len(order) // w.repeats)) % len(order)
                    for index in order[shift:] + order[:shift]:
                        cell = cells[index]
                        topic, committed = inputs[(cell["record_size"], cell["abort_ratio"])]
                        figures = self._run_cell(bootstrap, cell, topic, committed, Path(scratch),
                                                 f"{index}-r{repeat}", bars)
                        if figures is not None and figures["records"]:
                            runs[index].append(figures)
                            self._say(f"{_label(cell)}: {figures['throughput_rps']:,.0f} records/s over"
                                      f" {figures['records']:,} records")
                        bars.advance(grid_task)
        finally:
            # After an interruption the cells already run still become rows, from the runs they had.
            for index, cell in enumerate(cells):
                if runs[index]:
                    self.rows.append(self._row(cell, _median_figures(runs[index])))
            self._add_overheads()

    def _fill(self, bootstrap: str | Connection, brokers: int, size: int, ratio: float, replication: int) -> tuple[str, int]:
        """Fill one input topic; its producer run is a row of its own (goodput under aborts)."""
        w = self.workload
        topic = f"sweep-{self.run_id}-in-s{size}-r{ratio}"
        create_topic(bootstrap, topic, w.partitions, replication)
        self._say(f"filling {topic}: {w.records:,} records of {size} B, abort ratio {ratio}")
        run = run_eosbench_produce(bootstrap, topic, w.records, size, None, "fill", abort_ratio=ratio,
                                   records_per_transaction=w.fill_records_per_transaction)
        committed = round(w.records * (1 - run.aborted_record_fraction))
        self.rows.append(results.new_row(
            **self._common, cell=f"producer-b{brokers}-s{size}-r{ratio}", brokers=brokers, record_size=size,
            abort_ratio=ratio, records_per_transaction=None, sink="eosbench-produce", records=w.records,
            throughput_rps=run.records_per_sec, goodput_rps=run.goodput_records_per_sec,
            latency_p50_ms=run.p50_ms, latency_p99_ms=run.p99_ms, latency_max_ms=run.max_ms,
            latency_kind="send latency", abort_overhead=(run.aborted_record_fraction / (1 - run.aborted_record_fraction)
                                                         if run.aborted_record_fraction < 1 else None),
            config_json=json.dumps({"records_per_transaction": w.fill_records_per_transaction, "acks": "all"}),
            figures_json=json.dumps(run.__dict__)))
        return topic, committed

    def _anchor_rows(self, bootstrap: str | Connection, brokers: int, size: int, replication: int) -> None:
        """Java ProducerPerformance beside eosbench produce, without and with transactions."""
        records = self.workload.records
        for duration, mode in ((None, "no transactions"), (self.workload.fill_transaction_duration_ms, "transactions")):
            for tool, label in ((run_java_produce, "java-producer-perf"), (run_eosbench_produce, "eosbench-produce")):
                topic = f"sweep-{self.run_id}-anchor-{uuid.uuid4().hex[:6]}"
                create_topic(bootstrap, topic, 1, replication)
                self._say(f"anchor: {label}, {mode}, {records:,} records of {size} B")
                run = tool(bootstrap, topic, records, size, duration, mode)
                self.rows.append(results.new_row(
                    **{**self._common, "bench": "anchor"}, cell=f"anchor-{label}-{mode}-b{brokers}-s{size}",
                    brokers=brokers, record_size=size, abort_ratio=0.0, sink=label, records=records,
                    throughput_rps=run.records_per_sec, goodput_rps=run.goodput_records_per_sec,
                    latency_p50_ms=run.p50_ms, latency_p99_ms=run.p99_ms, latency_max_ms=run.max_ms,
                    latency_kind="send latency", config_json=json.dumps({"mode": mode, "transaction_duration_ms": duration}),
                    figures_json=json.dumps(run.__dict__)))

    def _warm_spark(self, bootstrap: str | Connection, topic: str) -> None:
        """A cold session loses 30-40 % on its first query: warm the JVM, the workers and Arrow first."""
        self._say("warming Spark up on the first input")
        with tempfile.TemporaryDirectory(prefix="eosbench-sweep-warm-") as scratch:
            spark_cell(self.spark_session(), bootstrap, topic, "kafka-alo", max(1, self.workload.records // 8),
                       self.workload.partitions, Path(scratch), f"warm-{self.run_id}")

    def _run_cell(self, bootstrap: str | Connection, cell: dict, topic: str, committed: int, scratch: Path, tag: str,
                  bars) -> dict | None:
        w = self.workload
        n, sink = cell["records_per_transaction"], cell["sink"]
        label = _label(cell)
        if sink in SPARK_SINKS:
            batches = w.records / (n * w.partitions)
            if batches > w.spark_max_batches:
                note = f"{label}: skipped, {batches:,.0f} micro-batches > spark_max_batches {w.spark_max_batches}"
                if note not in self.skipped:
                    self.skipped.append(note)
                return None
        task = bars.add_task(f"  {label}", total=None)

        def progress(done: int, total: int) -> None:
            bars.update(task, completed=done, total=total)
        try:
            if sink in SPARK_SINKS:
                return spark_cell(self.spark_session(), bootstrap, topic, sink, n, w.partitions, scratch,
                                  f"{self.run_id}-{tag}", progress, expected_records=committed)
            return plain_cell(bootstrap, topic, sink, n, w, w.partitions, f"{self.run_id}-{tag}", committed, progress)
        finally:
            bars.remove_task(task)

    def _row(self, cell: dict, figures: dict) -> dict:
        latencies = figures.pop("latencies_ms")
        at = (lambda q: latencies[q] if latencies else None)  # noqa: E731
        p999 = float(np.percentile(latencies, 99.9)) if latencies else None
        return results.new_row(
            **self._common, cell=f"{cell['sink']}-b{cell['brokers']}-s{cell['record_size']}-r{cell['abort_ratio']}"
                                 f"-n{cell['records_per_transaction']}",
            brokers=cell["brokers"], record_size=cell["record_size"], abort_ratio=cell["abort_ratio"],
            records_per_transaction=cell["records_per_transaction"], sink=cell["sink"], records=figures["records"],
            seconds=figures["seconds"], throughput_rps=figures["throughput_rps"], goodput_rps=figures["goodput_rps"],
            latency_p50_ms=at(50), latency_p90_ms=at(90), latency_p99_ms=at(99), latency_p999_ms=p999,
            latency_max_ms=at(100), latency_kind=figures["latency_kind"], latency_quantiles_ms=latencies,
            baseline=BASELINE_OF.get(cell["sink"]), config_json=json.dumps({**cell, "workload": self.workload.model_dump()}),
            figures_json=json.dumps(figures, default=str))

    def _add_overheads(self) -> None:
        """Each cell's overhead: its baseline's throughput over its own (1.0 = free, 40 = 40x slower)."""
        by_key = {(r["sink"], r["brokers"], r["record_size"], r["abort_ratio"], r["records_per_transaction"]): r
                  for r in self.rows if r["records_per_transaction"] is not None}
        fills = {(r["brokers"], r["record_size"], r["abort_ratio"]): r for r in self.rows if r["bench"] == "sweep"
                 and r["sink"] == "eosbench-produce"}
        for (sink, brokers, size, ratio, n), row in by_key.items():
            base = by_key.get((BASELINE_OF.get(sink), brokers, size, ratio, n))
            if base and row["throughput_rps"]:
                row["overhead_ratio"] = base["throughput_rps"] / row["throughput_rps"]
            fill = fills.get((brokers, size, ratio))
            row["abort_overhead"] = fill["abort_overhead"] if fill else None


def _label(cell: dict) -> str:
    return f"{cell['sink']} {cell['records_per_transaction']}/txn abort {cell['abort_ratio']} {cell['brokers']}b"


def run_sweep(workload: Workload, workload_name: str, results_dir: Path, bootstrap: str | Connection | None = None,
              port: int = SWEEP_PORT) -> Path:
    """Run a sweep, then write its plots and summary; print the summary and return its path."""
    from eosbench.bench.report import write_report

    sweep = Sweep(workload, workload_name, results_dir, bootstrap=bootstrap, port=port)
    sweep.run()
    summary, plots = write_report(results.read_rows(sweep.spark_session(), results_dir), sweep.run_id,
                                  results_dir / "plots")
    print(summary.read_text())
    for note in sweep.skipped:
        print(f"note: {note}")
    print(f"summary: {summary}\nplots: {', '.join(str(p) for p in plots)}")
    return summary
