"""The local YARN without a JVM: its ports, rendered site files, jar bundle, REST replies and container ids."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pyspark
import pytest
from pydantic import ValidationError

from conf.local_servers import YARN_LOCAL_DISK, YarnSettings
from conf.settings import load_jar_bundles
from eosbench.console.errors import BadInput
from eosbench.local.yarn import (ClusterView, Container, LocalYarn, application_of, node_reported_since_start,
                                 parse_cluster_metrics, parse_containers, spark_yarn_conf)
from tests.unit.test_cli_errors import run_eosbench


def site_properties(text: str) -> dict[str, str]:
    """The name -> value pairs of a Hadoop *-site.xml."""
    return {prop.findtext("name"): prop.findtext("value") for prop in ElementTree.fromstring(text).iter("property")}


def test_ports_are_eight_in_a_row_from_the_resourcemanagers_and_every_one_is_on_loopback(tmp_path: Path):
    settings = YarnSettings(port=28132, state_dir=tmp_path)
    assert list(settings.ports.of_daemon("resourcemanager").values()) == [28132, 28133, 28134, 28135, 28136]
    assert list(settings.ports.of_daemon("nodemanager").values()) == [28137, 28138, 28139]
    yarn_site = site_properties(settings.render_site_files()["yarn-site.xml"])
    addresses = {name: value for name, value in yarn_site.items() if name.endswith("address")}
    assert addresses == {"yarn.resourcemanager.address": "127.0.0.1:28132",
                         "yarn.resourcemanager.scheduler.address": "127.0.0.1:28133",
                         "yarn.resourcemanager.resource-tracker.address": "127.0.0.1:28134",
                         "yarn.resourcemanager.admin.address": "127.0.0.1:28135",
                         "yarn.resourcemanager.webapp.address": "127.0.0.1:28136",
                         "yarn.nodemanager.address": "127.0.0.1:28137",
                         "yarn.nodemanager.localizer.address": "127.0.0.1:28138",
                         "yarn.nodemanager.webapp.address": "127.0.0.1:28139"}


def test_the_node_budget_fits_a_small_machine_and_no_memory_check_kills_a_jvm(tmp_path: Path):
    yarn_site = site_properties(YarnSettings(state_dir=tmp_path).render_site_files()["yarn-site.xml"])
    assert (yarn_site["yarn.nodemanager.resource.memory-mb"], yarn_site["yarn.nodemanager.resource.cpu-vcores"]) == (
        "6144", "4")
    assert (yarn_site["yarn.scheduler.minimum-allocation-mb"], yarn_site["yarn.scheduler.maximum-allocation-mb"]) == (
        "256", "6144")
    assert (yarn_site["yarn.nodemanager.vmem-check-enabled"], yarn_site["yarn.nodemanager.pmem-check-enabled"]) == (
        "false", "false")
    assert yarn_site["yarn.resourcemanager.scheduler.class"].endswith(".FifoScheduler")


def test_site_files_keep_every_folder_under_the_state_dir(tmp_path: Path):
    settings = YarnSettings(state_dir=tmp_path, default_fs="hdfs://127.0.0.1:18020")
    rendered = settings.render_site_files()
    core_site, yarn_site = site_properties(rendered["core-site.xml"]), site_properties(rendered["yarn-site.xml"])
    assert core_site == {"fs.defaultFS": "hdfs://127.0.0.1:18020", "hadoop.tmp.dir": f"{tmp_path}/tmp",
                         "fs.viewfs.mounttable.eosbench-local.linkMergeSlash": "file:///"}
    assert (yarn_site["yarn.nodemanager.local-dirs"], yarn_site["yarn.nodemanager.log-dirs"]) == (
        f"{tmp_path}/nm-local", f"{tmp_path}/nm-logs")
    assert settings.conf_dir == tmp_path / "conf"
    assert site_properties(YarnSettings(state_dir=tmp_path).render_site_files()["core-site.xml"])["fs.defaultFS"] == "file:///"


def test_the_local_yarn_takes_the_archive_where_it_lies_under_the_viewfs_name_its_core_site_gives_the_local_disk(
        tmp_path: Path):
    archive = Path("/cache/executor-env/d1/eosbench-environment.tar.gz")
    settings = YarnSettings(state_dir=tmp_path / "yarn")
    # A YARN started before its core-site.xml named the disk: the file: paths, which Spark copies per application.
    assert spark_yarn_conf(settings, archive)["spark.yarn.dist.archives"] == f"{archive}#environment"
    assert spark_yarn_conf(settings, archive)["spark.yarn.stagingDir"] == f"file://{tmp_path}/yarn/staging"
    LocalYarn(settings)._write_config()
    conf = spark_yarn_conf(settings, archive)
    # Staging folder and archive on one file system that is not file: (Client.copyFileToRemote then
    # copies nothing), each the same path on the disk.
    assert YARN_LOCAL_DISK == "viewfs://eosbench-local"
    assert conf["spark.yarn.stagingDir"] == f"viewfs://eosbench-local{tmp_path}/yarn/staging"
    assert conf["spark.yarn.dist.archives"] == "viewfs://eosbench-local/cache/executor-env/d1/eosbench-environment.tar.gz#environment"
    core_site = site_properties((settings.conf_dir / "core-site.xml").read_text())
    assert core_site["fs.viewfs.mounttable.eosbench-local.linkMergeSlash"] == "file:///"
    # An hdfs:// default file system keeps Spark's staging folder there, and the archive's file: path.
    on_hdfs = YarnSettings(state_dir=tmp_path / "yarn-hdfs", default_fs="hdfs://127.0.0.1:18020")
    LocalYarn(on_hdfs)._write_config()
    hdfs_conf = spark_yarn_conf(on_hdfs, archive)
    assert "spark.yarn.stagingDir" not in hdfs_conf and hdfs_conf["spark.yarn.dist.archives"] == f"{archive}#environment"


@pytest.mark.parametrize("field,value", [("port", 80), ("port", 65530), ("heap_mb", 64), ("heap_mb", 4096),
                                         ("node_memory_mb", 512), ("node_vcores", 0)])
def test_yarn_shape_is_validated(field, value):
    with pytest.raises(ValidationError):
        YarnSettings(**{field: value})


def test_yarn_daemons_are_the_hadoop_release_of_pysparks_client():
    [client_jar] = (Path(pyspark.__file__).parent / "jars").glob("hadoop-client-api-*.jar")
    client_version = client_jar.name.removeprefix("hadoop-client-api-").removesuffix(".jar")
    yarn = load_jar_bundles()["yarn"]
    assert {gav.rsplit(":", 1)[1] for gav in yarn.artifacts} == {client_version}
    assert not yarn.skip_jars_bundled_with_pyspark  # the daemons run in JVMs of their own, not on Spark's classpath


def test_cluster_metrics_are_read_from_the_resourcemanagers_reply():
    reply = {"clusterMetrics": {"appsRunning": 1, "availableMB": 5120, "availableVirtualCores": 3, "containersAllocated": 2,
                                "activeNodes": 1, "lostNodes": 0, "unhealthyNodes": 0, "totalNodes": 1}}
    assert parse_cluster_metrics(reply) == ClusterView(active_nodes=1, lost_nodes=0, unhealthy_nodes=0, apps_running=1,
                                                       containers_allocated=2, available_mb=5120, available_vcores=3)


def test_containers_are_read_from_every_shape_of_the_nodemanagers_reply():
    one = {"id": "container_1795727298485_0001_01_000002", "state": "RUNNING", "totalMemoryNeededMB": 1024,
           "totalVCoresNeeded": 1}
    expected = Container(id=one["id"], application_id="application_1795727298485_0001", state="RUNNING", memory_mb=1024,
                         vcores=1)
    assert parse_containers({"containers": {}}) == [] == parse_containers({"containers": None})
    assert parse_containers({"containers": {"container": one}}) == [expected]
    assert parse_containers({"containers": {"container": [one, one]}}) == [expected, expected]


def test_a_restarted_nodemanager_counts_only_once_the_rm_has_a_report_from_it():
    info = {"nodeInfo": {"id": "localhost:18037", "nmStartupTime": 1_000}}
    node = {"id": "localhost:18037", "state": "RUNNING", "lastHealthUpdate": 1_500}
    assert node_reported_since_start({"nodes": {"node": [node]}}, info)
    assert node_reported_since_start({"nodes": {"node": node}}, info)
    # The killed process's last report, still held by the RM until its liveness expiry.
    assert not node_reported_since_start({"nodes": {"node": [{**node, "lastHealthUpdate": 900}]}}, info)
    assert not node_reported_since_start({"nodes": {"node": [{**node, "state": "LOST"}]}}, info)
    assert not node_reported_since_start({"nodes": None}, info)
    assert not node_reported_since_start({"nodes": {"node": [node]}}, {})


def test_a_container_id_names_its_application_with_or_without_an_rm_epoch():
    assert application_of("container_1795727298485_0001_01_000002") == "application_1795727298485_0001"
    assert application_of("container_e07_1795727298485_0012_02_000001") == "application_1795727298485_0012"
    with pytest.raises(BadInput):
        application_of("application_1795727298485_0001")


def test_a_containers_folder_is_found_under_the_nodemanagers_local_dirs(tmp_path: Path):
    yarn = LocalYarn(YarnSettings(state_dir=tmp_path))
    folder = tmp_path / "nm-local/usercache/someone/appcache/application_1_0003/container_1_0003_01_000004"
    folder.mkdir(parents=True)
    assert yarn.container_dir("container_1_0003_01_000004") == folder
    assert yarn.container_dir("container_1_0003_01_000005") is None
    assert yarn.container_pids("container_1_0003_01_000004") == []  # a folder no process works in


def test_status_and_stop_need_no_flags_and_name_what_they_found(tmp_path: Path):
    never = run_eosbench("yarn", "status", "--yarn-state-dir", str(tmp_path / "never"))
    assert (never.returncode, never.stdout) == (1, f"stopped (no YARN was ever started from {tmp_path / 'never'})\n")
    (tmp_path / "yarn.json").write_text(json.dumps({"port": 28132, "heap_mb": 384, "node_memory_mb": 6144,
                                                    "node_vcores": 4, "default_fs": "file:///"}))
    status = run_eosbench("yarn", "status", "--yarn-state-dir", str(tmp_path))
    assert (status.returncode, status.stdout) == (1, "resourcemanager\tdown\tpid -\t127.0.0.1:28132\n"
                                                     "nodemanager\tdown\tpid -\t127.0.0.1:28137\nyarn: stopped\n")
    stop = run_eosbench("yarn", "stop", "--yarn-state-dir", str(tmp_path))
    assert (stop.returncode, stop.stdout) == (0, "no YARN daemon running\n")


def test_master_yarn_finds_its_yarn_by_flag_then_hadoop_conf_dir_then_the_default_state_dir(tmp_path: Path):
    from eosbench.console.errors import EnvironmentProblem
    from eosbench.local.yarn import yarn_target

    given = tmp_path / "hadoop-conf"
    given.mkdir()
    (given / "yarn-site.xml").write_text("<configuration/>")
    target = yarn_target(None, {"HADOOP_CONF_DIR": str(given)})
    assert (target.conf_dir, target.local) == (given, None)
    conf = target.spark_conf(Path("/cache/d1/eosbench-environment.tar.gz"))
    # Any YARN: the archive through YARN's own distribution, no local-only jars or loopback driver.
    assert conf["spark.yarn.dist.archives"] == "/cache/d1/eosbench-environment.tar.gz#environment"
    assert "spark.archives" not in conf and "spark.yarn.jars" not in conf and "spark.driver.host" not in conf
    assert target.environment() == {"HADOOP_CONF_DIR": str(given), "PYSPARK_PYTHON": "./environment/bin/python"}
    with pytest.raises(EnvironmentProblem, match="holds no yarn-site.xml"):
        yarn_target(None, {"HADOOP_CONF_DIR": str(tmp_path)})
    # An explicit state dir wins over HADOOP_CONF_DIR; one where `eosbench yarn start` never ran is refused.
    with pytest.raises(EnvironmentProblem, match=f"no `eosbench yarn start` ran in {tmp_path / 'none'}"):
        yarn_target(tmp_path / "none", {"HADOOP_CONF_DIR": str(given)})
    # One that ran but is not running now.
    stopped = tmp_path / "stopped"
    stopped.mkdir()
    (stopped / "yarn.json").write_text(json.dumps({"port": 28232}))
    with pytest.raises(EnvironmentProblem, match=f"the local YARN in {stopped} is not running"):
        yarn_target(stopped, {})


def test_stream_on_yarn_without_any_yarn_fails_in_one_line_before_asking_the_broker(tmp_path: Path):
    from eosbench.console.errors import EXIT_ENVIRONMENT
    from tests.unit.test_cli_errors import assert_one_line_error

    completed = run_eosbench("stream", "--input-topic", "i", "--output-topic", "o", "--master", "yarn",
                             "--yarn-state-dir", str(tmp_path), "--bootstrap-server", "127.0.0.1:1")
    assert_one_line_error(completed, EXIT_ENVIRONMENT, "--master yarn needs HADOOP_CONF_DIR or a local YARN",
                          f"no `eosbench yarn start` ran in {tmp_path}")
