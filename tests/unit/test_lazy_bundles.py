"""`eosbench setup` resolves only the demo's bundles; every other bundle is resolved by its first use.

Maven is faked (tests/unit/fake_maven.py): a stand-in `mvn` on PATH records the POM it is given and writes one jar.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from conf.local_servers import HdfsSettings
from conf.settings import load_jar_bundles
from eosbench import cli
from eosbench.local import environment, jars
from eosbench.local.hdfs import LocalHdfs
from tests.unit.fake_maven import fake_maven

ROOT = Path(__file__).resolve().parents[2]
DEMO_BUNDLES = ["kafka", "jmx-exporter", "spark"]


@pytest.fixture
def asked_for(monkeypatch) -> list[str]:
    """The bundles `resolve_bundle` is asked for, none of them resolved; Java and Maven taken as found."""
    asked: list[str] = []
    monkeypatch.setattr(jars, "resolve_bundle", lambda name: asked.append(name) or [Path(f"/jars/{name}/a.jar")])
    monkeypatch.setattr(environment, "check_java", lambda: "/usr/bin/java")
    monkeypatch.setattr(environment, "check_maven", lambda: "/usr/bin/mvn")
    return asked


def test_setup_asks_only_for_the_bundles_the_demo_runs_on(asked_for, capsys):
    assert cli.main(["setup"]) == 0
    assert asked_for == DEMO_BUNDLES
    out = capsys.readouterr().out
    assert ("resolved on first use (or now with `eosbench setup --all`):"
            " hdfs, yarn, s3proxy, s3a, kafka-streams, flink") in out


def test_setup_all_asks_for_every_bundle(asked_for, capsys):
    assert cli.main(["setup", "--all"]) == 0
    assert asked_for == list(load_jar_bundles())
    assert "resolved on first use" not in capsys.readouterr().out


def test_a_lazy_bundles_first_use_resolves_it_once_with_one_progress_line(tmp_path, monkeypatch, capsys):
    bin_dir, calls = fake_maven(tmp_path / "bin")
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_MAVEN_LOG", str(calls))
    monkeypatch.setenv("EOSBENCH_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("EOSBENCH_MAVEN_OFFLINE", raising=False)
    hdfs = LocalHdfs(HdfsSettings(state_dir=tmp_path / "hdfs"))
    first = hdfs._classpath()  # where `eosbench hdfs start` takes its jars
    assert hdfs._classpath() == first
    assert first.endswith(f"{jars.bundle_dir(load_jar_bundles()['hdfs'])}/*")
    assert calls.read_text().count("<project") == 1, "resolved once"
    assert "<artifactId>hadoop-hdfs</artifactId>" in calls.read_text()
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("eosbench: fetching the hdfs bundle from Maven Central (once)… done in ")
    assert line.endswith(" s")


def test_nothing_reaches_the_jar_cache_but_through_resolve_bundle():
    # One way to a bundle's jars, so that no caller finds a lazy bundle's folder missing.
    private = ("bundle_dir(", "jar_cache_dir(", "_resolve_into(", '/ "jars"')
    own = ROOT / "eosbench" / "local" / "jars.py"
    offenders = [f"{path.relative_to(ROOT)}: {name}" for folder in ("eosbench", "streaming", "producers", "conf", "peers")
                 for path in (ROOT / folder).rglob("*.py") if path != own
                 for name in private if name in path.read_text()]
    assert offenders == []
