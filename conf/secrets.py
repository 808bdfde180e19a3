"""Which client settings are secrets, and how they are hidden wherever a run shows or writes a configuration.

One pattern names the secret keys for every client dialect eosbench speaks: Java's
(`sasl.jaas.config`, `ssl.keystore.key`, `ssl.*.password`), librdkafka's (`sasl.password`,
`ssl.key.pem`, `ssl.key.password`), Spark's `kafka.`-prefixed source and writer options, and
Spark's own default (secret, password, token, access key). It serves twice:

- as Spark's `spark.redaction.regex` (streaming/session.py): Spark then redacts the values of
  matching keys on the UI's environment page, in the event log and in the options its plans show;
- in `masked`, which the command line applies before it prints or stores a configuration.

`SECRET_VALUE_PATTERN` catches a secret inside a longer string (a JAAS line's password, a PEM
private key), for Spark's `spark.sql.redaction.string.regex`, which redacts plan strings.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

# Spark's default redaction pattern, widened to Kafka's secret properties that do not say "password".
SECRET_KEY_PATTERN = r"(?i)secret|password|token|access[.]?key|sasl[.]jaas[.]config|ssl[.]keystore[.]key|ssl[.]key[.]pem"
SECRET_VALUE_PATTERN = (r'(?i)password\s*=\s*"[^"]*"'
                        r"|-----BEGIN [A-Z ]*PRIVATE KEY-----[^-]*-----END [A-Z ]*PRIVATE KEY-----")
HIDDEN = "[hidden]"  # Kafka's own word for a hidden value in its logged configs

_SECRET_KEY = re.compile(SECRET_KEY_PATTERN)
_SECRET_VALUE = re.compile(SECRET_VALUE_PATTERN)


def is_secret_key(key: str) -> bool:
    """Whether a setting's value is a secret, by its name (any dialect, `kafka.` prefix or not)."""
    return _SECRET_KEY.search(key) is not None


def masked(config: Mapping[str, object]) -> dict[str, object]:
    """A copy of a configuration with every secret value replaced by [hidden], and secrets inside other values too."""
    return {key: HIDDEN if is_secret_key(key) else masked_text(value) if isinstance(value, str) else value
            for key, value in config.items()}


def masked_text(text: str) -> str:
    """A string with any secret it carries (a JAAS password, a PEM private key, a `k=v` secret pair) hidden."""
    text = _SECRET_VALUE.sub(HIDDEN, text)
    key, sep, _ = text.partition("=")
    return f"{key}={HIDDEN}" if sep and is_secret_key(key.strip()) else text
