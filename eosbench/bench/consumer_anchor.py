"""What the same input costs a plain reader: the anchor a Spark read is set against in `bench spark`.

Two readers, both read_committed over the whole input, on the broker the bench runs on:
Kafka's own `kafka-consumer-perf-test` (ConsumerPerformance from the cached kafka-tools; its
`fetch.nMsg.sec` leaves out its JVM start and group join, as the tool itself reports it), and one
librdkafka consumer in the bench's own process (verify's reader: assigned partitions, no group).
A Spark source that reads slower than these pays for itself, not for Kafka.
"""

from __future__ import annotations

import csv
import subprocess
import time

from conf.client_config import Connection, connection
from eosbench.console.errors import EnvironmentProblem
from eosbench.local.jars import kafka_tools_command
from streaming.verify.topic_index import records_to_end, topic_reader

CONSUMER_PERF_TIMEOUT_S = 300


def kafka_consumer_perf(bootstrap: str | Connection, topic: str, records: int) -> dict:
    """Kafka's ConsumerPerformance reading `records` committed records of `topic`, read_committed."""
    target = connection(bootstrap)
    command = [*kafka_tools_command("ConsumerPerformance", heap_mb=512), "--bootstrap-server", target.bootstrap,
               "--topic", topic, "--num-records", str(records), "--timeout", "30000", *target.tool_arguments(),
               "--command-property", "isolation.level=read_committed", "--command-property", "auto.offset.reset=earliest"]
    completed = subprocess.run(command, capture_output=True, text=True, timeout=CONSUMER_PERF_TIMEOUT_S)
    rows = [row for row in csv.reader(completed.stdout.splitlines()) if row]
    if completed.returncode != 0 or len(rows) < 2:
        last = (completed.stderr.strip().splitlines() or ["no output"])[-1]
        raise EnvironmentProblem(f"kafka-consumer-perf-test on {topic} failed: {last[:300]}")
    header, values = [name.strip() for name in rows[0]], rows[-1]
    stats = dict(zip(header, (value.strip() for value in values)))
    consumed = int(stats["data.consumed.in.nMsg"])
    return {"records": consumed, "seconds": int(stats["fetch.time.ms"]) / 1000,
            "records_per_sec": float(stats["fetch.nMsg.sec"]), "rebalance_ms": int(stats["rebalance.time.ms"])}


def plain_consumer(bootstrap: str | Connection, topic: str) -> dict:
    """One librdkafka consumer reading `topic` whole, read_committed, in this process."""
    consumer = topic_reader(bootstrap, "read_committed")
    try:
        reading = records_to_end(consumer, topic)
        next(reading)  # the partitions' bounds: metadata, not reading
        started = time.monotonic()
        records = sum(1 for _ in reading)
        seconds = time.monotonic() - started
    finally:
        consumer.close()
    return {"records": records, "seconds": seconds, "records_per_sec": records / seconds if seconds else 0.0}


def anchors(bootstrap: str | Connection, topic: str) -> dict[str, dict]:
    """Both plain readers over the same whole input; Kafka's tool is asked for as many records as
    the librdkafka reader found committed, so that it stops at the input's end, not at its timeout."""
    librdkafka = plain_consumer(bootstrap, topic)
    return {"kafka-consumer-perf-test": kafka_consumer_perf(bootstrap, topic, librdkafka["records"]),
            "librdkafka-consumer": librdkafka}
