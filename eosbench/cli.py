"""The `eosbench` command line: one argparse tree, one-line errors, documented exit codes.

Exit codes: 0 success, 1 a check ran and failed, 2 bad input, 3 the environment lacks
something (Java, Maven, jars, a free port, a reachable broker), 130 interrupted.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
from pathlib import Path

from pydantic import ValidationError

from conf.settings import (DEFAULT_BOOTSTRAP, DEFAULT_CLIENT_PORT, ClusterSettings, SettingsError, eosbench_home,
                           linger_for_final_scrape, metrics_linger_seconds)
from eosbench.errors import EXIT_BAD_INPUT, EXIT_CHECK_FAILED, EXIT_ENVIRONMENT, BadInput, CheckFailed, EosbenchError

EXIT_INTERRUPTED = 130


class OneLineArgumentParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line on stderr and exit status 2."""

    def error(self, message: str):  # noqa: D102 - argparse's contract
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {message}\n")


def _int_at_least(text: str, lowest: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None
    if value < lowest:
        raise argparse.ArgumentTypeError(f"must be at least {lowest}, got {value}")
    return value


def _positive_int(text: str) -> int:
    return _int_at_least(text, 1)


def _non_negative_int(text: str) -> int:
    return _int_at_least(text, 0)


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return value


def _bootstrap_parent() -> argparse.ArgumentParser:
    parent = OneLineArgumentParser(add_help=False)
    parent.add_argument("--bootstrap-server", metavar="HOST:PORT", dest="bootstrap",
                        help=f"Kafka bootstrap servers (default: the local broker, {DEFAULT_BOOTSTRAP})")
    return parent


def _state_dir_parent() -> argparse.ArgumentParser:
    parent = OneLineArgumentParser(add_help=False)
    parent.add_argument("--state-dir", metavar="DIR", type=Path, default=eosbench_home() / "cluster",
                        help="where the local cluster keeps data, logs and pid files (default: %(default)s)")
    return parent


def build_parser() -> argparse.ArgumentParser:
    """Return the full `eosbench` argument parser."""
    parser = OneLineArgumentParser(prog="eosbench", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                     parser_class=OneLineArgumentParser)
    bootstrap = _bootstrap_parent()
    state_dir = _state_dir_parent()

    broker = commands.add_parser("broker", help="run a real local Kafka (KRaft) cluster")
    broker_commands = broker.add_subparsers(dest="broker_command", required=True, metavar="ACTION")
    start = broker_commands.add_parser("start", parents=[state_dir], help="start the brokers and wait until transactions work")
    start.add_argument("--brokers", type=int, choices=(1, 3), default=1, help="number of nodes (default: 1)")
    start.add_argument("--port", type=int, default=DEFAULT_CLIENT_PORT, metavar="PORT",
                       help="client port of node 1; node i listens on PORT+i-1, its controller on +100, its JMX exporter on +200")
    start.add_argument("--heap-mb", type=int, default=512, metavar="MB", help="heap of each broker JVM (128-512)")
    start.add_argument("--fresh", action="store_true", help="wipe any existing cluster data first")
    broker_commands.add_parser("status", parents=[state_dir], help="show what is running (exit 1 unless every node is up)")
    broker_commands.add_parser("stop", parents=[state_dir], help="stop every node (idempotent)")
    logs = broker_commands.add_parser("logs", parents=[state_dir], help="print a node's server.log")
    logs.add_argument("--node", type=int, default=1, help="node id (default: 1)")
    logs.add_argument("-n", "--lines", type=_positive_int, default=50, help="lines to print (default: 50)")
    logs.add_argument("-f", "--follow", action="store_true", help="keep printing as the log grows")

    topics = commands.add_parser("topics", help="create, describe or delete topics")
    topic_commands = topics.add_subparsers(dest="topics_command", required=True, metavar="ACTION")
    create = topic_commands.add_parser("create", parents=[bootstrap], help="create a topic")
    create.add_argument("name")
    create.add_argument("--partitions", type=_positive_int, default=1)
    create.add_argument("--replication-factor", type=_positive_int, default=1)
    topic_commands.add_parser("describe", parents=[bootstrap], help="show partitions, leaders and ISR").add_argument("name")
    topic_commands.add_parser("delete", parents=[bootstrap], help="delete a topic").add_argument("name")

    commands.add_parser("setup", help="check Java and Maven and resolve every jar into the cache")

    add_produce_parser(commands)

    from streaming.job import add_stream_arguments

    stream = commands.add_parser("stream", help="the exactly-once Structured Streaming job, local master and cached jars")
    add_stream_arguments(stream)
    stream.add_argument("--master", help="Spark master (default: local[2,4])")
    stream.add_argument("--conf", action="append", default=[], metavar="K=V",
                        help="a Spark setting, as spark-submit's --conf; repeat for more")

    verify = commands.add_parser("verify", parents=[bootstrap],
                                 help="prove no duplicate, no loss, no aborted read (JSON report, exit 1 on violation)")
    verify.add_argument("--input-topic", required=True)
    verify.add_argument("--output-topic", required=True)
    verify.add_argument("--app-id", help="also check that this sink group's offsets reached the input's end")
    verify.add_argument("--dead-letter-topic", help="dead-lettered records count as delivered (default: <output>.dlq)")

    bench = commands.add_parser("bench", help="benchmarks that print ratios measured side by side")
    benches = bench.add_subparsers(dest="bench_command", required=True, metavar="BENCH")
    writes = benches.add_parser("writes", parents=[bootstrap],
                                help="kafka-tx-performance write benches: 2 records to 2 topics per iteration")
    writes.add_argument("--mode", choices=("base", "tx", "both"), default="both",
                        help="base: send and wait; tx: the same in a transaction (default: both, interleaved)")
    writes.add_argument("--warmup", type=_positive_int, default=1000, help="warmup iterations per mode")
    writes.add_argument("--iterations", type=_positive_int, default=1000, help="measured iterations per mode")
    writes.add_argument("--output-dir", type=Path, default=Path("results"), help="where the PNG and JSON go")
    produce_bench = benches.add_parser("produce", parents=[bootstrap],
                                       help="eosbench produce beside Java ProducerPerformance, plus an abort sweep")
    produce_bench.add_argument("--num-records", type=_positive_int, default=1_000_000)
    produce_bench.add_argument("--record-size", type=_positive_int, default=100)
    produce_bench.add_argument("--transaction-duration-ms", type=_positive_int, default=100)
    spark_bench = benches.add_parser("spark", parents=[bootstrap],
                                     help="the streaming job's sinks side by side on one pre-filled input")
    spark_bench.add_argument("--records", type=_positive_int, default=2_000_000)
    spark_bench.add_argument("--partitions", type=_positive_int, default=4)
    spark_bench.add_argument("--max-offsets-per-trigger", type=_positive_int, default=500_000)
    spark_bench.add_argument("--rounds", type=_positive_int, default=2, help="rounds, sink order rotated (default: 2)")
    spark_bench.add_argument("--trigger-seconds", type=_non_negative_int, default=30,
                             help="seconds of kafka-alo and kafka-eos at a 1 s trigger per round; 0 skips them")
    spark_bench.add_argument("--latency-seconds", type=_non_negative_int, default=30, help="0 skips the latency run")
    spark_bench.add_argument("--sink", nargs="+", dest="sinks", default=["kafka-eos", "kafka-alo", "delta", "kafka-eos+prereg"],
                             choices=["kafka-eos", "kafka-alo", "delta", "kafka-eos+prereg"])
    spark_bench.add_argument("--output-dir", type=Path, default=Path("results"),
                             help="where the JSON goes; the rows go to the Delta table <DIR>/bench_runs")
    produce_bench.add_argument("--repeat", type=_positive_int, default=3,
                               help="rounds of the whole matrix; medians are reported (default: 3)")
    produce_bench.add_argument("--output-dir", type=Path, default=Path("results"))
    produce_bench.add_argument("--throttled-rates", type=_positive_float, nargs="*", default=[500, 5000],
                               metavar="RECORDS/S", help="rates of the throttled latency pair, each tool at each"
                               " (default: 500 5000; none skips the pair)")
    produce_bench.add_argument("--latency-only", action="store_true",
                               help="run only the throttled latency pair, not the throughput matrix and abort sweep")

    streaming_bench = benches.add_parser(
        "streaming", parents=[bootstrap],
        help="EOSPerformance: poll-process-produce with the plain client, base (commitSync) and tx side by side")
    streaming_bench.add_argument("--mode", choices=("base", "tx", "both"), default="both")
    streaming_bench.add_argument("--input-topic", help="read this topic (default: a new one, filled first)")
    streaming_bench.add_argument("--output-topic", help="write here (default: <input>-<mode>, created)")
    streaming_bench.add_argument("--consumer-config", type=Path, metavar="FILE", help="consumer .properties file")
    streaming_bench.add_argument("--producer-config", type=Path, metavar="FILE",
                                 help="producer .properties file (librdkafka names, e.g. retry.backoff.ms)")
    streaming_bench.add_argument("--group-id", help="consumer group (default: a new one per mode)")
    streaming_bench.add_argument("--poll-timeout", type=_positive_int, default=100, metavar="MS",
                                 help="consumer poll timeout in ms (default: 100)")
    streaming_bench.add_argument("--pre-register-partitions", action="store_true",
                                 help="tx mode: register every output partition and the offsets right after begin")
    streaming_bench.add_argument("--records-per-transaction", type=_positive_int, default=1,
                                 help="records per unit (one transaction in tx mode; default: 1, the seed's)")
    streaming_bench.add_argument("--warmup", type=int, default=100, help="units before measuring (default: 100)")
    streaming_bench.add_argument("--iterations", type=_positive_int, default=1000, help="measured units per mode")
    streaming_bench.add_argument("--record-size", type=_positive_int, default=100)
    streaming_bench.add_argument("--partitions", type=_positive_int, default=1)
    streaming_bench.add_argument("--results-dir", type=Path, default=Path("results"),
                                 help="JSON, PNG, and the Delta results table (default: results)")
    sweep = benches.add_parser("sweep", help="a grid from a workload file, every sink side by side; rows to Delta")
    sweep.add_argument("--workload", type=Path, default=Path("conf/workloads/default.yaml"),
                       help="YAML under conf/workloads/ (default: %(default)s)")
    sweep.add_argument("--bootstrap-server", dest="bootstrap", metavar="HOST:PORT",
                       help="use this cluster instead of starting one per broker count")
    sweep.add_argument("--port", type=int, default=9500, help="client port of the sweep's own clusters")
    sweep.add_argument("--results-dir", type=Path, default=Path("results"))

    report = commands.add_parser("report", help="plots and a Markdown summary from the Delta results table")
    report.add_argument("--results-dir", type=Path, default=Path("results"))
    report.add_argument("--run-id", help="the sweep to report (default: the newest)")

    demo = commands.add_parser("demo", parents=[bootstrap],
                               help="the quick start: transactions in, Spark read_committed out, ids compared")
    demo.add_argument("--records", type=_positive_int, default=20_000)
    demo.add_argument("--records-per-transaction", type=_positive_int, default=1_000)
    demo.add_argument("--abort-ratio", type=float, default=0.3, help="share of transactions aborted, in [0, 1]")
    demo.add_argument("--partitions", type=_positive_int, default=4)
    demo.add_argument("--seed", type=int, default=0)
    demo.add_argument("--monitor", action="store_true",
                      help="start the real Prometheus next to the broker, serve every /metrics, print the URLs")
    demo.add_argument("--hold", action="store_true",
                      help="with --monitor: keep serving the run's /metrics until Ctrl-C")

    prometheus = commands.add_parser("prometheus", help="the local Prometheus server that demo --monitor starts")
    prometheus.add_argument("action", choices=("start", "stop", "status"))

    cluster = commands.add_parser("cluster", help="a Spark standalone cluster on loopback (master + workers)")
    cluster.add_argument("action", choices=("start", "stop", "status"))
    cluster.add_argument("--workers", type=_positive_int, default=2, help="worker daemons (default: 2)")
    cluster.add_argument("--master-port", type=int, default=7077, help="spark:// port (default: 7077)")
    cluster.add_argument("--ui-port", type=int, default=8080, help="master web UI; worker i uses +1+i (default: 8080)")
    cluster.add_argument("--spark-state-dir", type=Path, default=eosbench_home() / "spark-cluster",
                         help="pid files, logs and work folders (default: %(default)s)")

    add_soak_parser(commands, state_dir)
    return parser


def _duration(text: str) -> float:
    """Seconds from '90', '90s', '30m' or '2h'."""
    units = {"s": 1, "m": 60, "h": 3600}
    try:
        value = float(text[:-1]) * units[text[-1]] if text and text[-1] in units else float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (use e.g. 90s, 30m, 2h)") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"a duration must be positive, got {text!r}")
    return value


def add_soak_parser(commands, state_dir: argparse.ArgumentParser) -> None:
    """`eosbench soak`: the pipeline under injected faults, verified after each."""
    from eosbench.soak import FAULT_KINDS, SoakOptions

    defaults = SoakOptions(duration_s=1, faults=())
    soak = commands.add_parser("soak", parents=[state_dir],
                               help="run producer and stream for a while, inject faults, verify after each")
    soak.add_argument("--duration", type=_duration, required=True, help="how long faults are injected: 90s, 30m, 2h")
    soak.add_argument("--faults", default="kill-driver,kill-executor,kill-broker,pause-broker,delete-checkpoint,restart-producer",
                      help=f"comma-separated kinds, injected in a seeded round robin ({', '.join(FAULT_KINDS)})")
    soak.add_argument("--brokers", type=int, choices=(1, 3), default=1, help="local cluster size (default: 1)")
    soak.add_argument("--port", type=int, default=DEFAULT_CLIENT_PORT, help="client port of broker node 1")
    soak.add_argument("--master", default=defaults.master,
                      help="Spark master: local[2,4] (default) or spark://127.0.0.1:7077 (`eosbench cluster start`)")
    soak.add_argument("--spark-state-dir", type=Path, help="with a spark:// master: the `eosbench cluster` folder"
                      " (default: ~/.cache/eosbench/spark-cluster)")
    soak.add_argument("--seed", type=int, default=0, help="seeds the producer and the fault order")
    soak.add_argument("--throughput", type=float, default=defaults.throughput, help="records/s the producer offers")
    soak.add_argument("--records-per-transaction", type=_positive_int, default=defaults.records_per_transaction)
    soak.add_argument("--abort-ratio", type=float, default=defaults.abort_ratio, help="producer transactions aborted")
    soak.add_argument("--partitions", type=_positive_int, default=defaults.partitions)
    soak.add_argument("--gate-records", type=_positive_int, default=defaults.gate_records,
                      help="input offsets the sink must commit between two faults (default: %(default)s)")
    soak.add_argument("--delivery-timeout-ms", type=_positive_int, default=defaults.delivery_timeout_ms,
                      help="the producer's delivery.timeout.ms; pause-broker stops a broker 4 s longer")
    soak.add_argument("--metrics-port", type=int, default=defaults.metrics_port,
                      help="producer /metrics; the stream uses +1 and the soak +2 (default: %(default)s)")
    soak.add_argument("--output-dir", type=Path, help="report folder (default: results/soak/<run id>)")
    soak.add_argument("--max-faults", type=_positive_int,
                      help="end after this many faults, or at --duration if that comes first")


def add_produce_parser(commands) -> None:
    """`eosbench produce`: kafka-producer-perf-test's flags, then eosbench's."""
    produce = commands.add_parser(
        "produce", help="seeded transactional producer with kafka-producer-perf-test's flags and output",
        description="kafka-producer-perf-test, transactional and seeded: same flags, same output lines,"
                    " plus --transaction-abort-ratio (KIP-1260), --seed, --resume and Prometheus metrics.")
    produce.add_argument("--bootstrap-server", metavar="BOOTSTRAP-SERVER",
                         help="the server(s) to connect to; takes precedence over bootstrap.servers in the properties")
    produce.add_argument("--topic", required=True, metavar="TOPIC", help="produce records to this topic")
    produce.add_argument("--num-records", required=True, type=int, metavar="NUM-RECORDS", help="number of records to produce")
    payload = produce.add_mutually_exclusive_group(required=True)
    payload.add_argument("--record-size", type=int, metavar="RECORD-SIZE", help="record size in bytes")
    payload.add_argument("--payload-file", type=Path, metavar="PAYLOAD-FILE",
                         help="file to read the record payloads from (UTF-8 text, split on --payload-delimiter)")
    payload.add_argument("--payload-monotonic", action="store_true",
                         help="payload is the record's index as a decimal string")
    produce.add_argument("--payload-delimiter", default="\\n", metavar="PAYLOAD-DELIMITER",
                         help="delimiter of --payload-file (default: newline)")
    produce.add_argument("--throughput", required=True, type=float, metavar="THROUGHPUT",
                         help="throttle to about THROUGHPUT records/sec; -1 disables throttling")
    props = produce.add_mutually_exclusive_group()
    props.add_argument("--producer-props", nargs="+", metavar="PROP-NAME=PROP-VALUE",
                       help="producer configuration properties, Java names (translated for librdkafka)")
    props.add_argument("--command-property", nargs="+", metavar="PROP-NAME=PROP-VALUE",
                       help="the same as --producer-props (its newer name)")
    config = produce.add_mutually_exclusive_group()
    config.add_argument("--producer.config", dest="producer_config", type=Path, metavar="CONFIG-FILE",
                        help="producer configuration properties file")
    config.add_argument("--command-config", type=Path, metavar="CONFIG-FILE", help="the same as --producer.config")
    produce.add_argument("--print-metrics", action="store_true", help="print client metrics at the end")
    produce.add_argument("--transactional-id", metavar="TRANSACTIONAL-ID", help="the transactional id to use")
    produce.add_argument("--transaction-duration-ms", type=int, metavar="TRANSACTION-DURATION",
                         help="commit after this many ms (default 3000 when transactions are on)")
    produce.add_argument("--warmup-records", type=int, default=0, metavar="WARMUP-RECORDS",
                         help="records excluded from the steady-state statistics")
    produce.add_argument("--reporting-interval", type=int, default=5000, metavar="INTERVAL-MS",
                         help="ms between window lines (default: 5000)")
    ours = produce.add_argument_group("eosbench")
    ours.add_argument("--transaction-abort-ratio", type=float, default=0.0, metavar="TRANSACTION-ABORT-RATIO",
                      help="share of transactions to abort, in [0.0, 1.0]; needs transactions (KIP-1260)")
    ours.add_argument("--records-per-transaction", type=int, metavar="N",
                      help="commit every N records instead of by time (deterministic commit points)")
    ours.add_argument("--seed", type=int, default=0, help="seed of the SplittableRandom (default 0, as Java)")
    ours.add_argument("--resume", action="store_true",
                      help="continue an interrupted load after its last committed sequence number")
    ours.add_argument("--run-id", help="run id carried in every record's eos.run_id header (default: new)")
    ours.add_argument("--metrics-port", type=int, metavar="PORT", help="serve Prometheus /metrics on this port")
    ours.add_argument("--metrics-host", default="127.0.0.1", metavar="HOST",
                      help="address /metrics binds to (default: 127.0.0.1)")
    ours.add_argument("--metrics-linger", type=float, metavar="SECONDS",
                      help="keep /metrics up this long after the run, so its final values are scraped"
                           " (default with --metrics-port: two scrape intervals of conf/prometheus/prometheus.yml)")
    ours.add_argument("--output-json", type=Path, metavar="FILE", help="write a machine-readable summary here")


# ---------------------------------------------------------------------------- handlers


def _cluster_for(state_dir: Path):
    from eosbench.broker import LocalCluster

    return LocalCluster.from_state_dir(state_dir)


def cmd_broker(args: argparse.Namespace) -> int:
    """Handle `eosbench broker start|status|stop|logs`."""
    from eosbench.broker import LocalCluster

    if args.broker_command == "start":
        try:
            settings = ClusterSettings(brokers=args.brokers, port=args.port, state_dir=args.state_dir,
                                       heap_mb=args.heap_mb)
        except ValidationError as exc:
            raise BadInput(_first_validation_error(exc)) from exc
        cluster = LocalCluster(settings)
        print(f"eosbench: starting {settings.brokers} broker(s) from {settings.state_dir}", file=sys.stderr)
        seconds = cluster.start(fresh=args.fresh)
        print(f"eosbench: cluster ready in {seconds:.1f} s (transactions accepted)", file=sys.stderr)
        print(settings.bootstrap_servers)
        return 0

    cluster = _cluster_for(args.state_dir)
    if args.broker_command == "stop":
        stopped = cluster.stop() if cluster else 0
        print(f"stopped {stopped} broker(s)" if stopped else "no broker running")
        return 0
    if cluster is None:
        if args.broker_command == "status":
            print(f"stopped (no cluster was ever started from {args.state_dir})")
            return EXIT_CHECK_FAILED
        raise BadInput(f"no cluster was ever started from {args.state_dir}")
    if args.broker_command == "status":
        return _print_status(cluster)
    log_file = cluster.log_file(args.node)
    if args.follow:
        os.execvp("tail", ["tail", "-n", str(args.lines), "-F", str(log_file)])
    for line in cluster.tail_log(args.node, args.lines):
        print(line)
    return 0


def _print_status(cluster) -> int:
    from eosbench.kafka_admin import cluster_metadata

    nodes = cluster.status()
    up = [node for node in nodes if node.process_alive and node.listening]
    for node in nodes:
        state = "up" if node in up else ("starting" if node.process_alive else "down")
        pid = node.pid if node.pid else "-"
        print(f"node {node.node_id}\t{state}\tpid {pid}\t127.0.0.1:{node.client_port}"
              f"\tmetrics http://127.0.0.1:{node.jmx_exporter_port}/metrics")
    if not up:
        print("cluster: stopped")
        return EXIT_CHECK_FAILED
    bootstrap = ",".join(f"127.0.0.1:{node.client_port}" for node in up)
    try:
        metadata = cluster_metadata(bootstrap)
    except EosbenchError as exc:
        print(f"cluster: unreachable ({exc})")
        return EXIT_CHECK_FAILED
    registered = sorted(metadata.brokers)
    healthy = len(up) == len(nodes) and len(registered) == len(nodes)
    print(f"cluster: {'running' if healthy else 'degraded'}, {len(registered)}/{len(nodes)} brokers registered"
          f" {registered}, controller {metadata.controller_id}, {len(metadata.topics)} topics")
    print(f"bootstrap: {cluster.settings.bootstrap_servers}")
    return 0 if healthy else EXIT_CHECK_FAILED


def cmd_topics(args: argparse.Namespace) -> int:
    """Handle `eosbench topics create|describe|delete`."""
    from eosbench import kafka_admin

    bootstrap = args.bootstrap or DEFAULT_BOOTSTRAP
    if args.topics_command == "create":
        kafka_admin.create_topic(bootstrap, args.name, args.partitions, args.replication_factor)
        print(f"created topic {args.name} ({args.partitions} partitions, replication factor {args.replication_factor})")
    elif args.topics_command == "describe":
        print(kafka_admin.describe_topic(bootstrap, args.name).render())
    else:
        kafka_admin.delete_topics(bootstrap, [args.name])
        print(f"deleted topic {args.name}")
    return 0


def cmd_setup(_args: argparse.Namespace) -> int:
    """Handle `eosbench setup`: check the toolchain and fill the jar cache."""
    from importlib.metadata import version

    from eosbench.environment import check_java, check_maven
    from eosbench.jars import resolve_all

    java, mvn = check_java(), check_maven()
    started = time.monotonic()
    bundles = resolve_all()
    print(f"java: {java}\nmaven: {mvn}")
    print(f"pyspark {version('pyspark')}, delta-spark {version('delta-spark')},"
          f" confluent-kafka {version('confluent-kafka')}")
    for name, jars in bundles.items():
        print(f"jars/{name}: {len(jars)} jars in {jars[0].parent}")
    print(f"setup done in {time.monotonic() - started:.1f} s")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    """Handle `eosbench demo`."""
    from rich.console import Console

    from eosbench.demo import DemoOptions, run_demo

    if not 0.0 <= args.abort_ratio <= 1.0:
        raise BadInput(f"--abort-ratio must lie in [0.0, 1.0], got {args.abort_ratio}")
    options = DemoOptions(bootstrap=args.bootstrap, records=args.records,
                          records_per_transaction=args.records_per_transaction,
                          abort_ratio=args.abort_ratio, partitions=args.partitions, seed=args.seed,
                          monitor=args.monitor)
    result = run_demo(options, Console())
    if args.monitor and args.hold:
        print("serving /metrics until Ctrl-C", file=sys.stderr)
        while True:
            time.sleep(3600)
    return 0 if result.ok else EXIT_CHECK_FAILED


def cmd_prometheus(args: argparse.Namespace) -> int:
    """Handle `eosbench prometheus start|stop|status`."""
    from eosbench.prometheus_server import LocalPrometheus

    server = LocalPrometheus()
    if args.action == "start":
        print(server.start())
    elif args.action == "stop":
        print("stopped Prometheus" if server.stop() else "Prometheus was not running")
    else:
        running = server.running()
        print(f"Prometheus {'running at ' + server.url if running else 'stopped'}")
        return 0 if running else EXIT_CHECK_FAILED
    return 0


def cmd_produce(args: argparse.Namespace) -> int:
    """Handle `eosbench produce`."""
    from conf.produce_settings import ProduceSettings
    from eosbench.kafka_admin import describe_topic
    from eosbench.progress import progress_callback
    from producers.perf import ProduceFailed, ProducerPerformance

    fields = {name: value for name, value in vars(args).items()
              if name in ProduceSettings.model_fields and value is not None}
    if fields.get("payload_delimiter") == "\\n":
        fields["payload_delimiter"] = "\n"
    for name in ("producer_props", "command_property"):
        if name in fields:
            fields[name] = tuple(fields[name])
    try:
        settings = ProduceSettings(**fields)
    except ValidationError as exc:
        raise BadInput(_first_validation_error(exc)) from exc
    describe_topic(settings.bootstrap, settings.topic)  # one-line errors for no broker / no topic
    with progress_callback(f"producing to {settings.topic}") as progress:
        try:
            summary = ProducerPerformance(settings, progress=progress).run()
        except ProduceFailed as exc:
            raise CheckFailed(str(exc)) from exc
    if settings.output_json:
        settings.output_json.write_text(summary.to_json())
    linger_for_final_scrape(settings.metrics_linger_s, settings.metrics_host, settings.metrics_port)
    return 0


def cmd_stream(args: argparse.Namespace) -> int:
    """Handle `eosbench stream`: the streaming job with cached jars on a local master."""
    from conf.settings import parse_kv_pairs
    from eosbench.kafka_admin import cluster_metadata, create_topic, describe_topic
    from eosbench.spark import spark_session
    from streaming import job

    try:
        settings = job.settings_from_args(args)
    except ValidationError as exc:
        raise BadInput(_first_validation_error(exc)) from exc
    spark_conf = parse_kv_pairs(args.conf)
    describe_topic(settings.bootstrap_server, settings.input_topic)
    describe_topic(settings.bootstrap_server, settings.output_topic)
    metadata = cluster_metadata(settings.bootstrap_server)
    if settings.sink != "delta" and settings.dead_letter not in metadata.topics:
        create_topic(settings.bootstrap_server, settings.dead_letter, 1, min(3, len(metadata.brokers)))
    spark = spark_session(f"eosbench-stream-{settings.app_id}", master=args.master, conf=spark_conf)
    summary = job.run(spark, settings)
    print(summary.to_json())
    linger_for_final_scrape(settings.metrics_linger_s, settings.metrics_host, settings.metrics_port)
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    """Handle `eosbench verify`: print the JSON report; exit 1 on any violation."""
    from eosbench.kafka_admin import cluster_metadata, describe_topic
    from streaming.verify import verify

    bootstrap = args.bootstrap or DEFAULT_BOOTSTRAP
    describe_topic(bootstrap, args.input_topic)
    describe_topic(bootstrap, args.output_topic)
    report = verify(bootstrap, args.input_topic, args.output_topic, args.app_id,
                    args.dead_letter_topic or f"{args.output_topic}.dlq",
                    topic_exists=lambda name: name in cluster_metadata(bootstrap).topics)
    print(report.to_json())
    if not report.ok:
        print(f"eosbench: verify failed: {'; '.join(report.violations)}", file=sys.stderr)
        return EXIT_CHECK_FAILED
    return 0


STOP_REQUESTED = threading.Event()  # set once SIGTERM or Ctrl-C has asked a long command to stop


def interrupt_on_stop_signals() -> None:
    """Turn SIGTERM, like Ctrl-C, into KeyboardInterrupt, and remember it, so that clean-up runs first."""
    def interrupt(_signum, _frame):
        STOP_REQUESTED.set()
        raise KeyboardInterrupt
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, interrupt)


def cmd_bench(args: argparse.Namespace) -> int:
    """Handle `eosbench bench writes|produce|streaming|spark|sweep`."""
    bootstrap = args.bootstrap or (None if args.bench_command == "sweep" else DEFAULT_BOOTSTRAP)
    if args.bench_command == "writes":
        from eosbench import bench_writes

        modes = ["base", "tx"] if args.mode == "both" else [args.mode]
        bench_writes.run(bootstrap, modes, args.warmup, args.iterations, args.output_dir)
    elif args.bench_command == "streaming":
        from eosbench import bench_streaming

        bench_streaming.run(bootstrap, args)
    elif args.bench_command == "sweep":
        from conf.workload_settings import load_workload
        from eosbench.sweep import run_sweep

        interrupt_on_stop_signals()  # a SIGTERM still stops the sweep's brokers and keeps its finished rows
        run_sweep(load_workload(args.workload), args.workload.stem, args.results_dir, args.bootstrap, args.port)
    elif args.bench_command == "spark":
        from eosbench import bench_spark

        bench_spark.run(bootstrap, args.records, args.partitions, args.max_offsets_per_trigger, args.rounds,
                        args.latency_seconds, args.sinks, args.output_dir, args.trigger_seconds)
    else:
        from eosbench import bench_produce

        if args.latency_only and not args.throttled_rates:
            raise BadInput("--latency-only needs at least one --throttled-rates rate")
        bench_produce.run(bootstrap, args.num_records, args.record_size, args.transaction_duration_ms,
                          args.repeat, args.output_dir, tuple(args.throttled_rates), args.latency_only)
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    """Handle `eosbench report`: plots and summary of a sweep from the results table."""
    from eosbench import results
    from eosbench.report import write_report
    from eosbench.spark import spark_session

    if not (results.table_path(args.results_dir) / "_delta_log").exists():
        raise BadInput(f"no results table in {args.results_dir}; run `eosbench bench sweep` first")
    rows = results.read_rows(spark_session("eosbench-report"), args.results_dir)
    try:
        summary, plots = write_report(rows, args.run_id, args.results_dir / "plots")
    except LookupError as exc:
        raise BadInput(str(exc)) from exc
    print(summary.read_text())
    print(f"summary: {summary}\nplots: {', '.join(str(p) for p in plots)}")
    return 0


def cmd_cluster(args: argparse.Namespace) -> int:
    """Handle `eosbench cluster start|stop|status` (Spark standalone)."""
    from conf.settings import SparkClusterSettings
    from eosbench.spark_cluster import StandaloneCluster

    if args.action == "start":
        cluster = StandaloneCluster(SparkClusterSettings(workers=args.workers, master_port=args.master_port,
                                                         master_ui_port=args.ui_port, state_dir=args.spark_state_dir))
    else:
        cluster = StandaloneCluster.from_state_dir(args.spark_state_dir)
    if args.action == "start":
        seconds = cluster.start()
        print(f"Spark standalone at {cluster.settings.master_url} with {cluster.alive_workers()} workers"
              f" (UI http://127.0.0.1:{cluster.settings.master_ui_port}) after {seconds:.1f} s")
    elif args.action == "stop":
        print(f"stopped {cluster.stop()} Spark daemon(s)")
    else:
        daemons = cluster.status()
        for daemon in daemons:
            print(f"{daemon.name:10} {'up, pid ' + str(daemon.pid) if daemon.pid else 'down'}  port {daemon.port}")
        return 0 if all(d.pid for d in daemons) else EXIT_CHECK_FAILED
    return 0


def cmd_soak(args: argparse.Namespace) -> int:
    """Handle `eosbench soak`: exit 1 unless every fault was survived with zero violations."""
    from eosbench.soak import Soak, SoakOptions

    options = SoakOptions(
        duration_s=args.duration, faults=tuple(k.strip() for k in args.faults.split(",") if k.strip()),
        brokers=args.brokers, port=args.port, state_dir=args.state_dir, master=args.master,
        spark_state_dir=args.spark_state_dir, seed=args.seed,
        throughput=args.throughput, records_per_transaction=args.records_per_transaction,
        abort_ratio=args.abort_ratio, partitions=args.partitions, gate_records=args.gate_records,
        delivery_timeout_ms=args.delivery_timeout_ms, metrics_port=args.metrics_port, output_dir=args.output_dir,
        max_faults=args.max_faults)
    soak = Soak(options)
    interrupt_on_stop_signals()  # a SIGTERM still stops the children and writes the report
    report = soak.run()
    print(f"soak {report.run_id}: {len(report.faults)} faults, {sum(f.survived for f in report.faults)} survived,"
          f" {report.final.get('input_committed', 0):,} records verified, {len(report.violations)} violations;"
          f" report in {soak.output_dir}")
    # The producer and stream are killed (their endpoints go with them); the soak's own carries
    # the final verify, which the verify-failure alert must see.
    linger_for_final_scrape(metrics_linger_seconds(args.metrics_port, None), "127.0.0.1", args.metrics_port + 2)
    return 0 if report.ok else EXIT_CHECK_FAILED


HANDLERS = {"broker": cmd_broker, "topics": cmd_topics, "setup": cmd_setup, "demo": cmd_demo,
            "produce": cmd_produce, "bench": cmd_bench, "stream": cmd_stream, "verify": cmd_verify,
            "prometheus": cmd_prometheus, "cluster": cmd_cluster, "soak": cmd_soak, "report": cmd_report}


def _first_validation_error(exc: ValidationError) -> str:
    error = exc.errors()[0]
    message = str(error["msg"]).removeprefix("Value error, ")
    if not error["loc"]:
        return message  # a cross-field rule, whose message names its flags
    field = "--" + "-".join(str(part) for part in error["loc"]).replace("_", "-")
    return f"{field}: {message}"


def main(argv: list[str] | None = None) -> int:
    """Run one eosbench command and return its exit status."""
    args = build_parser().parse_args(argv)
    try:
        return HANDLERS[args.command](args)
    except KeyboardInterrupt:
        print("eosbench: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:
        if STOP_REQUESTED.is_set():
            # A stop signal that lands inside a client library's C code comes out as that
            # library's own error (confluent-kafka: a TypeError about property names).
            print("eosbench: interrupted", file=sys.stderr)
            return EXIT_INTERRUPTED
        return _report_failure(exc)


def _report_failure(exc: Exception) -> int:
    """Print one line for a command that failed and return its exit status."""
    if isinstance(exc, EosbenchError):
        print(f"eosbench: error: {exc}", file=sys.stderr)
        return exc.exit_code
    if isinstance(exc, SettingsError):
        print(f"eosbench: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if isinstance(exc, ValidationError):
        print(f"eosbench: error: {_first_validation_error(exc)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if os.environ.get("EOSBENCH_DEBUG"):  # a bug or an unforeseen failure: still one line, unless debugging
        raise exc
    print(f"eosbench: error: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
          " (set EOSBENCH_DEBUG=1 for the traceback)", file=sys.stderr)
    return EXIT_ENVIRONMENT


def entry_point() -> None:
    """Console-script entry point."""
    sys.exit(main())


if __name__ == "__main__":
    entry_point()
