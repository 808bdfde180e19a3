"""Every knob of one soak, one field per `eosbench soak` flag, and the checks that refuse a soak that cannot run."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from conf.local_servers import DEFAULT_NAMENODE_PORT, ClusterSettings, HdfsSettings, S3Settings
from conf.settings import validation_error_line
from conf.stream_settings import REALTIME_PREFIX, StreamSettings, checkpoint_uri
from eosbench.console.errors import BadInput

PIPELINES = ("spark", "java-copier", "kafka-streams", "flink")
# The pipelines that run an engine other than Spark, the peers a user would weigh it against
# (eosbench/local/peers.py): one supervised process each, exactly-once, judged by the same verifier.
PEER_PIPELINES = ("kafka-streams", "flink")


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
    yarn_state_dir: Path | None = None  # with --master yarn: the `eosbench yarn` folder (else as `stream` finds YARN)
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
    results_dir: Path = Path("results")
    output_dir: Path | None = None  # the run's own folder; default <results_dir>/soak/<run id>
    max_faults: int | None = None  # end early after this many rounds (--duration still bounds the soak)
    security: str = "plaintext"  # the soak's local cluster: plaintext or sasl-ssl
    command_config: Path | None = None  # the pipeline's client settings (default: the cluster's own, admin if secured)
    pipeline: str = "spark"  # what copies input to output: the Spark job, Kafka's copier, Kafka Streams or Flink
    txn_scope: str = "auto"  # the Spark job's transactional sink scope (--txn-scope): a new soak's group gets slot
    source: str = "auto"  # the Spark job's Kafka source (--source): Spark's, the grouped one, or the job's choice
    txn_slots: tuple[int, ...] = ()  # slot scope's G, drawn (seeded) from these at each launch of the stream
    trigger: str = "1 second"  # the Spark job's --trigger: an interval, or realtime:<interval> (real-time mode)
    checkpoint: str | None = None  # the folder (a path or Hadoop URI) that holds the run's checkpoint-<run id>
    hdfs: bool = False  # run the soak's own HDFS (`eosbench hdfs`) and keep the checkpoint there
    hdfs_port: int = DEFAULT_NAMENODE_PORT
    hdfs_state_dir: Path | None = None
    s3_state_dir: Path | None = None  # the local `eosbench s3` of an s3a:// checkpoint, which restart-s3 restarts
    s3a_config: Path | None = None  # S3A's settings for an s3a:// checkpoint on some other store

    @property
    def realtime(self) -> bool:
        """Whether the Spark job runs in real-time mode (--trigger realtime:<interval>)."""
        return self.trigger.startswith(REALTIME_PREFIX)

    def _check_realtime(self) -> None:
        """Refuse a real-time soak that cannot start: Kafka's copier, or a local master with fewer threads than partitions."""
        if self.pipeline != "spark":
            raise BadInput(f"--trigger {self.trigger}: real-time mode is the Spark job's; --pipeline {self.pipeline}"
                           " runs no Spark")
        threads = re.fullmatch(r"local\[(\d+)(?:,\s*\d+)?\]", self.master)
        if threads and int(threads.group(1)) < self.partitions:
            raise BadInput(f"--trigger {self.trigger}: real-time mode runs one task per partition at once, and"
                           f" --master {self.master} has {threads.group(1)} threads for {self.partitions} partitions;"
                           f" use --master local[{self.partitions},4] or fewer --partitions")

    def _check_txn_slots(self) -> None:
        """Refuse --txn-slots where no slot scope runs: another scope, real-time mode, or Kafka's copier."""
        runs = (f"--pipeline {self.pipeline}" if self.pipeline != "spark" else
                f"--trigger {self.trigger}" if self.realtime else
                f"--txn-scope {self.txn_scope}" if self.txn_scope not in ("slot", "auto") else "")
        if runs:
            raise BadInput(f"--txn-slots is slot scope's slot count, and this soak runs {runs}: use --txn-scope slot"
                           " in micro-batches")

    @property
    def hdfs_settings(self) -> HdfsSettings:
        """The shape of the soak's own HDFS (meaningful with --hdfs)."""
        return HdfsSettings(port=self.hdfs_port, **({"state_dir": self.hdfs_state_dir} if self.hdfs_state_dir else {}))

    @property
    def s3_checkpoint(self) -> bool:
        """Whether the checkpoint lives on an S3 API store (--checkpoint s3a://…)."""
        return (self.checkpoint or "").startswith("s3a://")

    @property
    def local_s3(self) -> S3Settings | None:
        """The local S3 server that holds the checkpoint (run by the soak if need be); None with --s3a-config or off S3."""
        if not self.s3_checkpoint or self.s3a_config:
            return None
        return S3Settings(**({"state_dir": self.s3_state_dir} if self.s3_state_dir else {}))

    @property
    def s3a_config_file(self) -> Path | None:
        """S3A's settings for an s3a:// checkpoint: --s3a-config, else the local S3's file; None off S3."""
        return self.s3a_config or (self.local_s3.credentials_file if self.local_s3 else None)

    def checkpoint_folder(self, output_dir: Path) -> str:
        """Where the run's checkpoint folder goes: --checkpoint, else the soak's HDFS with --hdfs, else the run's folder."""
        if self.checkpoint:
            return self.checkpoint.rstrip("/")
        return f"{self.hdfs_settings.uri}/eosbench/soak" if self.hdfs else str(output_dir)

    def validate(self) -> None:
        """Raise BadInput (one line) for a soak that cannot run as asked (its --faults: faults.refuse_unrunnable_faults)."""
        if self.pipeline not in PIPELINES:
            raise BadInput(f"--pipeline: unknown pipeline {self.pipeline!r} (choose from {', '.join(PIPELINES)})")
        if self.pipeline == "java-copier" and (self.security != "plaintext" or self.command_config):
            raise BadInput("--pipeline java-copier: Kafka's TransactionalMessageCopier takes no client settings;"
                           " run it on a plaintext cluster (no --security sasl-ssl, no --command-config)")
        if self.source not in ("spark", "auto") and self.pipeline != "spark":
            raise BadInput(f"--source {self.source} is the Spark job's; --pipeline {self.pipeline} runs no Spark")
        if self.txn_slots:
            self._check_txn_slots()
        if self.checkpoint:
            checkpoint_uri(self.checkpoint)  # a scheme no checkpoint may use fails here, in one line
        if (self.s3a_config or self.s3_state_dir) and not self.s3_checkpoint:
            flag = "--s3a-config" if self.s3a_config else "--s3-state-dir"
            raise BadInput(f"{flag} is for an s3a:// checkpoint; --checkpoint is {self.checkpoint or 'the run folder'}")
        if self.s3a_config and not self.s3a_config.is_file():
            raise BadInput(f"--s3a-config {self.s3a_config}: no such file")
        try:
            # The source with the trigger and the scope: grouped refuses real-time mode and partition scope.
            StreamSettings(input_topic="input", output_topic="output", trigger=self.trigger, source=self.source,
                           txn_scope=self.txn_scope)
        except ValidationError as invalid:  # the stream would refuse it at every relaunch
            raise BadInput(validation_error_line(invalid)) from None
        if self.realtime:
            self._check_realtime()
        if self.yarn_state_dir and self.master != "yarn":
            raise BadInput(f"--yarn-state-dir names the YARN of --master yarn, and this soak runs --master {self.master}")
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
