"""`eosbench broker` end to end: three nodes start, report truthfully, and stop idempotently."""

from __future__ import annotations

import pytest

from tests.unit.test_cli_errors import run_eosbench

THREE_NODE_PORT = 26092  # below the ephemeral range (32768+), so no client socket can hold it


@pytest.mark.heavy
def test_three_broker_cluster_start_status_stop(tmp_path):
    state = ["--state-dir", str(tmp_path)]
    started = run_eosbench("broker", "start", "--brokers", "3", "--port", str(THREE_NODE_PORT), *state, timeout=240)
    try:
        assert started.returncode == 0, started.stderr
        assert started.stdout.strip() == "127.0.0.1:26092,127.0.0.1:26093,127.0.0.1:26094"

        status = run_eosbench("broker", "status", *state)
        assert status.returncode == 0, status.stdout
        node_lines = [line for line in status.stdout.splitlines() if line.startswith("node ")]
        assert [line.split("\t")[1] for line in node_lines] == ["up", "up", "up"]
        assert "cluster: running, 3/3 brokers registered [1, 2, 3]" in status.stdout

        again = run_eosbench("broker", "start", "--brokers", "3", "--port", str(THREE_NODE_PORT), *state)
        assert again.returncode == 0 and again.stdout == started.stdout, "start on a running cluster is a no-op"

        other_shape = run_eosbench("broker", "start", "--brokers", "1", "--port", str(THREE_NODE_PORT), *state)
        assert other_shape.returncode == 2
        assert "run `eosbench broker stop` first" in other_shape.stderr
    finally:
        stopped = run_eosbench("broker", "stop", *state, timeout=120)
    assert stopped.returncode == 0 and stopped.stdout.strip() == "stopped 3 broker(s)"
    assert run_eosbench("broker", "stop", *state).stdout.strip() == "no broker running"
    after = run_eosbench("broker", "status", *state)
    assert after.returncode == 1
    assert [line.split("\t")[1] for line in after.stdout.splitlines() if line.startswith("node ")] == ["down"] * 3


def test_logs_show_the_test_broker_started(kafka_cluster):
    lines = kafka_cluster.tail_log(1, 5000)
    assert any("Kafka Server started" in line or "KafkaRaftServer" in line for line in lines)
