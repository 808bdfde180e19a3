"""The peer engines' command lines and `bench peers`' outside timing (no broker)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from conf.settings import load_jar_bundles
from eosbench.bench import peers as bench
from eosbench.bench import peers_live
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
    assert {"kafka-streams", "flink"} <= {name for name, bundle in bundles.items() if bundle.on_first_use}
    # Both compile the job's transform, so that a peer writes the job's bytes.
    assert all("streaming/jvm/RecordProcess.java" in bundles[name].java_sources for name in ("kafka-streams", "flink"))
    resolved = []
    monkeypatch.setattr(jars, "resolve_bundle", lambda name: resolved.append(name) or [])
    jars.resolve_for_setup()
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
        while sum(bench.cpu_seconds_by_command(parent.pid).values()) < 0.5 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert sum(bench.cpu_seconds_by_command(parent.pid).values()) >= 0.5, \
            "the child's spin counts, though only the parent was named"
        assert list(bench.cpu_seconds_by_command(parent.pid)) == ["python"], "both are Python, under one name"
    finally:
        parent.kill()
        parent.wait()


def test_bench_peers_takes_its_arms_and_refuses_a_bad_abort_ratio_in_one_line():
    args = build_parser().parse_args(["bench", "peers", "--arms", "spark-eos", "flink-eos", "--partitions", "4"])
    assert args.arms == ["spark-eos", "flink-eos"] and args.partitions == [4] and args.rounds == 3
    assert_one_line_error(run_eosbench("bench", "peers", "--transaction-abort-ratio", "1.5"), 2,
                          "--transaction-abort-ratio must be in [0.0, 1.0)")


def test_a_live_arm_reads_from_the_inputs_start_at_the_peers_commit_interval_and_a_drain_available_now(monkeypatch):
    monkeypatch.setattr(peers, "resolve_bundle", lambda name: [Path(f"/jars/{name}/a.jar")])
    live = bench.arm_command("127.0.0.1:9092", "spark-eos", "in", "out", "app", Path("/s"), 25_000, 2,
                             trigger="1000 milliseconds")
    flag = {live[i]: live[i + 1] for i in range(len(live) - 1) if live[i].startswith("--")}
    assert (flag["--trigger"], flag["--max-offsets-per-trigger"], flag["--checkpoint"]) == \
        ("1000 milliseconds", "25000", "/s/checkpoint")
    assert (flag["--sink"], flag["--txn-scope"], flag["--source"], flag["--process"]) == \
        ("kafka-eos", "slot", "grouped", "checksum")
    drain = bench.arm_command("127.0.0.1:9092", "spark-alo", "in", "out", "app", Path("/s"), 25_000, 2)
    assert drain[drain.index("--trigger") + 1] == "available-now" and drain[drain.index("--sink") + 1] == "kafka-alo"
    assert drain[drain.index("--source") + 1] == "grouped", "the two Spark arms differ in their sink alone"
    peer = dict(a.split("=", 1) for a in bench.arm_command("127.0.0.1:9092", "kafka-streams-alo", "in", "out", "app",
                                                           Path("/s"), 25_000, 2) if "=" in a and not a.startswith("-"))
    assert (peer["processing.guarantee"], peer["num.stream.threads"], peer["state.dir"]) == \
        ("at_least_once", "2", "/s/state")
    args = build_parser().parse_args(["bench", "peers", "--live", "20000"])
    assert (args.live, args.live_seconds) == (20_000.0, 60)


def test_the_drains_and_the_live_runs_are_plotted_per_partition_count(tmp_path):
    drains = [bench.Drain(arm, partitions, r, 1000, steady_records_per_s=rate)
              for arm, partitions, r, rate in (("spark-eos", 4, 1, 40_000.0), ("spark-eos", 4, 2, 44_000.0),
                                               ("flink-eos", 4, 1, 150_000.0), ("flink-eos", 64, 1, 100_000.0))]
    drains.append(bench.Drain("kafka-streams-eos", 4, 1, 1000))  # no steady figure: no bar
    assert bench.plot_drains(drains, tmp_path / "drains.png").stat().st_size > 0
    rows = [{"arm": "spark-eos", "partitions": 4, "p50_ms": 900.0, "p99_ms": 1800.0},
            {"arm": "flink-eos", "partitions": 4, "p50_ms": None, "p99_ms": None}]
    assert peers_live.plot_live(rows, tmp_path / "live.png", 20_000).stat().st_size > 0


def test_an_arms_cpu_is_split_between_the_jvm_and_python_where_both_ran():
    spark = bench.Drain("spark-eos", 4, 1, 1000, cpu_s=10.0, cpu_s_by_command={"python": 3.9, "java": 6.1, "bash": 0.0})
    assert bench._cpu_shares(spark) == " (java 61 %, python 39 %)"
    assert bench._cpu_shares(bench.Drain("flink-eos", 4, 1, 1000, cpu_s=2.0, cpu_s_by_command={"java": 2.0})) == ""


def test_a_drain_run_and_a_live_run_each_become_rows_that_report_plots_and_tabulates(tmp_path):
    from eosbench.bench.report import build_report
    figures = {"steady_records_per_s": 40_000.0, "records_per_s": 20_000.0, "wall_s": 18.0}
    drains = {"run_id": "d1", "abort_ratio": 0.1, "records": 400_000, "rounds": 3, "threads": 2, "process": "checksum",
              "settings": {"flink": {"delivery.guarantee": "EXACTLY_ONCE"}},
              "medians": {"4": {"spark-eos": figures, "flink-eos": {**figures, "steady_records_per_s": 160_000.0},
                                "flink-alo": {**figures, "steady_records_per_s": 200_000.0}}},
              "anchors": {"4": {"librdkafka-consumer": {"records_per_sec": 150_000.0, "records": 369_442}}}}
    rows = bench.drain_rows(drains)
    by_cell = {row["cell"]: row for row in rows}
    assert sorted(by_cell) == ["anchor-librdkafka-consumer-p4", "flink-alo-p4", "flink-eos-p4", "spark-eos-p4"]
    assert (by_cell["flink-eos-p4"]["baseline"], by_cell["flink-eos-p4"]["overhead_ratio"]) == ("flink-alo", 1.25)
    assert by_cell["spark-eos-p4"]["baseline"] is None, "no spark-alo arm ran"
    assert by_cell["anchor-librdkafka-consumer-p4"]["bench"] == "anchor"
    summary, plots = build_report(rows, "d1", tmp_path)
    assert summary.startswith("# Peers d1 (drains)") and "| 4 | flink-eos | 160,000 | 20,000 | 1.25 |" in summary
    assert [plot.name for plot in plots] == ["peers-d1.png"] and plots[0].stat().st_size > 0
    live = {"run_id": "l1", "rate": 10_000.0, "seconds": 60, "threads": 2,
            "live": [{"arm": "spark-eos", "partitions": 4, "read_records_per_sec": 9_900.0, "p50_ms": 1_100.0,
                      "p99_ms": 2_300.0, "window_s": 45.0},
                     {"arm": "flink-eos", "partitions": 4, "read_records_per_sec": 4_000.0, "p50_ms": None,
                      "p99_ms": None, "window_s": None}]}
    summary, plots = build_report(peers_live.live_rows(live), "l1", tmp_path)
    assert summary.startswith("# Peers l1 (live)") and "| 4 | spark-eos | 1,100 | 2,300 | 9,900 |" in summary
    assert "| 4 | flink-eos | – | – | 4,000 |" in summary and plots[0].stat().st_size > 0


def test_an_arms_cpu_is_the_largest_total_sampled_not_the_last():
    drain = bench.Drain("spark-eos", 4, 1, 1000)
    for sample in ({"java": 20.0, "python": 8.0}, {"java": 25.0, "python": 10.0}, {"python": 10.5}):
        drain.take_cpu_sample(sample)  # the last: the JVM exited and is not yet reaped
    assert (drain.cpu_s, drain.cpu_s_by_command) == (35.0, {"java": 25.0, "python": 10.0})
