"""The sink group's offsets outlive offsets.retention.minutes while the stream runs idle.

The group has no members, so the broker drops each partition's offset a retention after that
partition's last commit. The streams run in the background from the soaks' start on a broker of
their own with the shortest retention Kafka allows (tests/integration/idle_retention.py), which
samples the offsets while they run and resumes the micro-batch one from them; this test, which
the collection puts last, judges what it found.
"""

from __future__ import annotations

import pytest

from tests.integration.idle_retention import JUDGED_S


@pytest.mark.overlapped
def test_idle_partitions_keep_their_offsets_in_both_modes_and_a_lost_checkpoint_resumes_exactly(idle_retention_run):
    found = idle_retention_run.findings()
    for mode, ended in found.exits.items():
        assert ended.returncode == 0, f"{mode}: {ended.errors}"
    assert found.exits["micro-batch"].summary["records_out"] > 0
    for mode, samples in found.offsets.items():
        kept_s, lost = samples.kept_from_first_commit()
        assert kept_s >= JUDGED_S, f"{mode}: sampled only {kept_s:.0f} s past the first commit of every partition"
        assert lost == [], f"{mode}: offsets the broker dropped while the stream ran (seconds, offsets): {lost[:3]}"
    assert found.offsets["micro-batch"].samples[-1][1] == found.end_offsets, "the idle stream's offsets are the input's end"
    assert found.offsets["real-time"].samples[-1][1][1] > 0, "the real-time stream's idle partition has its offset"
    assert found.realtime_report.violations == []
    assert found.realtime_report.output_committed + found.realtime_report.dead_lettered \
        == found.realtime_report.input_committed

    # The checkpoint lost: the stream resumed from the group's offsets, while the idle stream kept them.
    assert found.resumed is not None and found.resumed.returncode == 0, found.resumed and found.resumed.errors
    assert found.resumed.summary["records_in"] == 0, "every record was delivered before the checkpoint was lost"
    report = found.report
    assert report.violations == [] and report.output_committed + report.dead_lettered == report.input_committed
    assert report.input_aborted > 0
