"""`eosbench soak`'s arguments beside its handler."""

from __future__ import annotations

import argparse
from pathlib import Path

from conf.client_config import COMMAND_CONFIG_HELP
from conf.metrics_endpoint import DEFAULT_METRICS_HOST, metrics_url
from conf.local_servers import DEFAULT_CLIENT_PORT
from conf.settings import linger_for_final_scrape, metrics_linger_seconds
from eosbench.console.arguments import duration, non_negative_int, positive_int, positive_ints, renamed_flag, state_dir_flag
from eosbench.console.errors import EXIT_CHECK_FAILED, interrupt_on_stop_signals
from eosbench.soak.faults import DEFAULT_FAULTS, FAULT_KINDS, default_faults
from eosbench.soak.options import PIPELINES, SoakOptions


def add_soak_parser(commands) -> None:
    """`eosbench soak`: the pipeline under injected faults, verified after each."""
    defaults = SoakOptions(duration_s=1, faults=())
    soak = commands.add_parser("soak", parents=[state_dir_flag()],
                               help="run producer and stream for a while, inject faults, verify after each")
    soak.add_argument("--duration", type=duration, required=True, help="how long faults are injected: 90s, 30m, 2h")
    soak.add_argument("--faults", help=f"comma-separated kinds, injected in a seeded round robin (a kind named twice"
                      " comes twice a round)"
                      f" ({', '.join(FAULT_KINDS)}; default: {','.join(DEFAULT_FAULTS)}, less the Spark-only ones"
                      " with a pipeline other than spark)")
    soak.add_argument("--pipeline", choices=PIPELINES, default="spark",
                      help="what copies input to output: the Spark job (default); Kafka's TransactionalMessageCopier,"
                           " one process per input partition (kill-driver then SIGKILLs one copier); or a peer engine,"
                           " Kafka Streams or Flink, exactly-once (kill-driver then SIGKILLs its JVM)")
    soak.add_argument("--txn-scope", choices=("partition", "slot", "batch", "auto"), default="auto",
                      help="the Spark job's transaction scope, as `eosbench stream --txn-scope` (default: %(default)s)")
    soak.add_argument("--txn-slots", type=positive_ints, default=(), metavar="G[,G…]",
                      help="slot scope's slot count, as `eosbench stream --txn-slots`; with several, each launch of"
                           " the stream draws one (seeded), so restarts change the slot map (default: the stream's)")
    soak.add_argument("--source", choices=("spark", "grouped", "auto"), default="auto",
                      help="the Spark job's Kafka source, as `eosbench stream --source` (default: %(default)s)")
    soak.add_argument("--trigger", default=defaults.trigger,
                      help="the Spark job's trigger, as `eosbench stream --trigger`: an interval, or"
                           " realtime:<interval> for real-time mode (default: %(default)s)")
    soak.add_argument("--brokers", type=int, choices=(1, 3), default=1, help="local cluster size (default: 1)")
    soak.add_argument("--port", type=int, default=DEFAULT_CLIENT_PORT, help="client port of broker node 1")
    soak.add_argument("--security", choices=("plaintext", "sasl-ssl"), default="plaintext",
                      help="the local cluster's client listener, as `broker start --security` (default: plaintext)")
    soak.add_argument("--command-config", type=Path, metavar="FILE",
                      help=f"{COMMAND_CONFIG_HELP.removesuffix(' (default: none, PLAINTEXT)')}; the producer, stream"
                           " and verifier connect with it (default: the cluster's own settings, the admin's with"
                           " --security sasl-ssl)")
    soak.add_argument("--master", default=defaults.master,
                      help="Spark master: local[2,4] (default), spark://127.0.0.1:7077 (`eosbench cluster start`)"
                           " or yarn (client mode, on a running `eosbench yarn start`)")
    soak.add_argument("--spark-state-dir", type=Path, help="with a spark:// master: the `eosbench cluster` folder"
                      " (default: ~/.cache/eosbench/spark-cluster)")
    soak.add_argument("--yarn-state-dir", type=Path, metavar="DIR",
                      help="with --master yarn: the `eosbench yarn start` whose YARN to run on (default:"
                           " $HADOOP_CONF_DIR's YARN if set, else the one in ~/.cache/eosbench/yarn)")
    soak.add_argument("--seed", type=int, default=0, help="seeds the producer and the fault order")
    soak.add_argument("--throughput", type=float, default=defaults.throughput, help="records/s the producer offers")
    soak.add_argument("--records-per-transaction", type=positive_int, default=defaults.records_per_transaction,
                      help="records in each producer transaction")
    soak.add_argument("--transaction-abort-ratio", type=float, default=defaults.abort_ratio,
                      help="share of producer transactions aborted, in [0.0, 1.0] (KIP-1260)")
    renamed_flag(soak, "--abort-ratio", "--transaction-abort-ratio")
    soak.add_argument("--partitions", type=positive_int, default=defaults.partitions,
                      help="partitions of the input and output topics")
    soak.add_argument("--gate-records", type=positive_int, default=defaults.gate_records,
                      help="input offsets the sink must commit between two faults (default: %(default)s)")
    soak.add_argument("--max-offsets-per-trigger", type=positive_int, default=defaults.max_offsets_per_trigger,
                      help="the stream's cap on each micro-batch; a higher cap catches up on a fault's backlog"
                           " in fewer, cheaper batches (default: %(default)s)")
    soak.add_argument("--delivery-timeout-ms", type=positive_int, default=defaults.delivery_timeout_ms,
                      help="the producer's delivery.timeout.ms; pause-broker stops a broker 4 s longer")
    soak.add_argument("--metrics-port", type=int, default=defaults.metrics_port,
                      help="producer /metrics; the stream uses +1 and the soak +2 (default: %(default)s)")
    soak.add_argument("--metrics-linger", type=non_negative_int, metavar="SECONDS",
                      help="keep the soak's own /metrics up this long after its report, so the final verify is"
                           " scraped (default: two scrape intervals of conf/prometheus/prometheus.yml; 0 exits at once)")
    soak.add_argument("--results-dir", type=Path, default=Path("results"),
                      help="the report, logs and checkpoint go to <DIR>/soak/<run id>")
    # The old spelling named the run's own folder; kept hidden for a release, with that meaning.
    soak.add_argument("--output-dir", type=Path, help=argparse.SUPPRESS)
    soak.add_argument("--checkpoint", metavar="URI",
                      help="the folder that holds the stream's checkpoint (checkpoint-<run id> in it): a path or a"
                           " Hadoop URI such as hdfs://127.0.0.1:8020/soak (default: the run's folder; with --hdfs,"
                           " /eosbench/soak on that HDFS)")
    soak.add_argument("--hdfs", action="store_true",
                      help="run the soak's own HDFS as `eosbench hdfs start` does (started if not running, stopped"
                           " at the end if the soak started it) and keep the checkpoint on it; needed by restart-hdfs")
    soak.add_argument("--hdfs-port", type=int, default=defaults.hdfs_port, metavar="PORT",
                      help="with --hdfs: its NameNode's RPC port, as `eosbench hdfs start --port` (default: %(default)s)")
    soak.add_argument("--hdfs-state-dir", type=Path, metavar="DIR",
                      help="with --hdfs: its folder, as `eosbench hdfs --hdfs-state-dir` (default: ~/.cache/eosbench/hdfs)")
    soak.add_argument("--s3-state-dir", type=Path, metavar="DIR",
                      help="with --checkpoint s3a://…: the local S3's folder, as `eosbench s3 --s3-state-dir` (started"
                           " if not running, stopped at the end if the soak started it; restart-s3 restarts it;"
                           " default: ~/.cache/eosbench/s3)")
    soak.add_argument("--s3a-config", type=Path, metavar="FILE",
                      help="with --checkpoint s3a://… on another store: S3A's fs.s3a.* settings, as `eosbench stream"
                           " --s3a-config` (no restart-s3 then; default: the local S3's s3a.properties)")
    soak.add_argument("--max-faults", type=positive_int,
                      help="end after this many faults, or at --duration if that comes first (default: no limit)")
    soak.add_argument("--recovery-timeout", type=positive_int, default=int(defaults.recovery_timeout_s),
                      metavar="SECONDS", help="how long a round waits for the pipeline to recover before it counts the"
                      " fault as not survived: raise it on a busy or slow cluster (default: %(default)s)")


def soak_options(args: argparse.Namespace) -> SoakOptions:
    """The soak's options as its flags give them (the kinds a pipeline cannot take left out of the default faults)."""
    if args.faults is None:
        faults, skipped = default_faults(args.pipeline)
        if skipped:
            print(f"--pipeline {args.pipeline}: skipping the Spark-only faults {', '.join(skipped)}")
    else:
        faults = tuple(k.strip() for k in args.faults.split(",") if k.strip())
    return SoakOptions(
        duration_s=args.duration, faults=faults, pipeline=args.pipeline, txn_scope=args.txn_scope, source=args.source,
        txn_slots=args.txn_slots, trigger=args.trigger,
        brokers=args.brokers, port=args.port, state_dir=args.state_dir, master=args.master,
        spark_state_dir=args.spark_state_dir, yarn_state_dir=args.yarn_state_dir, seed=args.seed,
        throughput=args.throughput, records_per_transaction=args.records_per_transaction,
        abort_ratio=args.transaction_abort_ratio, partitions=args.partitions, gate_records=args.gate_records,
        max_offsets_per_trigger=args.max_offsets_per_trigger,
        delivery_timeout_ms=args.delivery_timeout_ms, metrics_port=args.metrics_port,
        results_dir=args.results_dir, output_dir=args.output_dir,
        max_faults=args.max_faults, recovery_timeout_s=args.recovery_timeout, security=args.security,
        command_config=args.command_config, checkpoint=args.checkpoint, hdfs=args.hdfs, hdfs_port=args.hdfs_port,
        hdfs_state_dir=args.hdfs_state_dir, s3_state_dir=args.s3_state_dir, s3a_config=args.s3a_config)


def cmd_soak(args: argparse.Namespace) -> int:
    """Handle `eosbench soak`: exit 1 unless every fault was survived with zero violations."""
    from eosbench.soak.runner import Soak

    soak = Soak(soak_options(args))
    interrupt_on_stop_signals()  # a SIGTERM still stops the children and writes the report
    report = soak.run()
    print(f"soak {report.run_id}: {len(report.faults)} faults, {sum(f.survived for f in report.faults)} survived,"
          f" {report.final.get('input_committed', 0):,} records verified, {len(report.violations)} violations;"
          f" report in {soak.output_dir}")
    # The producer and stream are killed (their endpoints go with them); the soak's own carries
    # the final verify, which the verify-failure alert must see.
    linger_for_final_scrape(metrics_linger_seconds(args.metrics_port, args.metrics_linger),
                            metrics_url(DEFAULT_METRICS_HOST, args.metrics_port + 2, None))
    return 0 if report.ok else EXIT_CHECK_FAILED
