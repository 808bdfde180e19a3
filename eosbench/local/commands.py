"""The local infrastructure's commands (broker, topics, setup, prometheus, cluster, hdfs, yarn, s3), each one's arguments by its handler."""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

from conf.local_servers import (DEFAULT_CLIENT_PORT, DEFAULT_NAMENODE_PORT, DEFAULT_RESOURCEMANAGER_PORT,
                                DEFAULT_S3_PORT, ClusterSettings, HdfsSettings, S3Settings, YarnSettings)
from conf.settings import eosbench_home
from eosbench.console.arguments import OneLineArgumentParser, bootstrap_flag, kafka_connection, positive_int, state_dir_flag
from eosbench.console.errors import EXIT_CHECK_FAILED, BadInput, EnvironmentProblem


def add_broker_parser(commands) -> None:
    """`eosbench broker start|status|stop|logs`: the local Kafka cluster."""
    state_dir = state_dir_flag()
    broker = commands.add_parser("broker", help="run a real local Kafka (KRaft) cluster")
    broker_commands = broker.add_subparsers(dest="broker_command", required=True, metavar="ACTION")
    start = broker_commands.add_parser("start", parents=[state_dir], help="start the brokers and wait until transactions work")
    start.add_argument("--brokers", type=int, choices=(1, 3), default=1, help="number of nodes (default: 1)")
    start.add_argument("--port", type=int, default=DEFAULT_CLIENT_PORT, metavar="PORT",
                       help="client port of node 1; node i listens on PORT+i-1, its controller on +100, its JMX exporter on +200")
    start.add_argument("--heap-mb", type=int, default=512, metavar="MB", help="heap of each broker JVM (128-4096; 512 by default, 2048 for topics of 1,000 partitions)")
    start.add_argument("--fresh", action="store_true", help="wipe any existing cluster data first")
    start.add_argument("--security", choices=("plaintext", "sasl-ssl"), default="plaintext",
                       help="client listener: PLAINTEXT, or SASL_SSL with SCRAM-SHA-512, TLS made per cluster and"
                            " ACLs enforced (prints the admin's client.properties; default: plaintext)")
    broker_commands.add_parser("status", parents=[state_dir], help="show what is running (exit 1 unless every node is up)")
    broker_commands.add_parser("stop", parents=[state_dir], help="stop every node (idempotent)")
    logs = broker_commands.add_parser("logs", parents=[state_dir], help="print a node's server.log")
    logs.add_argument("--node", type=int, default=1, help="node id (default: 1)")
    logs.add_argument("-n", "--lines", type=positive_int, default=50, help="lines to print (default: 50)")
    logs.add_argument("-f", "--follow", action="store_true", help="keep printing as the log grows")


def cmd_broker(args: argparse.Namespace) -> int:
    """Handle `eosbench broker start|status|stop|logs`."""
    from eosbench.local.broker import LocalCluster

    if args.broker_command == "start":
        settings = ClusterSettings(brokers=args.brokers, port=args.port, state_dir=args.state_dir,
                                   heap_mb=args.heap_mb, security=args.security)
        cluster = LocalCluster(settings)
        print(f"eosbench: starting {settings.brokers} {settings.security} broker(s) from {settings.state_dir}",
              file=sys.stderr)
        seconds = cluster.start(fresh=args.fresh)
        print(f"eosbench: cluster ready in {seconds:.1f} s (transactions accepted)", file=sys.stderr)
        print(settings.bootstrap_servers)
        if cluster.client_properties is not None:
            print("eosbench: the admin's client settings (pass them with --command-config):", file=sys.stderr)
            print(cluster.client_properties)
        return 0

    cluster = LocalCluster.from_state_dir(args.state_dir)
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
    from eosbench.local.kafka_admin import cluster_metadata

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
        metadata = cluster_metadata(replace(cluster.connection, bootstrap=bootstrap))
    except EnvironmentProblem as exc:
        print(f"cluster: unreachable ({exc})")
        return EXIT_CHECK_FAILED
    registered = sorted(metadata.brokers)
    healthy = len(up) == len(nodes) and len(registered) == len(nodes)
    print(f"cluster: {'running' if healthy else 'degraded'}, {len(registered)}/{len(nodes)} brokers registered"
          f" {registered}, controller {metadata.controller_id}, {len(metadata.topics)} topics")
    print(f"bootstrap: {cluster.settings.bootstrap_servers}")
    return 0 if healthy else EXIT_CHECK_FAILED


def add_topics_parser(commands) -> None:
    """`eosbench topics create|describe|delete`."""
    bootstrap = bootstrap_flag()
    topics = commands.add_parser("topics", help="create, describe or delete topics")
    topic_commands = topics.add_subparsers(dest="topics_command", required=True, metavar="ACTION")
    create = topic_commands.add_parser("create", parents=[bootstrap], help="create a topic")
    create.add_argument("name")
    create.add_argument("--partitions", type=positive_int, default=1, help="partitions of the new topic")
    create.add_argument("--replication-factor", type=positive_int, default=1,
                        help="copies of each partition; at most the number of brokers")
    topic_commands.add_parser("describe", parents=[bootstrap], help="show partitions, leaders and ISR").add_argument("name")
    topic_commands.add_parser("delete", parents=[bootstrap], help="delete a topic").add_argument("name")


def cmd_topics(args: argparse.Namespace) -> int:
    """Handle `eosbench topics create|describe|delete`."""
    from eosbench.local import kafka_admin

    bootstrap = kafka_connection(args)
    if args.topics_command == "create":
        kafka_admin.create_topic(bootstrap, args.name, args.partitions, args.replication_factor)
        print(f"created topic {args.name} ({args.partitions} partitions, replication factor {args.replication_factor})")
    elif args.topics_command == "describe":
        print(kafka_admin.describe_topic(bootstrap, args.name).render())
    else:
        kafka_admin.delete_topics(bootstrap, [args.name])
        print(f"deleted topic {args.name}")
    return 0


def add_acls_parser(commands) -> None:
    """`eosbench acls`: the least-privilege ACLs of one pipeline, printed, or created with --apply."""
    acls = commands.add_parser(
        "acls", parents=[bootstrap_flag()], help="print (or --apply) the least-privilege ACLs of a pipeline",
        description="The ACLs one principal needs to run the whole pipeline (produce the input, stream, verify)"
                    " and nothing more, printed as kafka-acls --list prints them; --apply creates them.")
    acls.add_argument("--app-id", required=True, help="the stream's --app-id: its sink group and transactional-id prefix")
    acls.add_argument("--principal", required=True, metavar="User:NAME", help="who runs the pipeline")
    acls.add_argument("--input-topic", required=True, help="the pipeline's input")
    acls.add_argument("--output-topic", required=True, help="the pipeline's output")
    acls.add_argument("--dead-letter-topic", help="where poison records go (default: <output-topic>.dlq)")
    acls.add_argument("--producer-transactional-id", metavar="ID",
                      help="the input filler's --transactional-id (default: the prefix performance-producer-,"
                           " under which `eosbench produce` names its own)")
    acls.add_argument("--apply", action="store_true",
                      help="create them through the admin client (as the --command-config principal), and the"
                           " dead-letter topic if it is missing (shaped like the output), then list the principal's"
                           " ACLs as the cluster holds them")


def cmd_acls(args: argparse.Namespace) -> int:
    """Handle `eosbench acls`: print the set; with --apply create it (and a missing dead-letter topic), print what is held."""
    from eosbench.local.acl_set import PipelineAccess, pipeline_acls, render_acls

    try:
        access = PipelineAccess(args.app_id, args.principal, args.input_topic, args.output_topic,
                                args.dead_letter_topic, args.producer_transactional_id)
    except ValueError as exc:
        raise BadInput(str(exc)) from exc
    wanted = pipeline_acls(access)
    if not args.apply:
        print(render_acls(wanted, heading="Required"), end="")
        return 0
    from eosbench.local.kafka_admin import create_acls, create_dead_letter_topic, principal_acls

    cluster = kafka_connection(args)
    # The pipeline's principal may not create topics, and `stream` needs the dead-letter topic even
    # when no record is poisoned.
    made = create_dead_letter_topic(cluster, access.output_topic, access.dead_letter)
    if made:
        print(f"created topic {access.dead_letter} ({made[0]} partitions, replication factor {made[1]})")
    print(render_acls(wanted, heading="Adding"), end="")
    create_acls(cluster, wanted)
    held = principal_acls(cluster, access.principal)
    print(render_acls(held), end="")
    missing = sorted(set(wanted) - set(held))
    if missing:
        print(f"eosbench: {len(missing)} ACL(s) not held after --apply, first {missing[0].entry} on"
              f" {missing[0].resource}", file=sys.stderr)
        return EXIT_CHECK_FAILED
    return 0


def add_setup_parser(commands) -> None:
    """`eosbench setup [--all]`."""
    setup = commands.add_parser(
        "setup", help="check Java and Maven and resolve the demo's jars into the cache (--all: every jar)",
        description="Check Java and Maven and resolve the jars the demo runs on (Kafka, the JMX exporter, Spark's"
                    " Kafka connector and Delta) into the jar cache. Every other bundle (HDFS, YARN, S3, S3A, the"
                    " peers) is resolved by the first command that uses it, unless --all resolves it now.")
    setup.add_argument("--all", action="store_true",
                       help="resolve every bundle in conf/jars.yaml now, for a machine that will go offline")


def cmd_setup(args: argparse.Namespace) -> int:
    """Handle `eosbench setup`: check the toolchain and fill the jar cache with the demo's bundles, or every one."""
    from importlib.metadata import version

    from eosbench.local.environment import check_java, check_maven
    from eosbench.local.jars import resolve_for_setup, setup_bundle_names

    java, mvn = check_java(), check_maven()
    started = time.monotonic()
    bundles = resolve_for_setup(everything=args.all)
    print(f"java: {java}\nmaven: {mvn}")
    print(f"pyspark {version('pyspark')}, delta-spark {version('delta-spark')},"
          f" confluent-kafka {version('confluent-kafka')}")
    for name, jars in bundles.items():
        print(f"jars/{name}: {len(jars)} jars in {jars[0].parent}")
    later = [name for name in setup_bundle_names(everything=True) if name not in bundles]
    if later:
        print(f"resolved on first use (or now with `eosbench setup --all`): {', '.join(later)}")
    print(f"setup done in {time.monotonic() - started:.1f} s")
    return 0


def add_package_parser(commands) -> None:
    """`eosbench package`: the executors' Python environment and the spark-submit line that ships it."""
    from conf.local_servers import SparkClusterSettings

    package = commands.add_parser(
        "package", help="pack the executors' Python environment and print the spark-submit line that ships it",
        description="Pack the job's dependencies and eosbench's code into a relocatable venv archive (venv-pack;"
                    " cached by digest) and print, on stdout, the spark-submit line that runs the job with it:"
                    " eosbench package --master URL -- --input-topic in --output-topic out ...")
    package.add_argument("--master", default=SparkClusterSettings().master_url,
                         help="the Spark master the line submits to (default: %(default)s, `eosbench cluster start`'s)")
    package.add_argument("--conf", action="append", default=[], metavar="K=V",
                         help="a Spark setting for the line, as spark-submit's --conf; repeat for more")
    package.add_argument("job_arguments", nargs="*", metavar="JOB-ARGUMENT",
                         help="the streaming job's arguments, after `--` (the flags of `eosbench stream`)")


def cmd_package(args: argparse.Namespace) -> int:
    """Handle `eosbench package`: build or reuse the archive, print the spark-submit line."""
    import shlex

    from conf.settings import parse_kv_pairs
    from eosbench.console.arguments import OneLineArgumentParser
    from eosbench.local.executor_env import executor_environment, spark_submit_command
    from eosbench.local.jars import resolve_bundle
    from streaming.job import add_stream_arguments

    job_parser = OneLineArgumentParser(prog="eosbench package: streaming/job.py")
    add_stream_arguments(job_parser)
    job_parser.parse_args(args.job_arguments)  # bad job arguments fail here, not on the cluster
    environment = executor_environment()
    origin = "cached" if environment.built_s is None else f"built in {environment.built_s:.1f} s"
    print(f"eosbench: executors' environment {environment.archive}"
          f" ({environment.archive.stat().st_size / 1e6:.0f} MB, {origin})", file=sys.stderr)
    command = spark_submit_command(environment, args.master, resolve_bundle("spark"), args.job_arguments,
                                   parse_kv_pairs(args.conf))
    print(shlex.join(command))
    return 0


def add_prometheus_parser(commands) -> None:
    """`eosbench prometheus start|stop|status`."""
    prometheus = commands.add_parser("prometheus", help="the local Prometheus server that demo --monitor starts")
    prometheus.add_argument("action", choices=("start", "stop", "status"))


def cmd_prometheus(args: argparse.Namespace) -> int:
    """Handle `eosbench prometheus start|stop|status`."""
    from eosbench.local.prometheus_server import LocalPrometheus

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


def add_cluster_parser(commands) -> None:
    """`eosbench cluster start|stop|status`: the Spark standalone cluster."""
    cluster = commands.add_parser("cluster", help="a Spark standalone cluster on loopback (master + workers)")
    cluster.add_argument("action", choices=("start", "stop", "status"))
    cluster.add_argument("--workers", type=positive_int, default=2, help="worker daemons (default: 2)")
    cluster.add_argument("--master-port", type=int, default=7077, help="spark:// port (default: 7077)")
    cluster.add_argument("--ui-port", type=int, default=8080, help="master web UI; worker i uses +1+i (default: 8080)")
    cluster.add_argument("--spark-state-dir", type=Path, default=eosbench_home() / "spark-cluster",
                         help="pid files, logs and work folders (default: %(default)s)")


def cmd_cluster(args: argparse.Namespace) -> int:
    """Handle `eosbench cluster start|stop|status` (Spark standalone)."""
    from conf.local_servers import SparkClusterSettings
    from eosbench.local.spark_cluster import StandaloneCluster

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


def add_hdfs_parser(commands) -> None:
    """`eosbench hdfs start|status|stop`: the local HDFS (one NameNode, one DataNode)."""
    state_dir = OneLineArgumentParser(add_help=False)
    state_dir.add_argument("--hdfs-state-dir", metavar="DIR", type=Path, default=eosbench_home() / "hdfs",
                           help="configuration, storage, logs and pid files (default: %(default)s)")
    hdfs = commands.add_parser("hdfs", help="run a real local HDFS (a NameNode and a DataNode) on loopback")
    hdfs_commands = hdfs.add_subparsers(dest="hdfs_command", required=True, metavar="ACTION")
    start = hdfs_commands.add_parser("start", parents=[state_dir],
                                     help="start both daemons (formatting on first start), wait until writable,"
                                          " print the hdfs:// URI")
    start.add_argument("--port", type=int, default=DEFAULT_NAMENODE_PORT, metavar="PORT",
                       help="the NameNode's RPC port; its HTTP is on PORT+1, the DataNode's data, HTTP and IPC"
                            " ports on PORT+2..4 (default: %(default)s)")
    start.add_argument("--heap-mb", type=int, default=256, metavar="MB", help="heap of each daemon (128-1024, default: 256)")
    start.add_argument("--fresh", action="store_true", help="wipe any existing HDFS data first")
    hdfs_commands.add_parser("status", parents=[state_dir], help="show what is running (exit 1 unless writable)")
    hdfs_commands.add_parser("stop", parents=[state_dir], help="stop both daemons (idempotent)")


def cmd_hdfs(args: argparse.Namespace) -> int:
    """Handle `eosbench hdfs start|status|stop`."""
    from eosbench.local.hdfs import LocalHdfs

    if args.hdfs_command == "start":
        settings = HdfsSettings(port=args.port, heap_mb=args.heap_mb, state_dir=args.hdfs_state_dir)
        print(f"eosbench: starting HDFS from {settings.state_dir}", file=sys.stderr)
        seconds = LocalHdfs(settings).start(fresh=args.fresh)
        print(f"eosbench: HDFS ready in {seconds:.1f} s (a live DataNode, out of safe mode)", file=sys.stderr)
        print(settings.uri)
        return 0
    hdfs = LocalHdfs.from_state_dir(args.hdfs_state_dir)
    if args.hdfs_command == "stop":
        stopped = hdfs.stop() if hdfs else 0
        print(f"stopped {stopped} HDFS daemon(s)" if stopped else "no HDFS daemon running")
        return 0
    if hdfs is None:
        print(f"stopped (no HDFS was ever started from {args.hdfs_state_dir})")
        return EXIT_CHECK_FAILED
    return _print_hdfs_status(hdfs)


def _print_hdfs_status(hdfs) -> int:
    ports = hdfs.settings.ports
    for daemon in hdfs.status():
        state = "up" if daemon.pid and daemon.listening else ("starting" if daemon.pid else "down")
        print(f"{daemon.name}\t{state}\tpid {daemon.pid or '-'}\t127.0.0.1:{daemon.port}")
    view = hdfs.namenode_view()
    if view is None:
        print("hdfs: stopped" if not any(d.pid for d in hdfs.status()) else "hdfs: the NameNode does not answer")
        return EXIT_CHECK_FAILED
    writable = view.live_datanodes >= 1 and not view.safe_mode
    print(f"hdfs: {'running' if writable else 'degraded'}, {view.live_datanodes}/1 DataNode live,"
          f" safe mode {'on' if view.safe_mode else 'off'}, {view.files_and_dirs} files and folders"
          f" (metrics http://127.0.0.1:{ports.namenode_http}/jmx)")
    print(f"uri: {hdfs.uri}")
    return 0 if writable else EXIT_CHECK_FAILED


def add_yarn_parser(commands) -> None:
    """`eosbench yarn start|status|stop`: the local YARN (one ResourceManager, one NodeManager)."""
    state_dir = OneLineArgumentParser(add_help=False)
    state_dir.add_argument("--yarn-state-dir", metavar="DIR", type=Path, default=eosbench_home() / "yarn",
                           help="configuration (the HADOOP_CONF_DIR), containers' folders, logs and pid files"
                                " (default: %(default)s)")
    yarn = commands.add_parser("yarn", help="run a real local YARN (a ResourceManager and a NodeManager) on loopback")
    yarn_commands = yarn.add_subparsers(dest="yarn_command", required=True, metavar="ACTION")
    start = yarn_commands.add_parser("start", parents=[state_dir],
                                     help="start both daemons, wait until the NodeManager is registered,"
                                          " print the HADOOP_CONF_DIR")
    start.add_argument("--port", type=int, default=DEFAULT_RESOURCEMANAGER_PORT, metavar="PORT",
                       help="the ResourceManager's client port; its scheduler, tracker, admin and web ports are"
                            " PORT+1..4, the NodeManager's container, localizer and web ports PORT+5..7"
                            " (default: %(default)s)")
    start.add_argument("--heap-mb", type=int, default=384, metavar="MB", help="heap of each daemon (128-1024, default: 384)")
    start.add_argument("--node-memory-mb", type=int, default=6144, metavar="MB",
                       help="memory the NodeManager offers its containers (default: %(default)s)")
    start.add_argument("--node-vcores", type=int, default=4, metavar="N",
                       help="vcores the NodeManager offers its containers (default: %(default)s)")
    start.add_argument("--default-fs", default="file:///", metavar="URI",
                       help="fs.defaultFS of the rendered core-site.xml, e.g. the hdfs:// URI `eosbench hdfs start`"
                            " prints (default: %(default)s, enough on one host)")
    start.add_argument("--fresh", action="store_true", help="wipe any earlier state (logs, containers' folders) first")
    yarn_commands.add_parser("status", parents=[state_dir], help="show what is running (exit 1 unless usable)")
    yarn_commands.add_parser("stop", parents=[state_dir], help="stop both daemons and any container left (idempotent)")


def cmd_yarn(args: argparse.Namespace) -> int:
    """Handle `eosbench yarn start|status|stop`."""
    from eosbench.local.yarn import LocalYarn

    if args.yarn_command == "start":
        settings = YarnSettings(port=args.port, heap_mb=args.heap_mb, node_memory_mb=args.node_memory_mb,
                                node_vcores=args.node_vcores, default_fs=args.default_fs, state_dir=args.yarn_state_dir)
        print(f"eosbench: starting YARN from {settings.state_dir}", file=sys.stderr)
        seconds = LocalYarn(settings).start(fresh=args.fresh)
        print(f"eosbench: YARN ready in {seconds:.1f} s (a registered NodeManager); hand spark-submit"
              " --master yarn the HADOOP_CONF_DIR below", file=sys.stderr)
        print(settings.conf_dir)
        return 0
    yarn = LocalYarn.from_state_dir(args.yarn_state_dir)
    if args.yarn_command == "stop":
        stopped = yarn.stop() if yarn else 0
        print(f"stopped {stopped} YARN daemon(s)" if stopped else "no YARN daemon running")
        return 0
    if yarn is None:
        print(f"stopped (no YARN was ever started from {args.yarn_state_dir})")
        return EXIT_CHECK_FAILED
    return _print_yarn_status(yarn)


def _print_yarn_status(yarn) -> int:
    daemons = yarn.status()
    for daemon in daemons:
        state = "up" if daemon.pid and daemon.listening else ("starting" if daemon.pid else "down")
        print(f"{daemon.name}\t{state}\tpid {daemon.pid or '-'}\t127.0.0.1:{daemon.port}")
    view = yarn.cluster_view()
    if view is None:
        print("yarn: stopped" if not any(d.pid for d in daemons) else "yarn: the ResourceManager does not answer")
        return EXIT_CHECK_FAILED
    usable = view.active_nodes >= 1
    print(f"yarn: {'running' if usable else 'degraded'}, {view.active_nodes}/1 NodeManager active"
          f" ({view.lost_nodes} lost, {view.unhealthy_nodes} unhealthy), {view.apps_running} applications running,"
          f" {view.available_mb} MB and {view.available_vcores} vcores free"
          f" (web http://127.0.0.1:{yarn.settings.ports.resourcemanager_web})")
    print(f"HADOOP_CONF_DIR={yarn.conf_dir}")
    return 0 if usable else EXIT_CHECK_FAILED


def add_s3_parser(commands) -> None:
    """`eosbench s3 start|status|stop`: the local S3 API server (S3Proxy)."""
    state_dir = OneLineArgumentParser(add_help=False)
    state_dir.add_argument("--s3-state-dir", metavar="DIR", type=Path, default=eosbench_home() / "s3",
                           help="configuration, keys, logs and pid file (default: %(default)s)")
    s3 = commands.add_parser("s3", help="run a real local S3 API server (S3Proxy, objects on disk) on loopback")
    s3_commands = s3.add_subparsers(dest="s3_command", required=True, metavar="ACTION")
    start = s3_commands.add_parser("start", parents=[state_dir],
                                   help="start S3Proxy with generated keys, create the bucket, wait until it answers,"
                                        " print the endpoint, the bucket and the S3A settings file (never the secret)")
    start.add_argument("--port", type=int, default=DEFAULT_S3_PORT, metavar="PORT",
                       help="its HTTP port on 127.0.0.1 (default: %(default)s)")
    start.add_argument("--heap-mb", type=int, default=256, metavar="MB", help="its heap (128-1024, default: 256)")
    start.add_argument("--bucket", default=S3Settings.model_fields["bucket"].default,
                       help="the bucket to create (default: %(default)s)")
    start.add_argument("--fresh", action="store_true", help="new keys: wipe the state folder first")
    s3_commands.add_parser("status", parents=[state_dir], help="show what is running (exit 1 unless the bucket answers)")
    s3_commands.add_parser("stop", parents=[state_dir], help="stop the server (idempotent; its objects are lost)")


def cmd_s3(args: argparse.Namespace) -> int:
    """Handle `eosbench s3 start|status|stop`."""
    from eosbench.local.s3 import LocalS3

    if args.s3_command == "start":
        settings = S3Settings(port=args.port, heap_mb=args.heap_mb, bucket=args.bucket, state_dir=args.s3_state_dir)
        print(f"eosbench: starting S3Proxy from {settings.state_dir}", file=sys.stderr)
        seconds = LocalS3(settings).start(fresh=args.fresh)
        print(f"eosbench: S3 ready in {seconds:.1f} s", file=sys.stderr)
        _print_s3_where(settings)
        return 0
    s3 = LocalS3.from_state_dir(args.s3_state_dir)
    if args.s3_command == "stop":
        stopped = s3.stop() if s3 else 0
        print("stopped S3Proxy" if stopped else "no S3 server running")
        return 0
    if s3 is None:
        print(f"stopped (no S3 server was ever started from {args.s3_state_dir})")
        return EXIT_CHECK_FAILED
    status = s3.status()
    state = "up" if status.pid and status.listening else ("starting" if status.pid else "down")
    print(f"s3proxy\t{state}\tpid {status.pid or '-'}\t127.0.0.1:{s3.settings.port}")
    if not status.bucket_answers:
        print("s3: stopped" if not status.pid else f"s3: the bucket {s3.settings.bucket!r} does not answer")
        return EXIT_CHECK_FAILED
    print("s3: running")
    _print_s3_where(s3.settings)
    return 0


def _print_s3_where(settings: S3Settings) -> None:
    # The endpoint and the settings file's path only: the keys stay in that 0600 file.
    print(f"endpoint: {settings.endpoint}")
    print(f"bucket: {settings.bucket_uri}")
    print(f"s3a-config: {settings.credentials_file}")
