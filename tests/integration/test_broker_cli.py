"""`eosbench broker` on the session's broker. Three nodes starting, reporting truthfully and stopping
idempotently through it are checked by the real-time soak (tests/integration/test_soak.py), whose
cluster they are."""

from __future__ import annotations


def test_logs_show_the_test_broker_started(kafka_cluster):
    lines = kafka_cluster.tail_log(1, 5000)
    assert any("Kafka Server started" in line or "KafkaRaftServer" in line for line in lines)
