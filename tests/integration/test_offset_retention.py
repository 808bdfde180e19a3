"""The sink group's offsets outlive offsets.retention.minutes while the stream runs idle.

The group has no members, so the broker drops each partition's offset a retention after that
partition's last commit. The streams run in the background from the session's start on a broker
of their own with the shortest retention Kafka allows (tests/integration/idle_retention.py), which
reads the offsets as the streams end and resumes the micro-batch one from them; this test, which
the collection puts last, judges what it found.
"""

from __future__ import annotations

import pytest


@pytest.mark.overlapped
def test_idle_partitions_keep_their_offsets_in_both_modes_and_a_lost_checkpoint_resumes_exactly(idle_retention_run):
    found = idle_retention_run.findings()
    for mode, ended in found.exits.items():
        assert ended.returncode == 0, f"{mode}: {ended.errors}"
    assert found.exits["micro-batch"].summary["records_out"] > 0
    assert found.group_offsets == found.end_offsets, "no partition's offset expired"
    assert found.realtime_group_offsets[1] > 0, "nor the real-time stream's idle one"
    assert found.realtime_report.violations == []
    assert found.realtime_report.output_committed + found.realtime_report.dead_lettered \
        == found.realtime_report.input_committed

    # The checkpoint lost as the streams ended: the stream resumed from the group's offsets.
    assert found.resumed.returncode == 0, found.resumed.errors
    assert found.resumed.summary["records_in"] == 0, "every record was delivered before the checkpoint was lost"
    report = found.report
    assert report.violations == [] and report.output_committed + report.dead_lettered == report.input_committed
    assert report.input_aborted > 0
