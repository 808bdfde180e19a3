"""`eosbench soak` against real brokers and real Spark: faults of every kind, zero violations.

Each soak runs its own cluster in a temp folder (a broker fault must not touch the session's
broker) on ports of its own, through the command line, and is judged from its JSON report.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from conf.local_servers import ClusterSettings, HdfsSettings, SparkClusterSettings
from conf.stream_settings import StreamSettings
from eosbench.local.broker import LocalCluster
from eosbench.local.executor_env import ARCHIVE_NAME
from eosbench.local.hadoop_fs import fs_shell
from eosbench.local.hdfs import LocalHdfs
from eosbench.local.prometheus_server import LocalPrometheus
from eosbench.local.s3 import LocalS3
from eosbench.local.spark_cluster import StandaloneCluster
from eosbench.local.yarn import LocalYarn, application_of
from producers.resume import find_resume_point
from tests.integration.dashboard_queries import assert_plausible, dashboard_queries
from tests.integration.produce_helpers import produce
from tests.integration.stream_checks import assert_exactly_once
from tests.unit.test_cli_errors import run_eosbench

# The background scenarios of the overlapped tests (conftest.py) run beside the soaks, which they slow
# a little, rather than beside the timed tests before them.
pytestmark = pytest.mark.usefixtures("overlapped_scenarios")

SOAK_BROKER_PORT = 29092
SOAK_METRICS_PORT = 19600
SOAK_PROMETHEUS_PORT = 19690
SPARK_MASTER_PORT, SPARK_UI_PORT = 17077, 18080
SOAK_HDFS_PORT = 29020  # its NameNode; 29021-29024 its HTTP and DataNode ports
REALTIME_FAULTS = ("kill-broker", "kill-driver", "pause-broker", "delete-checkpoint")
CLUSTER_FAULTS = ("kill-worker", "kill-executor", "restart-hdfs", "zombie-executor", "add-partitions")
YARN_S3_FAULTS = ("kill-container", "restart-nodemanager", "restart-s3")
PEER_FAULTS = ("kill-driver", "kill-broker", "pause-broker", "restart-producer")
# Each soak here ends after its --max-faults rounds, which on a quiet machine take 2-4 minutes.
# The clock only bounds a run that hangs: at a load of 30 to 50 (a fresh clone's suite beside a
# two-hour soak and three test runs) a driver restart took 230 s and one round filled the whole
# 8 minutes a soak was once given, so the soaks failed for the machine's speed, not the pipeline's.
SOAK_BOUND, SOAK_TIMEOUT_S, SOAK_RECOVERY_TIMEOUT_S = "40m", 2700, 600


def run_soak(tmp_path: Path, *flags: str, keep_broker: bool = False, state: Path | None = None) -> dict:
    """Run `eosbench soak` (ended by its --max-faults) in its own cluster folder, stop that cluster, return the report.

    `keep_broker`: the caller started the soak's broker (`soak_broker`), which the soak then
    leaves running, and stops it itself. `state`: that cluster's folder (default <tmp_path>/cluster).
    """
    state = state or tmp_path / "cluster"
    assert "--max-faults" in flags, "a CI soak ends by its count of faults, never by the clock"
    try:
        completed = run_eosbench("soak", "--duration", SOAK_BOUND, "--recovery-timeout", str(SOAK_RECOVERY_TIMEOUT_S),
                                 "--state-dir", str(state), "--port", str(SOAK_BROKER_PORT),
                                 "--metrics-port", str(SOAK_METRICS_PORT), "--output-dir", str(tmp_path / "report"),
                                 *flags, timeout=SOAK_TIMEOUT_S)
    finally:
        if not keep_broker:
            run_eosbench("broker", "stop", "--state-dir", str(state), timeout=120)
    report_file = tmp_path / "report" / "report.json"
    assert report_file.exists(), completed.stdout[-3000:] + completed.stderr[-2000:]
    report = json.loads(report_file.read_text())
    assert completed.returncode == (0 if report["ok"] else 1), completed.stderr[-2000:]
    return report


def soak_broker(tmp_path: Path) -> LocalCluster:
    """The one plaintext broker that `run_soak` would start, in its folder, for a test to start before the soak."""
    return LocalCluster(ClusterSettings(port=SOAK_BROKER_PORT, state_dir=tmp_path / "cluster"))


def side_by_side(*calls: Callable[[], object]) -> None:
    """Run the calls at once and wait for all of them; the first failure is raised."""
    with ThreadPoolExecutor(len(calls)) as running:
        for done in [running.submit(call) for call in calls]:
            done.result()


def highest_in_the_last_10_minutes(prometheus: LocalPrometheus, expr: str) -> list[dict]:
    """Each series' highest value of the last 10 minutes: the soak's processes have exited, and
    their series have gone stale, by the time it is asked."""
    return prometheus.query(f"max_over_time(({expr})[10m:1s])")


def assert_clean(report: dict, tmp_path: Path, matched_by_key: bool = False, visibility_logged: bool = True,
                 transactions_declared: bool = True) -> None:
    """Zero violations, every fault survived, and the final verify saw every committed record once.

    `matched_by_key`: the output carries no eos headers (Kafka's copier), so the verify met it by
    key, judged no transaction whole, and there is no stream visibility log. `visibility_logged`:
    False where nothing times the commits' visibility (real-time mode, whose commits the observer
    does not time, and the peers, which write no visibility log). `transactions_declared`: False where
    the output declares no transaction's size, so none is judged whole (the peers write no eos.txn).
    """
    assert report["violations"] == [], report["violations"]
    assert [f["kind"] for f in report["faults"] if not f["survived"]] == []
    final = report["final"]
    assert final["ok"] and final["duplicates"] == final["lost"] == final["aborted_reads"] == 0
    assert final["input_committed"] == final["output_committed"] + final["dead_lettered"] > 0
    assert final["input_aborted"] > 0, "the producer's aborted transactions must be in the input"
    assert final["hanging_partitions"] == [] and final["group_offset_mismatches"] == []
    assert final["key_surplus"] == final["key_deficit"] == final["unexpected"] == 0
    assert final["match_by"] == ("key" if matched_by_key else "source")
    if matched_by_key:
        assert final["torn"] == final["reordered"] == final["transactions_checked"] == 0
    else:
        assert final["torn"] == final["reordered"] == 0 and (final["transactions_checked"] > 0) == transactions_declared
    if not matched_by_key and visibility_logged:
        seen = report["visibility"]["all"]  # the stream's visibility log, over every launch
        assert seen["samples"] > 0 and 0 <= seen["p50_ms"] <= seen["p99_ms"] <= seen["max_ms"]
    for fault in report["faults"]:
        assert fault["records_checked"] > 0 and fault["violations"] == []
    for name in ("report.json", "report.md", "timeline.png"):
        assert (tmp_path / "report" / name).stat().st_size > 0
    assert report["timeline"][-1][1] >= final["input_committed"]


def assert_three_nodes_started(started: subprocess.CompletedProcess, state: list[str]) -> None:
    """`eosbench broker start --brokers 3` printed the bootstrap servers and the admin's settings,
    `status` says all three are up, a second start is a no-op and a start of another shape is refused."""
    assert started.returncode == 0, started.stderr
    nodes = ",".join(f"127.0.0.1:{SOAK_BROKER_PORT + i}" for i in range(3))
    assert started.stdout.splitlines() == [nodes, f"{state[1]}/security/client.properties"]
    status = run_eosbench("broker", "status", *state)
    assert status.returncode == 0, status.stdout
    assert [line.split("\t")[1] for line in status.stdout.splitlines() if line.startswith("node ")] == ["up"] * 3
    assert "cluster: running, 3/3 brokers registered [1, 2, 3]" in status.stdout
    again = run_eosbench("broker", "start", "--brokers", "3", "--security", "sasl-ssl", "--port",
                         str(SOAK_BROKER_PORT), *state)
    assert again.returncode == 0 and again.stdout == started.stdout, "start on a running cluster is a no-op"
    other_shape = run_eosbench("broker", "start", "--brokers", "1", "--port", str(SOAK_BROKER_PORT), *state)
    assert other_shape.returncode == 2 and "run `eosbench broker stop` first" in other_shape.stderr


def test_realtime_mode_on_three_sasl_ssl_brokers_survives_every_local_fault_kind_and_its_dashboard_reads_it(tmp_path):
    # One soak for two setups, to keep the suite's soaks few: real-time mode (its writer's commits
    # every 100 ms, 5 s epochs) on the soak's own three-broker cluster with a SCRAM-SHA-512 SASL_SSL
    # listener and StandardAuthorizer. The producer, the stream (its Spark source, the writer's
    # producers), the progress sampler and every verify connect with the admin's client.properties.
    # A broker kill fails the writer's transactions mid-flight, a driver kill replays an epoch, the
    # coordinator's leader paused for 12 s outlasts the writer's 10 s transaction timeout (so the
    # coordinator aborts the transaction in flight when it wakes) and a deleted checkpoint resumes
    # from the group's offsets; the producer's restart is the copier soak's. Faults by count, not
    # by time: the ISR gate before a broker fault waits for a restarted broker to catch up, which a
    # slow machine takes long over. The real Prometheus scrapes it throughout, so the soak dashboard is proven on a
    # soak. kill-executor, which a local real-time job has no process for, is the standalone soak's;
    # the broker faults are this soak's alone (micro-batch mode meets them in docs/soak.md's long
    # soaks), which keeps the two cluster soaks to the kinds only their setups have.
    prometheus = LocalPrometheus(tmp_path / "prometheus", port=SOAK_PROMETHEUS_PORT, interval="1s", targets={
        "eosbench-producer": SOAK_METRICS_PORT, "eosbench-stream": SOAK_METRICS_PORT + 1,
        "eosbench-soak": SOAK_METRICS_PORT + 2})
    # The soak serves no metrics before its three brokers are up: Prometheus starts meanwhile. The
    # brokers are started (and stopped) through `eosbench broker`, whose three-node start, status
    # and stop this checks on the way (the soak leaves running a cluster it did not start).
    starting = ThreadPoolExecutor(1)
    prometheus_up = starting.submit(prometheus.start)
    starting.shutdown(wait=False)  # the start already submitted runs on
    state = ["--state-dir", str(tmp_path / "cluster")]
    try:
        started = run_eosbench("broker", "start", "--brokers", "3", "--security", "sasl-ssl", "--port",
                               str(SOAK_BROKER_PORT), *state, timeout=240)
        assert_three_nodes_started(started, state)
        report = run_soak(tmp_path, "--brokers", "3", "--security", "sasl-ssl", "--trigger", "realtime:5 seconds",
                          "--partitions", "2", "--faults", ",".join(REALTIME_FAULTS), "--gate-records", "200",
                          "--max-faults", str(len(REALTIME_FAULTS)), "--metrics-linger", "2", keep_broker=True)
        prometheus_up.result()
        for board, title, expr in dashboard_queries("soak.json"):
            assert_plausible(highest_in_the_last_10_minutes(prometheus, expr), f"{board} / {title}: {expr}")
        injected = highest_in_the_last_10_minutes(
            prometheus, "max by (kind) (eosbench_soak_fault_injected_timestamp_seconds)")
        assert {series["metric"]["kind"] for series in injected} == {fault["kind"] for fault in report["faults"]}
        faults = highest_in_the_last_10_minutes(prometheus, "sum(eosbench_soak_faults_total)")
        assert [float(series["value"][1]) for series in faults] == [len(report["faults"])]
        committed = highest_in_the_last_10_minutes(prometheus, "eosbench_soak_committed_offsets_total")
        assert [float(series["value"][1]) for series in committed] == [report["timeline"][-1][1]]
        # The gauge's old name, kept one release by a recording rule, still answers the same.
        renamed = highest_in_the_last_10_minutes(prometheus, "eosbench_soak_committed_offsets")
        assert [float(series["value"][1]) for series in renamed] == [report["timeline"][-1][1]]
        assert prometheus.query('ALERTS{alertname="EosbenchVerifyFailed"}[10m]') == []
    finally:
        prometheus_up.exception()  # a start still under way would leave its server behind the stop
        prometheus.stop()
        stopped = run_eosbench("broker", "stop", *state, timeout=120)
    assert stopped.returncode == 0 and stopped.stdout.strip() == "stopped 3 broker(s)"
    assert run_eosbench("broker", "stop", *state).stdout.strip() == "no broker running"
    after = run_eosbench("broker", "status", *state)
    assert after.returncode == 1
    assert [line.split("\t")[1] for line in after.stdout.splitlines() if line.startswith("node ")] == ["down"] * 3
    assert_clean(report, tmp_path, visibility_logged=False)
    assert sorted(fault["kind"] for fault in report["faults"]) == sorted(REALTIME_FAULTS)
    recovered = {kind: entry["recovery_median_s"] for kind, entry in report["by_kind"].items()}
    assert all(seconds is not None and seconds > 0 for seconds in recovered.values()), recovered
    assert all(fault["detail"].startswith("SIGKILL broker node") for fault in report["faults"]
               if fault["kind"] == "kill-broker"), report["faults"]
    paused = next(fault for fault in report["faults"] if fault["kind"] == "pause-broker")
    assert " for 12 s " in paused["detail"] and int(report["options"]["delivery_timeout_ms"]) + 2000 < 12_000
    markdown = (tmp_path / "report" / "report.md").read_text()
    assert markdown.startswith(f"# Soak {report['run_id']}: PASSED")


def test_kafkas_copier_survives_a_copier_kill_and_a_producer_restart(tmp_path):
    # The reference pipeline of Kafka's transactions system test, one copier per input partition,
    # under the faults that apply to it; its output meets the input by key (no eos headers).
    # Two partitions (two copier JVMs) at 200 records/s take under 3 minutes on the shared
    # two-core machine; --max-faults ends it, and --duration only bounds a slow run. The end
    # SIGKILLs and fences the producer, so its open transaction is aborted and the copiers' groups
    # stop before that aborted tail, which the drain and the final verify must accept.
    faults = ("kill-driver", "restart-producer")
    report = run_soak(tmp_path, "--pipeline", "java-copier", "--faults", ",".join(faults), "--partitions", "2",
                      "--throughput", "200", "--records-per-transaction", "100", "--gate-records", "200",
                      "--max-faults", str(len(faults)), "--metrics-linger", "0")
    assert_clean(report, tmp_path, matched_by_key=True)
    assert [fault["kind"] for fault in report["faults"]] == list(faults)  # the seeded round robin's order
    killed, restarted = (fault["detail"] for fault in report["faults"])
    assert re.fullmatch(r"SIGKILL copier-0 pid \d+; restarted from its group's committed offset", killed), killed
    assert re.fullmatch(r"SIGKILL producer pid \d+; restarted with --resume", restarted), restarted
    assert report["options"]["pipeline"] == "java-copier"
    assert "output matched to input by key" in (tmp_path / "report" / "report.md").read_text()


def test_kafka_streams_and_flink_survive_the_faults_a_peer_meets_on_three_brokers(tmp_path):
    # The peers Spark is weighed against (eosbench/local/peers.py), each exactly-once under the
    # faults that apply to an engine of its own: its JVM SIGKILLed and relaunched (Kafka Streams
    # takes its static members' places and fences their transactional ids, Flink resumes from its
    # newest retained checkpoint), a broker killed and one paused past the producer's delivery
    # timeout, the producer restarted. Three brokers, one cluster for both soaks: on a single
    # combined node a killed broker's partitions fall leaderless when its old incarnation's session
    # ends, and Kafka drops the markers of a transaction it aborts in that moment (docs/soak.md), a
    # violation of the broker's, not of the pipeline under test.
    cluster = LocalCluster(ClusterSettings(brokers=3, port=SOAK_BROKER_PORT, state_dir=tmp_path / "cluster"))
    cluster.start()
    try:
        for engine, resumes in (("kafka-streams", "its group's committed offsets"),
                                ("flink", "its newest retained checkpoint")):
            report = run_soak(tmp_path / engine, "--pipeline", engine, "--brokers", "3", "--faults", ",".join(PEER_FAULTS),
                              "--partitions", "2", "--gate-records", "200", "--max-faults", str(len(PEER_FAULTS)),
                              # The seeded producer's: pause-broker outlasts it by 4 s, an 8 s pause instead of 12.
                              "--delivery-timeout-ms", "4000",
                              "--metrics-linger", "0", keep_broker=True,
                              state=cluster.settings.state_dir)
            assert_clean(report, tmp_path / engine, visibility_logged=False, transactions_declared=False)
            assert sorted(fault["kind"] for fault in report["faults"]) == sorted(PEER_FAULTS)
            killed = next(fault for fault in report["faults"] if fault["kind"] == "kill-driver")
            assert re.fullmatch(rf"SIGKILL {engine} pid \d+; restarted from {resumes}", killed["detail"]), killed
            assert all(fault["first_commit_s"] is not None and 0 < fault["first_commit_s"] <= fault["recovery_s"]
                       for fault in report["faults"]), report["faults"]
            assert report["options"]["pipeline"] == engine and report["restarts"].get(engine) is None
    finally:
        cluster.stop()


@pytest.mark.heavy
def test_slot_scope_on_spark_standalone_with_its_checkpoint_on_hdfs_survives_worker_executor_and_namenode_kills(tmp_path):
    # The cluster setup: executors on a standalone cluster and the checkpoint on a real
    # HDFS, with one round of each fault only this setup has, and the input grown mid-run. The
    # other kinds are the local soaks' above: with them too (eight rounds, three of them driver
    # restarts) a round took 1.5 to 3 minutes on the loaded two-core machine, far past the five
    # minutes CI can give.
    spark_state, hdfs_state = tmp_path / "spark", tmp_path / "hdfs"
    cluster = StandaloneCluster(SparkClusterSettings(master_port=SPARK_MASTER_PORT, master_ui_port=SPARK_UI_PORT,
                                                     state_dir=spark_state))
    # Started here, not by the soak, so that it outlives the soak and its checkpoint can be looked at.
    hdfs = LocalHdfs(HdfsSettings(port=SOAK_HDFS_PORT, state_dir=hdfs_state))
    side_by_side(cluster.start, hdfs.start)  # two sets of JVM daemons, each waited for alone: their start-ups overlap
    try:
        report = run_soak(tmp_path, "--master", cluster.settings.master_url, "--spark-state-dir", str(spark_state),
                          "--hdfs", "--hdfs-port", str(SOAK_HDFS_PORT), "--hdfs-state-dir", str(hdfs_state),
                          "--faults", ",".join(CLUSTER_FAULTS), "--gate-records", "200", "--txn-scope", "slot",
                          "--source", "grouped", "--max-faults", str(len(CLUSTER_FAULTS)), "--metrics-linger", "0")
        assert cluster.master_state()["completedapps"] or cluster.master_state()["activeapps"]
        checkpoint = f"{hdfs.uri}/eosbench/soak/checkpoint-{report['run_id']}"
        listed = fs_shell("-ls", "-C", checkpoint).stdout.split()
    finally:
        side_by_side(cluster.stop, hdfs.stop)
    assert_clean(report, tmp_path)
    assert report["options"]["txn_scope"] == "slot", "slot scope holds through an executor's and a worker's kill"
    # On the grouped source: Spark's source keeps slot scope proven by the YARN soak and test_slot_scope.py.
    assert report["options"]["source"] == "grouped"
    assert sorted(listed) == [f"{checkpoint}/{entry}" for entry in ("commits", "metadata", "offsets", "sources")]
    details = {fault["kind"]: fault["detail"] for fault in report["faults"]}
    assert sorted(details) == sorted(CLUSTER_FAULTS), [f["kind"] for f in report["faults"]]
    assert details["restart-hdfs"].startswith("SIGKILL HDFS NameNode pid"), details
    # The NameNode's kill fails the query's next checkpoint write; the job's last words say so in one line.
    stream_exits = [died for died in report["exits"] if died["process"] == "stream"]
    assert stream_exits and all(died["exit_code"] == 3 and died["last_line"].startswith(
        "streaming/job.py: error: the streaming query failed: ") for died in stream_exits), stream_exits
    assert details["kill-worker"].startswith("SIGKILL Spark worker-"), details
    # The grouped source's slot map takes the new partitions in, and the final verify above covers their records.
    assert re.fullmatch(r"grew \S+ from 4 to 6 partitions; the sink committed records of each new one \d+ s later",
                        details["add-partitions"]), details
    # Each kind's first round; an executor JVM on even rounds, a Python worker on odd ones.
    assert details["kill-executor"].startswith("SIGKILL executor JVM pid"), details
    # The paused task's Python worker wakes after the new driver committed, and the fences hold (verify above).
    assert re.fullmatch(r"SIGSTOP Python worker pid \d+ in a transaction, its daemon pid \d+, executor JVM pid \d+ and"
                        r" Spark worker pid \d+; SIGKILL driver pid \d+, restarted; SIGCONT the Python worker alone"
                        r" \d+ s later, after the new driver's first commit of every partition; (it ended within 10 s"
                        r"|SIGKILL 10 s later[^;]*); the Spark worker woken after", details["zombie-executor"]), details


@pytest.mark.heavy
def test_slot_scope_on_yarn_with_its_checkpoint_on_s3_survives_container_nodemanager_and_s3_restarts(
        tmp_path, yarn_cluster, s3_server):
    # The YARN setup: the stream under `spark-submit --master yarn` (client mode) on the session's
    # YARN, slot scope, its checkpoint on the session's S3 through S3A, with one round of each kind
    # only this setup has. The other kinds run in the soaks above (a driver restart costs YARN a new
    # application, and a broker pause here cost the suite about 40 s).
    # Its broker is started here, so that the soak leaves it running for the restart after it,
    # which would otherwise start it again (about 10 s).
    broker = soak_broker(tmp_path)
    broker.start()
    try:
        # No --metrics-linger: nothing scrapes this soak, whose default would keep it up 10 s more.
        report = run_soak(tmp_path, "--master", "yarn", "--yarn-state-dir", str(yarn_cluster.settings.state_dir),
                          "--checkpoint", f"{s3_server.settings.bucket_uri}/soak",
                          "--s3-state-dir", str(s3_server.settings.state_dir), "--txn-scope", "slot",
                          "--source", "spark", "--partitions", "2", "--faults", ",".join(YARN_S3_FAULTS), "--gate-records", "200",
                          "--max-faults", str(len(YARN_S3_FAULTS)), "--metrics-linger", "0", keep_broker=True)
        assert broker.running_nodes(), "the soak leaves running the broker it did not start"
        assert_clean(report, tmp_path)
        assert report["options"]["master"] == "yarn" and report["options"]["txn_scope"] == "slot"
        # On Spark's source by name: the standalone soak's is the grouped one, the default's choice here.
        assert report["options"]["source"] == "spark"
        details = {fault["kind"]: fault["detail"] for fault in report["faults"]}
        assert sorted(details) == sorted(YARN_S3_FAULTS), [f["kind"] for f in report["faults"]]
        killed = re.fullmatch(
            r"SIGKILL executor container (container_\S+) \(pid [0-9, ]+\); YARN asked for a replacement",
            details["kill-container"])
        assert killed, details
        assert details["restart-nodemanager"].startswith("SIGKILL YARN NodeManager pid"), details
        assert details["restart-s3"].endswith("its objects kept"), details
        # The checkpoint is on S3, kept through the server's restart, in the soak's run folder there.
        checkpoint = f"{s3_server.settings.bucket_uri}/soak/checkpoint-{report['run_id']}"
        listed = fs_shell("-ls", "-C", checkpoint, s3a_config=s3_server.settings.credentials_file).stdout.split()
        assert sorted(listed) == [f"{checkpoint}/{entry}" for entry in ("commits", "metadata", "offsets", "sources")]
        assert s3_server.status().bucket_answers, "the soak leaves running the S3 it did not start"
        secret = s3_server.credentials()[1].encode()
        kept = [path for path in (tmp_path / "report").rglob("*") if path.is_file() and secret in path.read_bytes()]
        assert kept == [], "no file the soak leaves holds the S3 secret"
        # An empty folder of the bucket is, to S3A and Spark, the checkpoint deleted, without an FsShell JVM
        # to delete it.
        restart_after_a_lost_checkpoint_on_yarn(report["run_id"], application_of(killed[1]), f"{checkpoint}-lost",
                                                broker, yarn_cluster, s3_server)
    finally:
        broker.stop()


def restart_after_a_lost_checkpoint_on_yarn(run_id: str, soak_application: str, checkpoint: str, broker: LocalCluster,
                                            yarn_cluster: LocalYarn, s3_server: LocalS3) -> None:
    """`eosbench stream --master yarn` resumes the soak's group from an empty `checkpoint`, on the soak's archive."""
    # Here rather than in a test of its own: the soak has already paid for a first application and its
    # localization (18-35 s for a fresh NodeManager to unpack the archive), so this costs one application's
    # start. The stream runs as `eosbench` does from a shell: a child process whose JVM gets the
    # HADOOP_CONF_DIR that --yarn-state-dir names (none is inherited), so the flag alone finds the ResourceManager.
    bootstrap = broker.settings.bootstrap_servers
    settings = StreamSettings(input_topic=f"soak-{run_id}-in", output_topic=f"soak-{run_id}-out",
                              bootstrap_server=bootstrap, app_id=f"soak-{run_id}", checkpoint=checkpoint)
    # What the NodeManager unpacked for the soak's application (its AM attempt after restart-nodemanager,
    # which empties the NodeManager's caches).
    local_dirs = yarn_cluster.settings.local_dirs.resolve()
    unpacked_by_the_soak = unpacked_archives(local_dirs)
    assert len(unpacked_by_the_soak) == 1, unpacked_by_the_soak
    # 3,000 more sequence numbers of the soak's load, 30 % of them in aborted transactions.
    soak_produced, _ = find_resume_point(bootstrap, settings.input_topic, run_id)
    more = produce(bootstrap, settings.input_topic, soak_produced + 3_000, records_per_transaction=300,
                   abort_ratio=0.3, seed=9, resume=True, run_id=run_id)
    assert more.first_seq == soak_produced > 0 and more.records_committed > 0
    environment = {name: value for name, value in os.environ.items() if name != "HADOOP_CONF_DIR"}
    completed = subprocess.run([sys.executable, "-m", "eosbench.cli",
        "stream", "--master", "yarn", "--yarn-state-dir", str(yarn_cluster.settings.state_dir),
        "--input-topic", settings.input_topic, "--output-topic", settings.output_topic, "--app-id", settings.app_id,
        "--bootstrap-server", bootstrap, "--checkpoint", checkpoint, "--s3a-config",
        str(s3_server.settings.credentials_file), "--txn-scope", "slot", "--starting-offsets", "group",
        "--report-python",
        # One 2-core executor (a 1 GB container with overhead) and a small AM: one JVM fewer than
        # two executors on a two-core machine, and every task still runs in a YARN container.
        "--conf", "spark.executor.instances=1", "--conf", "spark.executor.cores=2",
        "--conf", "spark.executor.memory=512m", "--conf", "spark.yarn.am.memory=256m",
        "--conf", "spark.driver.memory=512m"], capture_output=True, text=True, timeout=300, env=environment)
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert s3_server.credentials()[1] not in completed.stdout + completed.stderr
    summary = json.loads(completed.stdout[completed.stdout.index("{\n"):])
    assert summary["records_in"] == summary["records_out"] == more.records_committed, \
        "only what came after the group's offsets is read"
    assert_exactly_once(bootstrap, settings)
    # Each task ran <local-dirs>/usercache/<user>/appcache/<application>/<container>/environment/bin/python:
    # the ./environment link YARN makes in a container's own folder, to the archive it unpacked.
    container_folder = re.compile(rf"{re.escape(str(local_dirs))}/usercache/[^/]+/appcache/"
                                  r"(application_[0-9]+_[0-9]+)/(container_[0-9e_]+)")
    tasks = summary["python"]["tasks"]
    assert len(tasks) == 2
    for task in tasks:
        folder = task["executable"].removesuffix("/environment/bin/python")
        match = container_folder.fullmatch(folder)
        assert match, task
        assert application_of(match[2]) == match[1] != soak_application, (task, soak_application)
        assert task["streaming"] == f"{folder}/environment/lib/python3.11/site-packages/streaming/__init__.py", task
    # YARN localized the archive once: the new application's links lead to the copy unpacked for the
    # soak's, and no other. Spark used to copy the archive into each application's staging folder: a
    # new path, a new copy.
    assert unpacked_archives(local_dirs) == unpacked_by_the_soak
    assert {task["environment"] for task in tasks} == {str(unpacked_by_the_soak[0])}, (tasks, unpacked_by_the_soak)
    assert (unpacked_by_the_soak[0] / "bin" / "python").exists()


def unpacked_archives(local_dirs: Path) -> list[Path]:
    """The NodeManager's unpacked copies of the archive: public, or a user's private ones, as its folders allow."""
    return [*local_dirs.glob(f"filecache/*/{ARCHIVE_NAME}"),
            *local_dirs.glob(f"usercache/*/filecache/*/{ARCHIVE_NAME}")]
