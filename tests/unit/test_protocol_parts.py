"""`bench protocol`'s parts that need no broker: the copier's progress lines and the table."""

from __future__ import annotations

import json

import pytest

from eosbench.bench.protocol import copier_arm, copier_progress, table


def status(time: str, processed: int, stage: str = "ProcessLoop") -> str:
    """One of the copier's JSON progress lines."""
    return json.dumps({"transactionalId": "t", "stage": stage, "time": f"2026/11/25 08:00:{time}",
                       "totalProcessed": processed, "consumed": processed, "remaining": 12}) + "\n"


def test_transactions_are_the_steps_of_total_processed_after_the_first():
    lines = [status("00:000", 0), "a log line, not JSON\n", status("00:500", 3), status("00:700", 3),
             status("00:710", 6), status("00:760", 9), status("01:000", 9, stage="ShutdownComplete")]
    points = copier_progress(lines)
    assert [processed for _, processed in points] == [0, 3, 3, 6, 9]
    arm = copier_arm("java-tv2", 3, 2, points)
    # The first transaction (0 -> 3) is warm-up; the rate runs from its line to the last one.
    assert (arm.records, arm.transactions, arm.all_transactions) == (6, 2, 3)
    assert arm.seconds == pytest.approx(0.26)
    assert arm.latencies_ms == pytest.approx([10.0, 50.0])
    assert arm.first_send_ms is None


def test_the_table_says_what_an_engine_cannot_report():
    points = copier_progress([status("00:000", 0), status("00:100", 2), status("00:150", 4)])
    arm = copier_arm("java-tv1", 2, 1, points)
    arm.requests = {"AddPartitionsToTxn_client": 3, "AddPartitionsToTxn_broker": 0, "AddOffsetsToTxn": 2,
                    "TxnOffsetCommit": 2, "EndTxn": 2}
    lines = table({"arms": [arm.figures()]}).splitlines()
    assert lines[2] == "| java-tv1 | 1 | 2 | 1 | 40 | 20.0 | 50.00 | 50.00 | n/a | 1.50 | 0.00 | 1.00 | 1.00 | 1.00 |"
