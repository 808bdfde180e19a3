"""A wrong password, an unknown user, an untrusted CA, a hostname mismatch, a mechanism not offered: one line each, exit 3, fast."""

from __future__ import annotations

import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from conf.settings import load_properties
from eosbench.local.security import make_ca
from tests.unit.test_cli_errors import run_eosbench

JAAS = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="{}" password="{}";'
B = "127.0.0.1:19492"

CASES = {
    "wrong password": (
        {"sasl.jaas.config": JAAS.format("admin", "not-the-password")},
        f"SASL authentication failed at {B}: user 'admin' and its password were refused (a wrong password or an"
        " unknown user: Kafka does not say which)"),
    "unknown user": (
        {"sasl.jaas.config": JAAS.format("nobody", "whatever")},
        f"SASL authentication failed at {B}: user 'nobody' and its password were refused (a wrong password or an"
        " unknown user: Kafka does not say which)"),
    "untrusted certificate": (
        {"ssl.truststore.location": "{other_ca}"},
        f"TLS: the broker's certificate at {B} is not trusted (self-signed certificate in certificate chain); point"
        " ssl.truststore.location at the CA that signed it"),
    "hostname mismatch": (
        {"bootstrap.servers": "localhost:19492"},
        "TLS hostname mismatch at localhost:19492: the broker's certificate is not valid for 'localhost'; connect by"
        " a name or address the certificate holds"),
    "mechanism not offered": (
        {"sasl.mechanism": "SCRAM-SHA-256"},
        f"SASL mechanism SCRAM-SHA-256 is not offered by the broker at {B} (it offers SCRAM-SHA-512); set"
        " sasl.mechanism accordingly"),
}


@pytest.fixture(scope="module")
def other_ca(tmp_path_factory) -> Path:
    """A CA that never signed the broker's certificate."""
    from cryptography.hazmat.primitives.serialization import Encoding

    path = tmp_path_factory.mktemp("other-ca") / "ca.pem"
    path.write_bytes(make_ca("not the cluster's CA")[1].public_bytes(Encoding.PEM))
    return path


def timed_describe(config: Path) -> tuple[subprocess.CompletedProcess, float]:
    """`eosbench topics describe` with this --command-config, and the seconds it took."""
    started = time.monotonic()
    completed = run_eosbench("topics", "describe", "any-topic", "--command-config", str(config), timeout=60)
    return completed, time.monotonic() - started


@pytest.fixture(scope="module")
def refusals(admin_properties, other_ca, tmp_path_factory) -> dict[str, tuple[subprocess.CompletedProcess, float]]:
    """Each case's command, all run at once: each spends most of its time starting up or waiting on the
    broker's answer, and none depends on another."""
    folder = tmp_path_factory.mktemp("refused")
    configs = {}
    for number, (case, (change, _)) in enumerate(CASES.items()):
        properties = {**load_properties(admin_properties),
                      **{key: value.format(other_ca=other_ca) for key, value in change.items()}}
        configs[case] = folder / f"client-{number}.properties"
        configs[case].write_text("".join(f"{key}={value}\n" for key, value in properties.items()))
    with ThreadPoolExecutor(len(CASES)) as pool:
        runs = {case: pool.submit(timed_describe, config) for case, config in configs.items()}
        return {case: run.result() for case, run in runs.items()}


@pytest.mark.parametrize("case", CASES)
def test_a_refused_login_or_certificate_is_one_line_and_exit_3_within_30_s(case, refusals):
    completed, seconds = refusals[case]
    assert seconds < 30
    assert (completed.returncode, completed.stdout, completed.stderr) == (3, "", f"eosbench: error: {CASES[case][1]}\n")
