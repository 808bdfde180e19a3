"""The soak's fault kinds: one function per kind, each registered into FAULTS by `@fault_kind`.

A kind breaks one thing, undoes it (a restart, a SIGCONT) and says in one line what it did. To add
a kind, add one decorated function here: `--faults`, its check, the metrics' labels and the
seeded round robin all read FAULTS, in the order the functions stand below.

A kind acts on the running soak through `SoakUnderFaults`, what it needs of `runner.Soak`, so that
the runner imports the kinds and not the other way round.
"""

from __future__ import annotations

import random
import signal
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from confluent_kafka.admin import NewPartitions

from eosbench.console.errors import BadInput, EnvironmentProblem
from eosbench.local.hadoop_fs import fs_shell
from eosbench.local.kafka_admin import admin_client, cluster_metadata, under_replicated
from eosbench.local.processes import kill_all, parent_pid, process_alive, send_signal
from eosbench.soak.executors import (executor_containers, executor_pids, executor_with_a_task_in_flight,
                                     pyspark_processes, waiting_in)
from eosbench.soak.options import SoakOptions

if TYPE_CHECKING:
    from conf.client_config import Connection
    from eosbench.local.broker import LocalCluster
    from eosbench.local.hdfs import LocalHdfs
    from eosbench.local.s3 import LocalS3
    from eosbench.local.spark_cluster import StandaloneCluster
    from eosbench.local.yarn import LocalYarn
    from eosbench.soak.pipeline import Pipeline
    from eosbench.soak.progress import ProgressSampler

# How long a zombie-executor's woken processes may act (and fail on their fence) before they are killed.
ZOMBIE_GRACE_S = 10.0
ADDED_PARTITIONS = 2  # by each add-partitions round
# A restarted driver's spark-submit takes longer than this to commit; an old run's last tasks, less.
NEW_DRIVER_S = 5.0
# The kinds a soak without --faults injects (less the Spark-only ones when no Spark runs).
DEFAULT_FAULTS = ("kill-driver", "kill-executor", "kill-broker", "pause-broker", "delete-checkpoint", "restart-producer")


class SoakUnderFaults(Protocol):
    """What a fault kind reaches of the running soak (runner.Soak)."""

    options: SoakOptions
    bootstrap: str | Connection
    cluster: LocalCluster
    spark_cluster: StandaloneCluster | None
    hdfs: LocalHdfs | None
    s3: LocalS3 | None
    yarn: LocalYarn | None
    pipeline: Pipeline
    sampler: ProgressSampler | None

    def wait_for(self, condition: Callable[[], bool], timeout_s: float, what: str) -> bool:
        """Wait until `condition` holds, at most `timeout_s`; False if it never did."""

    def say(self, line: str) -> None:
        """Print one line of the soak's log."""


@dataclass(frozen=True)
class FaultKind:
    """One kind of fault: how it is injected, and what it needs before that."""

    name: str
    # Breaks something (the kind's n-th time), undoes it, says what it did.
    inject: Callable[[SoakUnderFaults, int], str]
    prepare: Callable[[SoakUnderFaults], None] | None = None  # waits, before the round's clock starts, until it is fair
    check: Callable[[SoakOptions], None] | None = None  # raises BadInput when the options rule the kind out
    spark_only: bool = False  # breaks a part of Spark, which the other pipelines do not run


FAULTS: dict[str, FaultKind] = {}


def fault_kind(name: str, prepare: Callable[[SoakUnderFaults], None] | None = None,
               check: Callable[[SoakOptions], None] | None = None, spark_only: bool = False):
    """Register the decorated `inject(soak, occurrence) -> what was done` as the fault kind `name`."""
    def register(inject: Callable[[SoakUnderFaults, int], str]) -> Callable[[SoakUnderFaults, int], str]:
        FAULTS[name] = FaultKind(name, inject, prepare, check, spark_only)
        return inject
    return register


def wait_fully_replicated(soak: SoakUnderFaults) -> None:
    """Before breaking a broker, let the last restarted one rejoin every ISR.

    Killing a second broker while the first is still catching up can leave a partition with no
    in-sync replica to elect (min.insync.replicas=2 of 3): that tests unavailability, not
    exactly-once, and stalls the stream until the broker returns.
    """
    if soak.options.brokers == 1:
        return
    lagging: list[str] = []

    def replicated() -> bool:
        try:
            lagging[:] = under_replicated(soak.bootstrap)
        except EnvironmentProblem as exc:
            lagging[:] = [str(exc)]
        return not lagging
    if not soak.wait_for(replicated, soak.options.recovery_timeout_s, "every ISR to be full"):
        soak.say(f"still under-replicated: {', '.join(lagging[:5])}{' …' if len(lagging) > 5 else ''}")


def wait_every_partition_committed(soak: SoakUnderFaults) -> None:
    """Before deleting the checkpoint, let the sink commit on every input partition at least once.

    Without a checkpoint the job resumes from the group's offsets, and it refuses a partition that
    holds records but has no offset (it cannot tell "never committed" from "offsets expired").
    On a standalone cluster the first batch's tasks finish far apart, so the gate could open, and
    the checkpoint go, while one partition's first transaction was still running.
    """
    if not soak.wait_for(lambda: not soak.sampler.uncommitted_partitions(), soak.options.recovery_timeout_s,
                         "a committed offset on every input partition"):
        soak.say(f"input partitions without a committed offset: {soak.sampler.uncommitted_partitions()}")


def broker_target(soak: SoakUnderFaults, occurrence: int) -> int:
    """A broker to break: on a cluster, alternately the transaction coordinator's leader and an output leader."""
    nodes = soak.cluster.running_nodes()
    if len(nodes) == 1:
        return nodes[0]
    metadata = cluster_metadata(soak.bootstrap)
    pipeline = soak.pipeline
    if occurrence % 2 == 0:
        txn_partition = _java_string_hash(f"{pipeline.app_id}.{pipeline.input_topic}.0") % \
            soak.cluster.settings.transaction_state_partitions
        leader = metadata.topics["__transaction_state"].partitions[txn_partition].leader
    else:
        leader = metadata.topics[pipeline.output_topic].partitions[0].leader
    return leader if leader in nodes else nodes[0]


def needs_standalone_master(options: SoakOptions) -> None:
    """Refuse a fault of the standalone cluster's daemons on a local master."""
    if not options.master.startswith("spark://"):
        raise BadInput("--faults kill-worker needs a standalone master (--master spark://…, see `eosbench cluster start`)")


def seeded_pause_s(soak: SoakUnderFaults, kind: str, occurrence: int) -> float:
    """How long a restarting kind leaves its daemon down: 1-5 s, the same for one seed, kind and occurrence."""
    return round(random.Random(f"{soak.options.seed}:{kind}:{occurrence}").uniform(1.0, 5.0), 1)


def checkpoint_on_soak_hdfs(options: SoakOptions) -> None:
    """Refuse restart-hdfs unless the checkpoint is on the HDFS the soak runs (--hdfs)."""
    uri = options.hdfs_settings.uri
    if not options.hdfs:
        raise BadInput(f"--faults restart-hdfs needs the checkpoint on the soak's own HDFS: add --hdfs (it runs {uri})")
    if options.checkpoint and not (options.checkpoint + "/").startswith(uri + "/"):
        raise BadInput(f"--faults restart-hdfs needs the checkpoint on the soak's own HDFS ({uri}),"
                       f" not --checkpoint {options.checkpoint}")


def checkpoint_on_soak_s3(options: SoakOptions) -> None:
    """Refuse restart-s3 unless the checkpoint is on the local S3 the soak runs (--checkpoint s3a://…, no --s3a-config)."""
    if not options.s3_checkpoint:
        raise BadInput("--faults restart-s3 needs the checkpoint on the local S3: --checkpoint s3a://<bucket>/…"
                       " (see `eosbench s3 start`)")
    if options.s3a_config:
        raise BadInput(f"--faults restart-s3 restarts the local `eosbench s3` (--s3-state-dir), not the store"
                       f" --s3a-config {options.s3a_config} names")


def needs_yarn_master(options: SoakOptions) -> None:
    """Refuse a fault of YARN's containers or daemons unless the stream runs on YARN."""
    if options.master != "yarn":
        raise BadInput(f"--faults {' and '.join(kind for kind in YARN_FAULTS if kind in options.faults)} needs"
                       f" --master yarn (see `eosbench yarn start`), and this soak runs --master {options.master}")


@fault_kind("kill-driver")
def kill_driver(soak: SoakUnderFaults, occurrence: int) -> str:
    """SIGKILL the Spark driver and its session (java-copier: one copier, in turn; a peer: its JVM), then restart it."""
    if soak.pipeline.copiers:
        copier = soak.pipeline.copiers[occurrence % len(soak.pipeline.copiers)]
        pid = soak.pipeline.restart(copier)
        return f"SIGKILL {copier.name} pid {pid}; restarted from its group's committed offset"
    pid = soak.pipeline.restart(soak.pipeline.stream)
    if soak.pipeline.peer:
        return f"SIGKILL {soak.pipeline.stream.name} pid {pid}; restarted from {PEER_RESUMES_FROM[soak.pipeline.peer]}"
    return f"SIGKILL driver pid {pid} and its session; restarted from the checkpoint"


# Where each peer's relaunch takes up the work (peers/jvm/): Kafka Streams from its group's
# offsets, committed in its transactions; Flink from the newest checkpoint it retained.
PEER_RESUMES_FROM = {"kafka-streams": "its group's committed offsets", "flink": "its newest retained checkpoint"}


def has_an_executor_to_kill(options: SoakOptions) -> None:
    """Refuse kill-executor where nothing runs the tasks but the driver: real-time mode on a local master."""
    if options.realtime and not options.master.startswith("spark://"):
        raise BadInput(f"--faults kill-executor: with --trigger {options.trigger} on a local master the tasks run in the"
                       " driver's JVM, with no executor or Python worker of their own (kill-driver covers them)")


@fault_kind("kill-executor", check=has_an_executor_to_kill, spark_only=True)
def kill_executor(soak: SoakUnderFaults, occurrence: int) -> str:
    """SIGKILL where tasks run: on a standalone cluster or YARN alternately an executor JVM and a Python worker (in
    real-time mode always the JVM, whose Java writer runs the tasks: there is no Python worker to kill)."""
    executors = executor_pids(soak)
    if executors and (occurrence % 2 == 0 or soak.options.realtime):
        send_signal(executors[0], signal.SIGKILL)
        return f"SIGKILL executor JVM pid {executors[0]}"
    # Local mode (or odd rounds on a cluster): a Python worker forked by pyspark.daemon.
    workers, forked = pyspark_processes([soak.pipeline.stream.pid, *executors])
    target = (forked or workers or [None])[-1]
    if target is None:
        return "no Python worker was running; nothing killed"
    send_signal(target, signal.SIGKILL)
    return f"SIGKILL Python worker pid {target}{'' if forked else ' (the pyspark daemon)'}"


def has_a_zombie_to_wake(options: SoakOptions) -> None:
    """Refuse zombie-executor where no paused executor could wake up after its driver's restart."""
    if options.master == "yarn":
        raise BadInput("--faults zombie-executor: YARN kills a dead application's containers, paused or not (their"
                       " whole process group, SIGKILL), so none wakes up after the restart; it needs a standalone"
                       " master (--master spark://…)")
    if not options.master.startswith("spark://"):
        raise BadInput(f"--faults zombie-executor needs a standalone master (--master spark://…): on --master"
                       f" {options.master} the tasks run in the driver's own JVM, which the restart kills")
    if options.realtime:
        raise BadInput(f"--faults zombie-executor: with --trigger {options.trigger} the tasks run in the executor's"
                       " JVM, which the worker kills with its application, so none wakes up after the restart")


def _a_new_run_committed(before: dict[int, tuple[int, str | None]], now: dict[int, tuple[int, str | None]],
                         restarted: float) -> bool:
    """Whether the restarted driver has committed every partition: a run that had committed nothing at `before` moved
    each partition's offset, the paused task's partitions among them.

    A zombie whose commit lands before the new run's of its partitions is honoured by the new run
    (it finds the batch committed, and skips it), so it must wake after that. Not just any move: the
    old run's other tasks may still commit after its driver died. Every commit names its run; for
    offsets of an older release, which named none outside slot scope, a move of the total counts
    once the new driver has run for NEW_DRIVER_S, longer than the old run's last tasks take and
    shorter than a driver's start.
    """
    old_runs = {run for _, run in before.values()}
    if old_runs - {None}:
        return bool(now) and all(run not in old_runs and offset > before.get(partition, (-1, None))[0]
                                 for partition, (offset, run) in now.items())
    return time.monotonic() - restarted >= NEW_DRIVER_S and \
        sum(max(0, offset) for offset, _ in now.values()) > sum(max(0, offset) for offset, _ in before.values())


@fault_kind("zombie-executor", check=has_a_zombie_to_wake, spark_only=True)
def zombie_executor(soak: SoakUnderFaults, occurrence: int) -> str:
    """Freeze an executor's host while its task holds an open transaction, SIGKILL and restart the driver, and wake the
    task first after the new driver's first commit: the zombie that fencing exists for, an old task waking after its
    replacement ran.

    Frozen (SIGSTOP) are the task's Python worker, the pyspark daemon that forked it, the executor
    JVM and the Spark worker that launched it: a node that stopped, as a paused VM does. Less is not
    a zombie: the Spark worker would kill the dead application's JVM, whose death leaves the daemon's
    process group orphaned with stopped members, and Linux then sends each a SIGHUP, which ends a
    Python worker. The new driver's executors run on the other workers. After its first commit only
    the task's worker wakes, mid-transaction: the new run's fences must have ended what it held. Once
    it has ended, or ZOMBIE_GRACE_S later, the old JVM and Python processes are killed (orphans of a
    dead application) and the Spark worker wakes.
    """
    # Looked for as long as a recovery may take, in spells between which the soak keeps its children
    # alive: a fault that lands while the stream restarts (after an executor or NameNode kill on a
    # loaded machine) sees no transaction until the new driver's first batch.
    found = None

    def seen() -> bool:
        nonlocal found
        found = executor_with_a_task_in_flight(soak, timeout_s=5.0)
        return found is not None

    soak.wait_for(seen, soak.options.recovery_timeout_s, "a Python worker holding an open transaction")
    if found is None:
        return "no Python worker of an executor was seen holding an open transaction; nothing paused"
    jvm, daemon, worker = found
    spark_worker = parent_pid(jvm)
    if daemon is None or spark_worker is None:  # gone between the look and now (a pid of 0 would stop the soak itself)
        return "the executor with a transaction in flight ended before it could be paused; nothing paused"
    frozen = (worker, daemon, jvm, spark_worker)  # the task first: it goes no further
    for pid in frozen:
        send_signal(pid, signal.SIGSTOP)
    frozen_at, committed, woke = time.monotonic(), False, False
    try:
        before = soak.sampler.offsets_and_runs()
        driver = soak.pipeline.restart(soak.pipeline.stream)
        restarted = time.monotonic()
        committed = soak.wait_for(lambda: _a_new_run_committed(before, soak.sampler.offsets_and_runs(), restarted),
                                  soak.options.recovery_timeout_s, "the new driver's first commit of every partition")
    finally:
        woke = process_alive(worker)
        if woke:
            send_signal(worker, signal.SIGCONT)
        frozen_s = time.monotonic() - frozen_at
        try:
            ended = woke and soak.wait_for(lambda: not process_alive(worker), ZOMBIE_GRACE_S,
                                           "the woken worker to end")
            waiting = "" if ended or not woke else waiting_in(worker)
        finally:
            kill_all([pid for pid in (worker, daemon, jvm) if process_alive(pid)])
            send_signal(spark_worker, signal.SIGCONT)
    after = "after the new driver's first commit of every partition" if committed else \
        "before the new driver had committed every partition"
    fate = (f"it ended within {ZOMBIE_GRACE_S:g} s" if ended else f"SIGKILL {ZOMBIE_GRACE_S:g} s later{waiting}") if woke \
        else "it was gone before it could wake"
    return (f"SIGSTOP Python worker pid {worker} in a transaction, its daemon pid {daemon}, executor JVM pid {jvm} and"
            f" Spark worker pid {spark_worker}; SIGKILL driver pid {driver}, restarted; SIGCONT the Python worker alone"
            f" {frozen_s:.0f} s later, {after}; {fate}; the Spark worker woken after")


@fault_kind("kill-broker", prepare=wait_fully_replicated)
def kill_broker(soak: SoakUnderFaults, occurrence: int) -> str:
    """SIGKILL one broker, then restart it."""
    node = broker_target(soak, occurrence)
    # Restarted at once: the kill has reset every client's connection and waited for the JVM to be
    # gone, and the node stays down for its whole start-up, several seconds.
    pid = soak.cluster.signal_node(node, signal.SIGKILL)
    soak.cluster.start()
    return f"SIGKILL broker node {node} (pid {pid}); restarted"


@fault_kind("pause-broker", prepare=wait_fully_replicated)
def pause_broker(soak: SoakUnderFaults, occurrence: int) -> str:
    """SIGSTOP one broker for longer than the producer's delivery.timeout.ms, then SIGCONT it."""
    node = broker_target(soak, occurrence)
    pause_s = soak.options.delivery_timeout_ms / 1000 + 4
    pid = soak.cluster.signal_node(node, signal.SIGSTOP)
    try:
        time.sleep(pause_s)
    finally:
        soak.cluster.signal_node(node, signal.SIGCONT)
    return f"SIGSTOP broker node {node} (pid {pid}) for {pause_s:g} s (> delivery.timeout.ms), then SIGCONT"


@fault_kind("delete-checkpoint", prepare=wait_every_partition_committed, spark_only=True)
def delete_checkpoint(soak: SoakUnderFaults, occurrence: int) -> str:
    """SIGKILL the driver, delete its checkpoint (on any Hadoop file system), and restart it from the group's offsets."""
    soak.pipeline.stream.kill(signal.SIGKILL)
    fs_shell("-rm", "-r", "-f", soak.pipeline.checkpoint, s3a_config=soak.options.s3a_config_file)
    soak.pipeline.start(soak.pipeline.stream)
    return "SIGKILL driver, deleted the checkpoint, restarted with --starting-offsets group"


@fault_kind("restart-producer")
def restart_producer(soak: SoakUnderFaults, occurrence: int) -> str:
    """SIGKILL the producer and restart it with --resume."""
    pid = soak.pipeline.restart(soak.pipeline.producer)
    return f"SIGKILL producer pid {pid}; restarted with --resume"


def needs_micro_batch(options: SoakOptions) -> None:
    """Refuse add-partitions in real-time mode, where no soak has yet grown the input."""
    if options.realtime:
        raise BadInput("--faults add-partitions is tried in micro-batch mode only: no soak has grown the input under"
                       " real-time mode's long-running tasks yet; drop it or the real-time trigger")


@fault_kind("add-partitions", check=needs_micro_batch, spark_only=True)
def add_partitions(soak: SoakUnderFaults, occurrence: int) -> str:
    """Grow the input topic by ADDED_PARTITIONS, and wait until the sink has committed records of each new partition."""
    topic = soak.pipeline.input_topic
    before = len(cluster_metadata(soak.bootstrap).topics[topic].partitions)
    grown = before + ADDED_PARTITIONS
    # Held by name until the future resolves: a client dropped at once is destroyed, and its
    # pending request then fails with "Handle is terminating".
    admin = admin_client(soak.bootstrap)
    admin.create_partitions([NewPartitions(topic, grown)])[topic].result(60)
    started = time.monotonic()
    soak.sampler.watch_partitions(grown)
    # The producer's keys reach the new partitions at its next metadata refresh, the source's
    # reads at its next batch; committed offsets above 0 on each prove both.
    new = range(before, grown)
    if soak.wait_for(lambda: all(soak.sampler.offsets_and_runs().get(p, (-1, None))[0] > 0 for p in new),
                     soak.options.recovery_timeout_s, "the sink to commit records of every new partition"):
        return (f"grew {topic} from {before} to {grown} partitions; the sink committed records of each new one"
                f" {time.monotonic() - started:.0f} s later")
    return f"grew {topic} from {before} to {grown} partitions; the sink committed no records of some new ones"


@fault_kind("kill-worker", check=needs_standalone_master, spark_only=True)
def kill_worker(soak: SoakUnderFaults, occurrence: int) -> str:
    """SIGKILL one Spark standalone worker (its executors notice and exit), then restart it."""
    worker = occurrence % soak.spark_cluster.settings.workers
    pid = soak.spark_cluster.kill_worker(worker)  # restarted at once, as a broker is
    soak.spark_cluster.start()
    return f"SIGKILL Spark worker-{worker} (pid {pid}); restarted"


@fault_kind("restart-hdfs", check=checkpoint_on_soak_hdfs, spark_only=True)
def restart_hdfs(soak: SoakUnderFaults, occurrence: int) -> str:
    """SIGKILL the HDFS NameNode that holds the checkpoint, restart it after a short seeded pause.

    The driver's next checkpoint write fails (or waits out the outage): the query stops and the
    soak restarts the stream, which resumes from the checkpoint the NameNode replayed.
    """
    pause_s = seeded_pause_s(soak, "restart-hdfs", occurrence)
    with ThreadPoolExecutor(1) as restarting:
        restarted = restarting.submit(soak.hdfs.restart_namenode, pause_s)
        # The stream dies on the outage at once; its relaunch meanwhile reaches HDFS only once its
        # session is up, tens of seconds after the NameNode is back, so it need not wait for it.
        soak.wait_for(restarted.done, soak.hdfs.READY_TIMEOUT_S + pause_s, "the NameNode to restart")
        pid = restarted.result()
    return f"SIGKILL HDFS NameNode pid {pid}; restarted after {pause_s:g} s"


@fault_kind("restart-s3", check=checkpoint_on_soak_s3, spark_only=True)
def restart_s3(soak: SoakUnderFaults, occurrence: int) -> str:
    """SIGKILL the S3 server that holds the checkpoint and restart it after a short seeded pause.

    S3A retries a request that finds no server (fs.s3a.retry.limit times, backing off), so a
    short outage only stalls the batch; a longer one fails the checkpoint write, the query stops,
    and the soak restarts the stream from the entries whose upload completed. An entry is never
    partly there: an object appears whole at its upload's end or not at all.
    """
    pause_s = seeded_pause_s(soak, "restart-s3", occurrence)
    pid = soak.s3.restart(pause_s)
    return f"SIGKILL S3 server pid {pid}; restarted after {pause_s:g} s, its objects kept"


@fault_kind("kill-container", check=needs_yarn_master, spark_only=True)
def kill_container(soak: SoakUnderFaults, occurrence: int) -> str:
    """SIGKILL one executor container's JVM of the stream's YARN application (never the AM, container 1).

    The driver loses that executor and retries its tasks elsewhere; the AM hears from the
    NodeManager that the container exited and asks the ResourceManager for a replacement.
    """
    containers = executor_containers(soak)
    if not containers:
        return "no executor container was running; nothing killed"
    container = containers[occurrence % len(containers)]
    pids = soak.yarn.kill_container(container.id)
    return f"SIGKILL executor container {container.id} (pid {', '.join(map(str, pids))}); YARN asked for a replacement"


@fault_kind("restart-nodemanager", check=needs_yarn_master, spark_only=True)
def restart_nodemanager(soak: SoakUnderFaults, occurrence: int) -> str:
    """SIGKILL the YARN NodeManager and every container process (the AM and all executors), restart it after a short seeded pause.

    The driver runs outside YARN (client mode) and lives on. The restarted NodeManager registers
    afresh, the ResourceManager reports the lost containers and starts a new AM attempt, which
    asks for new executors: the driver carries on with them. Once the application is out of AM
    attempts (yarn.resourcemanager.am.max-attempts, 2), the ResourceManager fails it instead, the
    driver's SparkContext stops and it exits; the soak restarts the stream from its checkpoint.
    """
    pause_s = seeded_pause_s(soak, "restart-nodemanager", occurrence)
    pid = soak.yarn.restart_nodemanager(pause_s)
    return f"SIGKILL YARN NodeManager pid {pid} and its containers; restarted after {pause_s:g} s"


FAULT_KINDS = tuple(FAULTS)
# The kinds that break YARN itself: they need the local YARN of `eosbench yarn start`.
YARN_FAULTS = ("kill-container", "restart-nodemanager")


def default_faults(pipeline: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(the kinds a soak without --faults injects, the default kinds it skips because the pipeline has no Spark)."""
    skipped = tuple(kind for kind in DEFAULT_FAULTS if pipeline != "spark" and FAULTS[kind].spark_only)
    return tuple(kind for kind in DEFAULT_FAULTS if kind not in skipped), skipped


def refuse_unrunnable_faults(options: SoakOptions) -> None:
    """Raise BadInput (one line) for --faults that this soak cannot inject."""
    unknown = [kind for kind in options.faults if kind not in FAULT_KINDS]
    if unknown:
        raise BadInput(f"--faults: unknown fault {unknown[0]!r} (choose from {', '.join(FAULT_KINDS)})")
    if not options.faults:
        raise BadInput("--faults: name at least one fault")
    spark_only = [kind for kind in options.faults if FAULTS[kind].spark_only]
    if options.pipeline != "spark" and spark_only:
        # Flink's TaskManager would be its executor, but the local MiniCluster runs it in the job's JVM.
        minicluster = (" (Flink's TaskManagers run inside the job's own JVM on its local MiniCluster: kill-driver"
                       " kills them)" if options.pipeline == "flink" and spark_only[0] == "kill-executor" else "")
        raise BadInput(f"--faults {spark_only[0]}: a Spark-only fault, and --pipeline {options.pipeline} runs no Spark"
                       f"{minicluster}")
    for kind in options.faults:
        if FAULTS[kind].check:
            FAULTS[kind].check(options)


def _java_string_hash(text: str) -> int:
    """Java's String.hashCode, made non-negative as Kafka's Utils.abs does: the coordinator's partition."""
    value = 0
    for char in text:
        value = (31 * value + ord(char)) & 0xFFFFFFFF
    if value >= 2**31:
        value -= 2**32
    return value & 0x7FFFFFFF if value != -(2**31) else 0
