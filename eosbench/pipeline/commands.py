"""The pipeline's commands, one stage at a time (`produce`, `stream`, `verify`) and end to end (`demo`), arguments by handler."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from conf.metrics_endpoint import add_metrics_tls_arguments, metrics_url
from conf.settings import DEFAULT_BOOTSTRAP, linger_for_final_scrape, parse_kv_pairs
from conf.stream_settings import StreamSettings
from eosbench.console.arguments import bootstrap_flag, kafka_connection, positive_int, renamed_flag
from eosbench.console.errors import EXIT_CHECK_FAILED, BadInput, EnvironmentProblem
from streaming.process import TRANSFORMS


def add_produce_parser(commands) -> None:
    """`eosbench produce`: kafka-producer-perf-test's flags, then eosbench's."""
    produce = commands.add_parser(
        "produce", help="seeded transactional producer with kafka-producer-perf-test's flags and output",
        description="kafka-producer-perf-test, transactional and seeded: same flags, same output lines,"
                    " plus --transaction-abort-ratio (KIP-1260), --seed, --resume and Prometheus metrics.")
    produce.add_argument("--bootstrap-server", metavar="BOOTSTRAP-SERVER",
                         help="the server(s) to connect to; takes precedence over bootstrap.servers in the properties"
                              f" (default: bootstrap.servers, else {DEFAULT_BOOTSTRAP})")
    produce.add_argument("--topic", required=True, metavar="TOPIC", help="produce records to this topic")
    produce.add_argument("--num-records", required=True, type=int, metavar="NUM-RECORDS", help="number of records to produce")
    payload = produce.add_mutually_exclusive_group(required=True)
    payload.add_argument("--record-size", type=int, metavar="RECORD-SIZE", help="record size in bytes (no default: one of --record-size, --payload-file and --payload-monotonic is required)")
    payload.add_argument("--payload-file", type=Path, metavar="PAYLOAD-FILE",
                         help="file to read the record payloads from (UTF-8 text, split on --payload-delimiter; default: none)")
    payload.add_argument("--payload-monotonic", action="store_true",
                         help="payload is the record's index as a decimal string")
    produce.add_argument("--payload-delimiter", default="\\n", metavar="PAYLOAD-DELIMITER",
                         help="delimiter of --payload-file (default: newline)")
    produce.add_argument("--throughput", required=True, type=float, metavar="THROUGHPUT",
                         help="throttle to about THROUGHPUT records/sec; -1 disables throttling")
    props = produce.add_mutually_exclusive_group()
    props.add_argument("--producer-props", nargs="+", metavar="PROP-NAME=PROP-VALUE",
                       help="producer configuration properties, Java names (translated for librdkafka; default: none,"
                            " so acks=all and Kafka's defaults)")
    props.add_argument("--command-property", nargs="+", metavar="PROP-NAME=PROP-VALUE",
                       help="the same as --producer-props (its newer name; default: none)")
    config = produce.add_mutually_exclusive_group()
    config.add_argument("--producer.config", dest="producer_config", type=Path, metavar="CONFIG-FILE",
                        help="producer configuration properties file (default: none)")
    config.add_argument("--command-config", type=Path, metavar="CONFIG-FILE", help="the same as --producer.config (its newer name; default: none)")
    produce.add_argument("--print-metrics", action="store_true", help="print client metrics at the end")
    produce.add_argument("--transactional-id", metavar="TRANSACTIONAL-ID", help="the transactional id to use (default: performance-producer-<run id> when transactions are on)")
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
                      help="commit every N records instead of by time (deterministic commit points; default: by time)")
    ours.add_argument("--seed", type=int, default=0, help="seed of the SplittableRandom (default 0, as Java)")
    ours.add_argument("--resume", action="store_true",
                      help="continue an interrupted load after its last committed sequence number")
    ours.add_argument("--run-id", help="run id carried in every record's eos.run_id header (default: new)")
    ours.add_argument("--metrics-port", type=int, metavar="PORT", help="serve Prometheus /metrics on this port (default: none)")
    ours.add_argument("--metrics-host", default="127.0.0.1", metavar="HOST",
                      help="address /metrics binds to (default: 127.0.0.1)")
    add_metrics_tls_arguments(ours)
    ours.add_argument("--metrics-linger", type=float, metavar="SECONDS",
                      help="keep /metrics up this long after the run, so its final values are scraped"
                           " (default with --metrics-port: two scrape intervals of conf/prometheus/prometheus.yml)")
    ours.add_argument("--output-json", type=Path, metavar="FILE",
                      help="write a machine-readable summary here; - for stdout, with Java's lines on stderr"
                           " (default: none)")


def cmd_produce(args: argparse.Namespace) -> int:
    """Handle `eosbench produce`."""
    from conf.produce_settings import ProduceSettings
    from conf.settings import STDOUT, write_output
    from eosbench.console.progress import progress_callback
    from eosbench.local.kafka_admin import describe_topic
    from producers.perf import ProducerPerformance

    fields = {name: value for name, value in vars(args).items()
              if name in ProduceSettings.model_fields and value is not None}
    if fields.get("payload_delimiter") == "\\n":
        fields["payload_delimiter"] = "\n"
    for name in ("producer_props", "command_property"):
        if name in fields:
            fields[name] = tuple(fields[name])
    settings = ProduceSettings(**fields)
    # With the summary on stdout, Java's lines go to stderr, so that stdout is the JSON alone.
    performance = ProducerPerformance(settings, out=sys.stderr if settings.output_json == STDOUT else sys.stdout)
    performance.open()  # a rejected property or a taken metrics port fails before the broker is asked
    describe_topic(settings.connection, settings.topic)  # one-line errors for no broker / no topic
    with progress_callback(f"producing to {settings.topic}") as progress:
        performance.progress = progress
        summary = performance.run()
    if settings.output_json:
        write_output(settings.output_json, summary.to_json())
    linger_for_final_scrape(settings.metrics_linger_s, metrics_url(settings.metrics_host, settings.metrics_port,
                                                               settings.metrics_tls))
    return 0


def add_stream_parser(commands) -> None:
    """`eosbench stream`: the streaming job's own flags (`streaming.job`), so that it reads as spark-submit's."""
    from streaming.job import add_stream_arguments

    stream = commands.add_parser("stream", help="the exactly-once Structured Streaming job with cached jars, on a local master, a standalone cluster or YARN")
    add_stream_arguments(stream)
    stream.add_argument("--master", help="Spark master (default: local[2,4]); with spark://… or yarn (client mode) the"
                                         " executors run the environment `eosbench package` packs")
    stream.add_argument("--yarn-state-dir", type=Path, metavar="DIR",
                        help="with --master yarn: the `eosbench yarn start` whose YARN to run on (default:"
                             " $HADOOP_CONF_DIR's YARN if set, else the one in ~/.cache/eosbench/yarn)")
    stream.add_argument("--conf", action="append", default=[], metavar="K=V",
                        help="a Spark setting, as spark-submit's --conf; repeat for more")
    stream.add_argument("--s3a-config", type=Path, metavar="FILE",
                        help="with an s3a:// --checkpoint: a properties file of S3A's fs.s3a.* settings (endpoint,"
                             " keys...), kept off the command line (default: the one `eosbench s3 start` writes,"
                             " if any)")


def cmd_stream(args: argparse.Namespace) -> int:
    """Handle `eosbench stream`: the streaming job with cached jars, on a local master or a cluster's."""
    from eosbench.local.spark import cluster_spark_conf
    from eosbench.local.kafka_admin import describe_topic
    from eosbench.local.s3 import s3a_checkpoint_session
    from eosbench.local.spark import spark_session
    from streaming import job
    from streaming.session import session_defaults

    settings = job.settings_from_args(args)
    if args.master == "yarn":
        from eosbench.local.yarn import yarn_target

        yarn_target(args.yarn_state_dir)  # no YARN: one line before the broker is asked or the archive packed
    # An s3a:// checkpoint brings hadoop-aws and its SDK, and S3A's settings from a file; the
    # user's --conf still wins over the file's.
    checkpoint_jars, checkpoint_conf = s3a_checkpoint_session(settings.checkpoint_uri, args.s3a_config)
    spark_conf = {**checkpoint_conf, **parse_kv_pairs(args.conf)}
    describe_topic(settings.connection, settings.input_topic)
    describe_topic(settings.connection, settings.output_topic)
    if settings.sink != "delta":
        _dead_letter_topic_or_refusal(settings)
    # The executors of a cluster run the packed environment, as under `eosbench package`'s line.
    spark_conf = cluster_spark_conf(args.master, spark_conf, args.yarn_state_dir)
    spark = spark_session(f"eosbench-stream-{settings.app_id}", master=args.master, conf=spark_conf,
                          defaults=session_defaults(settings), extra_jars=checkpoint_jars)
    summary = job.run(spark, settings)
    if args.report_python:
        summary.python = job.python_locations(spark)
    print(summary.to_json())
    linger_for_final_scrape(settings.metrics_linger_s, metrics_url(settings.metrics_host, settings.metrics_port,
                                                               settings.metrics_tls))
    return 0


def _dead_letter_topic_or_refusal(settings) -> None:
    """Create the stream's dead-letter topic if the principal cannot see it; if it may not create it either,
    refuse in one line that names the admin's command (which creates it with the pipeline's ACLs)."""
    from conf.failures import AuthorizationFailure
    from eosbench.local.acl_set import PipelineAccess, apply_command, client_principal
    from eosbench.local.kafka_admin import create_dead_letter_topic

    try:
        create_dead_letter_topic(settings.connection, settings.output_topic, settings.dead_letter)
    except AuthorizationFailure as exc:
        principal = client_principal(dict(settings.connection.security))
        access = PipelineAccess(settings.app_id, principal, settings.input_topic, settings.output_topic,
                                settings.dead_letter_topic)
        raise EnvironmentProblem(
            f"dead-letter topic {settings.dead_letter!r} is missing (or hidden from {principal}), and {principal} may"
            f" not create it; an admin creates it with the pipeline's ACLs: `{apply_command(access)}`") from exc


def add_verify_parser(commands) -> None:
    """`eosbench verify`."""
    verify = commands.add_parser("verify", parents=[bootstrap_flag()],
                                 help="prove no duplicate, no loss, no aborted read (JSON report, exit 1 on violation)")
    verify.add_argument("--input-topic", required=True, help="the pipeline's input: every committed record is expected")
    verify.add_argument("--output-topic", required=True, help="the pipeline's output, read read_committed")
    verify.add_argument("--app-id", help="also check that this sink group's offsets reached the input's end"
                                         " (default: not checked)")
    verify.add_argument("--dead-letter-topic", help="dead-lettered records count as delivered, if process refuses"
                                                    " their input (default: <output>.dlq)")
    verify.add_argument("--process", choices=tuple(TRANSFORMS), default=StreamSettings.model_fields["process"].default,
                        help="the transform the stream ran (its --process): each output value must be what it makes"
                             " of the input's")


def cmd_verify(args: argparse.Namespace) -> int:
    """Handle `eosbench verify`: print the JSON report; exit 1 on any violation."""
    from eosbench.local.kafka_admin import cluster_metadata, describe_topic
    from streaming.verify.verifier import verify

    bootstrap = kafka_connection(args)
    describe_topic(bootstrap, args.input_topic)
    describe_topic(bootstrap, args.output_topic)
    report = verify(bootstrap, args.input_topic, args.output_topic, args.app_id,
                    args.dead_letter_topic or f"{args.output_topic}.dlq",
                    topic_exists=lambda name: name in cluster_metadata(bootstrap).topics, process=args.process)
    print(report.to_json())
    if not report.ok:
        print(f"eosbench: verify failed: {'; '.join(report.violations)}", file=sys.stderr)
        return EXIT_CHECK_FAILED
    return 0


def add_demo_parser(commands) -> None:
    """`eosbench demo`: the quick start."""
    demo = commands.add_parser("demo", parents=[bootstrap_flag()],
                               help="the quick start: transactions in, Spark read_committed out, ids compared")
    demo.add_argument("--records", type=positive_int, default=20_000, help="records the producer sends")
    demo.add_argument("--records-per-transaction", type=positive_int, default=1_000,
                      help="records in each producer transaction")
    demo.add_argument("--transaction-abort-ratio", type=float, default=0.3,
                      help="share of producer transactions aborted, in [0.0, 1.0] (KIP-1260)")
    renamed_flag(demo, "--abort-ratio", "--transaction-abort-ratio")
    demo.add_argument("--partitions", type=positive_int, default=4, help="partitions of the input and output topics")
    demo.add_argument("--seed", type=int, default=0, help="seed of the producer's abort decisions")
    demo.add_argument("--monitor", action="store_true",
                      help="start the real Prometheus next to the broker, serve every /metrics, print the URLs")
    demo.add_argument("--hold", action="store_true",
                      help="with --monitor: keep serving the run's /metrics until Ctrl-C")


def cmd_demo(args: argparse.Namespace) -> int:
    """Handle `eosbench demo`."""
    from rich.console import Console

    from eosbench.pipeline.demo import DemoOptions, run_demo

    if not 0.0 <= args.transaction_abort_ratio <= 1.0:
        raise BadInput(f"--transaction-abort-ratio must lie in [0.0, 1.0], got {args.transaction_abort_ratio}")
    given = args.bootstrap or args.command_config  # else the demo runs (and starts) the local broker
    options = DemoOptions(bootstrap=kafka_connection(args) if given else None, records=args.records,
                          records_per_transaction=args.records_per_transaction,
                          abort_ratio=args.transaction_abort_ratio, partitions=args.partitions, seed=args.seed,
                          monitor=args.monitor)
    result = run_demo(options, Console())
    if args.monitor and args.hold:
        print("serving /metrics until Ctrl-C", file=sys.stderr)
        while True:
            time.sleep(3600)
    return 0 if result.ok else EXIT_CHECK_FAILED
