"""--command-config: one Java properties file, translated for librdkafka, Spark, kafka-python and Java tools."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest
from pydantic import ValidationError
from cryptography.hazmat.primitives.serialization import BestAvailableEncryption, Encoding, pkcs12

from conf.client_config import ClientConfig, connection_of, kafka_python_options
from conf.produce_settings import to_librdkafka_config
from conf.settings import SettingsError
from conf.stream_settings import StreamSettings
from eosbench.local.security import make_ca, private_key_pem, sign_certificate
from tests.unit.test_cli_errors import assert_one_line_error, run_eosbench

JAAS = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="s3cr\\"et";'


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> dict[str, Path | str]:
    """A CA, a client key pair it signed, and the same as PEM files and PKCS12 stores."""
    folder = tmp_path_factory.mktemp("pki")
    ca_key, ca_cert = make_ca("test CA")
    key, cert = sign_certificate(ca_key, ca_cert, "alice")
    ca_pem = ca_cert.public_bytes(Encoding.PEM).decode()
    cert_pem = cert.public_bytes(Encoding.PEM).decode()
    (folder / "ca.pem").write_text(ca_pem)
    (folder / "keystore.pem").write_text(private_key_pem(key) + cert_pem)
    (folder / "truststore.p12").write_bytes(pkcs12.serialize_key_and_certificates(
        None, None, None, [pkcs12.PKCS12Certificate(ca_cert, b"ca")], BestAvailableEncryption(b"trust-pw")))
    (folder / "keystore.p12").write_bytes(pkcs12.serialize_key_and_certificates(
        b"alice", key, cert, None, BestAvailableEncryption(b"key-pw")))
    return {"folder": folder, "ca_pem": ca_pem, "cert_pem": cert_pem, "key_pem": private_key_pem(key)}


def scram(**extra: str) -> dict[str, str]:
    """A SASL_SSL SCRAM-SHA-512 client's properties."""
    return {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.jaas.config": JAAS, **extra}


def scram_with_pem_stores(pki) -> dict[str, str]:
    """SCRAM over TLS with a PEM truststore and a PEM keystore (mTLS besides)."""
    return scram(**{"ssl.truststore.type": "PEM", "ssl.truststore.location": str(pki["folder"] / "ca.pem"),
                    "ssl.keystore.type": "PEM", "ssl.keystore.location": str(pki["folder"] / "keystore.pem")})


def test_scram_with_a_pem_truststore_becomes_librdkafka_settings_with_the_ca_inline(pki):
    config = ClientConfig.from_properties(scram(**{"ssl.truststore.type": "PEM",
                                                   "ssl.truststore.location": str(pki["folder"] / "ca.pem")}))
    assert config.librdkafka_security() == {
        "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "alice",
        "sasl.password": 's3cr"et', "ssl.endpoint.identification.algorithm": "https", "ssl.ca.pem": pki["ca_pem"]}
    cluster = config.connection("broker:9093")
    assert str(cluster) == "broker:9093" and "s3cr" not in repr(cluster) and "s3cr" not in repr(config)
    assert cluster.librdkafka(**{"group.id": "g"})["group.id"] == "g"
    assert connection_of({**cluster.librdkafka(), "linger.ms": "5"}) == cluster  # what executors rebuild


def test_pkcs12_stores_become_pem_strings_for_librdkafka(pki):
    config = ClientConfig.from_properties({
        "security.protocol": "SSL", "ssl.endpoint.identification.algorithm": "",
        "ssl.truststore.type": "PKCS12", "ssl.truststore.location": str(pki["folder"] / "truststore.p12"),
        "ssl.truststore.password": "trust-pw", "ssl.keystore.type": "PKCS12",
        "ssl.keystore.location": str(pki["folder"] / "keystore.p12"), "ssl.keystore.password": "key-pw"})
    assert config.librdkafka_security() == {
        "security.protocol": "SSL", "ssl.endpoint.identification.algorithm": "none", "ssl.ca.pem": pki["ca_pem"],
        "ssl.certificate.pem": pki["cert_pem"], "ssl.key.pem": pki["key_pem"]}


def test_spark_gets_kafka_prefixed_java_names_with_the_stores_inline(pki):
    config = ClientConfig.from_properties(scram_with_pem_stores(pki))
    assert config.spark_kafka_options() == {
        "kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config": JAAS, "kafka.ssl.truststore.type": "PEM",
        "kafka.ssl.truststore.certificates": pki["ca_pem"], "kafka.ssl.keystore.type": "PEM",
        "kafka.ssl.keystore.key": pki["key_pem"], "kafka.ssl.keystore.certificate.chain": pki["cert_pem"]}


def test_kafka_python_gets_its_keywords_and_an_ssl_context_from_what_reaches_the_executor(pki):
    config = ClientConfig.from_properties(scram_with_pem_stores(pki))
    options = kafka_python_options(config.connection("b:1").librdkafka())
    context = options.pop("ssl_context")
    assert options == {"security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512",
                       "sasl_plain_username": "alice", "sasl_plain_password": 's3cr"et'}
    assert isinstance(context, ssl.SSLContext) and context.check_hostname
    assert kafka_python_options({"bootstrap.servers": "b:1"}) == {"security_protocol": "PLAINTEXT"}


def test_java_tools_get_the_file_itself(tmp_path):
    path = tmp_path / "client.properties"
    path.write_text("security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\nsasl.jaas.config="
                    'org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="p";\n')
    assert ClientConfig.load(path).connection(None).tool_arguments() == ["--command-config", str(path)]
    assert ClientConfig.load(None).connection(None).tool_arguments() == []


def test_bootstrap_comes_from_the_flag_else_the_file_else_the_local_broker():
    config = ClientConfig.from_properties({"bootstrap.servers": "file:9092"})
    assert (config.bootstrap("flag:9092"), config.bootstrap(None)) == ("flag:9092", "file:9092")
    assert ClientConfig.load(None).bootstrap(None) == "127.0.0.1:9092"


@pytest.mark.parametrize("properties,error", [
    ({"linger.ms": "5"}, "linger.ms: not a connection or security property eosbench can hand to every client"),
    ({"security.protocol": "SASL_TLS"}, "security.protocol: 'SASL_TLS' is not one of PLAINTEXT, SSL, SASL_PLAINTEXT,"
                                        " SASL_SSL"),
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "GSSAPI", "sasl.jaas.config": JAAS},
     "sasl.mechanism: GSSAPI is not supported (eosbench's clients take PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)"),
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512"},
     "sasl.jaas.config: is required for SASL mechanism SCRAM-SHA-512"),
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.jaas.config": JAAS},
     "sasl.jaas.config: ScramLoginModule does not serve sasl.mechanism PLAIN"),
    (scram(**{"sasl.jaas.config": JAAS.replace(";", ' tokenauth="true";')}),
     "sasl.jaas.config: login option 'tokenauth' is not supported"),
    (scram(**{"ssl.truststore.location": "/x.jks"}),
     "ssl.truststore.type: JKS stores are not readable by librdkafka; use PEM or PKCS12"),
    (scram(**{"ssl.truststore.type": "PEM", "ssl.truststore.location": "/no/such/ca.pem"}),
     "ssl.truststore.location: cannot read /no/such/ca.pem: No such file or directory"),
    ({"security.protocol": "PLAINTEXT", "ssl.truststore.location": "/ca.pem"},
     "ssl.truststore.location: has no effect with security.protocol PLAINTEXT"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512", "sasl.jaas.config": JAAS,
      "ssl.truststore.location": "/ca.pem"}, "ssl.truststore.location: has no effect with security.protocol"
                                             " SASL_PLAINTEXT"),
    (scram(**{"ssl.truststore.password": "x"}), "ssl.truststore.password: has no effect without ssl.truststore.location"),
])
def test_a_property_no_client_can_take_is_an_error_naming_it(properties, error):
    with pytest.raises(SettingsError) as refused:
        ClientConfig.from_properties(properties)
    assert str(refused.value).startswith(f"--command-config: {error}")


def test_produce_translates_the_security_part_and_keeps_producer_tuning():
    assert to_librdkafka_config({**scram(), "linger.ms": "7", "bootstrap.servers": "b:1"}) == {
        "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "alice",
        "sasl.password": 's3cr"et', "ssl.endpoint.identification.algorithm": "https", "linger.ms": "7",
        "bootstrap.servers": "b:1"}


def test_the_sinks_producers_carry_the_security_settings_and_refuse_them_elsewhere():
    settings = StreamSettings(input_topic="i", output_topic="o", client_config=ClientConfig.from_properties(scram()))
    assert {key: settings.producer_config()[key] for key in ("security.protocol", "sasl.username", "sasl.password")} == {
        "security.protocol": "SASL_SSL", "sasl.username": "alice", "sasl.password": 's3cr"et'}
    with pytest.raises(ValidationError, match="--producer-props sasl.password: security settings come from"):
        StreamSettings(input_topic="i", output_topic="o", producer_props=("sasl.password=x",))
    with pytest.raises(ValidationError, match="--source-options kafka.ssl.truststore.location: security settings come"):
        StreamSettings(input_topic="i", output_topic="o", source_options=("kafka.ssl.truststore.location=/x",))


@pytest.mark.parametrize("command", [["verify", "--input-topic", "i", "--output-topic", "o"],
                                     ["topics", "describe", "t"],
                                     ["stream", "--input-topic", "i", "--output-topic", "o"],
                                     ["produce", "--topic", "t", "--num-records", "1", "--record-size", "1",
                                      "--throughput", "-1"]])
def test_every_command_refuses_the_property_with_exit_2(command, tmp_path):
    path = tmp_path / "client.properties"
    path.write_text("security.protocol=SASL_SSL\nsasl.mechanism=OAUTHBEARER\n")
    completed = run_eosbench(*command, "--command-config", str(path))
    assert_one_line_error(completed, 2, f"--command-config {path}: sasl.mechanism: OAUTHBEARER is not supported")
