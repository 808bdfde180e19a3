"""Secret settings are recognised in every dialect and hidden wherever a configuration is shown."""

from __future__ import annotations

import pytest

from conf.secrets import HIDDEN, SECRET_KEY_PATTERN, SECRET_VALUE_PATTERN, is_secret_key, masked, masked_text
from streaming.session import DEFAULT_CONF

JAAS = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="s3cr3t";'
PEM_KEY = "-----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMG\n-----END PRIVATE KEY-----"


@pytest.mark.parametrize("key", [
    "sasl.jaas.config", "kafka.sasl.jaas.config", "ssl.keystore.password", "ssl.truststore.password",
    "ssl.key.password", "kafka.ssl.key.password", "ssl.keystore.key", "kafka.ssl.keystore.key", "sasl.password",
    "ssl.key.pem", "spark.some.secret", "fs.s3a.access.key", "spark.authenticate.secret", "oauth.token"])
def test_secret_keys_of_every_dialect_are_recognised(key):
    assert is_secret_key(key)


@pytest.mark.parametrize("key", [
    "bootstrap.servers", "security.protocol", "sasl.mechanism", "sasl.username", "ssl.truststore.location",
    "ssl.truststore.certificates", "ssl.ca.pem", "ssl.certificate.pem", "kafka.ssl.keystore.certificate.chain"])
def test_settings_that_are_no_secret_stay_visible(key):
    assert not is_secret_key(key)


def test_masked_hides_secret_values_and_secrets_inside_other_values():
    config = {"security.protocol": "SASL_SSL", "sasl.jaas.config": JAAS, "sasl.password": "s3cr3t",
              "ssl.key.pem": PEM_KEY, "note": f"login with {JAAS}", "producer_props": "sasl.password=s3cr3t",
              "partitions": 4}
    assert masked(config) == {
        "security.protocol": "SASL_SSL", "sasl.jaas.config": HIDDEN, "sasl.password": HIDDEN, "ssl.key.pem": HIDDEN,
        "note": 'login with org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" [hidden];',
        "producer_props": "sasl.password=[hidden]", "partitions": 4}


def test_a_pem_private_key_inside_text_is_hidden():
    assert masked_text(f"key: {PEM_KEY} end") == "key: [hidden] end"


def test_spark_redacts_with_the_same_patterns():
    assert DEFAULT_CONF["spark.redaction.regex"] == SECRET_KEY_PATTERN
    assert DEFAULT_CONF["spark.sql.redaction.string.regex"] == SECRET_VALUE_PATTERN
