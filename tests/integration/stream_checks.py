"""Checks shared by the streaming job's integration tests: the verifier's verdict, the checkpoint's logs, and records
read from the input and written as the sink writes them."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from conf.headers import IN_TS_HEADER, SRC_HEADER, transaction_identity, txn_header
from conf.stream_settings import StreamSettings
from eosbench.local.hadoop_fs import fs_shell
from streaming.group import CommittedOffset, read_committed_offsets
from streaming.verify.topic_index import topic_reader
from streaming.verify.verifier import verify


def local_checkpoint(settings: StreamSettings) -> Path:
    """The folder of a checkpoint on the local disk, for the tests that edit Spark's logs by hand."""
    return Path(urlsplit(settings.checkpoint_uri).path)


def logged_batches(settings: StreamSettings, s3a_config: Path | None = None) -> dict[str, set[int]]:
    """The batch ids in the checkpoint's offset and commit logs, listed through Hadoop wherever it lives."""
    listed = fs_shell("-ls", "-C", f"{settings.checkpoint_uri}/offsets", f"{settings.checkpoint_uri}/commits",
                      s3a_config=s3a_config).stdout
    logs: dict[str, set[int]] = {"offsets": set(), "commits": set()}
    for path in listed.split():
        folder, name = path.rsplit("/", 2)[-2:]
        if name.isdigit():
            logs[folder].add(int(name))
    return logs


def assert_exactly_once(bootstrap: str, settings: StreamSettings, expect_dead: int = 0):
    """The verifier finds nothing, and every committed input id arrived exactly once."""
    report = verify(bootstrap, settings.input_topic, settings.output_topic, settings.app_id, settings.dead_letter)
    assert report.violations == [], report.violations
    assert report.torn == report.reordered == 0 and report.transactions_checked > 0, "judged whole, and in order"
    assert report.output_committed + report.dead_lettered == report.input_committed
    assert report.dead_lettered == expect_dead
    assert report.input_aborted > 0, "the input must hold aborted transactions for this to mean anything"
    return report


def group_offsets(bootstrap: str, settings: StreamSettings, partitions=range(3)) -> dict[int, CommittedOffset]:
    """The sink group's committed offsets of the input, with their tags."""
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": settings.app_id, "isolation.level": "read_committed"})
    try:
        return read_committed_offsets(reader, settings.input_topic, list(partitions), settings.app_id)
    finally:
        reader.close()


def consumers_created(spark) -> int:
    """Consumers the grouped source created in the session's JVM (local mode: the driver's is the executor's)."""
    return spark._jvm.eosbench.spark.GroupedKafkaProvider.consumersCreated()


def committed_records(bootstrap: str, topic: str, partition: int, start: int) -> list[tuple[int, bytes, bytes, int]]:
    """(offset, key, value, timestamp) of each committed record of one input partition from `start` on."""
    consumer = topic_reader(bootstrap, "read_committed")
    try:
        consumer.assign([TopicPartition(topic, partition, start)])
        records = []
        while True:
            message = consumer.poll(30)
            assert message is not None, f"no end of {topic}[{partition}]"
            if message.error():
                assert message.error().code() == KafkaError._PARTITION_EOF, message.error()
                return records
            records.append((message.offset(), message.key(), message.value(), message.timestamp()[1]))
    finally:
        consumer.close()


def deliver(producer: Producer, pipeline: str, input_topic: str, output: str, source_partition: int, records,
            output_partition: int = 0) -> None:
    """Produce records as the sink writes them (eos.src, eos.in_ts, eos.txn of `pipeline`), inside the producer's open
    transaction, to one output partition."""
    identity = transaction_identity(pipeline, source_partition, 7)
    for offset, key, value, timestamp in records:
        producer.produce(output, value, key, partition=output_partition,
                         headers=[(SRC_HEADER, f"{input_topic}:{source_partition}:{offset}".encode()),
                                  (IN_TS_HEADER, str(timestamp).encode()), txn_header(identity, len(records))])
    assert producer.flush(30) == 0
