"""The failures the command line turns into one-line messages and exit codes, and the mapping that does it.

Exit codes: 0 success, 1 a check ran and failed, 2 bad input, 3 the environment lacks
something (Java, Maven, jars, a free port, a reachable broker), 130 interrupted.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from collections.abc import Callable

from pydantic import ValidationError

from conf.settings import SettingsError

EXIT_CHECK_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_ENVIRONMENT = 3
EXIT_INTERRUPTED = 130


class EosbenchError(Exception):
    """A failure with a one-line message meant for the user, and the exit code it ends with."""

    exit_code = EXIT_BAD_INPUT


class BadInput(EosbenchError):
    """The user asked for something that cannot be done as given."""

    exit_code = EXIT_BAD_INPUT


class EnvironmentProblem(EosbenchError):
    """The machine lacks something eosbench needs: Java, Maven, jars, a free port, a broker."""

    exit_code = EXIT_ENVIRONMENT


class CheckFailed(EosbenchError):
    """A check ran to the end and found a violation."""

    exit_code = EXIT_CHECK_FAILED


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
    except Exception as exc:
        if STOP_REQUESTED.is_set():
            # A stop signal that lands inside a client library's C code comes out as that
            # library's own error (confluent-kafka: a TypeError about property names).
            print("eosbench: interrupted", file=sys.stderr)
            return EXIT_INTERRUPTED
        return _report_failure(exc)


def _report_failure(exc: Exception) -> int:
    """Print one line for a command that failed and return its exit status."""
    if isinstance(exc, EosbenchError):
        print(f"eosbench: error: {exc}", file=sys.stderr)
        return exc.exit_code
    if isinstance(exc, SettingsError):
        print(f"eosbench: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if isinstance(exc, ValidationError):
        print(f"eosbench: error: {_first_validation_error(exc)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if os.environ.get("EOSBENCH_DEBUG"):  # a bug or an unforeseen failure: still one line, unless debugging
        raise exc
    print(f"eosbench: error: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
          " (set EOSBENCH_DEBUG=1 for the traceback)", file=sys.stderr)
    return EXIT_ENVIRONMENT


def _first_validation_error(exc: ValidationError) -> str:
    """The first error of a settings object's validation, as one line naming its flag."""
    error = exc.errors()[0]
    message = str(error["msg"]).removeprefix("Value error, ")
    if not error["loc"]:
        return message  # a cross-field rule, whose message names its flags
    field = "--" + "-".join(str(part) for part in error["loc"]).replace("_", "-")
    return f"{field}: {message}"
