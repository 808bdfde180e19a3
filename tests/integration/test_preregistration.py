"""--pre-register-partitions at the protocol level: registration completes before the first record.

The sink's own transaction function runs in this process, so kafka-python's debug log (which
names every request it sends and every transactional response it gets) can be read in order.
"""

from __future__ import annotations

import logging

import pyarrow as pa
from confluent_kafka import Consumer, TopicPartition

from eosbench.local.kafka_admin import create_topic

from streaming.sink.clients import _PRODUCERS, drop_producer, producer_key
from streaming.sink.task import run_transaction
from streaming.task_plan import TaskPlan
from streaming.process import arrow_columns
from streaming.group import read_committed_offsets
from streaming.verify.topic_index import topic_reader
from streaming.verify.verifier import stable_and_end_offsets
from tests.integration.kafka_reads import read_all
from tests.integration.produce_helpers import commit_keys, produce


class Recorder(logging.Handler):
    """Keeps kafka-python's log messages in order."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def slice_of(bootstrap: str, topic: str) -> tuple:
    """Partition 0 of a topic as the Arrow columns a sink task receives."""
    consumer = topic_reader(bootstrap, "read_committed")
    consumer.assign([TopicPartition(topic, 0, 0)])
    rows = {"topic": [], "partition": [], "offset": [], "timestamp": [], "key": [], "value": []}
    while True:
        message = consumer.poll(10)
        if message.error():
            break
        for name, value in (("topic", topic), ("partition", 0), ("offset", message.offset()),
                            ("timestamp", message.timestamp()[1] * 1000), ("key", message.key()),
                            ("value", message.value())):
            rows[name].append(value)
    consumer.close()
    batch = pa.RecordBatch.from_pydict(rows, schema=pa.schema([
        ("topic", pa.string()), ("partition", pa.int32()), ("offset", pa.int64()),
        ("timestamp", pa.timestamp("us", tz="UTC")), ("key", pa.binary()), ("value", pa.binary())]))
    return arrow_columns(batch)


def test_partitions_and_group_are_registered_before_the_first_produce_request(bootstrap, new_topic):
    source, sink = new_topic(partitions=1), new_topic(partitions=4)
    create_topic(bootstrap, f"{sink}.dlq", 4, 1)
    produce(bootstrap, source, 400, records_per_transaction=400)
    commit_keys(bootstrap, source, (90_000, 90_001, 90_002), value=b"POISON record")
    end = stable_and_end_offsets(bootstrap, source)[0][1]
    columns = slice_of(bootstrap, source)
    plan = TaskPlan(app_id=f"prereg-{sink}", output_topic=sink, dead_letter_topic=f"{sink}.dlq", process="passthrough",
                    producer_config={"bootstrap.servers": bootstrap, "linger.ms": "5"}, group_metadata=None,
                    end_offsets={0: end}, max_retries=0, pre_register=True, batch_id=0, fault=None,
                    sink_client="kafka-python")
    recorder = Recorder()
    kafka_log = logging.getLogger("kafka")
    kafka_log.addHandler(recorder)
    kafka_log.setLevel(logging.DEBUG)
    txn_id = f"{plan.app_id}.{source}.0"
    try:
        stats = run_transaction(plan, txn_id, [columns], {(source, 0): end})
    finally:
        kafka_log.removeHandler(recorder)
        kafka_log.setLevel(logging.WARNING)
        drop_producer(producer_key(plan, txn_id))

    messages = recorder.messages
    begin = next(i for i, m in enumerate(messages) if m.startswith("Begin adding new partition"))
    after = messages[begin:]
    assert not any("Sending Produce Request" in m for m in messages[:begin])
    first_produce = next(i for i, m in enumerate(after) if "Sending Produce Request" in m)
    registered = [m for m in after[:first_produce] if m.startswith("Successfully added partitions")]
    assert any(m.startswith("Successfully added partition for consumer group") for m in after[:first_produce])
    for partition in range(4):
        assert any(f"TopicPartition(topic='{sink}', partition={partition})" in m for m in registered), \
            f"partition {partition} was not registered before the first Produce request"
    assert len(registered) == 1, "all partitions go in one AddPartitionsToTxn round trip"
    dead_letter_partitions = {p for p in range(4) if f"TopicPartition(topic='{sink}.dlq', partition={p})" in registered[0]}
    assert dead_letter_partitions == partitions_holding(bootstrap, f"{sink}.dlq") != set(), \
        "exactly the dead-letter partitions the poison records went to are registered up front"
    assert stats["outcome"] == "committed" and stats["records_out"] == 400 and stats["records_dead_lettered"] == 3
    assert stats["register_round_trips"] >= 2  # AddPartitionsToTxn and AddOffsetsToTxn, at least
    assert stats["first_send_after_begin_s"] > 0
    assert sorted(int(k) for k in read_all(bootstrap, sink)) == list(range(400))
    assert sorted(int(k) for k in read_all(bootstrap, f"{sink}.dlq")) == [90_000, 90_001, 90_002]
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": plan.app_id, "isolation.level": "read_committed"})
    assert [(c.offset, c.scope) for c in read_committed_offsets(reader, source, [0], plan.app_id).values()] == [(end, "partition")], \
        "kafka-python's TxnOffsetCommit carries the scope"
    reader.close()


def partitions_holding(bootstrap: str, topic: str) -> set[int]:
    """The partitions of a fresh topic that a producer has written to (committed or not: the commit's
    markers may still be on their way, and only then does read_committed see the records)."""
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": "holding", "isolation.level": "read_uncommitted"})
    try:
        partitions = reader.list_topics(topic, timeout=10).topics[topic].partitions
        return {p for p in partitions if reader.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] > 0}
    finally:
        reader.close()


def test_the_kafka_python_sink_without_pre_registration_registers_lazily_and_commits_exactly(bootstrap, new_topic):
    """`--sink-client kafka-python`: the switched-off arm of the same-client comparison."""
    source, sink = new_topic(partitions=1), new_topic(partitions=2)
    create_topic(bootstrap, f"{sink}.dlq", 1, 1)
    produce(bootstrap, source, 200, records_per_transaction=200)
    end = stable_and_end_offsets(bootstrap, source)[0][1]
    plan = TaskPlan(app_id=f"kp-{sink}", output_topic=sink, dead_letter_topic=f"{sink}.dlq", process="passthrough",
                    producer_config={"bootstrap.servers": bootstrap, "linger.ms": "5"}, group_metadata=None,
                    end_offsets={0: end}, max_retries=0, pre_register=False, batch_id=0, fault=None,
                    sink_client="kafka-python")
    txn_id = f"{plan.app_id}.{source}.0"
    try:
        stats = run_transaction(plan, txn_id, [slice_of(bootstrap, source)], {(source, 0): end})
        assert type(_PRODUCERS[producer_key(plan, txn_id)]).__name__ == "PreRegisteringProducer"
    finally:
        drop_producer(producer_key(plan, txn_id))
    assert stats["outcome"] == "committed" and stats["records_out"] == 200
    assert stats["register_round_trips"] == 0
    assert sorted(int(k) for k in read_all(bootstrap, sink)) == list(range(200))
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": plan.app_id, "isolation.level": "read_committed"})
    assert [(c.offset, c.scope) for c in read_committed_offsets(reader, source, [0], plan.app_id).values()] == [(end, "partition")]
    reader.close()
