"""The exactly-once Structured Streaming job: read_committed Kafka in, process, sink out.

Runs directly under spark-submit (the jars come from its command line; docs/streaming.md, 'Running the job', has the line):

    PYSPARK_PYTHON=$PWD/.venv/bin/python .venv/bin/spark-submit --jars <spark-sql-kafka, delta, ...> \\
        streaming/job.py --input-topic in --output-topic out [--sink kafka-eos|kafka-alo|delta] ...

`eosbench stream` runs the same job with the cached jars and a local master. The job assumes
that the driver's Python can import this repository's packages: spark-submit starts the driver
with PYSPARK_PYTHON (else `python3` from PATH), and streaming/session.py hands the driver's
interpreter on to the Python workers. On a cluster, `eosbench package` prints the line that
ships the job's own Python environment to the executors instead (docs/clusters.md, 'On a Spark cluster').
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import asdict
from pathlib import Path

if __package__ in (None, ""):  # `spark-submit streaming/job.py`: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

try:
    from conf.client_config import COMMAND_CONFIG_HELP, ClientConfig  # noqa: E402
    from conf.failures import (EnvironmentFailure, RunFailed, java_authorization_failure,  # noqa: E402
                               streaming_query_failure)
    from conf.metrics_endpoint import add_metrics_tls_arguments, metrics_url  # noqa: E402
    from conf.settings import (DEFAULT_BOOTSTRAP, STDOUT, SettingsError, linger_for_final_scrape,  # noqa: E402
                               validation_error_line)
    from conf.stream_settings import GROUPED_SOURCE_FORMAT, StreamSettings  # noqa: E402
    from streaming.start_timeline import StartTimeline  # noqa: E402
    from streaming.stats import BatchStats, StreamSummary, histogram_percentile  # noqa: E402
except ImportError as missing:  # spark-submit ran the driver on a Python without eosbench's packages
    print(f"streaming/job.py: error: {sys.executable} cannot import {missing.name!r}; run spark-submit with"
          " PYSPARK_PYTHON set to the Python that has eosbench's packages (docs/streaming.md, 'Running"
          " the job')", file=sys.stderr)
    sys.exit(3)  # the environment lacks something (the CLI contract's exit 3)


def add_stream_arguments(parser: argparse.ArgumentParser) -> None:
    """The stream flags, shared by `spark-submit streaming/job.py` and `eosbench stream`."""
    parser.add_argument("--input-topic", required=True, help="read this topic read_committed")
    parser.add_argument("--output-topic", required=True, help="write the processed records here")
    parser.add_argument("--bootstrap-server", metavar="HOST:PORT",
                        help="Kafka bootstrap servers (default: bootstrap.servers of --command-config, else"
                             f" {DEFAULT_BOOTSTRAP})")
    parser.add_argument("--command-config", type=Path, metavar="FILE", help=COMMAND_CONFIG_HELP)
    parser.add_argument("--app-id", default="eosbench",
                        help="the sink's consumer group and transactional-id prefix (default: %(default)s)")
    parser.add_argument("--sink", choices=("kafka-eos", "kafka-alo", "delta"), default="kafka-eos",
                        help="kafka-eos: the transactional sink; kafka-alo: Spark's own at-least-once Kafka sink;"
                             " delta: the idempotent Delta sink (default: %(default)s)")
    parser.add_argument("--source", choices=("spark", "grouped", "auto"), default="auto",
                        help="spark: Spark's Kafka source, a task and a consumer per partition; grouped: eosbench's"
                             " source, a task and one consumer kept across batches per slot (G of them), micro-batch"
                             " only, not with --txn-scope partition; auto: grouped where it applies, else Spark's,"
                             " said with the first batch (default: %(default)s)")
    parser.add_argument("--txn-scope", choices=("partition", "slot", "batch", "auto"), default="auto",
                        help="one transaction per input partition and batch, one per slot (a task holding several"
                             " partitions) and batch, or one per batch on the driver; auto: slot scope for a group"
                             " with no offsets, else the scope that wrote them, partition scope in real-time mode"
                             " (default: %(default)s)")
    parser.add_argument("--txn-slots", type=int, metavar="G",
                        help="slot scope's slot count: each batch's partitions are coalesced into at most G tasks,"
                             " each one transaction (default: the job's total executor cores)")
    parser.add_argument("--output-partitioning", choices=("key", "input"), default="key",
                        help="key: the producer's partitioner (murmur2 of the key) picks each output partition;"
                             " input: a record goes to the output partition numbered as its input partition, so a"
                             " transaction touches one output partition per input partition (default: %(default)s)")
    parser.add_argument("--pre-register-partitions", action="store_true",
                        help="register every output partition and the group's offsets right after begin (KIP-609's"
                             " idea, on kafka-python)")
    parser.add_argument("--sink-client", choices=("librdkafka", "kafka-python"),
                        help="the Kafka client of kafka-eos's producers (default: librdkafka, or kafka-python with"
                             " --pre-register-partitions, which librdkafka cannot do)")
    parser.add_argument("--process", choices=("passthrough", "checksum", "enrich"), default="passthrough",
                        help="what each record goes through on its way (default: %(default)s)")
    parser.add_argument("--trigger", default="available-now",
                        help="available-now; an interval such as '1 second' (micro-batches); or realtime:<interval>"
                             " such as 'realtime:5 seconds', Spark's real-time mode with that checkpoint interval"
                             " (streaming/realtime/writer.py)")
    parser.add_argument("--commit-interval-ms", type=int, metavar="MS",
                        help="real-time mode: commit each partition's transaction once its oldest record has waited"
                             " this long (default: 100)")
    parser.add_argument("--checkpoint", metavar="URI",
                        help="the query's checkpoint folder: a local path, or a file://, hdfs://, s3a:// or abfs:// URI"
                             " (default: checkpoints/<app-id>)")
    parser.add_argument("--starting-offsets", choices=("earliest", "latest", "group", "output"), default="earliest",
                        help="where a query without a checkpoint starts: group resumes from the sink's committed"
                             " group offsets (a lost checkpoint); output resumes each partition after the last record"
                             " the output and dead-letter topics hold from it (a lost checkpoint whose group offsets"
                             " expired) (default: %(default)s)")
    parser.add_argument("--max-offsets-per-trigger", type=int, help="cap each micro-batch (default: no cap)")
    parser.add_argument("--dead-letter-topic", help="where poison records go (default: <output-topic>.dlq)")
    parser.add_argument("--delta-path", type=Path, help="table folder for --sink delta (default: none)")
    parser.add_argument("--producer-props", nargs="+", default=[], metavar="K=V", help="sink producer properties")
    parser.add_argument("--source-options", nargs="+", default=[], metavar="K=V",
                        help="Spark Kafka source options, such as kafka.fetch.max.bytes=1048576 or minPartitions=8"
                             " (--txn-scope partition refuses a batch that minPartitions or maxRecordsPerPartition"
                             " splits)")
    parser.add_argument("--offsets-retention-minutes", type=int, metavar="MINUTES",
                        help="the brokers' offsets.retention.minutes, for a principal that may not describe broker"
                             " configs (default: ask the brokers, else Kafka's 10080); the sink re-commits idle"
                             " partitions' group offsets every third of it")
    parser.add_argument("--max-retries", type=int, default=5, help="transaction retries inside a task")
    parser.add_argument("--metrics-port", type=int, help="serve the driver's Prometheus /metrics on this port (default: none)")
    parser.add_argument("--metrics-host", default="127.0.0.1", help="address /metrics binds to (default: 127.0.0.1)")
    add_metrics_tls_arguments(parser)
    parser.add_argument("--metrics-linger", type=float, metavar="SECONDS",
                        help="keep /metrics up this long after the run, so its final values are scraped"
                             " (default with --metrics-port: two scrape intervals of conf/prometheus/prometheus.yml)")
    parser.add_argument("--output-json", type=Path, metavar="FILE",
                        help="also write the summary JSON here (it is always stdout's last line; default: none)")
    visibility = "the time from each sink commit returning to a read_committed reader seeing it"
    parser.add_argument("--observe-visibility", action="store_true", help=f"measure {visibility} (docs/streaming.md)")
    parser.add_argument("--visibility-log", type=Path, metavar="FILE",
                        help=f"measure {visibility}, one line per transaction in FILE (default: none)")
    parser.add_argument("--timeout-s", type=float, help="stop an interval-triggered query after this many seconds (default: run until stopped)")
    parser.add_argument("--report-python", action="store_true",
                        help="after the query, run one task per core and add to the summary the driver's and each"
                             " task's Python, its environment's real folder and the files of the `streaming` and"
                             " `pyspark` it imports (shows what a cluster's executors run; default: off)")


def settings_from_args(args: argparse.Namespace) -> StreamSettings:
    """Build StreamSettings from parsed flags (raises ValueError with a one-line message)."""
    fields = {name: value for name, value in vars(args).items()
              if name in StreamSettings.model_fields and value is not None}
    fields["client_config"] = ClientConfig.load(args.command_config)
    fields["bootstrap_server"] = fields["client_config"].bootstrap(args.bootstrap_server)
    fields["producer_props"] = tuple(fields.get("producer_props", ()))
    fields["source_options"] = tuple(fields.get("source_options", ()))
    return StreamSettings(**fields)


# ----------------------------------------------------------------------------- source


def starting_offsets(checkpoint, settings: StreamSettings, start=None) -> str:
    """The source's startingOffsets (`streaming/source/starting_offsets.py` says when the sink refuses one).

    Spark uses startingOffsets only for a query that has not started before: with the query's
    initial offsets in the checkpoint, it resumes from the checkpoint and ignores them. `start` is
    the transactional sink's read of Kafka (streaming/sink/start.py); the other sinks have none.
    """
    from streaming.source.starting_offsets import resolve_starting_offsets

    if checkpoint.initial_offsets():
        return "earliest"
    if start is None:  # only the transactional sink keeps group offsets to resume from
        return "earliest" if settings.starting_offsets in ("group", "output") else settings.starting_offsets
    return resolve_starting_offsets(settings.starting_offsets, settings.group_id, settings.input_topic,
                                    [settings.output_topic, settings.dead_letter], start.committed, start.holding,
                                    start.written, start.evidence)


def source(spark, settings: StreamSettings, checkpoint, start=None):
    """The read_committed Kafka stream: Spark's source, or the grouped one with run's settled G, given the same options."""
    grouped = settings.source == "grouped"
    reader = (spark.readStream.format(GROUPED_SOURCE_FORMAT if grouped else "kafka")
              .options(**settings.source_option_defaults())  # each only where --source-options sets none
              .options(**settings.extra_source_options())
              .options(**settings.spark_kafka_options())
              .option("kafka.bootstrap.servers", settings.bootstrap_server)
              .option("subscribe", settings.input_topic)
              .option("kafka.isolation.level", "read_committed")
              .option("startingOffsets", starting_offsets(checkpoint, settings, start))
              .option("includeHeaders", "true"))
    if settings.max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", settings.max_offsets_per_trigger)
    if grouped:  # the sink's G: in slot scope, Spark partition k is slot k
        reader = reader.option("slots", settings.txn_slots)
    return reader.load()


# ----------------------------------------------------------------------------- run


class _ProgressWatcher:
    """Feeds the metrics from the query's progress (offset spans) and the sink group's lag, and hands
    each new progress report to `on_report` (real-time mode's per-epoch counts).

    Each sweep reads only the progress reports that are new since the last one: a soak runs for
    days, and re-reading (and re-converting through py4j) every report each second would grow
    without bound.
    """

    def __init__(self, query, checkpoint, settings: StreamSettings, metrics,
                 on_report: Callable[[dict], None] | None = None, interval_s: float = 1.0):
        import threading

        self.query, self.settings, self.metrics, self.interval_s = query, settings, metrics, interval_s
        self.on_report = on_report
        self.checkpoint = checkpoint  # streaming/source/checkpoint.py's CheckpointLog of the query
        self._last_batch_id = -1
        self._initial: dict | None = None
        self._lag_reader = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="eosbench-progress", daemon=True)
        self._thread.start()

    def _new_progress_reports(self) -> list[str]:
        reports = self.query._jsq.recentProgress()  # the Java array PySpark's recentProgress wraps
        new = []
        for index in range(len(reports) - 1, -1, -1):
            report = reports[index]
            if report.batchId() <= self._last_batch_id:
                break
            new.append(report.json())
        if new:
            self._last_batch_id = json.loads(new[0])["batchId"]
        return new[::-1]

    def _sweep(self) -> None:
        reports = self._new_progress_reports()
        if self.on_report:
            for report in reports:
                self.on_report(json.loads(report))
        if not self.metrics:
            return
        if not self._initial:  # written once, when the query starts
            self._initial = self.checkpoint.initial_offsets()
        for report in reports:
            self.metrics.progress(report, self._initial)
        if self._lag_reader is None:
            self._lag_reader = _group_reader(self.settings)
        self.metrics.set_lag(group_lag(self.settings, self._lag_reader))

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self._sweep()
            except Exception:  # a failed scrape of progress must never take the query down
                continue

    def stop(self) -> None:
        """Stop watching after one last sweep."""
        self._stop.set()
        self._thread.join(timeout=5)
        try:
            self._sweep()
        finally:
            if self._lag_reader is not None:
                self._lag_reader.close()


def _group_reader(settings: StreamSettings):
    from confluent_kafka import Consumer

    from conf.client_log import CLIENT_LOG

    return Consumer(settings.connection.librdkafka(**{"group.id": settings.group_id, "enable.auto.commit": False}),
                    logger=CLIENT_LOG)


def group_lag(settings: StreamSettings, reader) -> int:
    """Records between the sink group's committed offsets and the input's end offsets."""
    from confluent_kafka import TopicPartition

    from conf.watermarks import watermark_offsets

    topic = settings.input_topic
    partitions = reader.list_topics(topic, timeout=10).topics[topic].partitions
    lag = 0
    for tp in reader.committed([TopicPartition(topic, p) for p in partitions], timeout=10):
        low, high = watermark_offsets(reader, topic, tp.partition, timeout_s=10)
        lag += high - (tp.offset if tp.offset >= 0 else low)
    return lag


def print_batch(batch: BatchStats, out=None, note: str | None = None) -> None:
    """One line per micro-batch, on `out` (default: stdout as it is at the time, not at import), `note` at its end."""
    print(f"batch {batch.batch_id}: {batch.records_in} in, {batch.records_out} out,"
          f" {batch.records_dead_lettered} dead-lettered, {batch.records_skipped} skipped as replay;"
          f" transactions {batch.outcomes}; {batch.duration_s:.2f} s; end-to-end p50"
          f" {histogram_percentile(batch.latency_counts, 0.5):.0f} ms p99"
          f" {histogram_percentile(batch.latency_counts, 0.99):.0f} ms"
          # A transaction tried again on a new producer (a task's retry, or the real-time writer's).
          + (f"; {batch.retries} retried" if batch.retries else "") + (f"; {note}" if note else ""),
          file=out or sys.stdout, flush=True)


def _visibility_observer(settings: StreamSettings, metrics):
    """A started VisibilityObserver of the sink's topics when the settings ask for one, else None."""
    if not settings.visibility_observed:
        return None
    from streaming.verify.visibility import VisibilityObserver

    return VisibilityObserver(settings.connection, [settings.output_topic, settings.dead_letter],
                              on_sample=metrics.visible if metrics else None, log=settings.visibility_log).start()


def run(spark, settings: StreamSettings, on_batch: Callable[[BatchStats], None] | None = None,
        metrics=None, echo: bool = True, timeline: StartTimeline | None = None) -> StreamSummary:
    """Start the query, run it to its end (available-now) or its timeout, and return the totals.

    `echo` prints a line per batch. With --metrics-port the driver serves its metrics; a caller that wants to add to them (the
    demo publishes its verify result) passes its own StreamMetrics, already serving. `timeline`
    (spark-submit's driver) is marked at each step of the start and printed after the first batch.
    """
    from streaming.sink.baselines import AtLeastOnceKafkaSink, IdempotentDeltaSink
    from streaming.source.checkpoint import CheckpointLog
    from streaming.sink.driver import TransactionalSink
    from streaming.quiet_stop import stop_quietly
    from streaming.sink.slots import settle_slot_count
    from streaming.sink.start import read_start, resolved_scope

    summary = StreamSummary()
    mark = timeline.mark if timeline else lambda step, at=None: None
    # The transactional sink's start reads Kafka once; the scope, refusals, fences and starting offsets are decided
    # from what it read (streaming/sink/start.py).
    start = read_start(settings) if settings.sink == "kafka-eos" else None
    settings, scope_chosen = resolved_scope(settings, start)
    settings, source_chosen = settings.chosen_source()
    settings = settle_slot_count(spark, settings)  # the source's G and the sink's are one reading
    summary.txn_scope = settings.txn_scope if settings.sink == "kafka-eos" else None
    summary.txn_scope_chosen = scope_chosen
    summary.source = settings.source
    chosen = "; ".join(why for why in (scope_chosen, source_chosen) if why) or None
    if chosen and echo:
        print(chosen, flush=True)
    if metrics is None and settings.metrics_port:
        from streaming.metrics import StreamMetrics

        metrics = StreamMetrics(settings.app_id, settings.sink, settings.visibility_observed)
        metrics.serve(settings.metrics_port, settings.metrics_host, settings.metrics_tls)
    if metrics:
        metrics.configured(settings.commit_wait_s)

    observer = None  # started just before the query, so that no failure before it leaves a reader running

    def batch_done(batch: BatchStats) -> None:
        summary.add(batch)
        if echo:
            # The first batch's line says which scope and source `auto` chose, where a reader of the log looks first.
            print_batch(batch, note=chosen if summary.batches == 1 else None)
        if metrics:
            metrics.batch_done(batch)
        if observer:
            observer.committed(batch.commits)
        if timeline and summary.batches == 1:
            mark("first_batch", time.time() - batch.duration_s)
            mark("first_commit")
            print(timeline.line(), file=sys.stderr, flush=True)
        if on_batch:
            on_batch(batch)

    checkpoint = CheckpointLog(spark, settings.checkpoint_uri)  # one reader of the checkpoint, handed down
    if settings.realtime_interval is not None:
        from streaming.realtime.writer import EpochCounts, prepared_writer, write_stream

        sink = prepared_writer(spark, settings, checkpoint, start)
        mark("sink")
        writer = write_stream(spark, source(spark, settings, checkpoint, start), settings, sink)
    else:
        sink = {"kafka-eos": lambda: TransactionalSink(settings, spark, checkpoint, batch_done, start),
                "kafka-alo": lambda: AtLeastOnceKafkaSink(settings, batch_done),
                "delta": lambda: IdempotentDeltaSink(settings, batch_done)}[settings.sink]()
        mark("sink")
        writer = source(spark, settings, checkpoint, start).writeStream.foreachBatch(sink)
        writer = writer.trigger(availableNow=True) if settings.trigger == "available-now" \
            else writer.trigger(processingTime=settings.trigger)
    mark("source")
    writer = writer.option("checkpointLocation", settings.checkpoint_uri).queryName(settings.app_id)
    started = time.monotonic()
    # The transactional sinks keep the group's offsets alive for as long as the query runs.
    with sink.keeping_offsets() if hasattr(sink, "keeping_offsets") else nullcontext():
        observer = _visibility_observer(settings, metrics)
        try:
            query = writer.start()
            mark("query")
        except BaseException as exc:
            if observer:
                observer.stop(wait_s=0)
            if "STREAMING_REAL_TIME_MODE" in str(exc):  # Spark's own refusal of the trigger, in one line
                raise SettingsError(f"--trigger {settings.trigger}: {str(exc).splitlines()[0]}") from None
            raise
        epochs = EpochCounts(sink, batch_done) if settings.realtime_interval is not None else None
        watcher = _ProgressWatcher(query, checkpoint, settings, metrics, epochs.report if epochs else None) \
            if metrics or epochs else None
        try:
            if settings.trigger == "available-now" or settings.timeout_s is None:
                query.awaitTermination()
            elif not query.awaitTermination(settings.timeout_s):
                stop_quietly(spark, query, between_batches=settings.realtime_interval is None)
        except KeyboardInterrupt:
            stop_quietly(spark, query)
        except Exception as exc:  # the query failed; a refusal of the sink, or of an ACL, says why in one line
            if getattr(sink, "refusal", None) is None:
                denied = java_authorization_failure(str(exc))  # Spark's Kafka source or writer refused
                if denied is None:
                    raise streaming_query_failure(exc) from exc
                raise denied from None
        finally:
            if watcher:
                watcher.stop()
            if epochs:
                epochs.finish()
            if observer:
                summary.visibility = asdict(observer.stop())
    summary.seconds = time.monotonic() - started
    # Every sink's input count, with no extra Spark job (session.py keeps enough progress).
    summary.settle(query.recentProgress)
    if getattr(sink, "refusal", None) is not None:
        raise sink.refusal
    if query.exception() is not None:
        raise streaming_query_failure(query.exception())
    if settings.output_json and settings.output_json != STDOUT:  # stdout gets it anyway, last
        settings.output_json.write_text(summary.to_json() + "\n")
    return summary


def _where_this_python_is(_rows=()):
    import pyspark
    import streaming

    # The environment's real folder: on YARN, behind the container's ./environment link, the copy
    # the NodeManager unpacked into its cache, the same for every application that reuses it.
    yield {"executable": sys.executable, "environment": os.path.realpath(sys.prefix), "streaming": streaming.__file__,
           "pyspark": pyspark.__file__}


def python_locations(spark) -> dict:
    """The driver's and each task's interpreter and `streaming`/`pyspark` files, one task per core."""
    tasks = spark.sparkContext.defaultParallelism
    return {"driver": next(_where_this_python_is()),
            "tasks": spark.sparkContext.parallelize(range(tasks), tasks).mapPartitions(_where_this_python_is).collect()}


def _exit_after_spark(spark, parser: argparse.ArgumentParser, status: int, exc: Exception) -> None:
    """Stop Spark quietly (the session `main` started, else None), then exit with the failure's one line as the last words.

    Left to the interpreter's exit, Spark stops after the line is printed, and a cluster's
    executors closing their connections log stack traces below it (a soak's NameNode kill did).
    A session that was running before `main` (a caller's own) is left running.
    """
    if spark is not None:
        try:
            spark.sparkContext.setLogLevel("OFF")
            spark.stop()
        except Exception:  # a failed stop must not hide why the job failed
            pass
    parser.exit(status, f"{parser.prog}: error: {str(exc).splitlines()[0]}\n")


def main(argv: list[str] | None = None) -> int:
    """spark-submit entry point."""
    from pydantic import ValidationError

    from streaming.session import build_spark_session, session_defaults

    timeline = StartTimeline()
    timeline.mark("main")
    parser = argparse.ArgumentParser(prog="streaming/job.py", description=__doc__.splitlines()[0])
    add_stream_arguments(parser)
    args = parser.parse_args(argv)
    try:
        settings = settings_from_args(args)
    except ValidationError as exc:
        parser.exit(2, f"{parser.prog}: error: {validation_error_line(exc)}\n")
    except ValueError as exc:
        parser.exit(2, f"{parser.prog}: error: {str(exc).splitlines()[0]}\n")
    from pyspark import SparkContext

    started_here = SparkContext._active_spark_context is None
    spark = build_spark_session(f"eosbench-stream-{settings.app_id}", defaults=session_defaults(settings))
    timeline.mark("session")
    own = spark if started_here else None
    try:
        summary = run(spark, settings, timeline=timeline)
    except SettingsError as exc:  # the sink refused the query or the group: nothing was committed
        _exit_after_spark(own, parser, 2, exc)
    except EnvironmentFailure as exc:  # a missing ACL, or what the query ran on stopped: the CLI contract's exit 3
        _exit_after_spark(own, parser, 3, exc)
    except RunFailed as exc:  # the sink's own check failed (an exactly-once violation)
        _exit_after_spark(own, parser, 1, exc)
    if args.report_python:
        summary.python = python_locations(spark)
    print(summary.to_json())
    linger_for_final_scrape(settings.metrics_linger_s, metrics_url(settings.metrics_host, settings.metrics_port,
                                                               settings.metrics_tls))
    return 0


if __name__ == "__main__":
    sys.exit(main())
