"""`eosbench soak`: the pipeline runs on while faults are injected, and exactly-once is proven after each.

The method follows Kafka's transaction system tests (a copier per input partition, clean and
hard bounces, read_committed checks for duplicates and losses) and Jepsen's Kafka workload
(lost writes, duplicates, aborted reads). The seeded producer (`eosbench produce --resume`)
feeds the streaming job (`spark-submit streaming/job.py`, local or standalone master, or YARN); each
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
import random
import shutil
import signal
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from pathlib import Path

from confluent_kafka import KafkaException

from conf.client_config import ClientConfig, Connection
from conf.failures import kafka_reason
from conf.local_servers import ClusterSettings, SparkClusterSettings
from eosbench.console.errors import BadInput, EnvironmentProblem, classify_failure
from eosbench.local.broker import LocalCluster
from eosbench.local.hdfs import LocalHdfs
from eosbench.local.kafka_admin import create_topic
from eosbench.local.s3 import LocalS3
from eosbench.local.processes import Child
from eosbench.local.spark_cluster import StandaloneCluster
from eosbench.local.yarn import LocalYarn, yarn_target
from eosbench.soak.faults import FAULTS, YARN_FAULTS, refuse_unrunnable_faults
from eosbench.soak.live_verify import LiveVerifier
from eosbench.soak.metrics import SoakMetrics
from eosbench.soak.options import SoakOptions
from eosbench.soak.pipeline import Pipeline
from eosbench.soak.progress import SAMPLE_EVERY_S, ProgressGate, ProgressSampler
from eosbench.soak.report import FaultRecord, SoakReport, UnplannedExit, deleted_note, write_report

FIRST_RECORDS_TIMEOUT_S = 300
STATUS_EVERY_S = 10
# The soak stops, with its report, before its brokers, HDFS or Spark run out of disk: a full disk
# shows itself as timeouts and failed checkpoint writes everywhere at once, not as its own cause.
MIN_FREE_DISK_BYTES = 2 * 1024**3


class Soak:
    """One soak run: the cluster, the pipeline, the rounds and the report."""

    def __init__(self, options: SoakOptions, out=sys.stdout):
        refuse_unrunnable_faults(options)
        options.validate()
        self.options, self.out = options, out
        self.run_id = uuid.uuid4().hex[:8]
        self.output_dir = options.output_dir or options.results_dir / "soak" / self.run_id
        self.cluster = LocalCluster(ClusterSettings(
            brokers=options.brokers, port=options.port, security=options.security,
            **({"state_dir": options.state_dir} if options.state_dir else {})))
        self.client_config = ClientConfig.load(options.command_config)  # a bad file fails before brokers start
        # How the soak's clients connect; a secured cluster's settings exist once it has started (run()).
        self.bootstrap: str | Connection = self.cluster.settings.bootstrap_servers
        self.spark_cluster = (StandaloneCluster.from_state_dir(options.spark_state_dir or SparkClusterSettings().state_dir)
                              if options.master.startswith("spark://") else None)
        self.hdfs = LocalHdfs(options.hdfs_settings) if options.hdfs else None
        s3_settings = options.local_s3  # the server last started from that folder keeps its port
        self.s3 = (LocalS3.from_state_dir(s3_settings.state_dir) or LocalS3(s3_settings)) if s3_settings else None
        self.yarn = soak_yarn(options)
        self.metrics = SoakMetrics(self.run_id)
        self.report = SoakReport(self.run_id, {k: str(v) for k, v in asdict(options).items()}, time.time())
        self.started = time.monotonic()
        self.pipeline = Pipeline(options, self.run_id, self.bootstrap, self.output_dir, self.spark_cluster)
        self.report.slot_launches = self.pipeline.slot_launches  # the report shows each launch's slot count
        self.verifier = LiveVerifier(self.pipeline)
        self._order = random.Random(options.seed)
        self._last_status = 0.0
        self.sampler: ProgressSampler | None = None

    def run(self) -> SoakReport:
        """Run the whole soak and write its report; the report says whether it passed."""
        o, p = self.options, self.pipeline
        self.output_dir.mkdir(parents=True, exist_ok=True)
        self.say(f"soak {self.run_id}: {o.duration_s:g} s, faults {', '.join(o.faults)}, {o.brokers} broker(s),"
                 f" {what_copies(o, self.pipeline)}; report in {self.output_dir}")
        if o.brokers == 1 and "kill-broker" in o.faults:
            self.say("note: on one broker, kill-broker can make Kafka itself commit an aborted transaction's records"
                     " (docs/soak.md, Found while soaking); run --brokers 3 to judge the pipeline under broker kills")
        started_cluster = not self.cluster.running_nodes()  # a cluster the soak starts, it stops
        self.cluster.start()
        self.bootstrap = self.pipeline.bootstrap = (
            self.client_config.connection(self.cluster.settings.bootstrap_servers) if self.options.command_config
            else self.cluster.connection)
        started_hdfs = bool(self.hdfs) and not any(daemon.pid for daemon in self.hdfs.status())  # so with HDFS
        started_s3 = bool(self.s3) and self.s3.pid() is None  # and with S3
        try:
            if self.hdfs:
                self.hdfs.start()
            if self.s3:
                self.s3.start()
            if self.spark_cluster:
                self.spark_cluster.start()
            replication = min(3, o.brokers)
            topics = ((p.input_topic, o.partitions), (p.output_topic, o.partitions), (p.dead_letter_topic, 1))
            with ThreadPoolExecutor(len(topics)) as creating:  # each waits for its leaders: the three side by side
                for created in [creating.submit(create_topic, self.bootstrap, topic, partitions, replication)
                                for topic, partitions in topics]:
                    created.result()
            self.metrics.serve(o.metrics_port + 2)
            sampler = self.sampler = ProgressSampler(self.bootstrap, p.app_id, p.input_topic, o.partitions,
                                                     self.started)
            self.metrics.follow(sampler)
            self._keep_alive()
            self.verifier.start_reading_ahead()
            gate = ProgressGate(sampler, o.gate_records)
            if not self.wait_for(gate.is_open, FIRST_RECORDS_TIMEOUT_S, "the first records"):
                raise EnvironmentProblem(f"the pipeline never started; see {self.output_dir / 'logs'}")
            kinds = self._next_kinds()
            gate.close()
            # The gate opens before a fault, and none follows the last: the drain at the end proves
            # that the stream moves on after it (the gate would only have waited for more records).
            while self._elapsed() < o.duration_s and len(self.report.faults) != o.max_faults:
                if not self.wait_for(lambda: gate.is_open() or self._elapsed() >= o.duration_s,
                                     o.recovery_timeout_s, "progress"):
                    self.report.violations.append(f"stalled: fewer than {o.gate_records} records in"
                                                  f" {o.recovery_timeout_s:g} s at {self._elapsed():.0f} s")
                    break
                if self._elapsed() >= o.duration_s:
                    break
                fault = self._round(sampler, len(self.report.faults), next(kinds))
                self.report.faults.append(fault)
                self.report.violations += [f"after fault {fault.index + 1} ({fault.kind}): {v}" for v in fault.violations]
                self.metrics.fault_done(fault, len(self.report.violations))
                self.report.timeline = sampler.snapshot()
                self.report.seconds = round(self._elapsed(), 1)
                write_report(self.report, self.output_dir)  # a soak of days keeps a current report
                gate.close()
            self._finish()
            self.report.finished = True
        except BaseException as exc:  # the report says why the soak ended before its drain and final verify
            self.report.stopped = "interrupted" if isinstance(exc, KeyboardInterrupt) else classify_failure(exc)[1]
            raise
        finally:
            self.verifier.stop_reading_ahead()
            p.kill()
            if self.sampler is not None:
                self.sampler.stop()
                self.report.timeline = self.sampler.snapshot()
            self.report.seconds = round(self._elapsed(), 1)
            write_report(self.report, self.output_dir)
            if started_cluster:
                self.cluster.stop()
            if started_hdfs:
                self.hdfs.stop()
            if started_s3:
                self.s3.stop()
        return self.report

    # ------------------------------------------------------------------ rounds

    def _next_kinds(self) -> Iterator[str]:
        while True:
            kinds = list(self.options.faults)
            self._order.shuffle(kinds)
            yield from kinds

    def _round(self, sampler: ProgressSampler, index: int, kind: str) -> FaultRecord:
        fault = FAULTS[kind]
        if fault.prepare:
            fault.prepare(self)
        now = self._elapsed()
        # The offered rate counts the records plus one marker per transaction and partition.
        offered = self.options.throughput * (1 + self.options.partitions / self.options.records_per_transaction)
        baseline = sampler.baseline(now, offered)
        record = FaultRecord(index, kind, round(now, 1), "")
        self.say(f"fault {index + 1}: {kind} (baseline {baseline:,.0f} offsets/s)")
        self.metrics.fault_injected(kind)
        # Alternating targets (coordinator or leader, executor JVM or Python worker) go by the
        # kind's own count, so that every kind meets each of its targets.
        record.detail = fault.inject(self, sum(1 for f in self.report.faults if f.kind == kind))
        # The fault is undone and a killed process reaped: a commit seen above this total is its successor's.
        undone_at, settled = self._elapsed(), sampler.committed_now()
        settled = sampler.processed() if settled is None else settled
        sampler.renew()
        self._keep_alive()
        # Recovered means committing again at 90 % of the baseline, so never before the first
        # commit: a sampler that caught up on commits it had missed shows a burst, not a recovery.
        if self.wait_for(lambda: sampler.first_move(undone_at, settled) is not None
                         and sampler.recovered(record.at_s, self._elapsed(), baseline),
                         self.options.recovery_timeout_s, "throughput to recover"):
            record.recovery_s = round(self._elapsed() - record.at_s, 1)
        first_commit = sampler.first_move(undone_at, settled)
        record.first_commit_s = round(first_commit - record.at_s, 1) if first_commit is not None else None
        self.verifier.after_fault(record, self.say)
        self.say(f"fault {index + 1}: {kind}: {record.detail}; first commit after {record.first_commit_s} s,"
                 f" recovered in {record.recovery_s} s;"
                 f" verify {'ok' if not record.violations else 'FAILED: ' + '; '.join(record.violations)}"
                 f" ({record.records_checked:,} records in {record.verify_s} s;"
                 f" every open transaction ended within {record.stable_after_s} s)"
                 f"{deleted_note(record.source_deleted, record.output_deleted)}")
        return record

    def _finish(self) -> None:
        """Stop and fence the producer, let the stream drain, then run the full verifier."""
        self.say("stopping the producer and fencing its transactional id; draining the stream")
        self.verifier.stop_reading_ahead()
        self.pipeline.stop_producer()
        if not self.wait_for(self.verifier.drained, self.options.recovery_timeout_s, "the stream to drain"):
            why = f" (the group's offsets could not be read: {self.verifier.last_read_error})" \
                if self.verifier.last_read_error else ""
            self.report.violations.append(f"the stream did not drain its input at the end{why}")
        for stage in self.pipeline.stages:
            stage.kill(signal.SIGTERM, timeout_s=30)
        clock = time.monotonic()
        try:
            final = self.verifier.final()
        except KafkaException as exc:  # the report is still written, and the soak fails with exit 1
            self.report.violations.append(f"final verify could not read the cluster: {kafka_reason(exc)}")
            self.metrics.verified(len(self.report.violations), 0)
            self.say(f"final verify FAILED: it could not read the cluster: {kafka_reason(exc)}")
            return
        self.report.final = {**json.loads(final.to_json()), "seconds": round(time.monotonic() - clock, 1)}
        self.report.violations += [f"final verify: {v}" for v in final.violations]
        self.metrics.verified(len(self.report.violations), final.input_committed)
        self.say(f"final verify: {'ok' if final.ok else 'FAILED: ' + '; '.join(final.violations)};"
                 f" {final.input_committed:,} committed input records, {final.output_committed:,} output,"
                 f" {final.input_aborted:,} aborted input hidden"
                 f"{deleted_note(final.source_deleted, final.output_deleted)}")

    # ------------------------------------------------------------------ supervision

    def wait_for(self, condition: Callable[[], bool], timeout_s: float, what: str) -> bool:
        """Wait until the condition holds, keeping the pipeline alive and the status line coming; False on timeout."""
        deadline = time.monotonic() + timeout_s
        while not condition():
            if time.monotonic() > deadline:
                self.say(f"timed out after {timeout_s:g} s waiting for {what}")
                return False
            self._keep_alive()
            self._status()
            time.sleep(SAMPLE_EVERY_S)
        return True

    def _keep_alive(self) -> None:
        """Restart a child that died on its own (a fault elsewhere can take it down)."""
        self.pipeline.revive(self.sampler.processed() if self.sampler else 0, self._count_restart)

    def _count_restart(self, child: Child) -> None:
        last_line = child.last_lines(1)
        self.report.exits.append(UnplannedExit(round(self._elapsed(), 1), child.name, child.exit_code(), last_line[:300]))
        self.metrics.restarted(child.name)
        self.say(f"{child.name} exited ({child.exit_code()}): {last_line[:160]}; restarting")

    def _elapsed(self) -> float:
        return time.monotonic() - self.started

    # ------------------------------------------------------------------ output

    def say(self, line: str) -> None:
        """Print one line of the soak's log, stamped with the time since it started."""
        print(f"[{_clock(self._elapsed())}] {line}", file=self.out, flush=True)

    def _status(self) -> None:
        """A status line every 10 s: elapsed, faults by kind, processed offsets, violations; and the disk checked."""
        if time.monotonic() - self._last_status < STATUS_EVERY_S:
            return
        self._last_status = time.monotonic()
        self._check_disk()
        kinds = Counter(f.kind for f in self.report.faults)
        self.say(f"status: {_clock(self._elapsed())} of {_clock(self.options.duration_s)}, faults {sum(kinds.values())}"
                 f" ({', '.join(f'{k} {n}' for k, n in sorted(kinds.items())) or 'none yet'}),"
                 f" processed {self.sampler.processed():,} offsets, violations {len(self.report.violations)}")


    def _check_disk(self) -> None:
        """Stop the soak, in one line, once a folder it writes to has less than MIN_FREE_DISK_BYTES free."""
        folders = [self.output_dir, self.cluster.settings.state_dir, Path(tempfile.gettempdir())]
        folders += [self.spark_cluster.settings.state_dir] if self.spark_cluster else []
        folders += [self.hdfs.settings.state_dir] if self.hdfs else []
        folders += [self.yarn.settings.state_dir] if self.yarn else []
        folders += [self.s3.settings.state_dir] if self.s3 else []
        for folder in folders:
            free = shutil.disk_usage(folder).free if folder.exists() else MIN_FREE_DISK_BYTES
            if free < MIN_FREE_DISK_BYTES:
                raise EnvironmentProblem(f"only {free / 1024**2:,.0f} MB left on the disk of {folder}: the soak stops"
                                         " before its brokers, HDFS and Spark run out of space")


def what_copies(options: SoakOptions, pipeline: Pipeline) -> str:
    """What the soak's start line says of the pipeline: the Spark master and checkpoint, or what else copies."""
    if pipeline.peer:
        return f"{pipeline.peer} exactly-once, its state in {pipeline.peer_state_dir}"
    if pipeline.copiers:
        return f"Kafka's copier, {len(pipeline.copiers)} processes"
    return f"master {options.master}, checkpoint {pipeline.checkpoint}"


def soak_yarn(options: SoakOptions) -> LocalYarn | None:
    """The local YARN a `--master yarn` soak runs on, found as `eosbench stream --master yarn` finds it; None elsewhere.

    Raises EnvironmentProblem (one line) when no YARN runs, and BadInput when a YARN fault is asked
    of a YARN that is not `eosbench yarn`'s (one named by HADOOP_CONF_DIR alone: no daemon to break).
    """
    if options.master != "yarn":
        return None
    target = yarn_target(options.yarn_state_dir)  # before the archive is packed: a missing YARN fails in a second
    if target.local is None:
        breaks_yarn = [kind for kind in options.faults if kind in YARN_FAULTS]
        if breaks_yarn:
            raise BadInput(f"--faults {breaks_yarn[0]} breaks the local YARN of `eosbench yarn start`, and this soak"
                           f" runs on HADOOP_CONF_DIR={target.conf_dir}'s: add --yarn-state-dir")
        return None
    return LocalYarn(target.local)


def _clock(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
