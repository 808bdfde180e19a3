"""The Grafana dashboards: current with their generator, and valid as Grafana reads them."""

from __future__ import annotations

import importlib.util
import json
import re

import pytest

from conf.settings import CONF_DIR

DASHBOARD_DIR = CONF_DIR.parent / "dashboards"
BOARDS = ["overview.json", "producer.json", "broker.json", "soak.json"]


def generator():
    """dashboards/build.py, loaded as a module."""
    spec = importlib.util.spec_from_file_location("dashboards_build", DASHBOARD_DIR / "build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def dashboards() -> dict[str, dict]:
    """Every committed dashboard, parsed."""
    return {path.name: json.loads(path.read_text()) for path in sorted(DASHBOARD_DIR.glob("*.json"))}


def test_committed_json_is_what_the_generator_writes():
    assert {name: json.loads(text) for name, text in generator().render().items()} == dashboards()


def test_uids_are_unique_and_each_dashboard_has_panels():
    boards = dashboards()
    assert set(boards) == set(BOARDS)
    uids = [board["uid"] for board in boards.values()]
    assert len(uids) == len(set(uids))
    for board in boards.values():
        ids = [p["id"] for p in board["panels"]]
        assert ids and len(ids) == len(set(ids))


@pytest.mark.parametrize("name", BOARDS)
def test_every_panel_queries_prometheus_through_the_datasource_variable(name):
    board = dashboards()[name]
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert variables["DS_PROMETHEUS"]["type"] == "datasource"
    for panel in board["panels"]:
        assert panel["datasource"]["uid"] == "${DS_PROMETHEUS}"
        assert panel["targets"], f"{panel['title']} has no query"
        for target in panel["targets"]:
            assert target["expr"].strip() and target["datasource"]["uid"] == "${DS_PROMETHEUS}"
            for used in re.findall(r"\$(\w+)", target["expr"]):
                assert used in variables, f"{panel['title']} uses ${used}, which the dashboard does not define"
    for annotation in board["annotations"]["list"]:
        assert annotation["datasource"]["uid"] == "${DS_PROMETHEUS}"
        assert set(re.findall(r"\$(\w+)", annotation["expr"])) <= set(variables), annotation["name"]


def test_overview_and_producer_filter_by_run_and_app():
    boards = dashboards()
    assert {"app_id", "run_id"} <= {v["name"] for v in boards["overview.json"]["templating"]["list"]}
    assert "run_id" in {v["name"] for v in boards["producer.json"]["templating"]["list"]}


def test_soak_marks_every_fault_at_its_injection_time():
    board = dashboards()["soak.json"]
    [markers] = board["annotations"]["list"]
    assert markers["useValueForTime"] and "eosbench_soak_fault_injected_timestamp_seconds" in markers["expr"]
    assert {"soak_run", "app_id", "run_id"} == {v["name"] for v in board["templating"]["list"]} - {"DS_PROMETHEUS"}
