"""`--checkpoint s3a://…` on a real S3 API (S3Proxy, objects on disk): exactly once through a driver kill, and two writers of one entry."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter

import pytest

from eosbench.local.s3 import LocalS3
from tests.integration.kafka_reads import read_all
from tests.integration.stream_checks import assert_exactly_once, logged_batches


def run_stream(bootstrap: str, settings, s3_server: LocalS3, *extra: str, fault: str | None = None,
               exit_code: int = 0) -> subprocess.CompletedProcess:
    """`eosbench stream` with its checkpoint on the S3 server, S3A's settings from the server's file; the secret never shows."""
    command = [sys.executable, "-m", "eosbench.cli", "stream", "--input-topic", settings.input_topic,
               "--output-topic", settings.output_topic, "--bootstrap-server", bootstrap, "--app-id", settings.app_id,
               "--checkpoint", settings.checkpoint, "--s3a-config", str(s3_server.settings.credentials_file),
               "--max-offsets-per-trigger", "3000", *extra]
    completed = subprocess.run(command, capture_output=True, text=True, timeout=240,
                               env={**os.environ, **({"EOSBENCH_FAULT": fault} if fault else {})})
    assert completed.returncode == exit_code, completed.stderr[-3000:]
    assert s3_server.credentials()[1] not in completed.stdout + completed.stderr
    return completed


def assert_output_is_input(bootstrap: str, settings) -> None:
    """The output holds exactly the input's committed records (by key), each once."""
    assert Counter(read_all(bootstrap, settings.output_topic)) == Counter(read_all(bootstrap, settings.input_topic))


@pytest.mark.parametrize("checkpoint", ["s3a"], indirect=True)
def test_checkpoint_on_s3_survives_a_driver_kill(bootstrap, pipeline, checkpoint, s3_server, tmp_path):
    # A server restart that keeps the checkpoint is the YARN soak's restart-s3, and a lost checkpoint
    # resumed from the group's offsets is the stream that test runs after its soak (test_soak.py), which
    # starts that JVM for YARN's sake anyway.
    settings = pipeline()
    s3a_config = s3_server.settings.credentials_file
    # The driver dies after the sink committed batch 1 and before Spark's commit log says so; the
    # restart reads the kept checkpoint (S3A lists its logs as S3AFileStatus[], which CheckpointLog
    # must read) and replays batch 1.
    # Without --txn-scope (auto), a new group gets slot scope, and says so first.
    crashed = run_stream(bootstrap, settings, s3_server, fault="kill-driver-after-sink-commit:1", exit_code=-9)
    assert crashed.stdout.splitlines()[0] == (f"txn scope: slot (auto: group {settings.group_id!r} has no committed offsets);"
                                              " source: grouped (micro-batch: a task and one kept consumer per slot,"
                                              " not per partition)")
    assert logged_batches(settings, s3a_config) == {"offsets": {0, 1}, "commits": {0}}, \
        "the kill lands before Spark's commit log"
    replay = tmp_path / "replay.json"
    run_stream(bootstrap, settings, s3_server, "--output-json", str(replay))
    replayed = json.loads(replay.read_text())
    assert replayed["outcomes"]["skipped_replay"] >= 1, "batch 1 is replayed and skipped"
    assert replayed["txn_scope"] == "slot", "the group keeps the scope that wrote its offsets"
    assert_exactly_once(bootstrap, settings)
    assert_output_is_input(bootstrap, settings)


@pytest.mark.parametrize("checkpoint", ["s3a", "hdfs"], indirect=True)
def test_of_two_drivers_writing_one_batch_id_the_second_is_refused(checkpoint, request):
    from eosbench.local.hadoop_fs import hadoop_main
    from eosbench.local.jars import resolve_bundle

    on_s3 = checkpoint.startswith("s3a://")
    s3a_config = request.getfixturevalue("s3_server").settings.credentials_file if on_s3 else None
    manager = "eosbench.spark.ObjectStoreCheckpointFileManager"  # its test entry; the class is in bundle s3a's jar

    def writers(mode: str, path: str) -> list[str]:
        done = hadoop_main(manager, mode, path, s3a_config=s3a_config, jars=(resolve_bundle("s3a")[-1],))
        return done.stdout.split()

    # Both opened offsets/7 before either finished, as two drivers of one checkpoint do: this manager on S3,
    # Spark's default (a rename that refuses an existing name) on HDFS.
    assert writers("race", f"{checkpoint}/offsets/7") == ["written", "refused", "FileAlreadyExistsException"]
    if on_s3:  # and the store itself refuses a conditional upload of an entry that exists (If-None-Match)
        assert writers("conditional", f"{checkpoint}/offsets/7")[0] == "refused"
