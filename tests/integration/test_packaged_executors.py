"""The job on a Spark standalone cluster whose executors have only what `eosbench package` shipped.

The session's cluster (conftest's `spark_standalone`) runs its workers with no PYSPARK_PYTHON,
no PYTHONPATH and no venv on PATH, from their own folder; spark-submit runs from a fresh shell
in a folder outside the repository. An executor can then import eosbench only from the archive
that `--archives …#environment` unpacked into its work folder, and PySpark only from Spark.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from collections import Counter
from pathlib import Path

from eosbench.local.executor_env import ExecutorEnvironment
from eosbench.local.kafka_admin import create_topic
from eosbench.local.spark_cluster import StandaloneCluster, spark_home
from streaming.verify import verify
from tests.integration.kafka_reads import read_all, sequence_numbers
from tests.integration.produce_helpers import committed_ids, produce
from tests.integration.test_spark_submit import fresh_shell_environment
from tests.unit.test_cli_errors import run_eosbench

REPO = Path(__file__).resolve().parents[2]
PROBE = Path(__file__).with_name("executor_probe.py")
# Two executors of 512 MB beside the broker and the driver: enough for a few thousand records.
EXECUTOR_CONF = ("--conf", "spark.executor.memory=512m")


def printed_line(cluster: StandaloneCluster, *job_arguments: str) -> str:
    """What `eosbench package` prints for this cluster and these job arguments (its stdout, one line)."""
    completed = run_eosbench("package", "--master", cluster.settings.master_url, *EXECUTOR_CONF, "--", *job_arguments,
                             timeout=600)
    assert completed.returncode == 0, completed.stderr[-2000:]
    lines = completed.stdout.splitlines()
    assert len(lines) == 1, completed.stdout
    return lines[0]


def run_line(command: str, cwd: Path) -> subprocess.CompletedProcess:
    """Run a spark-submit line from a fresh shell (no venv, no PySpark variables) in `cwd`."""
    return subprocess.run(["bash", "-c", command], cwd=cwd, env=fresh_shell_environment(), capture_output=True,
                          text=True, timeout=600)


def test_executors_run_the_archive_python_and_import_eosbench_from_it(spark_standalone, packed_environment, tmp_path):
    line = shlex.split(printed_line(spark_standalone, "--input-topic", "unused", "--output-topic", "unused"))
    job_file = line.index(str(packed_environment.job_file))
    completed = run_line(shlex.join([*line[:job_file], str(PROBE), "4"]), tmp_path)
    assert completed.returncode == 0, completed.stderr[-3000:]
    seen = json.loads(completed.stdout.strip().splitlines()[-1])
    assert seen["driver"] == where_unpacked(packed_environment.unpacked)
    executor_folder = re.compile(rf"{re.escape(str(spark_standalone.settings.state_dir))}/worker-[01]/app-[0-9-]+/[0-9]+")
    assert len(seen["tasks"]) == 4
    for task in seen["tasks"]:
        folder = task["executable"].removesuffix("/environment/bin/python")
        assert executor_folder.fullmatch(folder), task
        assert task == where_unpacked(Path(folder) / "environment"), task
        # Spark's own pyspark.zip is where its distribution is (here the PySpark wheel, in the venv).
        assert not task["executable"].startswith(str(REPO)) and not task["streaming"].startswith(str(REPO)), task


def where_unpacked(environment: Path) -> dict[str, str]:
    """What the probe reports for a Python run from an unpacked archive: Spark's own pyspark."""
    return {"executable": str(environment / "bin" / "python"),
            "streaming": str(environment / "lib" / "python3.11" / "site-packages" / "streaming" / "__init__.py"),
            "pyspark": str(spark_home() / "python" / "lib" / "pyspark.zip" / "pyspark" / "__init__.py")}


def test_the_printed_line_runs_the_exactly_once_job_on_the_cluster(spark_standalone, packed_environment, bootstrap,
                                                                    new_topic, tmp_path):
    source, sink = new_topic(partitions=2, prefix="pkg-in"), new_topic(partitions=2, prefix="pkg-out")
    create_topic(bootstrap, f"{sink}.dlq", 1, 1)
    produced = produce(bootstrap, source, 2_000, records_per_transaction=100, abort_ratio=0.3, seed=17)
    line = printed_line(spark_standalone, "--input-topic", source, "--output-topic", sink, "--app-id", sink,
                        "--bootstrap-server", bootstrap, "--checkpoint", str(tmp_path / "checkpoint"))
    completed = run_line(line, tmp_path)
    assert completed.returncode == 0, completed.stderr[-3000:]
    summary = json.loads(completed.stdout[completed.stdout.index("{\n"):])
    expected = committed_ids(produced.transactions)
    assert summary["records_out"] == sum(expected.values())
    assert Counter(sequence_numbers(read_all(bootstrap, sink))) == expected
    report = verify(bootstrap, source, sink, sink, f"{sink}.dlq")
    assert report.ok, report.violations
