"""Settings of the streaming job (`eosbench stream` and `spark-submit streaming/job.py`)."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, field_validator, model_validator

from conf.client_config import PLAINTEXT, ClientConfig, Connection
from conf.metrics_endpoint import DEFAULT_METRICS_HOST, MetricsTls, metrics_tls
from conf.settings import (DEFAULT_BOOTSTRAP, SettingsError, metrics_linger_seconds, output_file_problem,
                           parse_kv_pairs)

Sink = Literal["kafka-eos", "kafka-alo", "delta"]
SinkClient = Literal["librdkafka", "kafka-python"]
TxnScope = Literal["partition", "slot", "batch"]
OutputPartitioning = Literal["key", "input"]
Process = Literal["passthrough", "checksum", "enrich"]
StartingOffsets = Literal["earliest", "latest", "group", "output"]
# spark: Spark's Kafka source, a task and a consumer per partition; grouped: eosbench's source, a
# task and a consumer per slot (streaming/source/jvm/GroupedKafkaProvider.java), micro-batch only.
Source = Literal["spark", "grouped"]
# The options the grouped source takes besides kafka.* (streaming/source/jvm/GroupedKafkaProvider.java): with
# --source auto, any other --source-options name keeps Spark's source, which has it.
GROUPED_SOURCE_OPTIONS = frozenset({
    "failondataloss", "kafkaconsumer.polltimeoutms", "minoffsetspertrigger", "maxtriggerdelay", "startingtimestamp",
    "startingoffsetsbytimestamp", "startingoffsetsbytimestampstrategy", "fetchoffset.numretries",
    "fetchoffset.retryintervalms"})
GROUPED_SOURCE_FORMAT = "eosbench-kafka-grouped"
# `--trigger realtime:<interval>`: Spark's real-time mode, the interval being its checkpoint interval.
REALTIME_PREFIX = "realtime:"
# What --trigger and a real-time trigger take as an interval: a number and a unit Spark reads.
INTERVAL = re.compile(r"^\d+(\.\d+)?\s*(ms|milliseconds?|s|seconds?|min|minutes?)$")
_INTERVAL_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "min": 60.0}


def interval_seconds(interval: str) -> float:
    """Seconds in an INTERVAL such as "1 second" or "500 ms"."""
    number, unit = re.fullmatch(r"(\d+(?:\.\d+)?)\s*(\D+)", interval.strip()).groups()
    short = {"milliseconds": "ms", "millisecond": "ms", "seconds": "s", "second": "s", "minutes": "min", "minute": "min"}
    return float(number) * _INTERVAL_UNIT_SECONDS[short.get(unit, unit)]


# Source options the job sets itself, from its own flags (Spark reads option names case-blind).
_JOB_SOURCE_OPTIONS = {"kafka.bootstrap.servers": "--bootstrap-server", "subscribe": "--input-topic",
                       "subscribepattern": "--input-topic", "assign": "--input-topic",
                       "startingoffsets": "--starting-offsets", "kafka.isolation.level": "read_committed, always",
                       "includeheaders": "true, always", "maxoffsetspertrigger": "--max-offsets-per-trigger",
                       "slots": "--txn-slots, for --source grouped"}
# How long the broker may hold a fetch of Spark's Kafka source that finds nothing new (Kafka's
# default is 500 ms). Kafka's consumer sends its next fetch as soon as a poll returns records, and
# after every poll Spark looks the partition's earliest and latest offsets up (two ListOffsets) on
# that same connection; a broker reads one request of a connection at a time, so when the poll
# ended at the log's end the look-up waited behind the held fetch. Every micro-batch task that reads
# to the end paid the whole wait, a core's tasks one after another. At 1 ms the look-up waits no
# longer than the round trips it costs anyway, and the broker still holds an empty fetch for a
# tick, so a poll that finds nothing does not send fetches back to back. A micro-batch consumer
# fetches only inside its tasks' polls, so the shorter wait adds no fetch requests. Real-time mode
# is left at Kafka's default: it never looks offsets up behind a fetch, and its tasks poll at the
# log's end all the time, so a short wait would only multiply their empty fetches.
SOURCE_FETCH_MAX_WAIT_MS = "kafka.fetch.max.wait.ms"
SOURCE_OPTION_DEFAULTS = {SOURCE_FETCH_MAX_WAIT_MS: "1"}
# The Hadoop file systems a checkpoint may live on; abfss is abfs over TLS, Azure's usual form.
CHECKPOINT_SCHEMES = ("file", "hdfs", "s3a", "abfs", "abfss")
_URI_SCHEME = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*):")


def checkpoint_uri(location: str) -> str:
    """The checkpoint as an absolute Hadoop URI: a bare path is a local folder (file:///<absolute path>).

    Raises SettingsError, in one line, for a scheme no checkpoint may use or a URI Hadoop would
    read as something else than the folder meant.
    """
    scheme = _URI_SCHEME.match(location)
    if scheme is None:
        # Hadoop's Path parses this string itself, so the path stays as it is (no percent-encoding).
        return "file://" + str(Path(location).resolve())
    if scheme["scheme"].lower() not in CHECKPOINT_SCHEMES:
        raise SettingsError(f"--checkpoint {location}: unsupported scheme {scheme['scheme']!r} (use a local path"
                            f" or a {', '.join(name + '://' for name in CHECKPOINT_SCHEMES)} URI)")
    name, rest = scheme["scheme"].lower(), location[scheme.end():]
    parts = urlsplit(f"{name}:{rest}")
    if not rest.startswith("//") or parts.query or parts.fragment:
        raise SettingsError(f"--checkpoint {location}: not a URI of the form {name}://[authority]/folder")
    try:
        _ = parts.port
    except ValueError:
        raise SettingsError(f"--checkpoint {location}: the port of {parts.netloc!r} is not a number") from None
    if parts.path.strip("/") == "":
        raise SettingsError(f"--checkpoint {location}: names no folder (the checkpoint needs a folder of its own)")
    if name == "file" and parts.netloc:
        raise SettingsError(f"--checkpoint {location}: a file URI has no host; write file:///{parts.netloc}{parts.path}"
                            " for that absolute path, or a bare path for a relative one")
    if name in ("s3a", "abfs", "abfss") and not parts.netloc:
        raise SettingsError(f"--checkpoint {location}: names no {'bucket' if name == 's3a' else 'container'}")
    return f"{name}:{rest}"  # Hadoop looks file systems up by the scheme in lower case


class StreamSettings(BaseModel):
    """One field per stream flag; cross-field rules are checked on construction."""

    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)

    input_topic: str
    output_topic: str
    bootstrap_server: str = DEFAULT_BOOTSTRAP
    app_id: str = "eosbench"
    sink: Sink = "kafka-eos"
    source: Source | Literal["auto"] = "auto"  # the job chooses (chosen_source), the default
    txn_scope: TxnScope | Literal["auto"] = "auto"  # the job chooses (streaming/sink/start.py), the default
    txn_slots: int | None = None  # slot scope's G; None: the job's total executor cores
    output_partitioning: OutputPartitioning = "key"
    pre_register_partitions: bool = False
    sink_client: SinkClient | None = None  # None: librdkafka, or kafka-python with pre-registration
    process: Process = "passthrough"
    trigger: str = "available-now"  # or an interval, or realtime:<interval> (streaming/realtime/writer.py)
    commit_interval_ms: int = 100  # real-time mode: the longest a record waits for its transaction's commit
    checkpoint: str | None = None  # a Hadoop URI or a local path (checkpoint_uri)
    starting_offsets: StartingOffsets = "earliest"
    max_offsets_per_trigger: int | None = None
    dead_letter_topic: str | None = None
    delta_path: Path | None = None
    producer_props: tuple[str, ...] = ()
    source_options: tuple[str, ...] = ()
    offsets_retention_minutes: int | None = None
    max_retries: int = 5
    metrics_port: int | None = None
    metrics_host: str = DEFAULT_METRICS_HOST
    metrics_tls_cert: Path | None = None
    metrics_tls_key: Path | None = None
    metrics_tls_client_ca: Path | None = None
    metrics_linger: float | None = None  # seconds; None: two scrape intervals when metrics_port is set
    output_json: Path | None = None
    timeout_s: float | None = None
    observe_visibility: bool = False
    visibility_log: Path | None = None  # implies observe_visibility
    # --command-config, read once (settings_from_args): how every client of the job connects.
    client_config: ClientConfig = PLAINTEXT

    @field_validator("checkpoint", mode="before")
    @classmethod
    def _path_as_text(cls, value):
        return os.fspath(value) if isinstance(value, os.PathLike) else value

    @model_validator(mode="after")
    def _rules(self) -> StreamSettings:
        realtime = self.trigger.startswith(REALTIME_PREFIX)
        if self.trigger != "available-now" and not INTERVAL.match(self.trigger.removeprefix(REALTIME_PREFIX).strip()):
            raise SettingsError("--trigger must be available-now, an interval such as '1 second', or realtime:<interval>"
                                f" such as 'realtime:5 seconds', got {self.trigger!r}")
        if "commit_interval_ms" in self.model_fields_set and not realtime:
            raise SettingsError("--commit-interval-ms applies to --trigger realtime:<interval> only")
        if self.commit_interval_ms < 1:
            raise SettingsError("--commit-interval-ms must be at least 1")
        if self.max_offsets_per_trigger is not None and self.max_offsets_per_trigger <= 0:
            raise SettingsError("--max-offsets-per-trigger must be positive")
        if self.source == "grouped" and realtime:
            raise SettingsError("--source grouped is micro-batch only: real-time mode keeps Spark's source")
        if self.source == "grouped" and self.sink == "kafka-eos" and self.txn_scope == "partition":
            raise SettingsError("--source grouped cannot run --txn-scope partition: a grouped task holds several Kafka"
                                " partitions and partition scope needs one a task; use --txn-scope slot (or auto)")
        if self.input_topic == self.output_topic:
            raise SettingsError("--input-topic and --output-topic must differ")
        if self.sink == "delta" and self.delta_path is None:
            raise SettingsError("--sink delta needs --delta-path")
        if self.pre_register_partitions and self.sink != "kafka-eos":
            raise SettingsError("--pre-register-partitions applies to --sink kafka-eos only")
        if self.sink_client is not None and self.sink != "kafka-eos":
            raise SettingsError("--sink-client applies to --sink kafka-eos only")
        if self.pre_register_partitions and self.sink_client == "librdkafka":
            raise SettingsError("--pre-register-partitions needs --sink-client kafka-python: librdkafka has no call"
                                " to register partitions before the first send")
        if self.visibility_observed and self.sink != "kafka-eos":
            raise SettingsError("--observe-visibility and --visibility-log apply to --sink kafka-eos only (its records"
                                " name their transaction)")
        if self.txn_slots is not None and (self.txn_scope not in ("slot", "auto") or self.sink != "kafka-eos"):
            raise SettingsError("--txn-slots applies to --sink kafka-eos --txn-scope slot only")
        if self.txn_slots is not None and self.txn_slots < 1:
            raise SettingsError("--txn-slots must be at least 1")
        if self.output_partitioning != "key" and self.sink != "kafka-eos":
            raise SettingsError("--output-partitioning input applies to --sink kafka-eos only")
        if self.max_retries < 0:
            raise SettingsError("--max-retries must be at least 0")
        if self.metrics_linger is not None and self.metrics_linger < 0:
            raise SettingsError("--metrics-linger must be at least 0 seconds")
        _ = self.metrics_tls  # refuses a half-given or missing certificate before the run
        _ = self.checkpoint_uri  # refuses a scheme or URI no checkpoint may use
        parse_kv_pairs(list(self.producer_props))
        for name in self.extra_source_options():
            if name.lower() in _JOB_SOURCE_OPTIONS:
                raise SettingsError(f"--source-options {name}: set by the job ({_JOB_SOURCE_OPTIONS[name.lower()]})")
            if name.lower().startswith(("kafka.security.", "kafka.sasl.", "kafka.ssl.")):
                raise SettingsError(f"--source-options {name}: security settings come from --command-config,"
                                    " which every client of the job shares")
        for name in parse_kv_pairs(list(self.producer_props)):
            if name.startswith(("security.", "sasl.", "ssl.")):
                raise SettingsError(f"--producer-props {name}: security settings come from --command-config,"
                                    " which every client of the job shares")
        if self.offsets_retention_minutes is not None and self.offsets_retention_minutes < 1:
            raise SettingsError("--offsets-retention-minutes must be at least 1")
        if self.output_json is not None and (problem := output_file_problem(self.output_json)):
            raise SettingsError(f"--output-json {self.output_json}: {problem}")
        return self

    @property
    def realtime_interval(self) -> str | None:
        """The checkpoint interval of a `realtime:<interval>` trigger, else None (micro-batch mode)."""
        return self.trigger[len(REALTIME_PREFIX):].strip() if self.trigger.startswith(REALTIME_PREFIX) else None

    @property
    def commit_wait_s(self) -> float | None:
        """The longest a record is meant to wait for its commit: the commit interval, or the trigger's; None available-now."""
        if self.realtime_interval is not None:
            return self.commit_interval_ms / 1000
        if self.trigger == "available-now":
            return None
        return interval_seconds(self.trigger)

    @property
    def metrics_tls(self) -> MetricsTls | None:
        """The TLS of the /metrics endpoint (None: plain HTTP)."""
        return metrics_tls(self.metrics_tls_cert, self.metrics_tls_key, self.metrics_tls_client_ca)

    @property
    def metrics_linger_s(self) -> float:
        """Seconds /metrics stays up after the run (0 without --metrics-port)."""
        return metrics_linger_seconds(self.metrics_port, self.metrics_linger)

    @property
    def client(self) -> str:
        """The Kafka client the transactional sink's producers use."""
        return self.sink_client or ("kafka-python" if self.pre_register_partitions else "librdkafka")

    @property
    def visibility_observed(self) -> bool:
        """Whether the driver times each transaction's visibility (streaming/verify/visibility.py)."""
        return self.observe_visibility or self.visibility_log is not None

    @property
    def checkpoint_uri(self) -> str:
        """The checkpoint folder as an absolute Hadoop URI (default: ./checkpoints/<app-id>, local)."""
        return checkpoint_uri(self.checkpoint or str(Path("checkpoints") / self.app_id))

    @property
    def group_id(self) -> str:
        """The sink's consumer group: the app id."""
        return self.app_id

    @property
    def dead_letter(self) -> str:
        """The topic that receives records `process` rejects."""
        return self.dead_letter_topic or f"{self.output_topic}.dlq"

    def chosen_source(self) -> tuple[StreamSettings, str | None]:
        """The settings with `--source auto` made the source it chooses, and why (None where the source was named).

        Call it once the scope is settled (`--txn-scope auto` may choose partition scope).
        """
        if self.source != "auto":
            return self, None
        spark_only = sorted(name for name in self.extra_source_options()
                            if not name.lower().startswith("kafka.") and name.lower() not in GROUPED_SOURCE_OPTIONS)
        if self.realtime_interval is not None:
            source, why = "spark", "real-time mode reads with Spark's source"
        elif self.sink == "kafka-eos" and self.txn_scope == "partition":
            source, why = "spark", "partition scope needs a task per Kafka partition"
        elif spark_only:
            source, why = "spark", f"--source-options {spark_only[0]} is Spark's source's alone"
        else:
            source, why = "grouped", "micro-batch: a task and one kept consumer per slot, not per partition"
        return self.model_copy(update={"source": source}), f"source: {source} ({why})"

    def extra_source_options(self) -> dict[str, str]:
        """Spark Kafka source options given with --source-options, on top of the job's own."""
        return parse_kv_pairs(list(self.source_options))

    def source_option_defaults(self) -> dict[str, str]:
        """eosbench's Spark Kafka source options (SOURCE_OPTION_DEFAULTS), each where the user set none of that name.

        Micro-batch mode only. Spark reads option names case-blind, so `kafka.FETCH.MAX.WAIT.MS` is the
        user's value too; --command-config cannot carry a consumer setting (it takes connection and
        security properties only), so --source-options is the one way to set one.
        """
        if self.realtime_interval is not None:
            return {}
        given = {name.lower() for name in (*self.extra_source_options(), *self.spark_kafka_options())}
        return {name: value for name, value in SOURCE_OPTION_DEFAULTS.items() if name.lower() not in given}

    @property
    def connection(self) -> Connection:
        """How the driver's librdkafka clients (group reads, admin) reach the cluster."""
        return self.client_config.connection(self.bootstrap_server)

    def spark_kafka_options(self) -> dict[str, str]:
        """The `kafka.`-prefixed security options of Spark's Kafka source and writer."""
        return self.client_config.spark_kafka_options()

    @property
    def transaction_timeout_s(self) -> float:
        """The sink producers' transaction.timeout.ms, in seconds: the longest one of their transactions stays open."""
        return int(self.producer_config()["transaction.timeout.ms"]) / 1000.0

    def producer_config(self) -> dict[str, str]:
        """Client configuration shared by every sink producer (transactional.id is per task).

        It travels to the executors inside the task plan, security settings included (as PEM
        strings, never as a path on the submitting machine).
        """
        return {
            **self.connection.librdkafka(),
            "linger.ms": "5",
            # Partitions move between Python workers, so new producers are routine; librdkafka waits
            # reconnect.backoff.ms / 2 before its first connection to a broker the metadata names,
            # which was 50 of a new producer's 55 ms at the default 100 (16 ms at 10).
            "reconnect.backoff.ms": "10",
            # Java's partitioner, so that keys land where a Java producer would put them.
            "partitioner": "murmur2_random",
            "transaction.timeout.ms": "60000",
            **parse_kv_pairs(list(self.producer_props)),
        }
