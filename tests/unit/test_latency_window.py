"""`bench latency`'s steady window: when an arm counts as caught up with its feeder, what it prints, and what an
arm that never catches up says, on fake lags and a fake observer's consumer."""

from __future__ import annotations

import time
from types import SimpleNamespace

import numpy as np
import pytest

from eosbench.bench import latency
from eosbench.bench.latency import CATCH_UP_GRACE_S, SteadyWindow, arm_lines, input_lag, table
from streaming.stats import histogram_percentile


def test_lag_sums_each_partitions_distance_to_the_input_end_and_is_unknown_until_every_fed_partition_has_output():
    began = {0: 100, 1: 200, 2: 300}
    assert input_lag({0: 1_100, 1: 1_200, 2: 300}, {0: 1_000, 1: 1_190}, began) == 110, \
        "partition 2 was not fed, so it owes nothing"
    assert input_lag({0: 1_100, 1: 1_200, 2: 301}, {0: 1_000, 1: 1_190}, began) is None, \
        "partition 2 was fed but shows no output: where the arm began in it is unknown"
    # The end is the last stable offset, which a commit marker puts one past the last record read.
    assert input_lag({0: 1_001}, {0: 1_002}, began) == 0


def test_a_micro_batch_arm_opens_its_window_when_its_lag_falls_within_a_trigger_plus_the_grace():
    window = SteadyWindow(rate=50_000, cadence_s=1.0, started=1_000.0)
    assert window.threshold == 50_000 * (1.0 + CATCH_UP_GRACE_S) == 100_000
    window.lag(1_001.0, None)  # no output from some partition yet
    window.read(1_004.0, 9_000.0)  # the start-up backlog's records: read, not counted
    window.lag(1_004.1, 400_000)
    window.read(1_006.0, 3_000.0)
    window.lag(1_006.1, 100_001)
    assert window.opened is None
    window.lag(1_007.5, 90_000)
    window.lag(1_007.75, 10_000)  # only the first lag within the threshold opens it
    for second in range(8, 18):
        window.read(1_000.0 + second, 1_200.0)
    summary = window.summary()
    assert summary["caught_up"] and summary["caught_up_after_s"] == pytest.approx(7.5)
    assert (summary["backlog_records"], summary["backlog_s"]) == (90_000, pytest.approx(1.8))
    # Timed from the opening, not the first record read in the window, which a trigger brings a second later.
    assert summary["records"] == 10 and summary["window_s"] == pytest.approx(9.5)
    assert summary["read_records_per_sec"] == pytest.approx(10 / 9.5)
    counts = np.asarray(summary["histogram"])
    assert counts.sum() == 10 and histogram_percentile(counts, 0.99) < 3_000, "the backlog's latencies are left out"


def test_a_real_time_arm_holds_one_commit_interval_plus_the_grace():
    window = SteadyWindow(rate=5_000, cadence_s=0.1, started=0.0)
    window.lag(2.0, 5_501)
    window.lag(2.25, 5_500)
    assert window.opened == 2.25 and window.backlog_records == 5_500


def test_an_arm_that_never_catches_up_says_how_far_behind_its_last_output_left_it_and_gives_no_steady_figure():
    window = SteadyWindow(rate=100_000, cadence_s=1.0, started=0.0)
    for second in range(1, 41):
        window.read(float(second), 8_000.0)
        window.lag(second + 0.1, 300_000 + second * 20_000)
    window.lag(45.0, 2_000_000)  # the query has stopped; the feeder runs on
    summary = window.summary()
    assert not summary["caught_up"] and summary["caught_up_after_s"] is None and summary["window_s"] is None
    assert summary["behind_at_end_records"] == 1_100_000 and summary["behind_at_end_s"] == pytest.approx(11.0)
    assert summary["records"] == 40 and summary["read_records_per_sec"] == pytest.approx(40 / 39)
    assert sum(summary["histogram"]) == 0
    row = {"sink": "kafka-eos", "trigger": "1 second", "offered_records_per_sec": 100_000.0, "backlog": 0,
           "load_average": 3.64, "p50_ms": None, "p99_ms": None, **summary}
    assert arm_lines(row, 40) == [
        "  never caught up in 40 s: 1,100,000 records (11.00 s) behind at its last output; no steady figures",
        "  1 records/s read over its whole run, 100,000 offered, load average 3.64 at end"]
    assert table([row])[2] == ("| kafka-eos micro-batch, 1 s trigger | 100,000 | 1 over its run | — | — | never,"
                               " 1,100,000 records (11.00 s) behind at its end | — | 3.64 |")


def test_a_drain_counts_every_record_from_its_start():
    window = SteadyWindow(rate=None, cadence_s=1.0, started=0.0)
    window.read(3.0, 2_500.0)
    window.read(11.0, 9_000.0)
    summary = window.summary()
    assert summary["caught_up"] and summary["records"] == 2 and summary["read_records_per_sec"] == pytest.approx(0.25)
    assert summary["backlog_s"] is None


def test_bench_latency_prints_each_arms_start_up_apart_from_its_window_and_tables_every_kind_of_row():
    steady = {"sink": "kafka-eos", "trigger": "realtime:5 seconds", "backlog": 0, "offered_records_per_sec": 5000.0,
              "read_records_per_sec": 5012.4, "p50_ms": 185.0, "p99_ms": 385.0, "load_average": 1.37,
              "caught_up": True, "caught_up_after_s": 6.42, "backlog_records": 1_210, "backlog_s": 0.242,
              "window_s": 32.9, "behind_at_end_records": 800, "behind_at_end_s": 0.16}
    drain = {"sink": "kafka-eos", "trigger": "1 second", "backlog": 1_000_000, "offered_records_per_sec": None,
             "read_records_per_sec": 112179.0, "p50_ms": 0.0, "p99_ms": 0.0, "load_average": 3.1, "caught_up": True}
    assert arm_lines(steady, 40) == [
        "  caught up after 6.4 s, 1,210 records (0.24 s) behind when its window opened; window 32.9 s",
        "  p50 185 ms, p99 385 ms, 5,012 records/s read in it, 5,000 offered, load average 1.37 at end"]
    assert table([steady, drain])[2:] == [
        "| kafka-eos real-time | 5,000 | 5,012 | 185 | 385 | 6.4 s | 1,210 records (0.24 s) | 1.37 |",
        "| kafka-eos micro-batch, 1 s trigger | ceiling: 1,000,000 waiting | 112,179 | — | — | — | — | 3.10 |"]


class _FakeObserverConsumer:
    """The output as the observer reads it, one consume() answer a call, and the input's end offsets: `began` until
    the first consume(), `ends` after."""

    def __init__(self, answers: list[list], began: dict[int, int], ends: dict[int, int]):
        self.answers, self.input_ends, self.ends, self.closed = answers, began, ends, False

    def assign(self, partitions):
        """Nothing to do."""

    def consume(self, count, timeout):
        """The next answer, else an empty one after `timeout`."""
        self.input_ends = self.ends
        if self.answers:
            return self.answers.pop(0)
        time.sleep(timeout)
        return []

    def close(self):
        """Note the close."""
        self.closed = True


def _record(src: str, in_ts_ms: float) -> SimpleNamespace:
    headers = [("eos.src", src.encode()), ("eos.in_ts", str(int(in_ts_ms)).encode()), ("eos.txn", b"a:0:1:f:1")]
    return SimpleNamespace(error=lambda: None, headers=lambda: headers)


def test_the_observer_follows_each_input_partitions_reach_by_eos_src_and_opens_the_window_on_it(monkeypatch):
    import confluent_kafka

    import conf.watermarks

    now_ms = time.time() * 1000
    behind = [_record("in:0:2", now_ms - 5_000), _record("in:1:3", now_ms - 5_000)]  # 23 records behind the ends
    caught_up = [_record("in:0:9", now_ms - 5_000), _record("in:1:19", now_ms - 5_000)]
    steady = [_record("in:0:9", now_ms), _record("in:1:19", now_ms), _record("in:1:19", now_ms)]
    consumer = _FakeObserverConsumer([behind, [], caught_up, steady], began={0: 0, 1: 0}, ends={0: 10, 1: 20})

    def fake_watermarks(reader, topic, partition, timeout_s):
        assert (reader, topic) == (consumer, "in")
        return 0, consumer.input_ends[partition]

    monkeypatch.setattr(confluent_kafka, "Consumer", lambda config: consumer)
    monkeypatch.setattr(conf.watermarks, "watermark_offsets", fake_watermarks)
    monkeypatch.setattr(latency, "LAG_SAMPLE_S", 0.0)
    put = []
    window = SteadyWindow(rate=10.0, cadence_s=0.1, started=time.time())  # within 11 records is caught up
    latency.observe_output("127.0.0.1:1", "in", "out", 2, 0.5, window, SimpleNamespace(put=put.append))
    summary = put[0]
    assert consumer.closed and summary["caught_up"] and summary["backlog_records"] == 0
    assert summary["records"] == 3, "what was read before the lag fell is left out"
    assert histogram_percentile(np.asarray(summary["histogram"]), 1.0) < 1_000
