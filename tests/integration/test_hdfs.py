"""`eosbench hdfs` end to end: it starts, reports truthfully, keeps its files across a NameNode SIGKILL, and stops."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request

from conf.local_servers import HdfsSettings
from eosbench.local.hdfs import LocalHdfs
from tests.unit.test_cli_errors import run_eosbench

CLI_HDFS_PORT = 28020  # below the ephemeral range, apart from the session HDFS's 18020-18024


def webhdfs(settings: HdfsSettings, path: str, op: str, method: str = "GET", data: bytes | None = None) -> bytes:
    """One WebHDFS call on the NameNode's HTTP port, following its redirect to the DataNode by hand (urllib only follows GETs)."""
    url = f"http://127.0.0.1:{settings.ports.namenode_http}/webhdfs/v1{path}?op={op}&user.name=eosbench&noredirect=true"
    with urllib.request.urlopen(urllib.request.Request(url, method=method), timeout=30) as reply:
        location = json.load(reply)["Location"]
    with urllib.request.urlopen(urllib.request.Request(location, data=data, method=method), timeout=30) as reply:
        return reply.read()


def wait_readable(settings: HdfsSettings, path: str, timeout_s: float = 30.0) -> None:
    """Wait until the NameNode can name a DataNode that holds the file's blocks."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            webhdfs(settings, path, "OPEN")
            return
        except urllib.error.HTTPError:
            time.sleep(0.2)


def test_hdfs_start_status_restart_namenode_stop(tmp_path):
    state = ["--hdfs-state-dir", str(tmp_path)]
    started = run_eosbench("hdfs", "start", "--port", str(CLI_HDFS_PORT), *state, timeout=180)
    try:
        assert started.returncode == 0, started.stderr
        assert started.stdout == "hdfs://127.0.0.1:28020\n"

        status = run_eosbench("hdfs", "status", *state)
        assert status.returncode == 0, status.stdout
        lines = status.stdout.splitlines()
        assert [line.split("\t")[:2] for line in lines[:2]] == [["namenode", "up"], ["datanode", "up"]]
        assert [line.split("\t")[3] for line in lines[:2]] == ["127.0.0.1:28020", "127.0.0.1:28022"]
        assert lines[2:] == ["hdfs: running, 1/1 DataNode live, safe mode off, 1 files and folders"
                             " (metrics http://127.0.0.1:28021/jmx)", "uri: hdfs://127.0.0.1:28020"]

        again = run_eosbench("hdfs", "start", "--port", str(CLI_HDFS_PORT), *state)
        assert (again.returncode, again.stdout) == (0, started.stdout), "start on a running HDFS is a no-op"
        other_shape = run_eosbench("hdfs", "start", "--port", "28030", *state)
        assert (other_shape.returncode, other_shape.stderr.splitlines()[-1]) == (
            2, f"eosbench: error: an HDFS with NameNode port 28020 and heap 256 MB is running from {tmp_path};"
               " run `eosbench hdfs stop` first")

        hdfs = LocalHdfs.from_state_dir(tmp_path)
        webhdfs(hdfs.settings, "/probe/kept", "CREATE", "PUT", b"written before the NameNode died")
        # The NameNode completes the file's block only once the DataNode reports it (within a
        # heartbeat); killed before that, it restarts with the file under construction.
        wait_readable(hdfs.settings, "/probe/kept")
        datanode_pid = hdfs.pid("datanode")
        killed = hdfs.restart_namenode()
        assert hdfs.pid("namenode") not in (None, killed) and hdfs.pid("datanode") == datanode_pid
        # `start` returned with no block missing, yet WebHDFS may need a moment more to pick the
        # DataNode (HDFS's own client, Spark's, retries that by itself).
        wait_readable(hdfs.settings, "/probe/kept")
        assert webhdfs(hdfs.settings, "/probe/kept", "OPEN") == b"written before the NameNode died"
    finally:
        stopped = run_eosbench("hdfs", "stop", *state, timeout=120)
    assert (stopped.returncode, stopped.stdout) == (0, "stopped 2 HDFS daemon(s)\n")
    assert run_eosbench("hdfs", "stop", *state).stdout == "no HDFS daemon running\n"
    after = run_eosbench("hdfs", "status", *state)
    assert (after.returncode, after.stdout) == (1, "namenode\tdown\tpid -\t127.0.0.1:28020\n"
                                                   "datanode\tdown\tpid -\t127.0.0.1:28022\nhdfs: stopped\n")


def test_spark_reads_back_what_it_wrote_to_hdfs_across_a_namenode_restart(spark, hdfs_cluster):
    path = f"{hdfs_cluster.uri}/spark-probe/ids"
    spark.range(0, 1000, numPartitions=3).write.mode("overwrite").parquet(path)
    hdfs_cluster.restart_namenode()
    assert sorted(row.id for row in spark.read.parquet(path).collect()) == list(range(1000))
