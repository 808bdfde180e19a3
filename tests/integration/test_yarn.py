"""Spark on the local YARN: a client-mode PySpark driver whose executors run Python from the packed archive.

The driver runs in a child process: a JVM (and so a SparkSession) per process, and this one's
master must be yarn with HADOOP_CONF_DIR set before its JVM starts.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from eosbench.local.executor_env import ExecutorEnvironment
from eosbench.local.yarn import LocalYarn, spark_yarn_conf, spark_yarn_environment

# Each task reports the interpreter it runs in, its working folder, its container and where its
# ./environment link leads (the container's folder is gone once the application ends).
DRIVER = """
import json, sys
from pyspark.sql import SparkSession
builder = SparkSession.builder.appName("eosbench-yarn-where")
for key, value in json.loads(sys.argv[1]).items():
    builder = builder.config(key, value)
spark = builder.getOrCreate()
def where(_):
    import os, sys
    yield {"executable": sys.executable, "cwd": os.getcwd(), "container": os.environ.get("CONTAINER_ID"),
           "environment": os.path.realpath("environment")}
print(json.dumps({"app": spark.sparkContext.applicationId,
                  "tasks": spark.sparkContext.parallelize(range(4), 4).mapPartitions(where).collect()}))
spark.stop()
"""


def test_executors_run_python_from_the_archive_yarn_unpacked_into_their_containers(
        yarn_cluster: LocalYarn, packed_environment: ExecutorEnvironment, tmp_path: Path):
    conf = {**spark_yarn_conf(yarn_cluster.settings, packed_environment.archive),
            # One 2-core executor (a 1 GB container with overhead) and a small AM: one JVM fewer than
            # two executors on a two-core machine, and every task still runs in a YARN container.
            "spark.executor.instances": "1", "spark.executor.cores": "2", "spark.executor.memory": "512m",
            "spark.yarn.am.memory": "256m", "spark.driver.memory": "512m"}
    completed = subprocess.run([sys.executable, "-c", DRIVER, json.dumps(conf)], cwd=tmp_path, capture_output=True,
                               text=True, timeout=240, env={**os.environ, **spark_yarn_environment(yarn_cluster.settings)})
    assert completed.returncode == 0, completed.stderr[-3000:]
    report = json.loads(completed.stdout.splitlines()[-1])

    local_dirs = yarn_cluster.settings.local_dirs.resolve()
    containers = {task["container"] for task in report["tasks"]}
    assert len(report["tasks"]) == 4 and None not in containers
    for task in report["tasks"]:
        cwd = Path(task["cwd"])
        # <local-dirs>/usercache/<user>/appcache/<application>/<container>: the container's own folder.
        assert cwd.parent.name == report["app"] and cwd.name == task["container"], task
        assert cwd.is_relative_to(local_dirs), task
        assert task["executable"] == str(cwd / "environment" / "bin" / "python"), task
        # ./environment is YARN's link to the archive it localized and unpacked (usercache/<user>/filecache/<n>/<archive>).
        unpacked = Path(task["environment"])
        assert unpacked.is_relative_to(local_dirs / "usercache") and unpacked.parent.parent.name == "filecache", task
        assert unpacked.name == packed_environment.archive.name, task
