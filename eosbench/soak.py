"""`eosbench soak`: the pipeline runs on while faults are injected, and exactly-once is proven after each.

The method follows Kafka's transaction system tests (a copier per input partition, clean and
hard bounces, read_committed checks for duplicates and losses) and Jepsen's Kafka workload
(lost writes, duplicates, aborted reads). The seeded producer (`eosbench produce --resume`)
feeds the streaming job (`spark-submit streaming/job.py`, local or standalone master); each
runs as a supervised child in its own session and is restarted whenever it dies.

One round:
1. gate: wait until the sink group has committed `--gate-records` more input offsets since the
   last round (progress, never a sleep, decides when the next fault lands);
2. inject the next fault (seeded round robin over the kinds) and undo it (restart, SIGCONT);
3. wait until throughput is back to 90 % of its rate before the fault (the recovery time);
4. verify the stable prefix (`verify(live=True)`, reading only what came since the last round)
   and check that every transaction open at that moment ends (`wait_until_stable`).
At the end the producer is stopped and fenced, the stream drains, and the full verifier runs.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import sys
import threading
import time
import uuid
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from prometheus_client import CollectorRegistry, Counter as PromCounter, Gauge, start_http_server
from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

from conf.client_log import CLIENT_LOG
from conf.settings import ClusterSettings, SparkClusterSettings, console_log4j_config
from eosbench.broker import LocalCluster
from eosbench.errors import BadInput, EnvironmentProblem
from eosbench.jars import resolve_bundle
from eosbench.kafka_admin import cluster_metadata, create_topic, under_replicated
from eosbench.processes import Child, command_line, descendants, proc_stat, send_signal
from eosbench.spark_cluster import StandaloneCluster
from streaming import job
from streaming.verify import IncrementalIndexes, group_offsets, stable_and_end_offsets, verify, wait_until_stable

FAULT_KINDS = ("kill-driver", "kill-executor", "kill-broker", "pause-broker", "delete-checkpoint",
               "restart-producer", "kill-worker")
RATE_WINDOW_S = 3.0  # the throughput window; recovery times are resolved to about this
SAMPLE_EVERY_S = 0.5
RECOVERED_SHARE = 0.9
STALE_AFTER_S = 5.0  # a sampler whose figure has not moved for this long reconnects


@dataclass(frozen=True)
class SoakOptions:
    """Every knob of one soak, one field per flag."""

    duration_s: float
    faults: tuple[str, ...]
    brokers: int = 1
    port: int = 9092
    state_dir: Path | None = None
    master: str = "local[2,4]"
    spark_state_dir: Path | None = None  # the standalone cluster's folder, for kill-worker and executors
    seed: int = 0
    throughput: float = 400.0
    records_per_transaction: int = 200
    abort_ratio: float = 0.1
    partitions: int = 4
    gate_records: int = 1_000
    delivery_timeout_ms: int = 8_000
    max_offsets_per_trigger: int = 20_000
    recovery_timeout_s: float = 240.0
    metrics_port: int = 9400  # producer; stream +1, soak +2 (the ports prometheus.yml scrapes)
    output_dir: Path | None = None
    max_faults: int | None = None  # end early after this many rounds (--duration still bounds the soak)

    def validate(self) -> None:
        """Raise BadInput (one line) for a soak that cannot run as asked."""
        unknown = [kind for kind in self.faults if kind not in FAULT_KINDS]
        if unknown:
            raise BadInput(f"--faults: unknown fault {unknown[0]!r} (choose from {', '.join(FAULT_KINDS)})")
        if not self.faults:
            raise BadInput("--faults: name at least one fault")
        if "kill-worker" in self.faults and not self.master.startswith("spark://"):
            raise BadInput("--faults kill-worker needs a standalone master (--master spark://…, see `eosbench cluster start`)")
        if self.duration_s <= 0:
            raise BadInput("--duration must be positive")
        cluster_ports = {port: f"{role} of node {node.node_id}"
                         for node in ClusterSettings(brokers=self.brokers, port=self.port).nodes()
                         for role, port in node.by_role().items()}
        for metrics_port in range(self.metrics_port, self.metrics_port + 3):
            if metrics_port in cluster_ports:
                raise BadInput(f"--metrics-port {self.metrics_port}: the soak serves /metrics on {self.metrics_port}-"
                               f"{self.metrics_port + 2}, and {metrics_port} is the cluster's"
                               f" {cluster_ports[metrics_port]} (--port {self.port})")


@dataclass
class FaultRecord:
    """What one round did and found."""

    index: int
    kind: str
    at_s: float  # seconds since the soak started
    detail: str
    recovery_s: float | None = None
    verify_s: float = 0.0
    stable_after_s: float = 0.0  # until every transaction open after the verify had ended
    records_checked: int = 0
    violations: list[str] = field(default_factory=list)

    @property
    def survived(self) -> bool:
        """Recovered in time and verified clean."""
        return self.recovery_s is not None and not self.violations


@dataclass
class SoakReport:
    """The soak's verdict: JSON, Markdown and a PNG timeline are written from it."""

    run_id: str
    options: dict
    started_at: float
    seconds: float = 0.0
    faults: list[FaultRecord] = field(default_factory=list)
    restarts: dict[str, int] = field(default_factory=dict)
    final: dict = field(default_factory=dict)
    violations: list[str] = field(default_factory=list)
    timeline: list[tuple[float, int]] = field(default_factory=list)
    finished: bool = False  # False in the report rewritten after every round of a running soak

    @property
    def ok(self) -> bool:
        """No violation anywhere and every fault survived (and, once finished, the final verify ran)."""
        return not self.violations and all(f.survived for f in self.faults) and (bool(self.final) or not self.finished)

    def by_kind(self) -> dict[str, dict]:
        """Faults, survivals and recovery times (median and max) for each kind."""
        kinds: dict[str, dict] = {}
        for fault in self.faults:
            entry = kinds.setdefault(fault.kind, {"injected": 0, "survived": 0, "recovery_s": []})
            entry["injected"] += 1
            entry["survived"] += fault.survived
            if fault.recovery_s is not None:
                entry["recovery_s"].append(fault.recovery_s)
        for entry in kinds.values():
            times = sorted(entry.pop("recovery_s"))
            entry["recovery_median_s"] = times[len(times) // 2] if times else None
            entry["recovery_max_s"] = times[-1] if times else None
        return kinds

    def to_json(self) -> str:
        """The whole report, faults first-class."""
        data = asdict(self)
        data["ok"] = self.ok
        data["by_kind"] = self.by_kind()
        data["faults"] = [{**asdict(f), "survived": f.survived} for f in self.faults]
        return json.dumps(data, indent=2)


class CommittedOffsets(Collector):
    """The sink group's committed input offsets, summed over partitions, as a counter (`rate()` charts it).

    It only grows: progress made exactly once, across every restart. A read from a coordinator
    that has not caught up yet can be lower for a moment; the counter keeps its highest value.
    """

    def __init__(self, labels: dict[str, str]):
        self.labels, self.sampler, self.highest = labels, None, 0

    def collect(self):
        """Yield the counter at the sampler's latest total."""
        if self.sampler is not None:
            self.highest = max(self.highest, self.sampler.processed())
        family = CounterMetricFamily("eosbench_soak_committed_offsets", "The sink group's committed input offsets,"
                                     " summed over partitions: progress made exactly once", labels=list(self.labels))
        family.add_metric(list(self.labels.values()), self.highest)
        yield family


class SoakMetrics:
    """The soak's own series, beside the producer's and the stream's."""

    def __init__(self, run_id: str):
        self.registry = CollectorRegistry()
        labels = {"run_id": run_id}
        self.faults = PromCounter("eosbench_soak_faults", "Faults injected, by kind and whether they were survived",
                                  [*labels, "kind", "outcome"], registry=self.registry)
        self.recovery = Gauge("eosbench_soak_recovery_seconds", "Seconds until throughput was back to 90 % after"
                              " the last fault of this kind", [*labels, "kind"], registry=self.registry)
        self.violations = Gauge("eosbench_soak_verify_violations", "Violations found by the soak's verifications",
                                list(labels), registry=self.registry)
        self.checked = Gauge("eosbench_soak_records_verified", "Committed input records the last verify checked",
                             list(labels), registry=self.registry)
        self.restarts = PromCounter("eosbench_soak_restarts", "Unplanned restarts of a supervised process",
                                    [*labels, "process"], registry=self.registry)
        self.injected_at = Gauge("eosbench_soak_fault_injected_timestamp_seconds", "Unix time the last fault of"
                                 " this kind was injected (the soak dashboard's fault markers)", [*labels, "kind"],
                                 registry=self.registry)
        self.committed = CommittedOffsets(labels)
        self.registry.register(self.committed)
        self.labels = labels
        for kind in FAULT_KINDS:
            for outcome in ("survived", "failed"):
                self.faults.labels(**labels, kind=kind, outcome=outcome)
        for process in ("producer", "stream"):
            self.restarts.labels(**labels, process=process)
        self.violations.labels(**labels).set(0)
        self.checked.labels(**labels).set(0)

    def serve(self, port: int) -> None:
        """Serve /metrics on loopback."""
        try:
            start_http_server(port, addr="127.0.0.1", registry=self.registry)
        except OSError as exc:
            raise EnvironmentProblem(f"cannot serve the soak's metrics on 127.0.0.1:{port}: {exc.strerror}") from exc

    def fault_injected(self, kind: str) -> None:
        """Mark the moment a fault goes in."""
        self.injected_at.labels(**self.labels, kind=kind).set(time.time())

    def follow(self, sampler: ProgressSampler) -> None:
        """Export the sampler's committed total on every scrape."""
        self.committed.sampler = sampler

    def fault_done(self, fault: FaultRecord, total_violations: int) -> None:
        """Count one round."""
        self.faults.labels(**self.labels, kind=fault.kind, outcome="survived" if fault.survived else "failed").inc()
        if fault.recovery_s is not None:
            self.recovery.labels(**self.labels, kind=fault.kind).set(fault.recovery_s)
        self.violations.labels(**self.labels).set(total_violations)
        self.checked.labels(**self.labels).set(fault.records_checked)


class ProgressSampler:
    """Samples the sink group's committed offsets (summed over partitions) twice a second.

    The group's offsets move only when the sink commits a transaction, so they count records
    processed exactly once, across every restart of the driver (and a lost checkpoint).
    """

    def __init__(self, bootstrap: str, group: str, topic: str, partitions: int, started: float):
        self.samples: list[tuple[float, int]] = []
        self._config = {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                        "socket.timeout.ms": 2000}
        self._consumer = Consumer(self._config, logger=CLIENT_LOG)
        self._last_change = time.monotonic()
        self._partitions = [TopicPartition(topic, p) for p in range(partitions)]
        self._started = started
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="eosbench-soak-sampler", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(SAMPLE_EVERY_S):
            try:
                committed = self._consumer.committed(self._partitions, timeout=2)
            except Exception:  # the broker is down or paused: a gap in the timeline, not an error
                continue
            total = sum(max(0, tp.offset) for tp in committed)
            if not self.samples or total != self.samples[-1][1]:
                self._last_change = time.monotonic()
            elif time.monotonic() - self._last_change > STALE_AFTER_S:
                # After the group coordinator's broker is killed, a long-lived client kept
                # answering with the old offsets; a new one finds the new coordinator.
                self._consumer.close()
                self._consumer = Consumer(self._config, logger=CLIENT_LOG)
                self._last_change = time.monotonic()
            with self._lock:
                self.samples.append((time.monotonic() - self._started, total))

    def processed(self) -> int:
        """The latest committed total (0 before the first sample)."""
        with self._lock:
            return self.samples[-1][1] if self.samples else 0

    def rate(self, since_s: float, until_s: float) -> float | None:
        """Records per second between two moments (None without two samples in between)."""
        with self._lock:
            inside = [s for s in self.samples if since_s <= s[0] <= until_s]
        if len(inside) < 2 or inside[-1][0] - inside[0][0] < RATE_WINDOW_S / 2:
            return None
        return (inside[-1][1] - inside[0][1]) / (inside[-1][0] - inside[0][0])

    def snapshot(self) -> list[tuple[float, int]]:
        """A copy of every sample so far."""
        with self._lock:
            return list(self.samples)

    def stop(self) -> None:
        """Stop sampling and close the consumer."""
        self._stop.set()
        self._thread.join(timeout=5)
        self._consumer.close()


class Soak:
    """One soak run: the cluster, the children, the rounds and the report."""

    def __init__(self, options: SoakOptions, out=sys.stdout):
        options.validate()
        self.options, self.out = options, out
        self.run_id = uuid.uuid4().hex[:8]
        self.output_dir = options.output_dir or Path("results") / "soak" / self.run_id
        self.cluster = LocalCluster(ClusterSettings(
            brokers=options.brokers, port=options.port,
            **({"state_dir": options.state_dir} if options.state_dir else {})))
        self.bootstrap = self.cluster.settings.bootstrap_servers
        self.spark_cluster = (StandaloneCluster.from_state_dir(options.spark_state_dir or SparkClusterSettings().state_dir)
                              if options.master.startswith("spark://") else None)
        self.input_topic, self.output_topic = f"soak-{self.run_id}-in", f"soak-{self.run_id}-out"
        self.app_id = f"soak-{self.run_id}"
        self.producer_id = f"soak.{self.run_id}.producer"
        self.checkpoint = self.output_dir / f"checkpoint-{self.run_id}"
        env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
        self.producer = Child("producer", self.output_dir / "logs", env)
        self.stream = Child("stream", self.output_dir / "logs", env)
        self.metrics = SoakMetrics(self.run_id)
        self.report = SoakReport(self.run_id, {k: str(v) for k, v in asdict(options).items()}, time.time())
        self.started = time.monotonic()
        self._spark_jars = ",".join(str(jar) for jar in resolve_bundle("spark"))
        self._order = random.Random(options.seed)
        self._last_status = 0.0
        self.sampler: ProgressSampler | None = None
        self.verified = IncrementalIndexes()  # each round's live verify reads only the records since the last
        self._deaths: dict[str, list[tuple[float, int]]] = {}
        self._supervised = {"producer", "stream"}

    # ------------------------------------------------------------------ children

    def _producer_command(self) -> list[str]:
        o = self.options
        return [sys.executable, "-m", "eosbench.cli", "produce", "--topic", self.input_topic,
                "--num-records", str(10**12), "--record-size", "100", "--throughput", str(o.throughput),
                "--bootstrap-server", self.bootstrap, "--transactional-id", self.producer_id,
                "--records-per-transaction", str(o.records_per_transaction),
                "--transaction-abort-ratio", str(o.abort_ratio), "--seed", str(o.seed), "--run-id", self.run_id,
                "--resume", "--metrics-port", str(o.metrics_port), "--metrics-linger", "0", "--reporting-interval", "30000",
                "--producer-props", "acks=all", f"delivery.timeout.ms={o.delivery_timeout_ms}",
                f"request.timeout.ms={o.delivery_timeout_ms // 2}", "linger.ms=5", "transaction.timeout.ms=30000"]

    def _stream_command(self) -> list[str]:
        o = self.options
        submit = [str(Path(sys.executable).parent / "spark-submit"), "--master", o.master, "--jars", self._spark_jars,
                  "--driver-memory", "768m", "--conf", "spark.task.maxFailures=4",
                  "--driver-java-options", f"-Dlog4j2.configurationFile={console_log4j_config()}"]
        if self.spark_cluster:
            submit += ["--executor-memory", "512m", "--total-executor-cores", str(self.spark_cluster.settings.workers),
                       "--conf", f"spark.executorEnv.PYSPARK_PYTHON={sys.executable}"]
        return [*submit, str(Path(job.__file__)),
                "--input-topic", self.input_topic, "--output-topic", self.output_topic,
                "--bootstrap-server", self.bootstrap, "--app-id", self.app_id, "--checkpoint", str(self.checkpoint),
                "--trigger", "1 second", "--starting-offsets", "group",
                "--max-offsets-per-trigger", str(o.max_offsets_per_trigger),
                "--metrics-port", str(o.metrics_port + 1), "--metrics-linger", "0",
                "--producer-props", "transaction.timeout.ms=30000"]

    def _keep_alive(self) -> None:
        """Restart a child that died on its own (a fault elsewhere can take it down)."""
        for child, command in ((self.producer, self._producer_command), (self.stream, self._stream_command)):
            if child.name in self._supervised and not child.alive():
                if child.starts:
                    self._crash_loop_guard(child)
                    self.report.restarts[child.name] = self.report.restarts.get(child.name, 0) + 1
                    self.metrics.restarts.labels(**self.metrics.labels, process=child.name).inc()
                    self._say(f"{child.name} exited ({child.exit_code()}): {child.last_lines(1)[:160]}; restarting")
                child.start(command())

    def _crash_loop_guard(self, child: Child) -> None:
        """Give up, with the child's last words, when it keeps dying without letting the pipeline move."""
        now, processed = time.monotonic(), self.sampler.processed() if self.sampler else 0
        deaths = self._deaths.setdefault(child.name, [])
        deaths.append((now, processed))
        recent = [d for d in deaths if now - d[0] < 180]
        if len(recent) >= 5 and recent[0][1] == processed:
            raise EnvironmentProblem(f"the {child.name} keeps exiting without progress ({len(recent)} times in 3 min):"
                                     f" {child.last_lines(1)[:200]} (log: {child.log_path})")

    # ------------------------------------------------------------------ faults

    def _next_kinds(self):
        while True:
            kinds = list(self.options.faults)
            self._order.shuffle(kinds)
            yield from kinds

    def _broker_target(self, index: int) -> int:
        """A broker to break: on a cluster, alternately the transaction coordinator's leader and an output leader."""
        nodes = self.cluster.running_nodes()
        if len(nodes) == 1:
            return nodes[0]
        metadata = cluster_metadata(self.bootstrap)
        if index % 2 == 0:
            txn_partition = _java_string_hash(f"{self.app_id}.{self.input_topic}.0") % \
                self.cluster.settings.transaction_state_partitions
            leader = metadata.topics["__transaction_state"].partitions[txn_partition].leader
        else:
            leader = metadata.topics[self.output_topic].partitions[0].leader
        return leader if leader in nodes else nodes[0]

    def _inject(self, kind: str, occurrence: int) -> str:
        """Break something (the kind's `occurrence`-th time), undo it, and say what was done."""
        o = self.options
        if kind == "kill-driver":
            pid = self.stream.pid
            self.stream.kill(signal.SIGKILL)
            self.stream.start(self._stream_command())
            return f"SIGKILL driver pid {pid} and its session; restarted from the checkpoint"
        if kind == "kill-executor":
            return self._kill_executor(occurrence)
        if kind == "kill-worker":
            worker = occurrence % self.spark_cluster.settings.workers
            pid = self.spark_cluster.kill_worker(worker)
            time.sleep(2)
            self.spark_cluster.start()
            return f"SIGKILL Spark worker-{worker} (pid {pid}); restarted"
        if kind == "kill-broker":
            node = self._broker_target(occurrence)
            pid = self.cluster.signal_node(node, signal.SIGKILL)
            time.sleep(2)
            self.cluster.start()
            return f"SIGKILL broker node {node} (pid {pid}); restarted"
        if kind == "pause-broker":
            node = self._broker_target(occurrence)
            pause_s = o.delivery_timeout_ms / 1000 + 4
            pid = self.cluster.signal_node(node, signal.SIGSTOP)
            try:
                time.sleep(pause_s)
            finally:
                self.cluster.signal_node(node, signal.SIGCONT)
            return f"SIGSTOP broker node {node} (pid {pid}) for {pause_s:g} s (> delivery.timeout.ms), then SIGCONT"
        if kind == "delete-checkpoint":
            self.stream.kill(signal.SIGKILL)
            shutil.rmtree(self.checkpoint, ignore_errors=True)
            self.stream.start(self._stream_command())
            return "SIGKILL driver, deleted the checkpoint, restarted with --starting-offsets group"
        if kind == "restart-producer":
            pid = self.producer.pid
            self.producer.kill(signal.SIGKILL)
            self.producer.start(self._producer_command())
            return f"SIGKILL producer pid {pid}; restarted with --resume"
        raise AssertionError(kind)

    def _wait_fully_replicated(self) -> None:
        """Before breaking a broker, let the last restarted one rejoin every ISR.

        Killing a second broker while the first is still catching up can leave a partition with no
        in-sync replica to elect (min.insync.replicas=2 of 3): that tests unavailability, not
        exactly-once, and stalls the stream until the broker returns.
        """
        if self.options.brokers == 1:
            return
        lagging: list[str] = []

        def replicated() -> bool:
            try:
                lagging[:] = under_replicated(self.bootstrap)
            except EnvironmentProblem as exc:
                lagging[:] = [str(exc)]
            return not lagging
        if not self._wait_for(replicated, self.options.recovery_timeout_s, "every ISR to be full"):
            self._say(f"still under-replicated: {', '.join(lagging[:5])}{' …' if len(lagging) > 5 else ''}")

    def _kill_executor(self, occurrence: int) -> str:
        if self.spark_cluster and occurrence % 2 == 0:
            executors = self.spark_cluster.executor_pids()
            if executors:
                send_signal(executors[0], signal.SIGKILL)
                return f"SIGKILL executor JVM pid {executors[0]}"
        # Local mode (or odd rounds on a cluster): a Python worker forked by pyspark.daemon.
        roots = [self.stream.pid] + (self.spark_cluster.executor_pids() if self.spark_cluster else [])
        workers = [pid for root in roots if root for pid in descendants(root) if "pyspark.daemon" in command_line(pid)]
        forked = [pid for pid in workers if (proc_stat(pid) or (0, 0, 0))[2] in workers]
        target = (forked or workers or [None])[-1]
        if target is None:
            return "no Python worker was running; nothing killed"
        send_signal(target, signal.SIGKILL)
        return f"SIGKILL Python worker pid {target}{'' if forked else ' (the pyspark daemon)'}"

    # ------------------------------------------------------------------ rounds

    def _wait_for(self, condition, timeout_s: float, what: str) -> bool:
        deadline = time.monotonic() + timeout_s
        while not condition():
            if time.monotonic() > deadline:
                self._say(f"timed out after {timeout_s:g} s waiting for {what}")
                return False
            self._keep_alive()
            self._status()
            time.sleep(SAMPLE_EVERY_S)
        return True

    def _elapsed(self) -> float:
        return time.monotonic() - self.started

    def _recovery(self, sampler: ProgressSampler, fault_at: float, baseline: float) -> float | None:
        def recovered() -> bool:
            now = self._elapsed()
            rate = sampler.rate(max(fault_at, now - RATE_WINDOW_S), now)
            return now - fault_at >= RATE_WINDOW_S and rate is not None and rate >= RECOVERED_SHARE * baseline
        if not self._wait_for(recovered, self.options.recovery_timeout_s, "throughput to recover"):
            return None
        return round(self._elapsed() - fault_at, 1)

    def _round(self, sampler: ProgressSampler, index: int, kind: str) -> FaultRecord:
        if kind in ("kill-broker", "pause-broker"):
            self._wait_fully_replicated()
        now = self._elapsed()
        # The offered rate (records plus one marker per transaction and partition) caps the baseline:
        # a stream still catching up runs faster than it can keep up.
        offered = self.options.throughput * (1 + self.options.partitions / self.options.records_per_transaction)
        baseline = min(sampler.rate(now - 20, now) or offered, offered)
        record = FaultRecord(index, kind, round(now, 1), "")
        self._say(f"fault {index + 1}: {kind} (baseline {baseline:,.0f} offsets/s)")
        self.metrics.fault_injected(kind)
        # Alternating targets (coordinator or leader, executor JVM or Python worker) go by the
        # kind's own count, so that every kind meets each of its targets.
        record.detail = self._inject(kind, sum(1 for f in self.report.faults if f.kind == kind))
        self._keep_alive()
        record.recovery_s = self._recovery(sampler, record.at_s, baseline)
        clock = time.monotonic()
        checked = verify(self.bootstrap, self.input_topic, self.output_topic, self.app_id,
                         f"{self.output_topic}.dlq", live=True, indexes=self.verified)
        record.violations += checked.violations
        record.verify_s = round(time.monotonic() - clock, 1)
        clock = time.monotonic()
        record.violations += [f"hanging: {line}" for line in
                              wait_until_stable(self.bootstrap, [self.input_topic, self.output_topic], timeout_s=60)]
        record.stable_after_s = round(time.monotonic() - clock, 1)
        record.records_checked = checked.input_committed
        self._say(f"fault {index + 1}: {kind}: {record.detail}; recovered in {record.recovery_s} s;"
                  f" verify {'ok' if not record.violations else 'FAILED: ' + '; '.join(record.violations)}"
                  f" ({checked.input_committed:,} records in {record.verify_s} s;"
                  f" every open transaction ended within {record.stable_after_s} s)")
        return record

    def run(self) -> SoakReport:
        """Run the whole soak and write its report; the report says whether it passed."""
        o = self.options
        self.output_dir.mkdir(parents=True, exist_ok=True)
        self._say(f"soak {self.run_id}: {o.duration_s:g} s, faults {', '.join(o.faults)}, {o.brokers} broker(s),"
                  f" master {o.master}; report in {self.output_dir}")
        started_cluster = not self.cluster.running_nodes()  # a cluster the soak starts, it stops
        self.cluster.start()
        try:
            if self.spark_cluster:
                self.spark_cluster.start()
            replication = min(3, o.brokers)
            for topic, partitions in ((self.input_topic, o.partitions), (self.output_topic, o.partitions),
                                      (f"{self.output_topic}.dlq", 1)):
                create_topic(self.bootstrap, topic, partitions, replication)
            self.metrics.serve(o.metrics_port + 2)
            sampler = self.sampler = ProgressSampler(self.bootstrap, self.app_id, self.input_topic, o.partitions,
                                                     self.started)
            self.metrics.follow(sampler)
            self._keep_alive()
            if not self._wait_for(lambda: sampler.processed() >= o.gate_records, 300, "the first records"):
                raise EnvironmentProblem(f"the pipeline never started; see {self.output_dir / 'logs'}")
            kinds = self._next_kinds()
            gate = sampler.processed()
            while self._elapsed() < o.duration_s:
                if not self._wait_for(lambda: sampler.processed() >= gate + o.gate_records
                                      or self._elapsed() >= o.duration_s, o.recovery_timeout_s, "progress"):
                    self.report.violations.append(f"stalled: fewer than {o.gate_records} records in"
                                                  f" {o.recovery_timeout_s:g} s at {self._elapsed():.0f} s")
                    break
                if self._elapsed() >= o.duration_s or len(self.report.faults) == o.max_faults:
                    break
                fault = self._round(sampler, len(self.report.faults), next(kinds))
                self.report.faults.append(fault)
                self.report.violations += [f"after fault {fault.index + 1} ({fault.kind}): {v}" for v in fault.violations]
                self.metrics.fault_done(fault, len(self.report.violations))
                self.report.timeline = sampler.snapshot()
                self.report.seconds = round(self._elapsed(), 1)
                write_report(self.report, self.output_dir)  # a soak of days keeps a current report
                gate = sampler.processed()
            self._finish(sampler)
            self.report.finished = True
        finally:
            self.producer.kill(signal.SIGKILL)
            self.stream.kill(signal.SIGKILL)
            if self.sampler is not None:
                self.sampler.stop()
                self.report.timeline = self.sampler.snapshot()
            self.report.seconds = round(self._elapsed(), 1)
            write_report(self.report, self.output_dir)
            if started_cluster:
                self.cluster.stop()
        return self.report

    def _finish(self, sampler: ProgressSampler) -> None:
        """Stop and fence the producer, let the stream drain, then run the full verifier."""
        self._say("stopping the producer and fencing its transactional id; draining the stream")
        self._supervised.discard("producer")
        self.producer.kill(signal.SIGKILL)
        fence(self.bootstrap, self.producer_id)

        def drained() -> bool:
            ends = {p: end for p, (_, end) in stable_and_end_offsets(self.bootstrap, self.input_topic).items()}
            committed = group_offsets(self.bootstrap, self.app_id, self.input_topic, sorted(ends))
            return all(committed.get(p, -1) == end or end == 0 for p, end in ends.items())
        if not self._wait_for(drained, self.options.recovery_timeout_s, "the stream to drain"):
            self.report.violations.append("the stream did not drain its input at the end")
        self.stream.kill(signal.SIGTERM, timeout_s=30)
        clock = time.monotonic()
        final = verify(self.bootstrap, self.input_topic, self.output_topic, self.app_id, f"{self.output_topic}.dlq")
        self.report.final = {**json.loads(final.to_json()), "seconds": round(time.monotonic() - clock, 1)}
        self.report.violations += [f"final verify: {v}" for v in final.violations]
        self.metrics.violations.labels(**self.metrics.labels).set(len(self.report.violations))
        self.metrics.checked.labels(**self.metrics.labels).set(final.input_committed)
        self._say(f"final verify: {'ok' if final.ok else 'FAILED: ' + '; '.join(final.violations)};"
                  f" {final.input_committed:,} committed input records, {final.output_committed:,} output,"
                  f" {final.input_aborted:,} aborted input hidden")

    # ------------------------------------------------------------------ output

    def _say(self, line: str) -> None:
        print(f"[{_clock(self._elapsed())}] {line}", file=self.out, flush=True)

    def _status(self) -> None:
        """A status line every 10 s: elapsed, faults by kind, processed offsets, violations."""
        if time.monotonic() - self._last_status < 10:
            return
        self._last_status = time.monotonic()
        kinds = Counter(f.kind for f in self.report.faults)
        self._say(f"status: {_clock(self._elapsed())} of {_clock(self.options.duration_s)}, faults {sum(kinds.values())}"
                  f" ({', '.join(f'{k} {n}' for k, n in sorted(kinds.items())) or 'none yet'}),"
                  f" processed {self.sampler.processed():,} offsets, violations {len(self.report.violations)}")



def fence(bootstrap: str, transactional_id: str) -> None:
    """Abort whatever transaction a dead producer left open, as its successor's init does."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id}, logger=CLIENT_LOG)
    producer.init_transactions(60)


def _java_string_hash(text: str) -> int:
    """Java's String.hashCode, made non-negative as Kafka's Utils.abs does: the coordinator's partition."""
    value = 0
    for char in text:
        value = (31 * value + ord(char)) & 0xFFFFFFFF
    if value >= 2**31:
        value -= 2**32
    return value & 0x7FFFFFFF if value != -(2**31) else 0


def _clock(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def write_report(report: SoakReport, output_dir: Path) -> None:
    """Write report.json, report.md and timeline.png into the output folder."""
    from eosbench.plots import soak_timeline_png

    output_dir.mkdir(parents=True, exist_ok=True)
    (output_dir / "report.json").write_text(report.to_json())
    soak_timeline_png(report.timeline, [(f.at_s, f.kind, f.recovery_s) for f in report.faults],
                      output_dir / "timeline.png", f"soak {report.run_id}: committed input offsets per second")
    (output_dir / "report.md").write_text(report_markdown(report))


def report_markdown(report: SoakReport) -> str:
    """The Markdown summary: verdict, faults by kind with recovery times, every violation."""
    final = report.final
    verdict = ("PASSED" if report.ok else "FAILED") if report.finished else (
        "RUNNING" if report.ok else "FAILING")
    lines = [f"# Soak {report.run_id}: {verdict}", "",
             f"- duration: {report.seconds / 60:.1f} min; options: " +
             ", ".join(f"{k}={v}" for k, v in report.options.items() if k not in ("output_dir", "state_dir")),
             f"- faults injected: {len(report.faults)}, survived: {sum(f.survived for f in report.faults)}",
             f"- records verified at the end: {final.get('input_committed', 0):,} committed input records,"
             f" {final.get('output_committed', 0):,} output records, {final.get('input_aborted', 0):,} aborted"
             f" input records hidden, {final.get('output_aborted_hidden', 0):,} aborted output records hidden",
             f"- unplanned restarts: {report.restarts or 'none'}",
             f"- violations: {len(report.violations)}", "",
             "| fault | injected | survived | recovery median (s) | recovery max (s) |", "|---|---|---|---|---|"]
    for kind, entry in sorted(report.by_kind().items()):
        lines.append(f"| {kind} | {entry['injected']} | {entry['survived']} | {entry['recovery_median_s']} |"
                     f" {entry['recovery_max_s']} |")
    lines += ["", "![timeline](timeline.png)", "", "## Rounds", "",
              "| # | at (s) | fault | what was done | recovery (s) | records checked | verify |",
              "|---|---|---|---|---|---|---|"]
    for f in report.faults:
        lines.append(f"| {f.index + 1} | {f.at_s} | {f.kind} | {f.detail} | {f.recovery_s} | {f.records_checked:,} |"
                     f" {'ok' if not f.violations else '; '.join(f.violations)} |")
    if report.violations:
        lines += ["", "## Violations", ""] + [f"- {v}" for v in report.violations]
    return "\n".join(lines) + "\n"
