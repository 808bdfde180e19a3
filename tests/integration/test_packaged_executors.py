"""The job on a Spark standalone cluster whose executors have only what `eosbench package` shipped.

The session's cluster (conftest's `spark_standalone`) runs its worker with no PYSPARK_PYTHON, no
PYTHONPATH and no venv on PATH, from its own folder; the printed spark-submit line runs from a
fresh shell in a folder outside the repository. An executor can then import eosbench only from
the archive that `--archives …#environment` unpacked into its work folder, and PySpark only from
Spark's own pyspark.zip.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from eosbench.local.kafka_admin import create_topic
from eosbench.local.spark_cluster import StandaloneCluster, spark_home
from streaming.verify.verifier import verify
from tests.integration.kafka_reads import read_all, sequence_numbers
from tests.integration.produce_helpers import committed_ids, produce
from tests.integration.test_spark_submit import fresh_shell_environment
from tests.unit.test_cli_errors import run_eosbench

REPO = Path(__file__).resolve().parents[2]


def printed_line(cluster: StandaloneCluster, *job_arguments: str) -> str:
    """What `eosbench package` prints for this cluster and these job arguments (its stdout, one line)."""
    # An executor of 512 MB beside the broker and the driver: enough for a few thousand records.
    completed = run_eosbench("package", "--master", cluster.settings.master_url, "--conf", "spark.executor.memory=512m",
                             "--", *job_arguments, timeout=600)
    assert completed.returncode == 0, completed.stderr[-2000:]
    lines = completed.stdout.splitlines()
    assert len(lines) == 1, completed.stdout
    return lines[0]


def where_unpacked(environment: Path) -> dict[str, str]:
    """What --report-python shows for a Python run from an unpacked archive: its interpreter, the
    environment's real folder and eosbench, and Spark's own pyspark."""
    return {"executable": str(environment / "bin" / "python"), "environment": os.path.realpath(environment),
            "streaming": str(environment / "lib" / "python3.11" / "site-packages" / "streaming" / "__init__.py"),
            "pyspark": str(spark_home() / "python" / "lib" / "pyspark.zip" / "pyspark" / "__init__.py")}


@pytest.mark.heavy
def test_the_printed_line_runs_the_job_exactly_once_with_executors_on_the_archive_alone(
        spark_standalone, packed_environment, bootstrap, new_topic, tmp_path):
    source, sink = new_topic(partitions=2, prefix="pkg-in"), new_topic(partitions=2, prefix="pkg-out")
    create_topic(bootstrap, f"{sink}.dlq", 1, 1)
    produced = produce(bootstrap, source, 2_000, records_per_transaction=100, abort_ratio=0.3, seed=17)
    line = printed_line(spark_standalone, "--input-topic", source, "--output-topic", sink, "--app-id", sink,
                        "--bootstrap-server", bootstrap, "--checkpoint", str(tmp_path / "checkpoint"),
                        "--report-python")
    print(line)  # the exact line, for the log of a run
    completed = subprocess.run(["bash", "-c", line], cwd=tmp_path, env=fresh_shell_environment(),
                               capture_output=True, text=True, timeout=600)
    assert completed.returncode == 0, completed.stderr[-3000:]
    summary = json.loads(completed.stdout[completed.stdout.index("{\n"):])

    expected = committed_ids(produced.transactions)
    assert summary["records_out"] == sum(expected.values())
    assert Counter(sequence_numbers(read_all(bootstrap, sink))) == expected
    report = verify(bootstrap, source, sink, sink, f"{sink}.dlq")
    assert report.ok, report.violations

    # The driver ran the unpacked copy beside the archive; each task the copy that Spark unpacked
    # into its executor's folder, <worker work dir>/<app id>/<executor id>/environment.
    assert summary["python"]["driver"] == where_unpacked(packed_environment.unpacked)
    executor_folder = re.compile(rf"{re.escape(str(spark_standalone.settings.state_dir))}/worker-0/app-[0-9-]+/[0-9]+")
    tasks = summary["python"]["tasks"]
    assert len(tasks) == 2
    for task in tasks:
        folder = task["executable"].removesuffix("/environment/bin/python")
        assert executor_folder.fullmatch(folder), task
        assert task == where_unpacked(Path(folder) / "environment"), task
        # Spark's pyspark.zip is wherever its distribution is: here the PySpark wheel, in the venv.
        assert not task["executable"].startswith(str(REPO)) and not task["streaming"].startswith(str(REPO)), task
