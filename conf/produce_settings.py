"""Settings of `eosbench produce`: kafka-producer-perf-test's flags, plus eosbench's own.

Validation mirrors Java's ProducerPerformance.ConfigPostProcessor (bad combinations never reach
the run), KIP-1260's rules for `--transaction-abort-ratio`, and KIP-91's rule that
`delivery.timeout.ms >= linger.ms + request.timeout.ms`. The client's defaults follow Java's
where they differ in kind: idempotence is on unless set or ruled out (KIP-679).
"""

from __future__ import annotations

import uuid
from pathlib import Path

from pydantic import BaseModel, ConfigDict, PrivateAttr, model_validator

from conf.client_config import KNOWN_PROPERTIES, ClientConfig, Connection
from conf.metrics_endpoint import DEFAULT_METRICS_HOST, MetricsTls, metrics_tls
from conf.settings import (DEFAULT_BOOTSTRAP, SettingsError, load_properties, metrics_linger_seconds,
                           output_file_problem, parse_kv_pairs)

DEFAULT_TRANSACTION_DURATION_MS = 3000  # Java's DEFAULT_TRANSACTION_DURATION_MS
DEFAULT_TRANSACTION_ID_PREFIX = "performance-producer-"
DEFAULT_REPORTING_INTERVAL_MS = 5000

# Java producer properties that librdkafka names differently or does not have. Values are
# converted where the meaning carries over; the rest are dropped because they configure the
# Java client only (serializers, blocking of send()).
_JAVA_ONLY_PROPERTIES = {"key.serializer", "value.serializer", "max.block.ms", "partitioner.class",
                         "interceptor.classes", "metric.reporters"}

# Defaults of the librdkafka producer, for the KIP-91 rule when a flag leaves one unset.
_LIBRDKAFKA_DEFAULTS = {"linger.ms": 5, "request.timeout.ms": 30000, "delivery.timeout.ms": 300000}
_ALIASES = {"queue.buffering.max.ms": "linger.ms", "message.timeout.ms": "delivery.timeout.ms"}


def security_properties(java_props: dict[str, str], source: str = "--producer-props") -> ClientConfig:
    """The connection and security part of a producer's Java properties (conf/client_config.py translates it)."""
    return ClientConfig.from_properties({key: value for key, value in java_props.items() if key in KNOWN_PROPERTIES},
                                        source)


def to_librdkafka_config(java_props: dict[str, str], source: str = "--producer-props") -> dict[str, str]:
    """Translate Java producer properties into librdkafka's names, dropping Java-only ones."""
    config: dict[str, str] = security_properties(java_props, source).librdkafka_security()
    for key, value in java_props.items():
        if key in KNOWN_PROPERTIES and key != "bootstrap.servers":
            continue  # translated above
        if key in _JAVA_ONLY_PROPERTIES:
            continue
        if key == "buffer.memory":
            config["queue.buffering.max.kbytes"] = str(max(1, int(value) // 1024))
        else:
            config[key] = value
    return config


# KIP-679 with KAFKA-13673: Java's producer is idempotent unless told otherwise, and quietly
# not when acks, retries or in-flight requests rule it out; librdkafka's default is the opposite.
_IDEMPOTENCE_CONFLICTS = (
    (("acks", "request.required.acks"), lambda value: value.lower() not in ("all", "-1")),
    (("retries", "message.send.max.retries"), lambda value: int(value) == 0),
    (("max.in.flight.requests.per.connection", "max.in.flight"), lambda value: int(value) > 5),
)


def with_java_idempotence_default(config: dict[str, str]) -> dict[str, str]:
    """Turn idempotence on as Java's producer does by default, unless it is set or conflicts."""
    if "enable.idempotence" in config:
        return config
    for names, conflicts in _IDEMPOTENCE_CONFLICTS:
        for name in names:
            try:
                if name in config and conflicts(config[name]):
                    return config
            except ValueError as exc:
                raise SettingsError(f"{name} must be a whole number, got {config[name]!r}") from exc
    return {**config, "enable.idempotence": "true"}


def check_delivery_timeout(client_config: dict[str, str]) -> None:
    """KIP-91: reject a delivery timeout shorter than linger.ms + request.timeout.ms."""
    effective = dict(_LIBRDKAFKA_DEFAULTS)
    for key, value in client_config.items():
        name = _ALIASES.get(key, key)
        if name in effective:
            try:
                effective[name] = int(float(value))
            except ValueError as exc:
                raise SettingsError(f"{key} must be a number of milliseconds, got {value!r}") from exc
    if effective["delivery.timeout.ms"] < effective["linger.ms"] + effective["request.timeout.ms"]:
        raise SettingsError(
            f"delivery.timeout.ms ({effective['delivery.timeout.ms']}) must be at least linger.ms"
            f" ({effective['linger.ms']}) + request.timeout.ms ({effective['request.timeout.ms']}),"
            " or records could expire before their first request completes (KIP-91)"
        )


class ProduceSettings(BaseModel):
    """One field per `eosbench produce` flag; cross-field rules are checked on construction."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    topic: str
    num_records: int
    throughput: float
    bootstrap_server: str | None = None
    record_size: int | None = None
    payload_file: Path | None = None
    payload_delimiter: str = "\n"
    payload_monotonic: bool = False
    producer_props: tuple[str, ...] | None = None
    command_property: tuple[str, ...] | None = None
    producer_config: Path | None = None
    command_config: Path | None = None
    transactional_id: str | None = None
    transaction_duration_ms: int | None = None
    warmup_records: int = 0
    reporting_interval: int = DEFAULT_REPORTING_INTERVAL_MS
    print_metrics: bool = False
    # eosbench's own
    transaction_abort_ratio: float = 0.0
    records_per_transaction: int | None = None
    seed: int = 0
    resume: bool = False
    run_id: str | None = None
    metrics_port: int | None = None
    metrics_host: str = DEFAULT_METRICS_HOST
    metrics_tls_cert: Path | None = None
    metrics_tls_key: Path | None = None
    metrics_tls_client_ca: Path | None = None
    metrics_linger: float | None = None  # seconds; None: two scrape intervals when metrics_port is set
    output_json: Path | None = None
    # Java's default: a fresh "performance-producer-<uuid>" when transactions are on without an id.
    _generated_transactional_id: str = PrivateAttr(
        default_factory=lambda: DEFAULT_TRANSACTION_ID_PREFIX + str(uuid.uuid4()))

    @model_validator(mode="after")
    def _post_process(self) -> ProduceSettings:
        payload_sources = sum(x is not None and x is not False for x in
                              (self.record_size, self.payload_file, self.payload_monotonic or None))
        if payload_sources != 1:
            raise SettingsError("exactly one of --record-size, --payload-file or --payload-monotonic is required")
        if self.num_records <= 0:
            raise SettingsError("--num-records should be greater than zero")
        if self.warmup_records < 0 or self.warmup_records >= self.num_records:
            raise SettingsError("--warmup-records must be at least 0 and strictly fewer than --num-records")
        if self.record_size is not None and self.record_size <= 0:
            raise SettingsError("--record-size should be greater than zero")
        if self.throughput == 0 or (self.throughput < 0 and self.throughput != -1):
            raise SettingsError("--throughput must be positive, or -1 to disable throttling")
        if self.transaction_duration_ms is not None and self.transaction_duration_ms <= 0:
            raise SettingsError("--transaction-duration-ms should be greater than zero")
        if self.records_per_transaction is not None and self.records_per_transaction <= 0:
            raise SettingsError("--records-per-transaction should be greater than zero")
        if self.reporting_interval <= 0:
            raise SettingsError("--reporting-interval should be greater than zero")
        if self.producer_props is not None and self.command_property is not None:
            raise SettingsError("--command-property and --producer-props cannot be specified together")
        if self.producer_config is not None and self.command_config is not None:
            raise SettingsError("--command-config and --producer.config cannot be specified together")
        if not 0.0 <= self.transaction_abort_ratio <= 1.0:
            raise SettingsError(
                f"--transaction-abort-ratio must be between 0.0 and 1.0, got {self.transaction_abort_ratio}"
            )
        if self.transaction_abort_ratio > 0.0 and not self.transactions_enabled:
            raise SettingsError(
                "--transaction-abort-ratio is only valid when transactions are enabled"
                " (--transactional-id, --transaction-duration-ms or transactional.id)"
            )
        if self.resume and not (self.transactional_id or "transactional.id" in self._java_props()):
            raise SettingsError(
                "--resume needs the interrupted load's --transactional-id: its init_transactions"
                " fences the old producer and aborts the transaction it left open"
            )
        if self.metrics_port is not None and not 0 < self.metrics_port < 65536:
            raise SettingsError("--metrics-port must be a TCP port")
        if self.metrics_linger is not None and self.metrics_linger < 0:
            raise SettingsError("--metrics-linger must be at least 0 seconds")
        _ = self.metrics_tls  # refuses a half-given or missing certificate before the run
        if self.output_json is not None and (problem := output_file_problem(self.output_json)):
            raise SettingsError(f"--output-json {self.output_json}: {problem}")
        check_delivery_timeout(self.client_config())
        return self

    # ------------------------------------------------------------------ derived

    @property
    def metrics_tls(self) -> MetricsTls | None:
        """The TLS of the /metrics endpoint (None: plain HTTP)."""
        return metrics_tls(self.metrics_tls_cert, self.metrics_tls_key, self.metrics_tls_client_ca)

    @property
    def metrics_linger_s(self) -> float:
        """Seconds /metrics stays up after the run (0 without --metrics-port)."""
        return metrics_linger_seconds(self.metrics_port, self.metrics_linger)

    def _java_props(self) -> dict[str, str]:
        props: dict[str, str] = {}
        config_file = self.command_config or self.producer_config
        if config_file is not None:
            props.update(load_properties(config_file))
        props.update(parse_kv_pairs(list(self.command_property or self.producer_props or ())))
        return props

    @property
    def transactions_enabled(self) -> bool:
        """Java's rule: a transactional id (flag or property) or a duration turns transactions on."""
        return (
            self.transaction_duration_ms is not None
            or self.records_per_transaction is not None
            or self.transactional_id is not None
            or "transactional.id" in self._java_props()
        )

    @property
    def effective_transaction_duration_ms(self) -> int | None:
        """The commit interval, Java's 3000 ms default when transactions are on without one."""
        if not self.transactions_enabled:
            return None
        if self.transaction_duration_ms is None and self.records_per_transaction is not None:
            return None
        return self.transaction_duration_ms or DEFAULT_TRANSACTION_DURATION_MS

    @property
    def bootstrap(self) -> str:
        """The bootstrap servers: the flag, else the properties, else the local broker."""
        return self.bootstrap_server or self._java_props().get("bootstrap.servers", DEFAULT_BOOTSTRAP)

    @property
    def connection(self) -> Connection:
        """How this run's other clients (topic checks, the --resume reader) reach the cluster, as the producer does."""
        return security_properties(self._java_props(), self._properties_source).connection(self.bootstrap)

    @property
    def _properties_source(self) -> str:
        """Where the producer's properties came from, for error lines."""
        if self.command_config is not None:
            return f"--command-config {self.command_config}"
        if self.producer_config is not None:
            return f"--producer.config {self.producer_config}"
        return "--producer-props"

    def client_config(self) -> dict[str, str]:
        """The librdkafka producer configuration this run uses."""
        config = with_java_idempotence_default({"client.id": "perf-producer-client",
                                                **to_librdkafka_config(self._java_props(), self._properties_source)})
        config["bootstrap.servers"] = self.bootstrap
        if self.transactions_enabled:
            config["transactional.id"] = (
                self.transactional_id
                or config.get("transactional.id")
                or self._generated_transactional_id
            )
        return config

    def read_payloads(self) -> list[bytes]:
        """Read --payload-file split on --payload-delimiter, as Java's Scanner does (no empty tokens)."""
        if self.payload_file is None:
            return []
        try:
            data = self.payload_file.read_bytes()
        except OSError as exc:
            raise SettingsError(f"cannot read --payload-file {self.payload_file}: {exc.strerror}") from exc
        payloads = [token for token in data.split(self.payload_delimiter.encode()) if token]
        if not payloads:
            raise SettingsError("File does not exist or empty file provided.")
        return payloads
