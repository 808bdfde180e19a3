"""conf.local_servers' HdfsSettings: the local HDFS's ports, its rendered site files, and its jars' Hadoop version."""

from __future__ import annotations

import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pyspark
import pytest
from pydantic import ValidationError

from conf.local_servers import HdfsSettings
from conf.settings import load_jar_bundles


def site_properties(text: str) -> dict[str, str]:
    """The name -> value pairs of a Hadoop *-site.xml."""
    return {prop.findtext("name"): prop.findtext("value") for prop in ElementTree.fromstring(text).iter("property")}


def test_ports_are_five_in_a_row_from_the_namenodes_and_every_one_is_on_loopback(tmp_path: Path):
    settings = HdfsSettings(port=18020, state_dir=tmp_path)
    assert settings.uri == "hdfs://127.0.0.1:18020"
    assert settings.ports.of_daemon("namenode") == {"NameNode RPC port": 18020, "NameNode HTTP port": 18021}
    assert settings.ports.of_daemon("datanode") == {"DataNode data port": 18022, "DataNode HTTP port": 18023,
                                                    "DataNode IPC port": 18024}
    hdfs_site = site_properties(settings.render_site_files()["hdfs-site.xml"])
    addresses = {name: value for name, value in hdfs_site.items() if name.endswith("address")}
    assert addresses == {"dfs.namenode.rpc-address": "127.0.0.1:18020", "dfs.namenode.http-address": "127.0.0.1:18021",
                         "dfs.datanode.address": "127.0.0.1:18022", "dfs.datanode.http.address": "127.0.0.1:18023",
                         "dfs.datanode.ipc.address": "127.0.0.1:18024"}


def test_site_files_keep_storage_under_the_state_dir_with_one_replica(tmp_path: Path):
    rendered = HdfsSettings(state_dir=tmp_path).render_site_files()
    core_site, hdfs_site = site_properties(rendered["core-site.xml"]), site_properties(rendered["hdfs-site.xml"])
    assert core_site == {"fs.defaultFS": "hdfs://127.0.0.1:8020", "hadoop.tmp.dir": f"{tmp_path}/tmp"}
    assert (hdfs_site["dfs.namenode.name.dir"], hdfs_site["dfs.datanode.data.dir"]) == (
        f"{tmp_path}/namenode", f"{tmp_path}/datanode")
    assert (hdfs_site["dfs.replication"], hdfs_site["dfs.namenode.safemode.extension"]) == ("1", "0")


@pytest.mark.parametrize("field,value", [("port", 80), ("port", 65534), ("heap_mb", 64), ("heap_mb", 4096)])
def test_hdfs_shape_is_validated(field, value):
    with pytest.raises(ValidationError):
        HdfsSettings(**{field: value})


def test_hdfs_daemons_are_the_hadoop_release_of_pysparks_client():
    [client_jar] = (Path(pyspark.__file__).parent / "jars").glob("hadoop-client-api-*.jar")
    client_version = client_jar.name.removeprefix("hadoop-client-api-").removesuffix(".jar")
    hdfs = load_jar_bundles()["hdfs"]
    assert {gav.rsplit(":", 1)[1] for gav in hdfs.artifacts} == {client_version}
    assert not hdfs.skip_jars_bundled_with_pyspark  # the daemons run in JVMs of their own, not on Spark's classpath
