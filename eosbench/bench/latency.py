"""`eosbench bench latency`: end-to-end latency of micro-batch and real-time mode, side by side in one run.

Three arms read one fed input each, at each offered rate:
- kafka-eos at a 1 s micro-batch trigger (the transactional foreachBatch sink);
- kafka-eos in real-time mode, committing every `--commit-interval-ms` (streaming/realtime/writer.py),
  its epochs (checkpoint interval) `--realtime-interval` long;
- kafka-alo in real-time mode: Spark's own Kafka sink, at-least-once.

Every arm is measured the same way, from outside: a read_committed consumer in its own process
reads the output and takes, for each record, the time it became readable minus its input
CreateTime (the eos.in_ts header every sink stamps). So the figure includes the commit, which
only a reader sees, and the observer shares neither the driver's Python nor its GIL.

Each arm is timed from its steady state. The feeder runs before the query starts and while it
starts, so every arm meets a backlog first; the observer also follows the arm's lag (the
records between the input's end and the input offsets its readable output has reached, by the
eos.src header), and the arm's window opens once that lag first falls to what a steady arm holds
(`SteadyWindow`). Only records read from then on count, and records/s read runs from that
opening to the last record, so it shows beside the offered rate whether the arm kept up. The
time the arm took to catch up and the backlog it still held when its window opened are
reported apart; an arm that never catches up within its time reports no latency figure, only
that it did not and how far behind it ended.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path

import numpy as np

from conf.client_config import Connection, connection
from eosbench.local.kafka_admin import create_topic
from streaming.stats import histogram_percentile, latency_histogram



def arms(realtime_interval: str) -> tuple[tuple[str, str], ...]:
    """(sink, trigger) of each arm: kafka-eos at a 1 s trigger, then kafka-eos and kafka-alo in real-time mode."""
    return (("kafka-eos", "1 second"), ("kafka-eos", f"realtime:{realtime_interval}"),
            ("kafka-alo", f"realtime:{realtime_interval}"))


# A steady arm still shows its reader some lag beyond its own cadence: the feeder's 100 ms
# transactions, the commit's round trips, and the reader's own pace through what a commit made
# readable (at 50,000 records/s, a 1 s micro-batch takes it about 0.4 s). The window opens once
# the lag is within the cadence plus this much.
CATCH_UP_GRACE_S = 1.0
LAG_SAMPLE_S = 0.25  # how often the observer asks for the input's end offsets


class SteadyWindow:
    """Which of an arm's records its figures count: those read after its lag first fell to what a steady arm holds.

    The observer feeds it: `lag` with the arm's lag each time it samples it, `read` with each
    output record. A steady arm holds about what one cadence (the trigger's interval, or
    real-time mode's commit interval) brings, so its threshold is the offered rate times the
    cadence plus CATCH_UP_GRACE_S. A drain (`rate` None) counts everything from its first record.
    """

    def __init__(self, rate: float | None, cadence_s: float, started: float):
        self.rate, self.started = rate, started
        self.threshold = None if rate is None else rate * (cadence_s + CATCH_UP_GRACE_S)
        self.opened: float | None = None
        self.backlog_records: int | None = None if rate is not None else 0
        self.latencies: list[float] = []
        self.last = 0.0  # the last record read in the window
        self.first_output = self.last_output = 0.0
        self.output_records = 0
        self.behind_at_end: int | None = None
        self._read_since_sample = False

    def lag(self, now: float, records: int | None) -> None:
        """Note the arm's lag at `now` (None: not known yet); the first one within the threshold opens the window."""
        if records is None:
            return
        if self._read_since_sample:  # once the query has stopped, the lag only grows with the feeder
            self.behind_at_end, self._read_since_sample = records, False
        if self.opened is None and records <= self.threshold:
            self.opened, self.backlog_records = now, records

    def read(self, now: float, latency_ms: float) -> None:
        """Note one output record read at `now`; its latency counts once the window is open."""
        self.first_output = self.first_output or now
        self.last_output, self.output_records, self._read_since_sample = now, self.output_records + 1, True
        if self.opened is None and self.rate is None:
            self.opened = now
        if self.opened is not None:
            self.latencies.append(latency_ms)
            self.last = now

    def seconds_of(self, records: int | None) -> float | None:
        """`records` as seconds of input at the offered rate (None for a drain, or no count)."""
        return None if records is None or not self.rate else records / self.rate

    def summary(self) -> dict:
        """The window's figures (latency histogram, records, records/s) and the start-up's (catch-up time, backlog)."""
        caught_up = self.opened is not None
        if caught_up:  # from its opening, not its first record: a micro-batch's come a trigger later
            records, span = len(self.latencies), max(self.last - self.opened, 0.0)
        else:  # its pace over the whole run, for a reader to set beside the rate offered
            records, span = self.output_records, self.last_output - self.first_output
        return {"caught_up": caught_up, "caught_up_after_s": self.opened - self.started if caught_up else None,
                "backlog_records": self.backlog_records, "backlog_s": self.seconds_of(self.backlog_records),
                "behind_at_end_records": self.behind_at_end, "behind_at_end_s": self.seconds_of(self.behind_at_end),
                "window_s": span if caught_up else None, "records": records,
                "read_records_per_sec": records / max(span, 1e-3),
                "histogram": latency_histogram(np.asarray(self.latencies)).tolist()}


def input_lag(ends: dict[int, int], reached: dict[int, int], began: dict[int, int]) -> int | None:
    """Records between each input partition's end and the offset the arm's readable output has reached in it.

    None while a partition fed since `began` (its end offsets when the observer started) has
    no output yet: where the arm started in it (the end when its query started) is unknown.
    """
    lag = 0
    for partition, end in ends.items():
        if partition in reached:
            lag += max(end - reached[partition], 0)
        elif end > began.get(partition, end):
            return None
    return lag


def observe_output(bootstrap: str, source: str, topic: str, partitions: int, seconds: float, window: SteadyWindow,
             results) -> None:
    """The observer process: read `topic` read_committed until `seconds` after the arm's start, following the arm's
    lag on `source`; put the window's summary."""
    from confluent_kafka import Consumer, TopicPartition

    from conf.headers import IN_TS_HEADER, SRC_HEADER
    from conf.watermarks import watermark_offsets
    from streaming.verify.topic_index import source_position

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"latency-{uuid.uuid4().hex[:8]}",
                         "isolation.level": "read_committed", "enable.auto.commit": False,
                         "fetch.wait.max.ms": 5})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])

    def input_ends() -> dict[int, int]:  # a read_committed consumer is answered the last stable offsets
        return {p: watermark_offsets(consumer, source, p, timeout_s=5)[1] for p in range(partitions)}

    following = window.rate is not None  # a drain has no feeder to keep up with
    began = input_ends() if following else {}
    reached: dict[int, int] = {}
    sampled = 0.0
    while time.time() - window.started < seconds:
        for message in consumer.consume(1000, timeout=0.1):
            if message.error():
                continue
            now = time.time()
            headers = dict(message.headers() or [])
            partition, offset = source_position(headers.get(SRC_HEADER), source)
            if partition >= 0 and offset >= reached.get(partition, 0):
                reached[partition] = offset + 1
            in_ts = headers.get(IN_TS_HEADER)
            if in_ts is not None:
                window.read(now, now * 1000.0 - int(in_ts))
        if following and time.time() - sampled >= LAG_SAMPLE_S:
            sampled = time.time()
            window.lag(sampled, input_lag(input_ends(), reached, began))
    consumer.close()
    results.put(window.summary())


def feed_command(bootstrap: Connection, topic: str, records: int, rate: float | None) -> list[str]:
    """`eosbench produce` offering `records` of 100 B at `rate` records/s (None: as fast as it can), 100 ms transactions."""
    return [sys.executable, "-m", "eosbench.cli", "produce", "--bootstrap-server", str(bootstrap),
            *bootstrap.tool_arguments(), "--topic", topic, "--record-size", "100", "--transaction-duration-ms", "100",
            "--producer-props", "acks=all", "--num-records", str(records), "--throughput",
            str(int(rate)) if rate else "-1"]


@contextmanager
def fed_input(bootstrap: Connection, topic: str, rate: float, records: int) -> Iterator[None]:
    """A separate producer process feeding `topic` at `rate` for the block, given 3 s to reach its rate first."""
    feeder = subprocess.Popen(feed_command(bootstrap, topic, records, rate), stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        time.sleep(3)  # the feeder reaches its rate before a query starts at "latest"
        yield
    finally:
        feeder.kill()


def _arm(bootstrap: Connection, spark, sink: str, trigger: str, rate: float | None, seconds: int, partitions: int,
         commit_interval_ms: int, scratch: Path, backlog: int = 0) -> dict:
    """One arm: fed at `rate` from the input's end (latency), or with `backlog` records already there (ceiling)."""
    from conf.stream_settings import StreamSettings
    from streaming import job

    tag = uuid.uuid4().hex[:8]
    source, output = f"lat-in-{tag}", f"lat-out-{tag}"
    for topic, count in ((source, partitions), (output, partitions), (f"{output}.dlq", 1)):
        create_topic(bootstrap, topic, count, 1)
    settings = StreamSettings(input_topic=source, output_topic=output, bootstrap_server=str(bootstrap),
                              app_id=f"lat-{tag}", sink=sink, trigger=trigger,
                              starting_offsets="earliest" if backlog else "latest",
                              checkpoint=str(scratch / tag), timeout_s=float(seconds), client_config=bootstrap.client_config,
                              **({"commit_interval_ms": commit_interval_ms} if trigger.startswith("realtime:") else {}))
    if backlog:
        subprocess.run(feed_command(bootstrap, source, backlog, None), stdout=subprocess.DEVNULL, check=True)
    spawn = multiprocessing.get_context("spawn")
    results, observer = spawn.Queue(), None
    try:
        with nullcontext() if backlog else fed_input(bootstrap, source, rate, int(rate * (seconds + 30))):
            window = SteadyWindow(None if backlog else rate, settings.commit_wait_s, time.time())
            observer = spawn.Process(target=observe_output, args=(str(bootstrap), source, output, partitions, seconds + 8,
                                                            window, results), daemon=True)
            observer.start()
            summary = job.run(spark, settings, echo=False)
            measured = results.get(timeout=seconds + 60)
    finally:
        if observer is not None:
            observer.join(timeout=10)
    return {"sink": sink, "trigger": trigger, "offered_records_per_sec": rate, "backlog": backlog,
            **window_figures(measured), "transactions": summary.outcomes.get("committed", 0),
            "load_average": os.getloadavg()[0]}


def window_figures(measured: dict) -> dict:
    """An observer's summary with its latency histogram read as p50 and p99 (None unless it caught up and read)."""
    counts = np.asarray(measured["histogram"], dtype=np.int64)
    steady = measured["caught_up"] and measured["records"] > 0
    return {**{name: value for name, value in measured.items() if name != "histogram"},
            "p50_ms": histogram_percentile(counts, 0.5) if steady else None,
            "p99_ms": histogram_percentile(counts, 0.99) if steady else None}


def arm_lines(row: dict, seconds: int) -> list[str]:
    """What a fed arm prints when it ends: its start-up (or that it never caught up), then its window's figures."""
    read = f"{row['read_records_per_sec']:,.0f} records/s read"
    offered, load = f"{row['offered_records_per_sec']:,.0f} offered", f"load average {row['load_average']:.2f} at end"
    if not row["caught_up"]:
        behind = (f"{row['behind_at_end_records']:,} records ({row['behind_at_end_s']:.2f} s) behind at its last output"
                  if row["behind_at_end_records"] is not None else "some fed partition showed no output")
        return [f"  never caught up in {seconds} s: {behind}; no steady figures",
                f"  {read} over its whole run, {offered}, {load}"]
    start = (f"  caught up after {row['caught_up_after_s']:.1f} s, {row['backlog_records']:,} records"
             f" ({row['backlog_s']:.2f} s) behind when its window opened; window {row['window_s']:.1f} s")
    if row["p50_ms"] is None:
        return [start, f"  no record read in its window, {load}"]
    return [start, f"  p50 {row['p50_ms']:,.0f} ms, p99 {row['p99_ms']:,.0f} ms, {read} in it, {offered}, {load}"]


def wait_for_quiet(load: float, most_s: float = 180.0) -> None:
    """Wait, up to `most_s`, for the 1-minute load average to fall below `load`: the last arm's load is not the next one's."""
    waited = time.monotonic()
    while os.getloadavg()[0] >= load and time.monotonic() - waited < most_s:
        time.sleep(5)


def run(bootstrap: Connection | str, rates: list[float], seconds: int, partitions: int, commit_interval_ms: int,
        master: str, results_dir: Path, settle_load: float = 2.0, ceiling_records: int = 0,
        realtime_interval: str = "5 seconds") -> dict:
    """Every arm at every rate, arms interleaved within a rate, then (with `ceiling_records`) every arm draining
    that backlog; print the table and write the JSON."""
    from eosbench.local.spark import spark_session

    bootstrap = connection(bootstrap)
    spark = spark_session("eosbench-bench-latency", master=master)
    results_dir.mkdir(parents=True, exist_ok=True)
    rows = []
    try:
        for rate in rates:
            for sink, trigger in arms(realtime_interval):
                wait_for_quiet(settle_load)
                print(f"{sink} {trigger} at {rate:,.0f} records/s offered ({seconds} s, load average"
                      f" {os.getloadavg()[0]:.2f} at start)", flush=True)
                row = _arm(bootstrap, spark, sink, trigger, rate, seconds, partitions, commit_interval_ms,
                           results_dir / "checkpoints")
                rows.append(row)
                print("\n".join(arm_lines(row, seconds)), flush=True)
        for sink, trigger in arms(realtime_interval) if ceiling_records else ():
            wait_for_quiet(settle_load)
            print(f"{sink} {trigger} draining {ceiling_records:,} records (load average {os.getloadavg()[0]:.2f} at"
                  " start)", flush=True)
            row = _arm(bootstrap, spark, sink, trigger, None, seconds, partitions, commit_interval_ms,
                       results_dir / "checkpoints", backlog=ceiling_records)
            rows.append(row)
            print(f"  {row['read_records_per_sec']:,.0f} records/s read, load average {row['load_average']:.2f} at end",
                  flush=True)
    finally:
        spark.stop()
    report = {"master": master, "partitions": partitions, "seconds": seconds, "catch_up_grace_s": CATCH_UP_GRACE_S,
              "commit_interval_ms": commit_interval_ms, "realtime_interval": realtime_interval, "rows": rows}
    path = results_dir / f"bench-latency-{uuid.uuid4().hex[:8]}.json"
    path.write_text(json.dumps(report, indent=2) + "\n")
    print("\n".join(table(rows)))
    print(f"json: {path}")
    return report


def table(rows: list[dict]) -> list[str]:
    """The side-by-side Markdown table of a run's rows."""
    lines = ["| arm | offered rec/s | read rec/s | p50 ms | p99 ms | caught up after | behind when its window opened"
             " | load at end |", "|---|---|---|---|---|---|---|---|"]
    for row in rows:
        mode = "micro-batch, 1 s trigger" if not row["trigger"].startswith("realtime:") else "real-time"
        arm, read, load = f"{row['sink']} {mode}", f"{row['read_records_per_sec']:,.0f}", f"{row['load_average']:.2f}"
        if row["backlog"]:  # a drain: its latency is the backlog's wait, not the arm's
            lines.append(f"| {arm} | ceiling: {row['backlog']:,} waiting | {read} | — | — | — | — | {load} |")
        elif not row["caught_up"]:
            behind = "" if row["behind_at_end_records"] is None else \
                f", {row['behind_at_end_records']:,} records ({row['behind_at_end_s']:.2f} s) behind at its end"
            lines.append(f"| {arm} | {row['offered_records_per_sec']:,.0f} | {read} over its run | — | — |"
                         f" never{behind} | — | {load} |")
        else:
            p50, p99 = (f"{row[key]:,.0f}" if row[key] is not None else "—" for key in ("p50_ms", "p99_ms"))
            lines.append(f"| {arm} | {row['offered_records_per_sec']:,.0f} | {read} | {p50} | {p99} |"
                         f" {row['caught_up_after_s']:.1f} s | {row['backlog_records']:,} records"
                         f" ({row['backlog_s']:.2f} s) | {load} |")
    return lines
