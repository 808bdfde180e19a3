"""The sink group's offsets outlive offsets.retention.minutes while the stream runs idle.

The group has no members, so the broker drops each partition's offset a retention after that
partition's last commit. The streams run in the background from the session's start on a broker
of their own with the shortest retention Kafka allows (tests/integration/idle_retention.py); this
test, which the collection puts last, judges what they left.
"""

from __future__ import annotations

import shutil

import pytest

from conf.stream_settings import StreamSettings
from streaming import job
from streaming.verify import group_offsets, stable_and_end_offsets, verify
from tests.integration.idle_retention import RT_SINK, RT_SOURCE, SINK, SOURCE


@pytest.mark.overlapped
def test_idle_partitions_keep_their_offsets_in_both_modes_and_a_lost_checkpoint_resumes_exactly(
        idle_retention_run, spark):
    run = idle_retention_run
    bootstrap = run.bootstrap
    exits = run.wait()
    for mode, ended in exits.items():
        assert ended.returncode == 0, f"{mode}: {ended.errors}"
    assert exits["micro-batch"].summary["records_out"] > 0
    ends = {p: end for p, (_, end) in stable_and_end_offsets(bootstrap, SOURCE).items()}
    assert group_offsets(bootstrap, "retention", SOURCE, sorted(ends)) == ends, "no partition's offset expired"
    assert group_offsets(bootstrap, "retention-rt", RT_SOURCE, [0, 1])[1] > 0, "nor the real-time stream's idle one"
    realtime_report = verify(bootstrap, RT_SOURCE, RT_SINK, "retention-rt", f"{RT_SINK}.dlq")
    assert realtime_report.violations == []
    assert realtime_report.output_committed + realtime_report.dead_lettered == realtime_report.input_committed

    shutil.rmtree(run.checkpoint)  # a lost checkpoint: resume from the group's offsets
    resumed = job.run(spark, StreamSettings(input_topic=SOURCE, output_topic=SINK, bootstrap_server=bootstrap,
                                            app_id="retention", checkpoint=run.checkpoint, starting_offsets="group"))
    assert resumed.records_in == 0, "every record was delivered before the checkpoint was lost"
    report = verify(bootstrap, SOURCE, SINK, "retention", f"{SINK}.dlq")
    assert report.violations == [] and report.output_committed + report.dead_lettered == report.input_committed
    assert report.input_aborted > 0
