"""Help a user can work from: every flag of every command says what it does and what it is by default."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from eosbench.cli import build_parser
from eosbench.console.arguments import DefaultsHelpFormatter


def every_parser(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """Yield (command path, parser) for the parser and every subcommand below it."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from every_parser(sub, (*path, name))


def visible_flags():
    """Every flag help shows, with the command it belongs to."""
    for path, parser in every_parser(build_parser()):
        for action in parser._actions:
            if action.option_strings and action.help != argparse.SUPPRESS and not isinstance(action, argparse._HelpAction):
                yield " ".join(path) or "eosbench", action


FLAGS = list(visible_flags())


def test_every_command_is_walked():
    commands = {path for path, _ in FLAGS}
    assert {"broker start", "produce", "stream", "verify", "demo", "soak", "bench produce", "bench spark",
            "bench streaming", "bench sweep", "bench writes", "report", "topics create"} <= commands


def test_every_flag_has_a_help_line():
    missing = [f"{command} {action.option_strings[0]}" for command, action in FLAGS if not (action.help or "").strip()]
    assert missing == []


def test_every_flag_shows_its_default_or_is_a_switch():
    formatter = DefaultsHelpFormatter("eosbench")
    silent = [f"{command} {action.option_strings[0]}" for command, action in FLAGS
              if action.nargs != 0 and not action.required
              and "default" not in formatter._expand_help(action).lower()]
    assert silent == []


def test_one_name_per_idea():
    spellings = {option for _, action in FLAGS for option in action.option_strings}
    assert not spellings & {"--abort-ratio", "--output-dir"}, "old spellings are hidden aliases only"


@pytest.mark.parametrize("old,new,argv", [
    ("--abort-ratio", "transaction_abort_ratio", ["demo", "--abort-ratio", "0.2"]),
    ("--abort-ratio", "transaction_abort_ratio", ["soak", "--duration", "1m", "--abort-ratio", "0.2"]),
    ("--output-dir", "results_dir", ["bench", "writes", "--output-dir", "elsewhere"]),
])
def test_old_spellings_still_work(old, new, argv):
    args = build_parser().parse_args(argv)
    assert str(getattr(args, new)) in {"0.2", "elsewhere"}


def test_version_is_one_line_naming_the_versions_it_runs_against():
    completed = subprocess.run([sys.executable, "-m", "eosbench.cli", "--version"], capture_output=True, text=True)
    assert completed.returncode == 0
    (line,) = completed.stdout.splitlines()
    assert line.startswith("eosbench ") and "Kafka 4.3.1" in line and "PySpark 4.2.0" in line
