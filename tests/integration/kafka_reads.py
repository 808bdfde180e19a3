"""Read a whole topic with a plain consumer at a chosen isolation level (the tests' oracle)."""

from __future__ import annotations

from confluent_kafka import KafkaError, TopicPartition

from streaming.verify.topic_index import topic_reader


def read_all(bootstrap: str, topic: str, isolation: str = "read_committed", timeout_s: float = 30.0) -> list[bytes]:
    """Return the keys of every record in the topic visible at `isolation`, up to each partition's end."""
    consumer = topic_reader(bootstrap, isolation)  # verify's reader: its end of a partition costs no 500 ms wait
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        at_end: set[int] = set()
        keys: list[bytes] = []
        while len(at_end) < len(partitions):
            message = consumer.poll(timeout_s)
            if message is None:
                raise TimeoutError(f"no end-of-partition for {topic} within {timeout_s} s")
            if message.error():
                if message.error().code() == KafkaError._PARTITION_EOF:
                    at_end.add(message.partition())
                    continue
                raise RuntimeError(message.error().str())
            keys.append(message.key())
        return keys
    finally:
        consumer.close()


def sequence_numbers(keys: list[bytes]) -> list[int]:
    """Decode ASCII sequence-number keys."""
    return [int(key) for key in keys]
