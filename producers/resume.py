"""`eosbench produce --resume`: where an interrupted load stands, read from its topic's committed tail (KAFKA-2260)."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, KafkaError, TopicPartition

from conf.client_config import Connection, connection
from conf.client_log import CLIENT_LOG
from conf.failures import kafka_failure
from conf.watermarks import END_FETCH_WAIT_MS, watermark_offsets

# Every record of a load carries its run id in this header; a resumed load finds its own records by it.
RUN_ID_HEADER = "eos.run_id"


def find_resume_point(bootstrap: str | Connection, topic: str, run_id: str | None,
                      timeout_s: float = 30.0) -> tuple[int, str | None]:
    """Return (next sequence number, run id) after the newest committed record of a load.

    Only the tail of each partition is read (read_committed, widening the window until a
    record of the load turns up), so resuming a load of millions of records costs little.
    With no run id given, the newest committed record names the load to resume.
    """
    consumer = Consumer(connection(bootstrap).librdkafka(**{
        "group.id": f"eosbench-resume-{topic}", "isolation.level": "read_committed", "enable.auto.commit": False,
        "enable.partition.eof": True, "fetch.wait.max.ms": END_FETCH_WAIT_MS,
    }), logger=CLIENT_LOG)
    try:
        metadata = consumer.list_topics(topic, timeout=timeout_s).topics.get(topic)
        if metadata is None or metadata.error is not None:
            return 0, run_id
        tails: list[tuple[int, int, str]] = []  # (timestamp, seq, run id)
        for partition in metadata.partitions:
            low, high = watermark_offsets(consumer, topic, partition, timeout_s)
            window = 1024
            while True:
                start = max(low, high - window)
                found = _read_range(consumer, topic, partition, start, timeout_s)
                mine = [r for r in found if run_id is None or r[2] == run_id]
                if mine or start == low:
                    tails.extend(mine)
                    break
                window *= 4
        if not tails:
            return 0, run_id
        if run_id is None:
            run_id = max(tails)[2]
            tails = [r for r in tails if r[2] == run_id]
        return max(seq for _, seq, _ in tails) + 1, run_id
    finally:
        consumer.close()


def _read_range(consumer: Consumer, topic: str, partition: int, start: int, timeout_s: float) -> list[tuple[int, int, str]]:
    consumer.assign([TopicPartition(topic, partition, start)])
    records = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        message = consumer.poll(1.0)
        if message is None:
            continue
        if message.error():
            if message.error().code() == KafkaError._PARTITION_EOF:
                break
            raise kafka_failure(message.error(), f"reading {topic}[{partition}] to resume: {message.error().str()}")
        headers = dict(message.headers() or [])
        if RUN_ID_HEADER in headers and message.key() is not None:
            records.append((message.timestamp()[1], int(message.key()), headers[RUN_ID_HEADER].decode()))
    return records
