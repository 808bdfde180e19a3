"""The failures the command line turns into one-line messages and exit codes, and the mapping that does it.

Exit codes: 0 success, 1 a check ran and failed, 2 bad input, 3 the environment lacks
something (Java, Maven, jars, a free port, a reachable broker), 130 interrupted. A failure
nobody foresaw also ends with 3, in one line (EOSBENCH_DEBUG=1 shows its traceback).
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import sys
import threading
from collections.abc import Callable

import yaml
from pydantic import ValidationError

from conf.failures import EnvironmentFailure, RunFailed, java_error_line, kafka_failure, kafka_reason
from conf.settings import SettingsError, validation_error_line, yaml_error_line

EXIT_CHECK_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_ENVIRONMENT = 3
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, as a tool the signal killed


class BadInput(SettingsError):
    """The user asked for something that cannot be done as given."""


class EnvironmentProblem(EnvironmentFailure):
    """The machine lacks something eosbench needs: Java, Maven, jars, a free port, a broker."""


class CheckFailed(RunFailed):
    """A check ran to the end and found a violation."""


# The three kinds every failure meant for the user belongs to (conf/failures.py, so that the
# engines can raise them too), and their exit codes. pydantic's ValidationError is a settings
# object refusing a flag's value.
EXIT_CODES: dict[type[Exception], int] = {
    SettingsError: EXIT_BAD_INPUT,
    ValidationError: EXIT_BAD_INPUT,
    EnvironmentFailure: EXIT_ENVIRONMENT,
    RunFailed: EXIT_CHECK_FAILED,
}
OWN_FAILURES = tuple(EXIT_CODES)  # anything else shows its traceback under EOSBENCH_DEBUG=1

STOP_REQUESTED = threading.Event()  # set once SIGTERM or Ctrl-C has asked a long command to stop


def interrupt_on_stop_signals() -> None:
    """Turn SIGTERM, like Ctrl-C, into KeyboardInterrupt, and remember it, so that clean-up runs first."""
    def interrupt(_signum, _frame):
        STOP_REQUESTED.set()
        raise KeyboardInterrupt
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, interrupt)


def run_handler(handler: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """Run one command's handler and return its exit status; a failure becomes one line on stderr."""
    try:
        return handler(args)
    except KeyboardInterrupt:
        print("eosbench: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away (`eosbench … | head`): no error of the command's, so no message,
        # and the exit a tool killed by SIGPIPE gives; stdout goes nowhere so that its flush at exit is quiet.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    except Exception as exc:
        if STOP_REQUESTED.is_set():
            # A stop signal that lands inside a client library's C code comes out as that
            # library's own error (confluent-kafka: a TypeError about property names).
            print("eosbench: interrupted", file=sys.stderr)
            return EXIT_INTERRUPTED
        return _report_failure(exc)


def _report_failure(exc: Exception) -> int:
    """Print one line for a command that failed and return its exit status."""
    exit_code, message = classify_failure(exc)
    if os.environ.get("EOSBENCH_DEBUG") and not isinstance(exc, OWN_FAILURES):  # a library's or nobody's
        raise exc
    print(f"eosbench: error: {message}", file=sys.stderr)
    return EXIT_ENVIRONMENT if exit_code is None else exit_code


def classify_failure(exc: Exception) -> tuple[int | None, str]:
    """The exit code and one-line message for a failure; None for one nobody foresaw (a bug, most likely).

    Ours say their kind by class (EXIT_CODES); the libraries' are sorted here, once for every
    command: a Kafka client's error by its code, Spark's by its kind, an OSError as the
    environment, a YAML error with its place.
    """
    if isinstance(exc, ValidationError):
        return EXIT_BAD_INPUT, validation_error_line(exc)
    for kind, exit_code in EXIT_CODES.items():
        if isinstance(exc, kind):
            return exit_code, _first_line(exc)
    if isinstance(exc, yaml.YAMLError):
        return EXIT_BAD_INPUT, yaml_error_line(exc)
    from confluent_kafka import KafkaError, KafkaException

    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        reason = kafka_reason(exc)
        broker = re.search(r"\w+://([^/\s]+)/", reason)
        security_line = kafka_security_failure(reason, {}, broker[1] if broker else "the broker")
        if security_line:
            return EXIT_ENVIRONMENT, security_line
        return classify_failure(kafka_failure(exc, f"Kafka: {reason}"))
    module = type(exc).__module__
    if module.startswith(("py4j", "pyspark")):
        # Spark rejects an argument it was handed (a setting, an option) as IllegalArgumentException.
        kind = EXIT_BAD_INPUT if type(exc).__name__ == "IllegalArgumentException" else EXIT_ENVIRONMENT
        return kind, f"Spark: {java_error_line(str(exc))}"
    if isinstance(exc, OSError):
        where = f" ({exc.filename})" if exc.filename else ""
        return EXIT_ENVIRONMENT, f"{exc.strerror or _first_line(exc)}{where}"
    return None, (f"{type(exc).__name__}: {_first_line(exc)} (set EOSBENCH_DEBUG=1 for the traceback)")


# --------------------------------------------------------------------------- authentication and TLS

# What a Kafka client's authentication or TLS error means, one rule per failure a user meets with a
# wrong --command-config. Each rule is (pattern in librdkafka's error text, a function of the match,
# the connection and the bootstrap servers giving the one line). Extend the list for new cases.
SecurityRule = tuple[re.Pattern, Callable[[re.Match, dict[str, str], str], str]]


def _certificate_line(_match: re.Match, security: dict[str, str], bootstrap: str) -> str:
    # librdkafka words every failed verification alike; Python's ssl names the reason (hostname or trust).
    reason = tls_verify_problem(bootstrap, security) or "certificate verify failed"
    if reason.lower().startswith("hostname mismatch"):
        host = bootstrap.split(",")[0].rsplit(":", 1)[0]
        return (f"TLS hostname mismatch at {bootstrap}: the broker's certificate is not valid for {host!r};"
                " connect by a name or address the certificate holds")
    return (f"TLS: the broker's certificate at {bootstrap} is not trusted ({reason}); point ssl.truststore.location"
            " at the CA that signed it")


SECURITY_FAILURES: list[SecurityRule] = [
    (re.compile(r"SASL (?P<mechanism>[\w-]+) mechanism handshake failed: .*supported mechanisms: (?P<offered>[\w, -]+)"),
     lambda m, _s, bootstrap: (f"SASL mechanism {m['mechanism']} is not offered by the broker at {bootstrap} (it"
                               f" offers {m['offered'].strip()}); set sasl.mechanism accordingly")),
    (re.compile(r"Authentication failed during authentication due to invalid credentials"),
     lambda _m, security, bootstrap: (f"SASL authentication failed at {bootstrap}: user"
                                      f" {security.get('sasl.username', '?')!r} and its password were refused (a wrong"
                                      " password or an unknown user: Kafka does not say which)")),
    (re.compile(r"certificate verify failed"), _certificate_line),
]


def kafka_security_failure(error_text: str, security: dict[str, str], bootstrap: str) -> str | None:
    """The one line that says which authentication or TLS failure a Kafka client error is, or None."""
    for pattern, line in SECURITY_FAILURES:
        match = pattern.search(error_text)
        if match:
            return line(match, security, bootstrap)
    return None


def tls_verify_problem(bootstrap: str, security: dict[str, str], timeout_s: float = 5.0) -> str | None:
    """Why the first bootstrap server's certificate fails verification with these settings (Python's ssl), or None."""
    import socket
    import ssl

    host, _, port = bootstrap.split(",")[0].rpartition(":")
    context = ssl.create_default_context(cadata=security.get("ssl.ca.pem"))
    context.check_hostname = security.get("ssl.endpoint.identification.algorithm", "https") == "https"
    try:
        with socket.create_connection((host, int(port)), timeout=timeout_s) as raw:
            with context.wrap_socket(raw, server_hostname=host):
                return None
    except ssl.SSLCertVerificationError as exc:
        return exc.verify_message
    except (OSError, ValueError):
        return None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
