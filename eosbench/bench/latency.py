"""`eosbench bench latency`: end-to-end latency of micro-batch and real-time mode, side by side in one run.

Three arms read one fed input each, at each offered rate:
- kafka-eos at a 1 s micro-batch trigger (the transactional foreachBatch sink);
- kafka-eos in real-time mode, committing every `--commit-interval-ms` (streaming/realtime.py),
  its epochs (checkpoint interval) `--realtime-interval` long;
- kafka-alo in real-time mode: Spark's own Kafka sink, at-least-once.

Every arm is measured the same way, from outside: a read_committed consumer in its own process
reads the output and takes, for each record, the time it became readable minus its input
CreateTime (the eos.in_ts header every sink stamps). So the figure includes the commit, which
only a reader sees, and the observer shares neither the driver's Python nor its GIL. The first
`WARMUP_S` seconds after the arm's first output are left out; records/s read is over the span from the first record
read after them to the last. An arm that cannot keep up shows it: its records/s read falls short
of the rate offered, which is then its throughput ceiling, and its latency grows with the run.
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


WARMUP_S = 10.0


def _observe(bootstrap: str, topic: str, partitions: int, seconds: float, warmup_s: float, results) -> None:
    """The observer process: read `topic` read_committed for `seconds`; put (histogram, records, their span in s),
    leaving out the records read in the first `warmup_s` after the first one."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"latency-{uuid.uuid4().hex[:8]}",
                         "isolation.level": "read_committed", "enable.auto.commit": False,
                         "fetch.wait.max.ms": 5})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    started = time.time()
    latencies: list[float] = []
    output_began = first = last = 0.0
    while time.time() - started < seconds:
        for message in consumer.consume(1000, timeout=0.1):
            if message.error():
                continue
            now = time.time()
            output_began = output_began or now
            if now - output_began < warmup_s:  # the query's start-up, and the backlog it met, are left out
                continue
            in_ts = dict(message.headers() or []).get("eos.in_ts")
            if in_ts is not None:
                latencies.append(now * 1000.0 - int(in_ts))
                first, last = first or now, now
    consumer.close()
    results.put((latency_histogram(np.asarray(latencies)).tolist(), len(latencies), max(last - first, 1e-3)))


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
    results = multiprocessing.get_context("spawn").Queue()
    observer = multiprocessing.get_context("spawn").Process(
        target=_observe, args=(str(bootstrap), output, partitions, seconds + 8, 0.0 if backlog else WARMUP_S, results),
        daemon=True)
    try:
        with nullcontext() if backlog else fed_input(bootstrap, source, rate, int(rate * (seconds + 30))):
            observer.start()
            summary = job.run(spark, settings, echo=False)
            histogram, records, measured_s = results.get(timeout=seconds + 60)
    finally:
        observer.join(timeout=10)
    counts = np.asarray(histogram, dtype=np.int64)
    return {"sink": sink, "trigger": trigger, "offered_records_per_sec": rate, "backlog": backlog, "records": records,
            "read_records_per_sec": records / measured_s, "p50_ms": histogram_percentile(counts, 0.5),
            "p99_ms": histogram_percentile(counts, 0.99), "transactions": summary.outcomes.get("committed", 0),
            "load_average": os.getloadavg()[0]}


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
                print(f"  p50 {row['p50_ms']:,.0f} ms, p99 {row['p99_ms']:,.0f} ms, {row['read_records_per_sec']:,.0f}"
                      f" records/s read, load average {row['load_average']:.2f} at end", flush=True)
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
    report = {"master": master, "partitions": partitions, "seconds": seconds, "warmup_s": WARMUP_S,
              "commit_interval_ms": commit_interval_ms, "realtime_interval": realtime_interval, "rows": rows}
    path = results_dir / f"bench-latency-{uuid.uuid4().hex[:8]}.json"
    path.write_text(json.dumps(report, indent=2) + "\n")
    print("\n".join(table(rows)))
    print(f"json: {path}")
    return report


def table(rows: list[dict]) -> list[str]:
    """The side-by-side Markdown table of a run's rows."""
    lines = ["| arm | offered rec/s | read rec/s | p50 ms | p99 ms | load at end |", "|---|---|---|---|---|---|"]
    for row in rows:
        mode = "micro-batch, 1 s trigger" if not row["trigger"].startswith("realtime:") else "real-time"
        if row["backlog"]:  # a drain: its latency is the backlog's wait, not the arm's
            lines.append(f"| {row['sink']} {mode} | ceiling: {row['backlog']:,} waiting |"
                         f" {row['read_records_per_sec']:,.0f} | — | — | {row['load_average']:.2f} |")
            continue
        lines.append(f"| {row['sink']} {mode} | {row['offered_records_per_sec']:,.0f} |"
                     f" {row['read_records_per_sec']:,.0f} | {row['p50_ms']:,.0f} | {row['p99_ms']:,.0f} |"
                     f" {row['load_average']:.2f} |")
    return lines

