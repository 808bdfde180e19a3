"""The sink group's offsets outlive offsets.retention.minutes while the stream runs idle.

The group has no members, so the broker drops each partition's offset a retention after that
partition's last commit. This module runs its own small broker with the shortest retention Kafka
allows (one minute, checked every second), started only for these tests, on ports of its own.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator

import pytest
from conf.local_servers import ClusterSettings
from conf.stream_settings import StreamSettings
from eosbench.local.broker import LocalCluster
from eosbench.local.kafka_admin import create_topic
from streaming import job
from streaming.verify import group_offsets, stable_and_end_offsets, verify
from tests.integration.produce_helpers import commit_keys, produce

SHORT_RETENTION_PORT = 19700
RETENTION_S = 60


@pytest.fixture(scope="module")
def short_retention(tmp_path_factory) -> Iterator[str]:
    """A one-node cluster whose group offsets expire a minute after their partition's last commit."""
    cluster = LocalCluster(ClusterSettings(
        port=SHORT_RETENTION_PORT, heap_mb=256, state_dir=tmp_path_factory.mktemp("short-retention"),
        server_properties={"offsets.retention.minutes": str(RETENTION_S // 60),
                           "offsets.retention.check.interval.ms": "1000"}))
    cluster.start(fresh=True)
    yield cluster.settings.bootstrap_servers
    cluster.stop()


def test_idle_partitions_keep_their_offsets_in_both_modes_and_a_lost_checkpoint_resumes_exactly(short_retention,
                                                                                                 spark, tmp_path):
    bootstrap = short_retention
    source, sink = "retention-in", "retention-out"
    rt_source, rt_sink = "retention-rt-in", "retention-rt-out"
    for topic, partitions in ((source, 3), (sink, 3), (f"{sink}.dlq", 1), (rt_source, 2), (rt_sink, 2),
                              (f"{rt_sink}.dlq", 1)):
        create_topic(bootstrap, topic, partitions, 1)
    produce(bootstrap, source, 3_000, records_per_transaction=300, abort_ratio=0.3, seed=9)
    produce(bootstrap, rt_source, 1_000, records_per_transaction=100, abort_ratio=0.3, seed=10)

    def settings(**overrides) -> StreamSettings:
        fields = dict(input_topic=source, output_topic=sink, bootstrap_server=bootstrap, app_id="retention",
                      checkpoint=tmp_path / "checkpoint")
        return StreamSettings(**{**fields, **overrides})

    # A real-time stream beside it, in a process of its own for the same wait: its writer's tasks run
    # all along but commit only what they write, so before, nothing refreshed an idle partition's offset.
    realtime = subprocess.Popen(
        [sys.executable, "-m", "eosbench.cli", "stream", "--input-topic", rt_source, "--output-topic", rt_sink,
         "--bootstrap-server", bootstrap, "--app-id", "retention-rt", "--checkpoint", str(tmp_path / "rt-checkpoint"),
         "--trigger", "realtime:5 seconds", "--timeout-s", str(RETENTION_S + 12)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    # Half a minute in, partition 0 of each input alone gets more records; the other partitions stay
    # idle after the first batch (epoch), for longer than the retention, while the streams run.
    later = threading.Timer(30, lambda: [commit_keys(bootstrap, topic, range(100_000, 100_050))
                                         for topic in (source, rt_source)])
    later.start()
    try:
        running = job.run(spark, settings(trigger="1 second", timeout_s=RETENTION_S + 12))
    finally:
        later.join()
        _, errors = realtime.communicate(timeout=240)
    assert running.records_out > 0
    assert realtime.returncode == 0, errors[-3000:]
    ends = {p: end for p, (_, end) in stable_and_end_offsets(bootstrap, source).items()}
    assert group_offsets(bootstrap, "retention", source, sorted(ends)) == ends, "no partition's offset expired"
    assert group_offsets(bootstrap, "retention-rt", rt_source, [0, 1])[1] > 0, "nor the real-time stream's idle one"
    realtime_report = verify(bootstrap, rt_source, rt_sink, "retention-rt", f"{rt_sink}.dlq")
    assert realtime_report.violations == []
    assert realtime_report.output_committed + realtime_report.dead_lettered == realtime_report.input_committed

    shutil.rmtree(tmp_path / "checkpoint")  # a lost checkpoint: resume from the group's offsets
    resumed = job.run(spark, settings(starting_offsets="group"))
    assert resumed.records_in == 0, "every record was delivered before the checkpoint was lost"
    report = verify(bootstrap, source, sink, "retention", f"{sink}.dlq")
    assert report.violations == [] and report.output_committed + report.dead_lettered == report.input_committed
    assert report.input_aborted > 0
