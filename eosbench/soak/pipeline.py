"""The pipeline under soak: the seeded producer feeding the streaming job, each a supervised child.

The producer is `eosbench produce --resume` and the stream is `spark-submit streaming/job.py` (local
or standalone master, or YARN in client mode; on a cluster the executors run from `eosbench package`'s
archive, as they would on a user's cluster, and on YARN with `eosbench stream --master yarn`'s settings); each runs in its own session, so that a fault kills exactly that process and
its descendants, and is restarted whenever it dies. With `--pipeline java-copier` Kafka's own
TransactionalMessageCopier takes the stream's place, one supervised child per input partition
(`copier-<partition>`), as in Kafka's transactions system test: its group is the app id and its
transactional ids are `<app id>.<input topic>.<partition>`, as the sink's. A copier copies up to
its partition's end offset as of its launch and then exits 0 (it has no endless mode), so a copier
that ended so is relaunched at once, resuming from its group's offset, and is no restart. With
`--pipeline kafka-streams` or `flink` the peer engine (eosbench/local/peers.py) takes the stream's
place, exactly-once, as one supervised JVM: its group is the app id, its state under the run's
folder (`peer-state`), from which a relaunched Flink job resumes.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from confluent_kafka import Producer

from conf.client_config import Connection, connection
from conf.client_log import CLIENT_LOG
from conf.settings import console_log4j_config
from conf.stream_settings import checkpoint_uri
from eosbench.console.errors import EnvironmentProblem
from eosbench.local.executor_env import executor_environment, ships_environment, spark_submit_command
from eosbench.local.jars import resolve_bundle, transactional_copier_command
from eosbench.local.peers import PeerSettings, peer_command
from eosbench.local.processes import Child
from eosbench.local.s3 import render_properties, s3a_checkpoint_session, write_private
from eosbench.local.spark import cluster_spark_conf
from eosbench.local.spark_cluster import StandaloneCluster
from eosbench.soak.options import PEER_PIPELINES, SoakOptions
from streaming import job

VISIBILITY_LOG = "visibility.log"
CRASH_LOOP_WINDOW_S = 180
CRASH_LOOP_DEATHS = 5


class Pipeline:
    """The producer and the stream of one soak: their topics, ids, command lines and supervision."""

    def __init__(self, options: SoakOptions, run_id: str, bootstrap: str | Connection, output_dir: Path,
                 spark_cluster: StandaloneCluster | None):
        self.options, self.run_id, self.bootstrap, self.spark_cluster = options, run_id, bootstrap, spark_cluster
        self.input_topic, self.output_topic = f"soak-{run_id}-in", f"soak-{run_id}-out"
        self.dead_letter_topic = f"{self.output_topic}.dlq"
        self.app_id = f"soak-{run_id}"
        self.producer_id = f"soak.{run_id}.producer"
        # A Hadoop URI wherever it lives: the driver and faults.py's FsShell read and delete it by it.
        self.checkpoint = checkpoint_uri(f"{options.checkpoint_folder(output_dir)}/checkpoint-{run_id}")
        self.visibility_log = output_dir / VISIBILITY_LOG  # every launch of the stream appends to it
        # The driver's scratch (spark.local.dir and java.io.tmpdir): a SIGKILLed driver never removes
        # its own, and each holds the unpacked executor archive (320 MB) and the archive it fetched to
        # unpack (111 MB); 155 of them filled /tmp in a cluster soak.
        self.driver_scratch = output_dir / "spark-local"
        env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
        self.producer = Child("producer", output_dir / "logs", env)
        self.copiers = ([Child(f"copier-{partition}", output_dir / "logs", env) for partition in range(options.partitions)]
                        if options.pipeline == "java-copier" else [])
        self.peer_state_dir = output_dir / "peer-state"  # Kafka Streams' state.dir, Flink's retained checkpoints
        self._peer_settings = (PeerSettings(options.pipeline, "exactly-once", self.input_topic, self.output_topic,
                                            self.app_id, self.peer_state_dir, heap_mb=384)
                               if options.pipeline in PEER_PIPELINES else None)
        # An s3a:// checkpoint adds hadoop-aws, its SDK and the checkpoint file manager.
        self._spark_jars = ([*resolve_bundle("spark"), *(resolve_bundle("s3a") if options.s3_checkpoint else [])]
                            if options.pipeline == "spark" else [])
        on_cluster = ships_environment(options.master) and options.pipeline == "spark"
        # Built once per soak (or taken from the cache): every relaunch of the stream ships the same archive.
        self._environment = executor_environment() if on_cluster else None
        # On YARN, what `eosbench stream --master yarn` sets: it also puts HADOOP_CONF_DIR into this
        # process's environment and takes PYTHONPATH out, so the stream's env is read after it (the
        # producer's before: it runs this process's code, not the archive's).
        self._yarn_conf = (cluster_spark_conf("yarn", {}, options.yarn_state_dir)
                           if on_cluster and options.master == "yarn" else None)
        stream_env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"} if self._yarn_conf else env
        self.stream = Child(self.peer or "stream", output_dir / "logs", stream_env)
        # Each launch of the stream draws its slot count from --txn-slots, seeded apart from the fault order.
        self._slot_draws = random.Random(f"{options.seed}/txn-slots")
        self.slot_launches: list[int] = []  # the slot count of each launch, in order (with --txn-slots)
        self.stages = self.copiers or [self.stream]  # what copies input to output, one child or one per partition
        self._supervised = {"producer", *(child.name for child in self.stages)}
        self._deaths: dict[str, list[tuple[float, int]]] = {}

    @property
    def peer(self) -> str | None:
        """The peer engine in the stream's place (kafka-streams or flink), or None."""
        return self._peer_settings.engine if self._peer_settings else None

    def _producer_command(self) -> list[str]:
        o = self.options
        return [sys.executable, "-m", "eosbench.cli", "produce", "--topic", self.input_topic,
                "--num-records", str(10**12), "--record-size", "100", "--throughput", str(o.throughput),
                "--bootstrap-server", str(self.bootstrap), *connection(self.bootstrap).tool_arguments(),
                "--transactional-id", self.producer_id,
                "--records-per-transaction", str(o.records_per_transaction),
                "--transaction-abort-ratio", str(o.abort_ratio), "--seed", str(o.seed), "--run-id", self.run_id,
                "--resume", "--metrics-port", str(o.metrics_port), "--metrics-linger", "0", "--reporting-interval", "30000",
                "--producer-props", "acks=all", f"delivery.timeout.ms={o.delivery_timeout_ms}",
                f"request.timeout.ms={o.delivery_timeout_ms // 2}", "linger.ms=5", "transaction.timeout.ms=30000",
                # Partitions an add-partitions round creates get records within seconds, not librdkafka's 5 minutes.
                "topic.metadata.refresh.interval.ms=5000"]

    def _stream_command(self) -> list[str]:
        o = self.options
        job_arguments = [
            "--input-topic", self.input_topic, "--output-topic", self.output_topic,
            "--bootstrap-server", str(self.bootstrap), *connection(self.bootstrap).tool_arguments(),
            "--app-id", self.app_id, "--checkpoint", self.checkpoint,
            "--trigger", o.trigger, "--starting-offsets", "group", "--txn-scope", o.txn_scope,
            "--source", o.source, *(["--txn-slots", str(self.slot_launches[-1])] if o.txn_slots else []),
            "--metrics-port", str(o.metrics_port + 1), "--metrics-linger", "0",
            # Real-time transactions last milliseconds, so pause-broker (delivery.timeout.ms + 4 s)
            # outlasts their timeout and the coordinator aborts the one in flight on its return.
            "--producer-props", f"transaction.timeout.ms={o.delivery_timeout_ms + 2000 if o.realtime else 30000}",
            # Real-time mode reads as records arrive, and its commits are not timed by the observer.
            *([] if o.realtime else ["--max-offsets-per-trigger", str(o.max_offsets_per_trigger),
                                     "--visibility-log", str(self.visibility_log)])]
        driver = ["--driver-memory", "768m", "--conf", "spark.task.maxFailures=4", *self._s3a_arguments(),
                  "--conf", f"spark.local.dir={self.driver_scratch}",
                  "--driver-java-options",
                  f"-Dlog4j2.configurationFile={console_log4j_config()} -Djava.io.tmpdir={self.driver_scratch}"]
        if self._yarn_conf:
            executors = {**self._yarn_conf, "spark.executor.memory": "512m", "spark.executor.instances": "2",
                         # Every kill-container and kill-executor is an executor failure, and Spark
                         # fails the application at spark.executor.maxNumFailures (4 with 2
                         # executors) counted over its whole life: a long soak counts recent ones only.
                         "spark.executor.failuresValidityInterval": "10m"}
        elif self._environment:
            executors = {"spark.executor.memory": "512m", "spark.cores.max": str(self.spark_cluster.settings.workers),
                         # An executor fetches the archive into a java.io.tmpdir folder that only its
                         # shutdown hook removes, which a SIGKILL skips: in its own work folder (its
                         # cwd), the worker's cleanup of the application's folder takes it too.
                         "spark.executor.extraJavaOptions": "-Djava.io.tmpdir=."}
        if self._environment:
            command = spark_submit_command(self._environment, o.master, self._spark_jars, job_arguments, executors)
            return [command[0], *driver, *command[1:]]
        return [str(Path(sys.executable).parent / "spark-submit"), "--master", o.master,
                "--jars", ",".join(str(jar) for jar in self._spark_jars), *driver, str(Path(job.__file__)),
                *job_arguments]

    def _s3a_arguments(self) -> list[str]:
        """For an s3a:// checkpoint: S3A's settings and the checkpoint file manager, in a 0600 properties file.

        In a file, as `eosbench stream --s3a-config` reads them, so that the keys are on no command
        line; spark-submit's --properties-file takes the place of spark-defaults.conf.
        """
        config = self.options.s3a_config_file
        if config is None:
            return []
        _, spark_conf = s3a_checkpoint_session(self.checkpoint, config)
        # In the driver's scratch, which the soak empties before each launch and removes at its end:
        # the keys are in no file the run's folder keeps.
        properties = self.driver_scratch / "spark-s3a.properties"
        write_private(properties, render_properties(spark_conf))
        return ["--properties-file", str(properties)]

    def _copier_command(self, partition: int) -> list[str]:
        return transactional_copier_command(str(self.bootstrap), self.input_topic, partition, self.output_topic,
                                            self.app_id, f"{self.app_id}.{self.input_topic}.{partition}",
                                            self.options.records_per_transaction, heap_mb=128)

    def start(self, child: Child) -> None:
        """Launch (or relaunch) the producer, the stream, a copier or the peer."""
        if child is self.producer:
            child.start(self._producer_command())
        elif child in self.copiers:
            child.start(self._copier_command(self.copiers.index(child)))
        elif self._peer_settings:
            child.start(peer_command(self._peer_settings, self.bootstrap))
        else:
            shutil.rmtree(self.driver_scratch, ignore_errors=True)  # the last driver's: it is dead
            self.driver_scratch.mkdir(parents=True)  # java.io.tmpdir must exist before the JVM starts
            if self.options.txn_slots:
                self.slot_launches.append(self._slot_draws.choice(self.options.txn_slots))
            child.start(self._stream_command())

    def restart(self, child: Child) -> int | None:
        """SIGKILL the producer, the stream or a copier with its whole session and start it again; return its old pid."""
        pid = child.pid
        child.kill(signal.SIGKILL)
        self.start(child)
        return pid

    def revive(self, processed: int, on_restart: Callable[[Child], None]) -> None:
        """Start each child that is not running: the first time, or after it died on its own.

        A fault elsewhere can take a child down. `on_restart` hears of each restart before it
        happens, while the child's exit code and log are still those of the launch that died.
        """
        for child in self._dead():
            caught_up = child in self.copiers and child.exit_code() == 0
            if child.starts and not caught_up:
                self._crash_loop_guard(child, processed)
                on_restart(child)
            self.start(child)

    def _dead(self) -> Iterator[Child]:
        for child in (self.producer, *self.stages):
            if child.name in self._supervised and not child.alive():
                yield child

    def _crash_loop_guard(self, child: Child, processed: int) -> None:
        """Give up, with the child's last words, when it keeps dying without letting the pipeline move."""
        now = time.monotonic()
        deaths = self._deaths.setdefault(child.name, [])
        deaths.append((now, processed))
        recent = [d for d in deaths if now - d[0] < CRASH_LOOP_WINDOW_S]
        if len(recent) >= CRASH_LOOP_DEATHS and recent[0][1] == processed:
            raise EnvironmentProblem(f"the {child.name} keeps exiting without progress ({len(recent)} times in 3 min):"
                                     f" {child.last_lines(1)[:200]} (log: {child.log_path})")

    def stop_producer(self) -> None:
        """Stop the producer for good and fence its transactional id, so that its open transaction is aborted."""
        self._supervised.discard("producer")
        self.producer.kill(signal.SIGKILL)
        fence(self.bootstrap, self.producer_id)

    def kill(self) -> None:
        """SIGKILL every child (the end of a soak, however it ends)."""
        for child in (self.producer, *self.stages):
            child.kill(signal.SIGKILL)
        shutil.rmtree(self.driver_scratch, ignore_errors=True)


def fence(bootstrap: str | Connection, transactional_id: str) -> None:
    """Abort whatever transaction a dead producer left open, as its successor's init does."""
    producer = Producer(connection(bootstrap).librdkafka(**{"transactional.id": transactional_id}), logger=CLIENT_LOG)
    producer.init_transactions(60)
