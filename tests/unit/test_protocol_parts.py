"""`bench protocol`'s parts that need no broker: the copier's progress lines, the table, the engines a cluster takes."""

from __future__ import annotations

import json

import pytest

from conf.client_config import Connection
from eosbench.bench.protocol import copier_arm, copier_progress, engines_on, run, table
from eosbench.console.errors import BadInput


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


SECURED = Connection("127.0.0.1:19093", (("sasl.mechanism", "SCRAM-SHA-512"), ("security.protocol", "SASL_SSL")))
ALL_ENGINES = ["librdkafka", "kafka-python", "kafka-python+prereg", "java-tv2", "java-tv1"]


def test_a_plaintext_cluster_runs_every_engine():
    assert engines_on(Connection("127.0.0.1:9092"), ALL_ENGINES) == (ALL_ENGINES, None)


def test_a_secured_cluster_skips_the_java_engines_with_one_line_why():
    assert engines_on(SECURED, ALL_ENGINES) == (
        ["librdkafka", "kafka-python", "kafka-python+prereg"],
        "skipping java-tv2, java-tv1: Kafka's TransactionalMessageCopier takes no client security settings"
        " (only --broker-list), so it cannot reach a secured cluster")
    assert engines_on(SECURED, ["kafka-python"]) == (["kafka-python"], None)


def test_a_secured_cluster_with_only_java_engines_asked_for_is_bad_input(tmp_path):
    with pytest.raises(BadInput) as refused:
        run(SECURED, [1], 2, ["java-tv2"], tmp_path)
    assert str(refused.value) == ("bench protocol on a secured cluster runs only the Python engines (librdkafka,"
                                  " kafka-python, kafka-python+prereg), and --engines named none of them")
