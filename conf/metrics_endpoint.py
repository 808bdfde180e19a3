"""Where and how a command serves its Prometheus /metrics: loopback by default, TLS and client certificates on request.

Every endpoint (the producer's, the streaming driver's, the soak's) starts through `serve_metrics`,
with prometheus-client's own `start_http_server`. That function (0.26.0) takes a server
certificate and key for TLS, and a CA for client certificates, which it then requires (mutual
TLS); it offers no basic auth, so neither does eosbench. conf/prometheus/prometheus-tls.yml is
the scrape configuration that matches a TLS endpoint with client certificates.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from conf.settings import SettingsError

DEFAULT_METRICS_HOST = "127.0.0.1"  # nothing outside this machine can scrape unless --metrics-host says so


@dataclass(frozen=True)
class MetricsTls:
    """The TLS files of a /metrics endpoint: the server's certificate and key, and optionally a client CA."""

    cert: Path
    key: Path
    client_ca: Path | None = None  # when set, a scraper must present a certificate this CA signed


def metrics_tls(cert: Path | None, key: Path | None, client_ca: Path | None) -> MetricsTls | None:
    """The endpoint's TLS from its three flags (None: plain HTTP), refusing a combination that cannot serve."""
    if cert is None and key is None:
        if client_ca is not None:
            raise SettingsError("--metrics-tls-client-ca needs --metrics-tls-cert and --metrics-tls-key")
        return None
    if cert is None or key is None:
        raise SettingsError("--metrics-tls-cert and --metrics-tls-key go together")
    for flag, path in (("--metrics-tls-cert", cert), ("--metrics-tls-key", key), ("--metrics-tls-client-ca", client_ca)):
        if path is not None and not path.is_file():
            raise SettingsError(f"{flag} {path}: no such file")
    return MetricsTls(cert, key, client_ca)


def add_metrics_tls_arguments(parser) -> None:
    """The TLS flags of a command that serves /metrics (produce, stream), beside its --metrics-port and --metrics-host."""
    parser.add_argument("--metrics-tls-cert", type=Path, metavar="FILE",
                        help="serve /metrics over TLS with this PEM certificate (chain) (default: plain HTTP)")
    parser.add_argument("--metrics-tls-key", type=Path, metavar="FILE", help="the PEM private key of --metrics-tls-cert (default: none)")
    parser.add_argument("--metrics-tls-client-ca", type=Path, metavar="FILE",
                        help="require scrapers to present a certificate signed by this PEM CA (mutual TLS;"
                             " default: any client)")


def metrics_url(host: str, port: int, tls: MetricsTls | None) -> str:
    """The URL a scraper reads the endpoint at."""
    return f"{'https' if tls else 'http'}://{host}:{port}/metrics"


def serve_metrics(registry, port: int, host: str = DEFAULT_METRICS_HOST, tls: MetricsTls | None = None) -> None:
    """Serve `registry` on host:port/metrics in a daemon thread, over TLS when `tls` is given.

    A wrong certificate or key is bad input (SettingsError); binding errors are left to the caller,
    which knows its flags (conf.failures.bind_failure).
    """
    import ssl

    from prometheus_client import start_http_server

    if tls is None:
        start_http_server(port, addr=host, registry=registry)
        return
    try:
        start_http_server(port, addr=host, registry=registry, certfile=str(tls.cert), keyfile=str(tls.key),
                          client_cafile=str(tls.client_ca) if tls.client_ca else None,
                          client_auth_required=tls.client_ca is not None)
    except ssl.SSLError as exc:  # prometheus-client's words name the files: "Cannot load server certificate ..."
        raise SettingsError(f"--metrics-tls-*: {exc.args[0] if exc.args else exc}") from exc
