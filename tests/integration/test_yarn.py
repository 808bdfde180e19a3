"""`eosbench stream --master yarn`: the exactly-once job on the test YARN, in client mode, its tasks in YARN
containers running Python from the packed archive that YARN localized and unpacked once for every application.

The stream runs as `eosbench` does from a shell: a child process, its JVM started with the
HADOOP_CONF_DIR that `--yarn-state-dir` names (none is inherited), so the flag alone leads it to
the ResourceManager.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

from conf.stream_settings import StreamSettings
from eosbench.local.executor_env import ARCHIVE_NAME, ExecutorEnvironment
from eosbench.local.kafka_admin import create_topic
from eosbench.local.yarn import LocalYarn, application_of
from tests.integration.kafka_reads import read_all, sequence_numbers
from tests.integration.produce_helpers import committed_ids, produce
from tests.integration.stream_checks import assert_exactly_once


def test_stream_on_yarn_is_exactly_once_and_its_tasks_run_the_archive_in_yarn_containers(
        yarn_cluster: LocalYarn, packed_environment: ExecutorEnvironment, bootstrap, new_topic, tmp_path: Path):
    source, sink = new_topic(partitions=3, prefix="yarn-in"), new_topic(partitions=3, prefix="yarn-out")
    create_topic(bootstrap, f"{sink}.dlq", 1, 1)
    produced = produce(bootstrap, source, 6_000, records_per_transaction=300, abort_ratio=0.3, seed=28)
    settings = StreamSettings(input_topic=source, output_topic=sink, bootstrap_server=bootstrap, app_id=f"app-{sink}",
                              checkpoint=str(tmp_path / "checkpoint"), max_offsets_per_trigger=2_000)
    environment = {name: value for name, value in os.environ.items() if name != "HADOOP_CONF_DIR"}

    def stream() -> dict:
        completed = subprocess.run([sys.executable, "-m", "eosbench.cli",
            "stream", "--master", "yarn", "--yarn-state-dir", str(yarn_cluster.settings.state_dir),
            "--input-topic", source, "--output-topic", sink, "--app-id", settings.app_id, "--bootstrap-server", bootstrap,
            "--checkpoint", settings.checkpoint_uri, "--max-offsets-per-trigger", "2000", "--report-python",
            # One 2-core executor (a 1 GB container with overhead) and a small AM: one JVM fewer than
            # two executors on a two-core machine, and every task still runs in a YARN container.
            "--conf", "spark.executor.instances=1", "--conf", "spark.executor.cores=2",
            "--conf", "spark.executor.memory=512m", "--conf", "spark.yarn.am.memory=256m",
            "--conf", "spark.driver.memory=512m"], capture_output=True, text=True, timeout=300, env=environment)
        assert completed.returncode == 0, completed.stderr[-3000:]
        return json.loads(completed.stdout[completed.stdout.index("{\n"):])

    summary = stream()
    expected = committed_ids(produced.transactions)
    assert summary["records_out"] == sum(expected.values())
    assert Counter(sequence_numbers(read_all(bootstrap, sink))) == expected
    assert_exactly_once(bootstrap, settings)
    # The driver restarted: a second YARN application, from the checkpoint, with nothing left to copy.
    restarted = stream()
    assert restarted["records_out"] == 0
    assert_exactly_once(bootstrap, settings)

    # Each task ran <local-dirs>/usercache/<user>/appcache/<application>/<container>/environment/bin/python:
    # the ./environment link YARN makes in a container's own folder, to the archive it unpacked.
    local_dirs = yarn_cluster.settings.local_dirs.resolve()
    container_folder = re.compile(rf"{re.escape(str(local_dirs))}/usercache/[^/]+/appcache/"
                                  r"(application_[0-9]+_[0-9]+)/(container_[0-9e_]+)")
    applications, unpacked_at = set(), set()
    for task in summary["python"]["tasks"] + restarted["python"]["tasks"]:
        folder = task["executable"].removesuffix("/environment/bin/python")
        match = container_folder.fullmatch(folder)
        assert match, task
        assert application_of(match[2]) == match[1], task
        assert task["streaming"] == f"{folder}/environment/lib/python3.11/site-packages/streaming/__init__.py", task
        applications.add(match[1])
        unpacked_at.add(task["environment"])
    assert len(summary["python"]["tasks"]) == len(restarted["python"]["tasks"]) == 2
    assert len(applications) == 2
    # YARN localized the archive once: the NodeManager's cache (public, or the user's private one, as
    # the archive's folders allow) holds one unpacked copy, and both applications' links lead to it.
    # Spark used to copy the archive into each application's staging folder: a new path, a new copy.
    unpacked = [*local_dirs.glob(f"filecache/*/{ARCHIVE_NAME}"), *local_dirs.glob(f"usercache/*/filecache/*/{ARCHIVE_NAME}")]
    assert [str(folder) for folder in unpacked] == sorted(unpacked_at), (unpacked, unpacked_at)
    assert (unpacked[0] / "bin" / "python").exists()
    assert packed_environment.archive.name == ARCHIVE_NAME
