"""The command line's building blocks: a parser whose errors are one line, argument types, shared flags."""

from __future__ import annotations

import argparse
import copy
from pathlib import Path

from conf.client_config import COMMAND_CONFIG_HELP, ClientConfig, Connection
from conf.settings import DEFAULT_BOOTSTRAP, eosbench_home
from eosbench.console.errors import EXIT_BAD_INPUT


class DefaultsHelpFormatter(argparse.HelpFormatter):
    """Help that shows each flag's default, unless the flag's own help line already says what it is."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if ("default" in text.lower() or not action.option_strings or action.nargs == 0 or action.required
                or action.default in (None, argparse.SUPPRESS, [], ())):
            return text
        return f"{text} (default: %(default)s)" if text else "(default: %(default)s)"

    def _expand_help(self, action: argparse.Action) -> str:
        if isinstance(action.default, (list, tuple)):  # '500 5000', as it is typed, not "[500, 5000]"
            action = copy.copy(action)
            action.default = " ".join(str(value) for value in action.default)
        return super()._expand_help(action)


class OneLineArgumentParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line on stderr and exit status 2, and whose help shows defaults."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", DefaultsHelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str):  # noqa: D102 - argparse's contract
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {message}\n")


def _int_at_least(text: str, lowest: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None
    if value < lowest:
        raise argparse.ArgumentTypeError(f"must be at least {lowest}, got {value}")
    return value


def positive_int(text: str) -> int:
    """An argument type: a whole number of at least 1."""
    return _int_at_least(text, 1)


def non_negative_int(text: str) -> int:
    """An argument type: a whole number of at least 0."""
    return _int_at_least(text, 0)


def positive_ints(text: str) -> tuple[int, ...]:
    """An argument type: comma-separated whole numbers of at least 1, such as '2,3,4'."""
    return tuple(positive_int(part.strip()) for part in text.split(","))


def positive_float(text: str) -> float:
    """An argument type: a number above 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return value


def duration(text: str) -> float:
    """An argument type: seconds from '90', '90s', '30m' or '2h'."""
    units = {"s": 1, "m": 60, "h": 3600}
    try:
        value = float(text[:-1]) * units[text[-1]] if text and text[-1] in units else float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (use e.g. 90s, 30m, 2h)") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"a duration must be positive, got {text!r}")
    return value


def bootstrap_flag() -> argparse.ArgumentParser:
    """A parent parser with `--bootstrap-server` and `--command-config`, for every command that talks to Kafka."""
    parent = OneLineArgumentParser(add_help=False)
    parent.add_argument("--bootstrap-server", metavar="HOST:PORT", dest="bootstrap",
                        help="Kafka bootstrap servers (default: bootstrap.servers of --command-config,"
                             f" else the local broker, {DEFAULT_BOOTSTRAP})")
    parent.add_argument("--command-config", type=Path, metavar="FILE", help=COMMAND_CONFIG_HELP)
    return parent


def kafka_connection(args: argparse.Namespace) -> Connection:
    """The Connection a command's --bootstrap-server and --command-config name (the file is read once, here)."""
    return ClientConfig.load(args.command_config).connection(args.bootstrap)


def state_dir_flag() -> argparse.ArgumentParser:
    """A parent parser with `--state-dir`, for every command that runs or finds the local cluster."""
    parent = OneLineArgumentParser(add_help=False)
    parent.add_argument("--state-dir", metavar="DIR", type=Path, default=eosbench_home() / "cluster",
                        help="where the local cluster keeps data, logs and pid files (default: %(default)s)")
    return parent


def renamed_flag(parser: argparse.ArgumentParser, old: str, new: str) -> None:
    """Keep a flag's old spelling working for a release, hidden from help, as an alias of its new one."""
    action = next(a for a in parser._actions if new in a.option_strings)
    parser.add_argument(old, dest=action.dest, type=action.type, choices=action.choices, nargs=action.nargs,
                        metavar=action.metavar, default=argparse.SUPPRESS, help=argparse.SUPPRESS)
