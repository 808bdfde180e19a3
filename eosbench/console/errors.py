"""The failures the command line turns into one-line messages and exit codes."""

from __future__ import annotations

EXIT_CHECK_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_ENVIRONMENT = 3


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
