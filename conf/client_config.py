"""`--command-config FILE`: one Java client-properties file, read once, turned into every client's settings.

Kafka's tools take connection and security settings as a Java `.properties` file; eosbench takes the
same file and speaks it to each client in that client's dialect:

- librdkafka (confluent-kafka's producers, consumers and admin clients, the sink's producers on the
  executors): `sasl.jaas.config` becomes `sasl.username`/`sasl.password`, and truststores and
  keystores (PEM or PKCS12) become PEM strings (`ssl.ca.pem`, `ssl.certificate.pem`,
  `ssl.key.pem`), so the settings travel to executors inside the task plan and never depend on a
  file path that only the submitting machine has;
- Spark's Kafka source and writer: the Java names with the `kafka.` prefix, stores as inline PEM;
- kafka-python (the pre-registering producer): its keyword arguments, made from the librdkafka
  settings that reach the executor;
- tools that read the file themselves (Java's ProducerPerformance, `eosbench produce` run as its own
  process): the file itself, passed through (`Connection.tool_arguments`).

A property that eosbench cannot hand to every client is refused with a one-line error naming it
(SettingsError, exit 2); nothing is dropped silently. Producer tuning belongs in --producer-props.
"""

from __future__ import annotations

import re
import ssl
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from conf.settings import DEFAULT_BOOTSTRAP, SettingsError, load_properties

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
STORE_TYPES = ("PEM", "PKCS12")

COMMAND_CONFIG_HELP = ("client properties file, Java names as Kafka's tools take them (security.protocol, sasl.mechanism,"
                       " sasl.jaas.config, ssl.truststore.*, ssl.keystore.*, bootstrap.servers); handed to every"
                       " Kafka client of the command (default: none, PLAINTEXT)")

# The Java properties eosbench translates; anything else in the file is an error, not a drop.
KNOWN_PROPERTIES = (
    "bootstrap.servers", "security.protocol", "sasl.mechanism", "sasl.jaas.config",
    "ssl.truststore.location", "ssl.truststore.type", "ssl.truststore.password", "ssl.truststore.certificates",
    "ssl.keystore.location", "ssl.keystore.type", "ssl.keystore.password", "ssl.key.password",
    "ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.endpoint.identification.algorithm",
)

_JAAS = re.compile(
    r"^\s*org\.apache\.kafka\.common\.security\.(?P<module>scram\.ScramLoginModule|plain\.PlainLoginModule)"
    r"\s+required\s+(?P<options>.*?);?\s*$", re.DOTALL)
_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')

# Names of librdkafka settings whose values are secrets (masked wherever eosbench shows a config).
SECRET_LIBRDKAFKA_KEYS = ("sasl.password", "ssl.key.pem", "ssl.key.password")


@dataclass(frozen=True)
class ClientConfig:
    """The Java properties of one --command-config file; empty means PLAINTEXT with no extras."""

    properties: dict[str, str] = field(default_factory=dict, repr=False)  # repr=False: it holds passwords
    source: str = "--command-config"
    path: Path | None = None  # the file, for tools that take it themselves (Java's, `eosbench produce`)

    @classmethod
    def load(cls, path: Path | str | None) -> ClientConfig:
        """Read and check a --command-config file (None: no file, PLAINTEXT)."""
        if path is None:
            return PLAINTEXT
        config = cls(load_properties(path), source=f"--command-config {path}", path=Path(path))
        config.librdkafka_security()  # every property is checked once, here, before any client is made
        return config

    @classmethod
    def from_properties(cls, properties: dict[str, str], source: str = "--command-config") -> ClientConfig:
        """A config from Java properties already in memory (checked as a file would be)."""
        config = cls(dict(properties), source=source)
        config.librdkafka_security()
        return config

    # ------------------------------------------------------------------ common

    def bootstrap(self, flag: str | None) -> str:
        """The bootstrap servers: --bootstrap-server, else the file's bootstrap.servers, else the local broker."""
        return flag or self.properties.get("bootstrap.servers") or DEFAULT_BOOTSTRAP

    def connection(self, bootstrap_flag: str | None) -> Connection:
        """Where and how librdkafka clients connect, for a command given --bootstrap-server (or not)."""
        return Connection(self.bootstrap(bootstrap_flag), tuple(sorted(self.librdkafka_security().items())), self)

    @property
    def security_protocol(self) -> str:
        """The protocol the file asks for (PLAINTEXT when it names none)."""
        return self.properties.get("security.protocol", "PLAINTEXT").upper()

    def _error(self, key: str, why: str) -> SettingsError:
        return SettingsError(f"{self.source}: {key}: {why}")

    # ------------------------------------------------------------------ librdkafka

    def librdkafka_security(self) -> dict[str, str]:
        """The file's settings in librdkafka's names (no bootstrap.servers); raises on any it cannot take."""
        props = self.properties
        for key in props:
            if key not in KNOWN_PROPERTIES:
                raise self._error(key, "not a connection or security property eosbench can hand to every client"
                                       f" (it takes: {', '.join(KNOWN_PROPERTIES)})")
        config: dict[str, str] = {}
        protocol = self.security_protocol
        if protocol not in SECURITY_PROTOCOLS:
            raise self._error("security.protocol", f"{props['security.protocol']!r} is not one of"
                                                   f" {', '.join(SECURITY_PROTOCOLS)}")
        if protocol == "PLAINTEXT":
            extra = [key for key in props if key not in ("bootstrap.servers", "security.protocol")]
            if extra:
                raise self._error(extra[0], "has no effect with security.protocol PLAINTEXT")
            return config
        config["security.protocol"] = protocol
        if protocol.startswith("SASL_"):
            config.update(self._sasl())
        elif "sasl.jaas.config" in props or "sasl.mechanism" in props:
            key = "sasl.jaas.config" if "sasl.jaas.config" in props else "sasl.mechanism"
            raise self._error(key, f"has no effect with security.protocol {protocol}")
        if protocol.endswith("SSL"):
            config.update(self._ssl())
        else:
            ssl_keys = [key for key in props if key.startswith("ssl.")]
            if ssl_keys:
                raise self._error(ssl_keys[0], f"has no effect with security.protocol {protocol}")
        return config

    def _sasl(self) -> dict[str, str]:
        mechanism = self.properties.get("sasl.mechanism", "GSSAPI").upper()  # Java's default
        if mechanism not in SASL_MECHANISMS:
            raise self._error("sasl.mechanism", f"{mechanism} is not supported (eosbench's clients take"
                                                f" {', '.join(SASL_MECHANISMS)})")
        jaas = self.properties.get("sasl.jaas.config")
        if jaas is None:
            raise self._error("sasl.jaas.config", f"is required for SASL mechanism {mechanism}")
        match = _JAAS.match(jaas)
        if match is None:
            raise self._error("sasl.jaas.config", "expected '<ScramLoginModule|PlainLoginModule> required"
                                                  ' username="..." password="...";\'')
        module_is_scram = match["module"].startswith("scram")
        if module_is_scram != mechanism.startswith("SCRAM"):
            raise self._error("sasl.jaas.config", f"{match['module'].split('.')[-1]} does not serve"
                                                  f" sasl.mechanism {mechanism}")
        options = {name: re.sub(r"\\(.)", r"\1", value) for name, value in _JAAS_OPTION.findall(match["options"])}
        unknown = sorted(set(options) - {"username", "password"})
        if unknown:
            raise self._error("sasl.jaas.config", f"login option {unknown[0]!r} is not supported")
        if "username" not in options or "password" not in options:
            raise self._error("sasl.jaas.config", "needs both username and password")
        return {"sasl.mechanism": mechanism, "sasl.username": options["username"],
                "sasl.password": options["password"]}

    def _ssl(self) -> dict[str, str]:
        props = self.properties
        config: dict[str, str] = {}
        algorithm = props.get("ssl.endpoint.identification.algorithm", "https")
        if algorithm.lower() not in ("https", ""):
            raise self._error("ssl.endpoint.identification.algorithm", f"{algorithm!r} is neither 'https' nor empty")
        config["ssl.endpoint.identification.algorithm"] = "https" if algorithm else "none"
        ca_pem = self._truststore_pem()
        if ca_pem is not None:
            config["ssl.ca.pem"] = ca_pem
        config.update(self._keystore_pem())
        return config

    def _store_type(self, key: str) -> str:
        store_type = self.properties.get(key, "JKS").upper()  # Java's default store type
        if store_type not in STORE_TYPES:
            raise self._error(key, f"{store_type} stores are not readable by librdkafka; use PEM or PKCS12"
                                   " (keytool -importkeystore -deststoretype PKCS12 converts a JKS store)")
        return store_type

    def _read(self, key: str) -> bytes:
        try:
            return Path(self.properties[key]).read_bytes()
        except OSError as exc:
            raise self._error(key, f"cannot read {self.properties[key]}: {exc.strerror}") from exc

    def _truststore_pem(self) -> str | None:
        props = self.properties
        if "ssl.truststore.certificates" in props:
            return props["ssl.truststore.certificates"]
        if "ssl.truststore.location" not in props:
            for key in ("ssl.truststore.type", "ssl.truststore.password"):
                if key in props:
                    raise self._error(key, "has no effect without ssl.truststore.location")
            return None  # the system's CAs, as Java's default truststore
        store_type = self._store_type("ssl.truststore.type")
        data = self._read("ssl.truststore.location")
        if store_type == "PEM":
            if "ssl.truststore.password" in props:
                raise self._error("ssl.truststore.password", "PEM truststores take no password")
            return data.decode()
        from cryptography.hazmat.primitives.serialization import Encoding, pkcs12

        password = props.get("ssl.truststore.password")
        try:
            store = pkcs12.load_pkcs12(data, password.encode() if password else None)
        except ValueError as exc:
            raise self._error("ssl.truststore.location", f"cannot open the PKCS12 store: {exc}") from exc
        certs = [c.certificate for c in store.additional_certs] + ([store.cert.certificate] if store.cert else [])
        if not certs:
            raise self._error("ssl.truststore.location", "the PKCS12 store holds no certificate")
        return "".join(cert.public_bytes(Encoding.PEM).decode() for cert in certs)

    def _keystore_pem(self) -> dict[str, str]:
        props = self.properties
        if "ssl.keystore.key" in props or "ssl.keystore.certificate.chain" in props:
            if not ("ssl.keystore.key" in props and "ssl.keystore.certificate.chain" in props):
                raise self._error("ssl.keystore.key", "needs ssl.keystore.certificate.chain beside it")
            return self._pem_key_pair(props["ssl.keystore.key"], props["ssl.keystore.certificate.chain"])
        if "ssl.keystore.location" not in props:
            for key in ("ssl.keystore.type", "ssl.keystore.password", "ssl.key.password"):
                if key in props:
                    raise self._error(key, "has no effect without ssl.keystore.location")
            return {}
        store_type = self._store_type("ssl.keystore.type")
        data = self._read("ssl.keystore.location")
        if store_type == "PEM":
            if "ssl.keystore.password" in props:
                raise self._error("ssl.keystore.password", "PEM keystores take ssl.key.password only")
            text = data.decode()
            return self._pem_key_pair(text, text)
        from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat, pkcs12

        password = props.get("ssl.keystore.password")
        try:
            store = pkcs12.load_pkcs12(data, password.encode() if password else None)
        except ValueError as exc:
            raise self._error("ssl.keystore.location", f"cannot open the PKCS12 store: {exc}") from exc
        if store.key is None or store.cert is None:
            raise self._error("ssl.keystore.location", "the PKCS12 store holds no private key and certificate")
        chain = [store.cert.certificate] + [c.certificate for c in store.additional_certs]
        return {"ssl.certificate.pem": "".join(c.public_bytes(Encoding.PEM).decode() for c in chain),
                "ssl.key.pem": store.key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()).decode()}

    def _pem_key_pair(self, key_text: str, chain_text: str) -> dict[str, str]:
        key_blocks = re.findall(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?-----END [A-Z ]*PRIVATE KEY-----",
                                key_text, re.DOTALL)
        cert_blocks = re.findall(r"-----BEGIN CERTIFICATE-----.*?-----END CERTIFICATE-----", chain_text, re.DOTALL)
        if len(key_blocks) != 1 or not cert_blocks:
            raise self._error("ssl.keystore.location", "a PEM keystore needs one private key and its certificate chain")
        config = {"ssl.key.pem": key_blocks[0] + "\n", "ssl.certificate.pem": "\n".join(cert_blocks) + "\n"}
        if "ssl.key.password" in self.properties:
            config["ssl.key.password"] = self.properties["ssl.key.password"]
        return config

    # ------------------------------------------------------------------ Spark (Java client inside Spark)

    def spark_kafka_options(self) -> dict[str, str]:
        """The `kafka.`-prefixed options of Spark's Kafka source and writer; stores travel as inline PEM."""
        security = self.librdkafka_security()
        options: dict[str, str] = {}
        for key in ("security.protocol", "sasl.mechanism", "sasl.jaas.config", "ssl.endpoint.identification.algorithm"):
            if key in self.properties:
                options[key] = self.properties[key]
        if "ssl.ca.pem" in security:
            options.update({"ssl.truststore.type": "PEM", "ssl.truststore.certificates": security["ssl.ca.pem"]})
        if "ssl.key.pem" in security:
            options.update({"ssl.keystore.type": "PEM", "ssl.keystore.key": security["ssl.key.pem"],
                            "ssl.keystore.certificate.chain": security["ssl.certificate.pem"]})
            if "ssl.key.password" in security:
                options["ssl.key.password"] = security["ssl.key.password"]
        return {f"kafka.{key}": value for key, value in options.items()}


PLAINTEXT = ClientConfig()


@dataclass(frozen=True)
class Connection:
    """Where and how a librdkafka client connects: the bootstrap servers and the security settings.

    Hashable and printable as its bootstrap servers, so it stands wherever a bootstrap string
    did (messages, cache keys); `connection()` turns a plain string into a PLAINTEXT one.
    """

    bootstrap: str
    security: tuple[tuple[str, str], ...] = field(default=(), repr=False)  # repr=False: it holds passwords
    # The file's settings these came from, for the clients that speak Java names (Spark) or read the
    # file themselves; not part of the identity (executors rebuild a Connection from librdkafka settings).
    client_config: ClientConfig = field(default=PLAINTEXT, repr=False, compare=False)

    def __str__(self) -> str:
        return self.bootstrap

    def tool_arguments(self) -> list[str]:
        """What hands these settings to a tool that reads the file itself (Java's ProducerPerformance,
        `eosbench produce` in its own process): `--command-config FILE`, or nothing for PLAINTEXT."""
        path = self.client_config.path
        return ["--command-config", str(path)] if path is not None else []

    def librdkafka(self, **extra: str) -> dict[str, str]:
        """A complete librdkafka config: the servers, the security settings, then the caller's own."""
        return {"bootstrap.servers": self.bootstrap, **dict(self.security), **extra}


def connection(target: str | Connection) -> Connection:
    """A Connection for a bootstrap string (PLAINTEXT) or an existing Connection."""
    return target if isinstance(target, Connection) else Connection(target)


def connection_of(librdkafka_config: dict[str, str]) -> Connection:
    """The Connection inside a full librdkafka config (the sink's producer config on an executor)."""
    security = {key: value for key, value in librdkafka_config.items() if key.startswith(("security.", "sasl.", "ssl."))}
    return Connection(librdkafka_config["bootstrap.servers"], tuple(sorted(security.items())))


def kafka_python_options(librdkafka_config: dict[str, str]) -> dict[str, object]:
    """kafka-python's keyword arguments for the security settings of a librdkafka config (as shipped to executors)."""
    protocol = librdkafka_config.get("security.protocol", "PLAINTEXT").upper()
    options: dict[str, object] = {"security_protocol": protocol}
    if protocol.startswith("SASL_"):
        options.update(sasl_mechanism=librdkafka_config["sasl.mechanism"],
                       sasl_plain_username=librdkafka_config["sasl.username"],
                       sasl_plain_password=librdkafka_config["sasl.password"])
    if protocol.endswith("SSL"):
        context = ssl.create_default_context(cadata=librdkafka_config.get("ssl.ca.pem"))
        context.check_hostname = librdkafka_config.get("ssl.endpoint.identification.algorithm", "https") == "https"
        if "ssl.key.pem" in librdkafka_config:
            # ssl.SSLContext loads a key pair from files only: a private temporary file on this executor.
            with tempfile.NamedTemporaryFile("w", suffix=".pem") as pair:
                pair.write(librdkafka_config["ssl.key.pem"] + librdkafka_config["ssl.certificate.pem"])
                pair.flush()
                context.load_cert_chain(pair.name, password=librdkafka_config.get("ssl.key.password"))
        options["ssl_context"] = context
    return options
