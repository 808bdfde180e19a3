"""The benchmarks' commands (`bench writes|produce|spark|latency|checkpoint|streaming|protocol|peers|recovery|sweep` and `report`), arguments by handler."""

from __future__ import annotations

import argparse
import os
import re
from pathlib import Path

from pydantic import ValidationError

from conf.client_config import COMMAND_CONFIG_HELP
from conf.local_servers import DEFAULT_CLIENT_PORT
from conf.settings import SettingsError, validation_error_line
from conf.stream_settings import INTERVAL, StreamSettings
from conf.workload_settings import DEFAULT_WORKLOAD, packaged_workloads, workload_path
from eosbench.bench.checkpoint import STORES as CHECKPOINT_STORES
from eosbench.bench.peers import ARMS as PEER_ARMS
from eosbench.bench.protocol import ENGINES as PROTOCOL_ENGINES
from eosbench.bench.recovery import ENGINES as RECOVERY_ENGINES
from eosbench.console.arguments import (bootstrap_flag, kafka_connection, non_negative_int, positive_float,
                                        positive_int, renamed_flag, state_dir_flag)
from eosbench.console.errors import BadInput, interrupt_on_stop_signals

_SPARK_MASTER = re.compile(r"local(\[[^\]]+\])?|spark://[^:/\s]+:[0-9]{1,5}|yarn")
# kafka-eos runs on librdkafka; +kafka-python and +prereg on kafka-python, without and with pre-registration.
SPARK_BENCH_SINKS = ("kafka-eos", "kafka-alo", "delta", "kafka-eos+kafka-python", "kafka-eos+prereg", "kafka-eos+batch",
                     "kafka-eos+slot", "kafka-eos+slot+input")
# The scopes (--txn-scope batch and slot, --output-partitioning input) are for the scaling runs
# (docs/benchmarks.md), not the default comparison.
SPARK_BENCH_DEFAULT_SINKS = SPARK_BENCH_SINKS[:5]


def spark_master(text: str) -> str:
    """An argument type: a local master (local, local[…]), a standalone one (spark://HOST:PORT) or yarn."""
    if not _SPARK_MASTER.fullmatch(text):
        raise argparse.ArgumentTypeError(f"must be local[N], spark://HOST:PORT or yarn, got {text!r}")
    return text


_ARM_LABEL = re.compile(r"[A-Za-z0-9._-]+")


def source_arm(text: str) -> tuple[str, tuple[str, ...]]:
    """An argument type: `LABEL:K=V[,K=V...]`, a source arm of `bench spark`, as (LABEL, ("K=V", ...)).

    The options are checked as `eosbench stream --source-options` checks them (the job's own, such
    as startingOffsets, and security settings are refused), before any input is filled.
    """
    label, colon, options = text.partition(":")
    if not colon or not _ARM_LABEL.fullmatch(label) or not options.strip():
        raise argparse.ArgumentTypeError(f"expected LABEL:K=V[,K=V...] with a LABEL of letters, digits, '.', '_' and"
                                         f" '-', got {text!r}")
    pairs = tuple(pair.strip() for pair in options.split(","))
    try:
        StreamSettings(input_topic="in", output_topic="out", source_options=pairs)
    except ValidationError as exc:
        raise argparse.ArgumentTypeError(validation_error_line(exc)) from None
    except SettingsError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return label, pairs


def add_bench_parser(commands) -> None:
    """`eosbench bench writes|produce|spark|streaming|protocol|sweep`."""
    bootstrap = bootstrap_flag()
    bench = commands.add_parser("bench", help="benchmarks that print ratios measured side by side")
    benches = bench.add_subparsers(dest="bench_command", required=True, metavar="BENCH")
    writes = benches.add_parser("writes", parents=[bootstrap],
                                help="kafka-tx-performance write benches: 2 records to 2 topics per iteration")
    writes.add_argument("--mode", choices=("base", "tx", "both"), default="both",
                        help="base: send and wait; tx: the same in a transaction (default: both, interleaved)")
    writes.add_argument("--warmup", type=positive_int, default=1000, help="warmup iterations per mode")
    writes.add_argument("--iterations", type=positive_int, default=1000, help="measured iterations per mode")
    writes.add_argument("--results-dir", type=Path, default=Path("results"), help="where the PNG and JSON go")
    renamed_flag(writes, "--output-dir", "--results-dir")

    produce = benches.add_parser("produce", parents=[bootstrap],
                                 help="eosbench produce beside Java ProducerPerformance, plus an abort sweep")
    produce.add_argument("--num-records", type=positive_int, default=1_000_000, help="records per run of each tool")
    produce.add_argument("--record-size", type=positive_int, default=100, help="record size in bytes")
    produce.add_argument("--transaction-duration-ms", type=positive_int, default=100,
                         help="transaction length of the transactional runs")
    produce.add_argument("--repeat", type=positive_int, default=3,
                         help="rounds of the whole matrix; medians are reported (default: 3)")
    produce.add_argument("--results-dir", type=Path, default=Path("results"), help="where the PNG and JSON go")
    renamed_flag(produce, "--output-dir", "--results-dir")
    produce.add_argument("--throttled-rates", type=positive_float, nargs="*", default=[500, 5000],
                         metavar="RECORDS/S", help="rates of the throttled latency pair, each tool at each"
                         " (default: 500 5000; none skips the pair)")
    produce.add_argument("--latency-only", action="store_true",
                         help="run only the throttled latency pair, not the throughput matrix and abort sweep")

    spark = benches.add_parser("spark", parents=[bootstrap],
                               help="the streaming job's sinks side by side on one pre-filled input")
    spark.add_argument("--records", type=positive_int, default=2_000_000, help="records in the pre-filled input")
    spark.add_argument("--partitions", type=positive_int, nargs="+", default=[4],
                       help="partitions of the input and outputs; several counts run one after another and"
                            " plot how each transactional sink's cost per batch grows with them (default: 4)")
    spark.add_argument("--max-offsets-per-trigger", type=positive_int, default=500_000,
                       help="cap of each micro-batch in the drain runs")
    spark.add_argument("--rounds", type=positive_int, default=2, help="rounds, sink order rotated (default: 2)")
    spark.add_argument("--trigger-seconds", type=non_negative_int, default=30,
                       help="seconds of kafka-alo and kafka-eos at a 1 s trigger per round; 0 skips them")
    spark.add_argument("--latency-seconds", type=non_negative_int, default=30, help="0 skips the latency run")
    spark.add_argument("--latency-sink", default="kafka-eos",
                       choices=[sink for sink in SPARK_BENCH_SINKS if sink.startswith("kafka-eos")],
                       help="the transactional sink the latency run times; it must be one of --sink (default:"
                            " kafka-eos, partition scope)")
    spark.add_argument("--observe-visibility", action=argparse.BooleanOptionalAction, default=True,
                       help="time each transaction's visibility in a second latency run of its own, so that its"
                            " reader, which reads every output record, costs the end-to-end figure nothing;"
                            " --no-observe-visibility skips that run")
    spark.add_argument("--sink", nargs="+", dest="sinks", default=list(SPARK_BENCH_DEFAULT_SINKS), choices=SPARK_BENCH_SINKS,
                       help="the sinks to run side by side; pre-registration on / off is kafka-eos+prereg /"
                            " kafka-eos+kafka-python, one client on both sides; kafka-eos+batch is --txn-scope batch,"
                            " kafka-eos+slot --txn-scope slot and kafka-eos+slot+input adds --output-partitioning"
                            " input (these three not in the default)")
    spark.add_argument("--source", nargs="+", dest="sources", default=["spark"], choices=("spark", "grouped", "auto"),
                       help="the Kafka sources to read with: spark grouped runs every sink the grouped source can"
                            " run (not partition scope) again as <sink>@grouped beside Spark's source, in the drain,"
                            " 1 s trigger and latency runs; auto runs every sink again as <sink>@auto, as the job's"
                            " default chooses (default: spark)")
    spark.add_argument("--source-arm", type=source_arm, nargs="+", default=[], dest="source_arms",
                       metavar="LABEL:K=V[,K=V]",
                       help="run every sink again as <sink>@LABEL, its Spark Kafka source given these options over"
                            " the job's own, beside the sinks without them in the drain, 1 s trigger and latency runs"
                            " (each arm fed the same rate), e.g. kafka-default:kafka.fetch.max.wait.ms=500 against"
                            " the job's 1 ms (default: none)")
    spark.add_argument("--master", type=spark_master,
                       help="Spark master: local[2,4] (default), spark://HOST:PORT or yarn (client mode), whose"
                            " executors run the environment `eosbench package` packs")
    spark.add_argument("--yarn-state-dir", type=Path, metavar="DIR",
                       help="with --master yarn: the `eosbench yarn start` whose YARN to run on (default:"
                            " $HADOOP_CONF_DIR's YARN if set, else the one in ~/.cache/eosbench/yarn)")
    spark.add_argument("--results-dir", type=Path, default=Path("results"),
                       help="where the JSON goes; the rows go to the Delta table <DIR>/bench_runs")
    renamed_flag(spark, "--output-dir", "--results-dir")

    latency = benches.add_parser("latency", parents=[bootstrap],
                                 help="end-to-end latency of kafka-eos in micro-batch and real-time mode and of"
                                      " Spark's own Kafka sink in real-time mode, side by side on fed inputs")
    latency.add_argument("--rates", type=positive_float, nargs="+", default=[5_000, 10_000], metavar="RECORDS/S",
                         help="offered rates, each arm at each (default: 5000 10000)")
    latency.add_argument("--seconds", type=positive_int, default=40,
                         help="seconds of each arm, its start-up included: its figures are timed from when it has"
                              " caught up with the feeder (default: 40)")
    latency.add_argument("--partitions", type=positive_int, default=4, help="input and output partitions (default: 4)")
    latency.add_argument("--commit-interval-ms", type=positive_int, default=100,
                         help="the real-time writer's commit interval (default: 100)")
    latency.add_argument("--master", type=spark_master, default="local[4]",
                         help="Spark master; real-time mode needs a task slot per partition (default: local[4])")
    latency.add_argument("--realtime-interval", default="5 seconds", metavar="INTERVAL",
                         help="the real-time arms' checkpoint interval, as in --trigger realtime:<interval> (default:"
                              " 5 seconds, Spark's least)")
    latency.add_argument("--ceiling-records", type=non_negative_int, default=0, metavar="N",
                         help="after the rates, each arm drains N records already waiting: its throughput ceiling"
                              " (default: 0, skipped)")
    latency.add_argument("--settle-load", type=positive_float, default=2.0, metavar="LOAD",
                         help="before each arm, wait (up to 3 minutes) for the 1-minute load average to fall below"
                              " this (default: 2.0)")
    latency.add_argument("--results-dir", type=Path, default=Path("results"), help="where the JSON goes")

    streaming = benches.add_parser(
        "streaming", parents=[bootstrap],
        help="EOSPerformance: poll-process-produce with the plain client, base (commitSync) and tx side by side")
    streaming.add_argument("--mode", choices=("base", "tx", "both"), default="both",
                           help="base: commitSync; tx: one transaction per unit; both: side by side")
    streaming.add_argument("--input-topic", help="read this topic (default: a new one, filled first)")
    streaming.add_argument("--output-topic", help="write here (default: <input>-<mode>, created)")
    streaming.add_argument("--consumer-config", type=Path, metavar="FILE", help="consumer .properties file (default: none)")
    streaming.add_argument("--producer-config", type=Path, metavar="FILE",
                           help="producer .properties file (librdkafka names, e.g. retry.backoff.ms; default: none)")
    streaming.add_argument("--group-id", help="consumer group (default: a new one per mode)")
    streaming.add_argument("--poll-timeout", type=positive_int, default=100, metavar="MS",
                           help="consumer poll timeout in ms (default: 100)")
    streaming.add_argument("--pre-register-partitions", action="store_true",
                           help="tx mode also runs on kafka-python with pre-registration off (tx-kafka-python) and on"
                                " (tx-prereg: every output partition and the offsets registered right after begin),"
                                " so on / off compares one client with itself")
    streaming.add_argument("--observe-visibility", action="store_true",
                           help="tx modes stamp each record with its transaction's eos.txn header, and a"
                                " read_committed reader per tx mode times commit returned to records seen (p50/p99;"
                                " off by default: the reader shares the loop's process)")
    streaming.add_argument("--records-per-transaction", type=positive_int, default=1,
                           help="records per unit (one transaction in tx mode; default: 1, the seed's)")
    streaming.add_argument("--warmup", type=int, default=100, help="units before measuring (default: 100)")
    streaming.add_argument("--iterations", type=positive_int, default=1000, help="measured units per mode")
    streaming.add_argument("--record-size", type=positive_int, default=100, help="record size in bytes")
    streaming.add_argument("--partitions", type=positive_int, default=1, help="partitions of the new input topic")
    streaming.add_argument("--results-dir", type=Path, default=Path("results"),
                           help="JSON, PNG, and the Delta results table (default: results)")

    protocol = benches.add_parser(
        "protocol", parents=[bootstrap],
        help="the transaction protocol side by side: librdkafka, kafka-python (pre-registration off and on) and"
             " Kafka's TransactionalMessageCopier at transaction.version 2 and 1, on one input per size")
    protocol.add_argument("--sizes", type=positive_int, nargs="+", default=[1, 10, 100], metavar="N",
                          help="records per transaction, one run of every engine each (the issue's: 1 10 100 1000)")
    protocol.add_argument("--transactions", type=positive_int, default=200,
                          help="transactions' worth of records in each size's input; a fifth of the filler's are"
                               " aborted, so each engine runs about 0.8 of this many")
    protocol.add_argument("--engines", nargs="+", default=list(PROTOCOL_ENGINES), choices=PROTOCOL_ENGINES,
                          metavar="ENGINE", help=f"the engines to run, of {', '.join(PROTOCOL_ENGINES)}")
    protocol.add_argument("--results-dir", type=Path, default=Path("results"), help="where the PNG and JSON go")
    protocol.add_argument("--output-json", type=Path, metavar="FILE",
                          help="write the report here (default: <results-dir>/protocol-<run id>.json)")

    checkpoint = benches.add_parser("checkpoint", parents=[bootstrap],
                                    help="the stream's checkpoint writes per batch on the local disk, HDFS and S3,"
                                         " side by side")
    checkpoint.add_argument("--records", type=positive_int, default=200_000, help="records in the pre-filled input")
    checkpoint.add_argument("--partitions", type=positive_int, default=4, help="partitions of the input and outputs")
    checkpoint.add_argument("--max-offsets-per-trigger", type=positive_int, default=5_000,
                            help="cap of each batch: the smaller, the more batches and checkpoint writes per record"
                                 " (default: %(default)s)")
    checkpoint.add_argument("--rounds", type=positive_int, default=2, help="rounds, store order rotated (default: 2)")
    checkpoint.add_argument("--stores", nargs="+", choices=CHECKPOINT_STORES, default=list(CHECKPOINT_STORES),
                            help="the stores to set side by side (default: all three)")
    checkpoint.add_argument("--hdfs-uri", metavar="URI",
                            help="the HDFS of the hdfs arm (default: the local `eosbench hdfs`'s, hdfs://127.0.0.1:8020)")
    checkpoint.add_argument("--s3-bucket", metavar="URI",
                            help="the bucket of the s3 arm, s3a://NAME (default: the local `eosbench s3`'s, s3a://eosbench)")
    checkpoint.add_argument("--s3a-config", type=Path, metavar="FILE",
                            help="S3A's fs.s3a.* settings for the s3 arm, as `eosbench stream --s3a-config`"
                                 " (default: the local `eosbench s3`'s file)")
    checkpoint.add_argument("--results-dir", type=Path, default=Path("results"), help="where the PNG and JSON go")

    peers = benches.add_parser("peers", parents=[bootstrap],
                               help="the Spark job beside Kafka Streams and Flink, exactly-once and at-least-once,"
                                    " each draining the same input in a process of its own")
    peers.add_argument("--records", type=positive_int, default=400_000,
                       help="records produced into each input, 100 B each (default: %(default)s)")
    peers.add_argument("--partitions", type=positive_int, nargs="+", default=[4, 64, 256],
                       help="one input per partition count (default: 4 64 256)")
    peers.add_argument("--arms", nargs="+", choices=PEER_ARMS, default=list(PEER_ARMS),
                       help="what drains each input (default: all six)")
    peers.add_argument("--rounds", type=positive_int, default=3, help="rounds, arm order rotated (default: 3)")
    peers.add_argument("--transaction-abort-ratio", type=float, default=0.1,
                       help="share of the input's transactions aborted (default: %(default)s)")
    peers.add_argument("--threads", type=positive_int, default=os.cpu_count() or 2,
                       help="Kafka Streams' stream threads and Flink's parallelism (default: the cores, %(default)s)")
    peers.add_argument("--results-dir", type=Path, default=Path("results"), help="where the JSON goes")
    peers.add_argument("--live", type=positive_float, metavar="RECORDS/S",
                       help="instead of drains, feed each arm a new input at this rate for --live-seconds and time"
                            " its end-to-end latency as `bench latency` does (p50, p99; default: drains)")
    peers.add_argument("--live-seconds", type=positive_int, default=60,
                       help="how long each arm runs with --live, its start-up included (default: %(default)s)")

    recovery = benches.add_parser("recovery", parents=[state_dir_flag()],
                                  help="the Spark job, Kafka Streams and Flink each SIGKILLed while fed live and"
                                       " relaunched: time to the first commit and to 90 %% throughput, verified")
    recovery.add_argument("--engines", nargs="+", choices=RECOVERY_ENGINES, default=list(RECOVERY_ENGINES),
                          help="what is killed, one after the other (default: all three)")
    recovery.add_argument("--rounds", type=positive_int, default=5, help="kills of each engine (default: %(default)s)")
    recovery.add_argument("--partitions", type=positive_int, default=16, help="input partitions (default: %(default)s)")
    recovery.add_argument("--rate", type=positive_float, default=5_000.0,
                          help="records/s the producer feeds in (default: %(default)s)")
    recovery.add_argument("--port", type=int, default=DEFAULT_CLIENT_PORT,
                          help="client port of the local broker, started if it is not running (default: %(default)s)")
    recovery.add_argument("--results-dir", type=Path, default=Path("results"),
                          help="each engine's soak report and recovery.json go to <DIR>/recovery/<run>")

    sweep = benches.add_parser("sweep", help="a grid from a workload file, every sink side by side; rows to Delta")
    sweep.add_argument("--workload", type=workload_path, default=DEFAULT_WORKLOAD, metavar="NAME|FILE",
                       help=f"a workload file, or the name of one that ships with eosbench"
                            f" ({', '.join(packaged_workloads())}; default: %(default)s)")
    sweep.add_argument("--bootstrap-server", dest="bootstrap", metavar="HOST:PORT",
                       help="use this cluster instead of starting one per broker count (default: start them)")
    sweep.add_argument("--command-config", type=Path, metavar="FILE", help=COMMAND_CONFIG_HELP)
    sweep.add_argument("--port", type=int, default=9500, help="client port of the sweep's own clusters")
    sweep.add_argument("--results-dir", type=Path, default=Path("results"),
                       help="the Delta results table goes to <DIR>/bench_runs")


def cmd_bench(args: argparse.Namespace) -> int:
    """Handle `eosbench bench writes|produce|streaming|spark|latency|checkpoint|protocol|peers|recovery|sweep`."""
    # A SIGTERM runs every bench's clean-up as Ctrl-C does: a sweep stops its brokers and keeps its
    # finished rows, protocol puts transaction.version back, and spark and latency kill their feeders
    # (a bench stopped by SIGTERM used to leave its feeding producer running).
    interrupt_on_stop_signals()
    # --command-config is read once, here; a sweep without --bootstrap-server runs its own clusters,
    # and recovery runs on the local broker its soaks start (or find running).
    runs_own_cluster = args.bench_command == "recovery" or (args.bench_command == "sweep" and not args.bootstrap)
    bootstrap = None if runs_own_cluster else kafka_connection(args)
    if args.bench_command == "writes":
        from eosbench.bench import writes

        modes = ["base", "tx"] if args.mode == "both" else [args.mode]
        writes.run(bootstrap, modes, args.warmup, args.iterations, args.results_dir)
    elif args.bench_command == "streaming":
        from eosbench.bench import streaming

        streaming.run(bootstrap, args)
    elif args.bench_command == "sweep":
        from conf.workload_settings import load_workload
        from eosbench.bench.sweep import run_sweep

        if args.command_config and not args.bootstrap:
            raise BadInput("--command-config needs --bootstrap-server: without it the sweep runs its own PLAINTEXT"
                           " clusters")
        run_sweep(load_workload(args.workload), args.workload.stem, args.results_dir, bootstrap, args.port)
    elif args.bench_command == "peers":
        from eosbench.bench import peers, peers_live

        if not 0.0 <= args.transaction_abort_ratio < 1.0:
            raise BadInput(f"--transaction-abort-ratio must be in [0.0, 1.0), got {args.transaction_abort_ratio}")
        if args.live:
            peers_live.run_live(bootstrap, args.live, args.live_seconds, sorted(set(args.partitions)),
                           list(dict.fromkeys(args.arms)), args.results_dir, args.threads)
        else:
            peers.run(bootstrap, args.records, sorted(set(args.partitions)), args.rounds,
                      list(dict.fromkeys(args.arms)), args.transaction_abort_ratio, args.results_dir, args.threads)
    elif args.bench_command == "recovery":
        from eosbench.bench import recovery

        recovery.run(list(dict.fromkeys(args.engines)), args.rounds, args.partitions, args.rate, args.port,
                     args.state_dir, args.results_dir)
    elif args.bench_command == "protocol":
        from conf.settings import output_file_problem
        from eosbench.bench import protocol

        if args.output_json is not None and (problem := output_file_problem(args.output_json)):
            raise BadInput(f"--output-json {args.output_json}: {problem}")
        protocol.run(bootstrap, sorted(set(args.sizes)), args.transactions, args.engines, args.results_dir,
                     args.output_json)
    elif args.bench_command == "checkpoint":
        from eosbench.bench import checkpoint

        if args.s3_bucket and not args.s3_bucket.startswith("s3a://"):
            raise BadInput(f"--s3-bucket must be an s3a:// URI, got {args.s3_bucket!r}")
        checkpoint.run(bootstrap, args.records, args.partitions, args.max_offsets_per_trigger, args.rounds,
                       list(dict.fromkeys(args.stores)), args.results_dir, args.hdfs_uri, args.s3_bucket, args.s3a_config)
    elif args.bench_command == "latency":
        from eosbench.bench import latency

        if args.master == "yarn":  # its sessions ship no archive: YARN's executors would lack eosbench
            raise BadInput("bench latency runs on local[N] or spark://HOST:PORT; --master yarn is for bench spark"
                           " and stream")
        if not INTERVAL.match(args.realtime_interval.strip()):
            raise BadInput(f"--realtime-interval must be an interval such as '5 seconds', got {args.realtime_interval!r}")
        latency.run(bootstrap, args.rates, args.seconds, args.partitions, args.commit_interval_ms, args.master,
                    args.results_dir, args.settle_load, args.ceiling_records, args.realtime_interval)
    elif args.bench_command == "spark":
        from eosbench.bench import spark, spark_figures

        if args.master == "yarn":
            from eosbench.local.yarn import yarn_target

            yarn_target(args.yarn_state_dir)  # no YARN: one line before the input is filled
        if args.latency_seconds and args.latency_sink not in args.sinks:
            raise BadInput(f"--latency-sink {args.latency_sink}: not among --sink ({' '.join(args.sinks)}); add it,"
                           " or skip the latency run with --latency-seconds 0")
        labels = [label for label, _ in args.source_arms]
        if len(set(labels)) < len(labels):
            raise BadInput(f"--source-arm: each LABEL once, got {' '.join(labels)}")
        if "spark" not in args.sources:
            raise BadInput("--source: bench spark measures the grouped source beside Spark's; give --source spark"
                           " grouped")
        for taken in set(spark.SOURCE_ARMS) & set(labels):
            raise BadInput(f"--source-arm {taken}: that label is --source {taken}'s arm; name it otherwise")
        args.source_arms += [(label, ()) for label in spark.SOURCE_ARMS if label in args.sources]

        reports = [spark.run(bootstrap, args.records, partitions, args.max_offsets_per_trigger, args.rounds,
                             args.latency_seconds, args.sinks, args.results_dir, args.trigger_seconds, args.master,
                             most_partitions=max(args.partitions), observe_visibility=args.observe_visibility,
                             yarn_state_dir=args.yarn_state_dir, source_arms=dict(args.source_arms),
                             latency_variant=args.latency_sink)
                   for partitions in sorted(set(args.partitions))]
        if len(reports) > 1:
            print(f"plot: {spark_figures.plot_scaling(reports, args.results_dir)}")
            print(f"plot: {spark_figures.plot_throughput(reports, args.results_dir)}")
            print("\n".join(spark_figures.scaling_table(reports)))
    else:
        from eosbench.bench import produce

        if args.latency_only and not args.throttled_rates:
            raise BadInput("--latency-only needs at least one --throttled-rates rate")
        produce.run(bootstrap, args.num_records, args.record_size, args.transaction_duration_ms,
                    args.repeat, args.results_dir, tuple(args.throttled_rates), args.latency_only)
    return 0


def add_report_parser(commands) -> None:
    """`eosbench report`."""
    report = commands.add_parser("report", help="plots and a Markdown summary from the Delta results table")
    report.add_argument("--results-dir", type=Path, default=Path("results"),
                        help="the folder `bench sweep` wrote its results table to; plots go to <DIR>/plots")
    report.add_argument("--run-id", help="the sweep or `bench peers` run to report (default: the newest sweep)")


def cmd_report(args: argparse.Namespace) -> int:
    """Handle `eosbench report`: plots and summary of a sweep (or a `bench peers` run) from the results table."""
    from eosbench.bench import results
    from eosbench.bench.report import write_report
    from eosbench.local.spark import spark_session

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
