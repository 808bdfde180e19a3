"""A partition's watermark offsets that ride out a leader moving, for every engine that reads them.

librdkafka's `get_watermark_offsets` sends one ListOffsets to the leader it knows and returns that
leader's answer. While a killed broker restarts, leadership moves twice (away, then back by the
preferred-leader election), and a leader that has just lost or not yet taken the partition answers
NOT_LEADER_OR_FOLLOWER, OFFSET_NOT_AVAILABLE or a leader-epoch error: the 2-hour cluster soak
308a257e died of one at its 128th fault. These answers pass once the client's metadata catches
up (librdkafka refreshes it on such an error), so the read is asked again until its deadline.
"""

from __future__ import annotations

import time

from confluent_kafka import KafkaError, KafkaException, TopicPartition

# What a leader moving or a broker restarting answers; bare error codes carry no retriable flag.
PASSING = frozenset({KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE,
                     KafkaError.FENCED_LEADER_EPOCH, KafkaError.UNKNOWN_LEADER_EPOCH, KafkaError.OFFSET_NOT_AVAILABLE,
                     KafkaError.REQUEST_TIMED_OUT, KafkaError.NETWORK_EXCEPTION, KafkaError._TRANSPORT,
                     KafkaError._ALL_BROKERS_DOWN, KafkaError._TIMED_OUT})
RETRY_PAUSE_S = 0.2
# How long the broker may hold a fetch that finds nothing new, for the readers that read a partition
# to its end (librdkafka's fetch.wait.max.ms): a reader learns that it is at the end from such a
# fetch, and a transactional partition ends in a marker, not a record, so at Kafka's 500 ms every
# read to the end waited half a second per partition.
END_FETCH_WAIT_MS = 10


def watermark_offsets(consumer, topic: str, partition: int, timeout_s: float, cached: bool = False) -> tuple[int, int]:
    """(low, high) of one partition, asked again on a passing error until `timeout_s` is spent; then it raises."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return consumer.get_watermark_offsets(TopicPartition(topic, partition),
                                                  timeout=max(0.5, deadline - time.monotonic()), cached=cached)
        except KafkaException as exc:
            error = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
            if error is None or error.code() not in PASSING or time.monotonic() + RETRY_PAUSE_S >= deadline:
                raise
        time.sleep(RETRY_PAUSE_S)
