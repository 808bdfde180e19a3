"""The Prometheus configuration and rules pass the real promtool."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest
import yaml

from conf.settings import CONF_DIR

PROMETHEUS_DIR = CONF_DIR / "prometheus"


def promtool() -> str:
    """The promtool binary (`make setup` installs Debian's prometheus package)."""
    found = shutil.which("promtool")
    if found is None:
        pytest.fail("promtool not found: run `make setup` (it installs Debian's prometheus package)")
    return found


def test_prometheus_config_is_valid():
    completed = subprocess.run([promtool(), "check", "config", str(PROMETHEUS_DIR / "prometheus.yml")],
                               capture_output=True, text=True)
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert "SUCCESS: 2 rule files found" in completed.stdout


def test_recording_and_alert_rules_are_valid():
    completed = subprocess.run([promtool(), "check", "rules", str(PROMETHEUS_DIR / "recording_rules.yml"),
                                str(PROMETHEUS_DIR / "alert_rules.yml")], capture_output=True, text=True)
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert "SUCCESS: 21 rules found" in completed.stdout and "SUCCESS: 4 rules found" in completed.stdout


def _promql_sources() -> list[tuple[str, str]]:
    """(where, PromQL) for every dashboard target and every rule."""
    found = []
    for board in sorted((CONF_DIR.parent / "dashboards").glob("*.json")):
        for panel in json.loads(board.read_text())["panels"]:
            found += [(f"{board.name} / {panel['title']}", target["expr"]) for target in panel["targets"]]
    for name in ("recording_rules.yml", "alert_rules.yml"):
        for group in yaml.safe_load((PROMETHEUS_DIR / name).read_text())["groups"]:
            found += [(f"{name} / {rule.get('record') or rule.get('alert')}", rule["expr"]) for rule in group["rules"]]
    return found


@pytest.mark.parametrize("where,expr", _promql_sources())
def test_rate_and_increase_only_ever_see_counters(where, expr):
    # rate() of a gauge is meaningless (Prometheus's naming rules): whatever it wraps must be a
    # counter or a histogram's cumulative series.
    for name in re.findall(r"\b(?:rate|irate|increase)\(\s*([A-Za-z_:][\w:]*)", expr):
        assert name.endswith(("_total", "_bucket", "_sum", "_count")), f"{where}: {name} is not a counter"
