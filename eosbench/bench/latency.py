"""`eosbench bench latency`: end-to-end latency of micro-batch and real-time mode, side by side in one run.

Three arms read one fed input each, at each offered rate:
- kafka-eos at a 1 s micro-batch trigger (the transactional foreachBatch sink);
- kafka-eos in real-time mode, committing every `--commit-interval-ms` (streaming/realtime.py);
- kafka-alo in real-time mode: Spark's own Kafka sink, at-least-once.

Every arm is measured the same way, from outside: a read_committed consumer in its own process
reads the output and takes, for each record, the time it became readable minus its input
CreateTime (the eos.in_ts header every sink stamps). So the figure includes the commit, which
only a reader sees, and the observer shares neither the driver's Python nor its GIL. The first
`WARMUP_S` seconds of each arm are left out; records/s read is over the span from the first record
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
from pathlib import Path

import numpy as np

from conf.client_config import Connection, connection
from eosbench.local.kafka_admin import create_topic
from streaming.stats import histogram_percentile, latency_histogram

ARMS = (("kafka-eos", "1 second"), ("kafka-eos", "realtime:5 seconds"), ("kafka-alo", "realtime:5 seconds"))
WARMUP_S = 10.0


def _observe(bootstrap: str, topic: str, partitions: int, seconds: float, results) -> None:
    """The observer process: read `topic` read_committed for `seconds`; put (histogram, records after warm-up)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"latency-{uuid.uuid4().hex[:8]}",
                         "isolation.level": "read_committed", "enable.auto.commit": False,
                         "fetch.wait.max.ms": 5})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    started = time.time()
    latencies: list[float] = []
    first = last = 0.0
    while time.time() - started < seconds:
        for message in consumer.consume(1000, timeout=0.1):
            if message.error():
                continue
            now = time.time()
            if now - started < WARMUP_S:
                continue
            in_ts = dict(message.headers() or []).get("eos.in_ts")
            if in_ts is not None:
                latencies.append(now * 1000.0 - int(in_ts))
                first, last = first or now, now
    consumer.close()
    results.put((latency_histogram(np.asarray(latencies)).tolist(), len(latencies), max(last - first, 1e-3)))


def _arm(bootstrap: Connection, spark, sink: str, trigger: str, rate: float, seconds: int, partitions: int,
         commit_interval_ms: int, scratch: Path) -> dict:
    from conf.stream_settings import StreamSettings
    from streaming import job

    tag = uuid.uuid4().hex[:8]
    source, output = f"lat-in-{tag}", f"lat-out-{tag}"
    for topic, count in ((source, partitions), (output, partitions), (f"{output}.dlq", 1)):
        create_topic(bootstrap, topic, count, 1)
    settings = StreamSettings(input_topic=source, output_topic=output, bootstrap_server=str(bootstrap),
                              app_id=f"lat-{tag}", sink=sink, trigger=trigger, starting_offsets="latest",
                              checkpoint=str(scratch / tag), timeout_s=float(seconds), client_config=bootstrap.client_config,
                              **({"commit_interval_ms": commit_interval_ms} if trigger.startswith("realtime:") else {}))
    feeder = subprocess.Popen(
        [sys.executable, "-m", "eosbench.cli", "produce", "--bootstrap-server", str(bootstrap),
         *bootstrap.tool_arguments(), "--topic", source, "--num-records", str(int(rate * (seconds + 30))),
         "--record-size", "100", "--throughput", str(int(rate)), "--transaction-duration-ms", "100",
         "--producer-props", "acks=all"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    results = multiprocessing.get_context("spawn").Queue()
    observer = multiprocessing.get_context("spawn").Process(
        target=_observe, args=(str(bootstrap), output, partitions, seconds + 8, results), daemon=True)
    try:
        time.sleep(3)  # the feeder reaches its rate before the query starts at "latest"
        observer.start()
        summary = job.run(spark, settings, echo=False)
        histogram, records, measured_s = results.get(timeout=seconds + 60)
    finally:
        feeder.kill()
        observer.join(timeout=10)
    counts = np.asarray(histogram, dtype=np.int64)
    return {"sink": sink, "trigger": trigger, "offered_records_per_sec": rate, "records": records,
            "read_records_per_sec": records / measured_s, "p50_ms": histogram_percentile(counts, 0.5),
            "p99_ms": histogram_percentile(counts, 0.99), "transactions": summary.outcomes.get("committed", 0),
            "load_average": os.getloadavg()[0]}


def run(bootstrap: Connection | str, rates: list[float], seconds: int, partitions: int, commit_interval_ms: int,
        master: str, results_dir: Path) -> dict:
    """Every arm at every rate, arms interleaved within a rate; print the table and write the JSON."""
    from eosbench.local.spark import spark_session

    bootstrap = connection(bootstrap)
    spark = spark_session("eosbench-bench-latency", master=master)
    results_dir.mkdir(parents=True, exist_ok=True)
    rows = []
    try:
        for rate in rates:
            for sink, trigger in ARMS:
                print(f"{sink} {trigger} at {rate:,.0f} records/s offered ({seconds} s, load average"
                      f" {os.getloadavg()[0]:.2f} at start)", flush=True)
                row = _arm(bootstrap, spark, sink, trigger, rate, seconds, partitions, commit_interval_ms,
                           results_dir / "checkpoints")
                rows.append(row)
                print(f"  p50 {row['p50_ms']:,.0f} ms, p99 {row['p99_ms']:,.0f} ms, {row['read_records_per_sec']:,.0f}"
                      f" records/s read, load average {row['load_average']:.2f} at end", flush=True)
    finally:
        spark.stop()
    report = {"master": master, "partitions": partitions, "seconds": seconds, "warmup_s": WARMUP_S,
              "commit_interval_ms": commit_interval_ms, "rows": rows}
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
        lines.append(f"| {row['sink']} {mode} | {row['offered_records_per_sec']:,.0f} |"
                     f" {row['read_records_per_sec']:,.0f} | {row['p50_ms']:,.0f} | {row['p99_ms']:,.0f} |"
                     f" {row['load_average']:.2f} |")
    return lines
