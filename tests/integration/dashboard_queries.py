"""The PromQL behind the committed Grafana dashboards, ready to send to a test's Prometheus."""

from __future__ import annotations

import json
import math

from conf.settings import CONF_DIR

DASHBOARD_DIR = CONF_DIR.parent / "dashboards"


def dashboard_queries(*boards: str) -> list[tuple[str, str, str]]:
    """(dashboard, panel, PromQL) for every target of the named dashboards, variables set to All.

    Grafana sizes the panels' rate windows ($__rate_interval) to the graph it draws; a test's run
    has ended by the time the queries go out, so the window is one that covers all of it.
    """
    found = []
    for board in boards:
        for panel in json.loads((DASHBOARD_DIR / board).read_text())["panels"]:
            for target in panel["targets"]:
                expr = target["expr"].replace("[$__rate_interval]", "[10m]")
                for variable in ("$run_id", "$app_id", "$soak_run"):
                    expr = expr.replace(variable, ".*")
                assert "$" not in expr, f"{board} / {panel['title']}: a Grafana variable this harness does not set: {expr}"
                found.append((board, panel["title"], expr))
    return found


def assert_plausible(result: list[dict], where: str) -> None:
    """At least one series, no negative value, and at least one real number."""
    assert result, f"{where}: no series"
    values = [float(series["value"][1]) for series in result]
    assert all(v >= 0 for v in values if not math.isnan(v)), (where, values)
    assert any(not math.isnan(v) for v in values), (where, values)
