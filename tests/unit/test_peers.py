"""The peer engines' command lines and `bench peers`' outside timing (no broker)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from conf.settings import load_jar_bundles
from eosbench.bench import peers as bench
from eosbench.cli import build_parser
from eosbench.local import jars, peers
from tests.unit.test_cli_errors import assert_one_line_error, run_eosbench


def settings(engine: str, guarantee: str = "exactly-once") -> peers.PeerSettings:
    """A pipeline of `engine` on topics in/out with two threads and the job's 1 s trigger."""
    return peers.PeerSettings(engine, guarantee, "in", "out", "app", Path("/state"), process="checksum", threads=2)


def test_each_engine_is_set_up_for_its_guarantee_as_its_documentation_advises():
    assert settings("kafka-streams").chosen_settings() == {
        "processing.guarantee": "exactly_once_v2", "num.stream.threads": "2", "commit.interval.ms": "1000",
        "group.instance.id": "app-instance", "consumer.isolation.level": "read_committed", "state.dir": "/state"}
    assert settings("kafka-streams", "at-least-once").chosen_settings()["processing.guarantee"] == "at_least_once"
    flink = settings("flink").chosen_settings()
    assert flink["flink.parallelism.default"] == "2" and flink["flink.execution.checkpointing.interval"] == "1000 ms"
    assert flink["flink.execution.checkpointing.mode"] == flink["delivery.guarantee"] == "EXACTLY_ONCE"
    assert settings("flink", "at-least-once").chosen_settings()["delivery.guarantee"] == "AT_LEAST_ONCE"
    assert settings("flink").dead_letter_topic == "out.dlq"
    with pytest.raises(ValueError, match="engine must be one of kafka-streams, flink"):
        peers.PeerSettings("samza", "exactly-once", "in", "out", "app", Path("/state"))
    with pytest.raises(ValueError, match="guarantee must be one of"):
        peers.PeerSettings("flink", "exactly_once", "in", "out", "app", Path("/state"))


def test_a_command_line_runs_the_engines_main_class_on_its_bundle_with_every_setting(monkeypatch):
    monkeypatch.setattr(peers, "resolve_bundle", lambda name: [Path(f"/jars/{name}/a.jar"), Path(f"/jars/{name}/b.jar")])
    command = peers.peer_command(settings("flink"), "127.0.0.1:9092")
    main = command.index("eosbench.peers.FlinkPeer")
    assert command[main - 2:main] == ["-cp", "/jars/flink/a.jar:/jars/flink/b.jar"]
    arguments = dict(argument.split("=", 1) for argument in command[main + 1:])
    assert arguments == {"input.topic": "in", "output.topic": "out", "dead.letter.topic": "out.dlq",
                         "process": "checksum", "application.id": "app", "bootstrap.servers": "127.0.0.1:9092",
                         "checkpoint.dir": "/state", **settings("flink").chosen_settings()}
    streams = peers.peer_command(settings("kafka-streams"), "127.0.0.1:9092")
    assert "eosbench.peers.KafkaStreamsPeer" in streams and not any(a.startswith("checkpoint.dir=") for a in streams)


def test_setup_leaves_the_peers_bundles_to_their_first_use(monkeypatch):
    bundles = load_jar_bundles()
    assert {name for name, bundle in bundles.items() if bundle.on_first_use} == {"kafka-streams", "flink"}
    # Both compile the job's transform, so that a peer writes the job's bytes.
    assert all("streaming/jvm/RecordProcess.java" in bundles[name].java_sources for name in ("kafka-streams", "flink"))
    resolved = []
    monkeypatch.setattr(jars, "resolve_bundle", lambda name: resolved.append(name) or [])
    jars.resolve_all()
    assert "flink" not in resolved and "kafka-streams" not in resolved and "kafka" in resolved


def test_a_drain_is_over_once_the_output_holds_the_input_and_stood_still_for_three_seconds():
    watch = bench.VisibleOutput.__new__(bench.VisibleOutput)
    watch.timeline = [(0.0, 0), (1.0, 40), (2.0, 100), (3.0, 110), (4.0, 110), (5.5, 110)]
    assert watch.settled_at(120) is None, "short of the input"
    assert watch.settled_at(100) is None, "still for 2.5 s only"
    watch.timeline.append((6.0, 110))
    assert watch.settled_at(100) == 3.0


def test_the_steady_rate_is_taken_between_the_10_and_90_percent_marks_after_the_first_output():
    timeline = [(10.0, 5), (11.0, 5), (12.0, 15), (13.0, 55), (14.0, 95), (15.0, 105)]
    first, steady = bench.marks(timeline, start=10.0)
    assert first == 2.0  # the output was at 5 before the arm wrote anything
    assert steady == pytest.approx((90 - 10) / (14.0 - 12.0))
    assert bench.marks([(0.0, 7), (1.0, 7)], start=0.0) == (None, None)


def test_cpu_seconds_count_a_process_and_its_children():
    spin = "import time\nend = time.process_time() + 0.5\nwhile time.process_time() < end: pass\ntime.sleep(30)"
    parent = subprocess.Popen([sys.executable, "-c",
                               f"import subprocess, sys; subprocess.run([sys.executable, '-c', {spin!r}])"])
    try:
        deadline = time.monotonic() + 30
        while bench.cpu_seconds(parent.pid) < 0.5 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert bench.cpu_seconds(parent.pid) >= 0.5, "the child's spin counts, though only the parent was named"
    finally:
        parent.kill()
        parent.wait()


def test_bench_peers_takes_its_arms_and_refuses_a_bad_abort_ratio_in_one_line():
    args = build_parser().parse_args(["bench", "peers", "--arms", "spark-eos", "flink-eos", "--partitions", "4"])
    assert args.arms == ["spark-eos", "flink-eos"] and args.partitions == [4] and args.rounds == 3
    assert_one_line_error(run_eosbench("bench", "peers", "--transaction-abort-ratio", "1.5"), 2,
                          "--transaction-abort-ratio must be in [0.0, 1.0)")
