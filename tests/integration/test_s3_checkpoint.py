"""`--checkpoint s3a://…` on a real S3 API (S3Proxy): exactly once, and a server restart that loses the checkpoint."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter

import pytest

from eosbench.local.s3 import LocalS3
from tests.integration.kafka_reads import read_all
from tests.integration.produce_helpers import produce
from tests.integration.stream_checks import assert_exactly_once


def run_stream(bootstrap: str, settings, s3_server: LocalS3, *extra: str) -> subprocess.CompletedProcess:
    """`eosbench stream` with its checkpoint on the S3 server, S3A's settings from the server's file; the secret never shows."""
    command = [sys.executable, "-m", "eosbench.cli", "stream", "--input-topic", settings.input_topic,
               "--output-topic", settings.output_topic, "--bootstrap-server", bootstrap, "--app-id", settings.app_id,
               "--checkpoint", settings.checkpoint, "--s3a-config", str(s3_server.settings.credentials_file),
               "--max-offsets-per-trigger", "3000", *extra]
    completed = subprocess.run(command, capture_output=True, text=True, timeout=240, env=dict(os.environ))
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert s3_server.credentials()[1] not in completed.stdout + completed.stderr
    return completed


def assert_output_is_input(bootstrap: str, settings) -> None:
    """The output holds exactly the input's committed records (by key), each once."""
    assert Counter(read_all(bootstrap, settings.output_topic)) == Counter(read_all(bootstrap, settings.input_topic))


@pytest.mark.parametrize("checkpoint", ["s3a"], indirect=True)
def test_checkpoint_on_s3_then_lost_in_a_server_restart(bootstrap, pipeline, checkpoint, s3_server, tmp_path):
    settings = pipeline()
    run_stream(bootstrap, settings, s3_server)
    assert_exactly_once(bootstrap, settings)
    assert_output_is_input(bootstrap, settings)

    more = produce(bootstrap, settings.input_topic, 18_000, records_per_transaction=500, abort_ratio=0.3, seed=5,
                   resume=True)
    assert more.first_seq > 0 and more.records_committed > 0  # resumed: 6,000 records more
    # S3Proxy keeps its objects in memory: the restarted server has an empty bucket, the checkpoint is lost.
    s3_server.restart()
    summary = tmp_path / "resumed.json"
    run_stream(bootstrap, settings, s3_server, "--starting-offsets", "group", "--output-json", str(summary))
    resumed = json.loads(summary.read_text())
    assert resumed["records_in"] == more.records_committed, "only what came after the group's offsets is read"
    assert_exactly_once(bootstrap, settings)
    assert_output_is_input(bootstrap, settings)
