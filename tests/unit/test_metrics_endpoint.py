"""A /metrics endpoint: loopback by default, TLS when asked, and client certificates required with a client CA."""

from __future__ import annotations

import http.client
import shutil
import socket
import ssl
import subprocess
from pathlib import Path

import pytest
import yaml
from prometheus_client import CollectorRegistry, Counter

from conf.metrics_endpoint import DEFAULT_METRICS_HOST, MetricsTls, metrics_tls, serve_metrics
from conf.produce_settings import ProduceSettings
from conf.settings import SettingsError
from conf.stream_settings import StreamSettings


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Path:
    """A CA, a server certificate for 127.0.0.1 and a client certificate, all signed by it (openssl)."""
    folder = tmp_path_factory.mktemp("pki")
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "1",
             "-subj", "/CN=test CA", "-keyout", str(folder / "ca.key"), "-out", str(folder / "ca.pem"))
    for name, extension in (("server", "subjectAltName=IP:127.0.0.1"), ("client", "extendedKeyUsage=clientAuth")):
        _openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-subj", f"/CN={name}",
                 "-keyout", str(folder / f"{name}.key"), "-out", str(folder / f"{name}.csr"))
        (folder / f"{name}.ext").write_text(extension + "\n")
        _openssl("x509", "-req", "-in", str(folder / f"{name}.csr"), "-CA", str(folder / "ca.pem"), "-CAkey",
                 str(folder / "ca.key"), "-CAcreateserial", "-days", "1", "-extfile", str(folder / f"{name}.ext"),
                 "-out", str(folder / f"{name}.pem"))
    return folder


def _registry() -> CollectorRegistry:
    registry = CollectorRegistry()
    Counter("eosbench_probe", "a probe", registry=registry).inc(3)
    return registry


def _https_get(port: int, ca: Path, client: tuple[Path, Path] | None = None) -> str:
    context = ssl.create_default_context(cafile=str(ca))
    if client:
        context.load_cert_chain(str(client[0]), str(client[1]))
    connection = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=10)
    try:
        connection.request("GET", "/metrics")
        response = connection.getresponse()
        return f"{response.status} {response.read().decode()}"
    finally:
        connection.close()


def _plain_get(port: int) -> str:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request("GET", "/metrics")
        return str(connection.getresponse().status)
    finally:
        connection.close()


def test_the_default_host_is_loopback():
    assert DEFAULT_METRICS_HOST == "127.0.0.1"
    assert ProduceSettings(topic="t", num_records=1, record_size=1, throughput=-1).metrics_host == "127.0.0.1"
    assert StreamSettings(input_topic="a", output_topic="b").metrics_host == "127.0.0.1"


def test_a_tls_endpoint_serves_https_and_refuses_plain_http(pki):
    port = _free_port()
    serve_metrics(_registry(), port, tls=MetricsTls(pki / "server.pem", pki / "server.key"))
    assert "eosbench_probe_total 3.0" in _https_get(port, pki / "ca.pem")
    with pytest.raises((http.client.RemoteDisconnected, ConnectionResetError)):
        _plain_get(port)
    assert _https_get(port, pki / "ca.pem").startswith("200 ")  # the refused request did not stop the server


def test_a_client_ca_requires_a_client_certificate(pki):
    port = _free_port()
    serve_metrics(_registry(), port, tls=MetricsTls(pki / "server.pem", pki / "server.key", pki / "ca.pem"))
    assert _https_get(port, pki / "ca.pem", (pki / "client.pem", pki / "client.key")).startswith("200 ")
    with pytest.raises((ssl.SSLError, ConnectionResetError)):
        _https_get(port, pki / "ca.pem")


@pytest.mark.parametrize("cert,key,client_ca,message", [
    ("server.pem", None, None, "--metrics-tls-cert and --metrics-tls-key go together"),
    (None, None, "ca.pem", "--metrics-tls-client-ca needs --metrics-tls-cert and --metrics-tls-key"),
    ("server.pem", "missing.key", None, "--metrics-tls-key {pki}/missing.key: no such file"),
])
def test_tls_flags_that_cannot_serve_are_refused(pki, cert, key, client_ca, message):
    with pytest.raises(SettingsError) as refused:
        metrics_tls(*(pki / name if name else None for name in (cert, key, client_ca)))
    assert str(refused.value) == message.format(pki=pki)


def test_a_key_that_does_not_match_the_certificate_is_bad_input(pki):
    with pytest.raises(SettingsError) as refused:
        serve_metrics(_registry(), _free_port(), tls=MetricsTls(pki / "server.pem", pki / "client.key"))
    assert str(refused.value).startswith(
        f"--metrics-tls-*: Cannot load server certificate file '{pki}/server.pem' or its private key file"
        f" '{pki}/client.key': [X509: KEY_VALUES_MISMATCH] key values mismatch")


def test_the_tls_scrape_config_passes_promtool(pki, tmp_path):
    # promtool checks that the files a tls_config names exist, so the config is checked beside real ones.
    from tests.unit.test_prometheus_config import PROMETHEUS_DIR, promtool

    for name in ("prometheus-tls.yml", "recording_rules.yml", "alert_rules.yml"):
        shutil.copy(PROMETHEUS_DIR / name, tmp_path / name)
    (tmp_path / "tls").mkdir()
    for source, target in (("ca.pem", "metrics-ca.pem"), ("client.pem", "scraper.pem"), ("client.key", "scraper.key")):
        shutil.copy(pki / source, tmp_path / "tls" / target)
    completed = subprocess.run([promtool(), "check", "config", str(tmp_path / "prometheus-tls.yml")],
                               capture_output=True, text=True)
    assert completed.returncode == 0, completed.stdout + completed.stderr
    scrape = yaml.safe_load((PROMETHEUS_DIR / "prometheus-tls.yml").read_text())["scrape_configs"]
    assert [(job["job_name"], job["scheme"], job["static_configs"][0]["targets"]) for job in scrape] == [
        ("eosbench-producer", "https", ["127.0.0.1:9400"]), ("eosbench-stream", "https", ["127.0.0.1:9401"])]
