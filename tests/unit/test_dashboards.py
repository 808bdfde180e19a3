"""The Grafana dashboards: current with their generator (grafana-foundation-sdk), and valid as Grafana reads them."""

from __future__ import annotations

import importlib.util
import json
import re

import pytest
import yaml
from grafana_foundation_sdk.models import units

from conf.settings import CONF_DIR

DASHBOARD_DIR = CONF_DIR.parent / "dashboards"
BOARDS = ["overview.json", "producer.json", "broker.json", "soak.json"]
# Grafana addresses a dashboard by its uid (/d/<uid>): a new uid breaks every link and bookmark to it.
UIDS = {"overview.json": "eosbench-overview", "producer.json": "eosbench-producer", "broker.json": "eosbench-broker",
        "soak.json": "eosbench-soak"}
# Grafana's own variables that a query may use besides the dashboard's.
GRAFANA_VARIABLES = {"__rate_interval"}


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
    committed = {path.name: path.read_text() for path in sorted(DASHBOARD_DIR.glob("*.json"))}
    assert generator().render() == committed, "regenerate them: .venv/bin/python dashboards/build.py"


def test_uids_stay_what_links_open_and_each_dashboard_has_panels():
    boards = dashboards()
    assert set(boards) == set(BOARDS)
    assert {name: board["uid"] for name, board in boards.items()} == UIDS
    for board in boards.values():
        ids = [p["id"] for p in board["panels"]]
        assert ids and len(ids) == len(set(ids))


@pytest.mark.parametrize("name", BOARDS)
def test_every_panel_queries_prometheus_through_the_datasource_variable(name):
    board = dashboards()[name]
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert (variables["DS_PROMETHEUS"]["type"], variables["DS_PROMETHEUS"]["query"]) == ("datasource", "prometheus")
    for variable in variables.values():
        if variable["type"] == "query":
            assert variable["datasource"]["uid"] == "${DS_PROMETHEUS}", variable["name"]
    for panel in board["panels"]:
        assert panel["datasource"]["uid"] == "${DS_PROMETHEUS}"
        assert panel["targets"], f"{panel['title']} has no query"
        for target in panel["targets"]:
            assert target["expr"].strip() and target["datasource"]["uid"] == "${DS_PROMETHEUS}"
            for used in re.findall(r"\$(\w+)", target["expr"]):
                assert used in variables or used in GRAFANA_VARIABLES, \
                    f"{panel['title']} uses ${used}, which neither the dashboard nor Grafana defines"
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


@pytest.mark.parametrize("name", BOARDS)
def test_every_rate_window_is_grafanas_rate_interval(name):
    # A fixed window ([1m]) skips samples once a graph's step outgrows it, and holds too few
    # scrapes for a rate if the scrape interval grows; $__rate_interval follows both.
    for panel in dashboards()[name]["panels"]:
        for target in panel["targets"]:
            windows = re.findall(r"\[([^\]]*)\]", target["expr"])
            assert set(windows) <= {"$__rate_interval"}, f"{panel['title']}: {target['expr']}"
            if re.search(r"\b(?:rate|irate|increase)\(", target["expr"]):
                assert windows, f"{panel['title']}: {target['expr']}"


@pytest.mark.parametrize("name", BOARDS)
def test_every_panel_has_a_unit_grafana_knows(name):
    known = {value for key, value in vars(units).items() if not key.startswith("_") and isinstance(value, str)}
    for panel in dashboards()[name]["panels"]:
        assert panel["fieldConfig"]["defaults"].get("unit") in known, panel["title"]


@pytest.mark.parametrize("name", BOARDS)
def test_every_panel_shows_its_legend(name):
    # The SDK's time-series panel hides its legend by default, and the legend names the series.
    for panel in dashboards()[name]["panels"]:
        assert panel["options"]["legend"]["showLegend"], panel["title"]


def test_provisioned_datasource_tells_grafana_the_scrape_interval():
    # $__rate_interval is four of the datasource's scrape intervals at least; Grafana assumes 15 s
    # unless told, and Prometheus here scrapes every 5 s.
    scrape = yaml.safe_load((CONF_DIR / "prometheus" / "prometheus.yml").read_text())["global"]["scrape_interval"]
    provisioned = yaml.safe_load((DASHBOARD_DIR / "provisioning" / "datasources" / "prometheus.yml").read_text())
    [datasource] = provisioned["datasources"]
    assert datasource["type"] == "prometheus" and datasource["jsonData"]["timeInterval"] == scrape
