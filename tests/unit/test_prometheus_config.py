"""The Prometheus configuration and rules pass the real promtool."""

from __future__ import annotations

import shutil
import subprocess

import pytest

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
    assert "SUCCESS: 6 rules found" in completed.stdout and "SUCCESS: 4 rules found" in completed.stdout
