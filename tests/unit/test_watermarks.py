"""conf/watermarks.py: a watermark read rides out a leader moving, and nothing else."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException

from conf import watermarks
from conf.watermarks import watermark_offsets


class _Consumer:
    """Answers get_watermark_offsets from a script: an error code to raise, or the (low, high) to return."""

    def __init__(self, *answers):
        self.answers, self.asked = list(answers), []

    def get_watermark_offsets(self, partition, timeout, cached):
        self.asked.append((partition.topic, partition.partition, cached))
        answer = self.answers.pop(0)
        if isinstance(answer, int):
            raise KafkaException(KafkaError(answer))
        return answer


@pytest.fixture(autouse=True)
def no_pause(monkeypatch):
    monkeypatch.setattr(watermarks, "RETRY_PAUSE_S", 0.0)


def test_a_leader_moving_is_asked_again_until_it_answers():
    consumer = _Consumer(KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.OFFSET_NOT_AVAILABLE,
                         KafkaError.FENCED_LEADER_EPOCH, (0, 42))
    assert watermark_offsets(consumer, "in", 3, timeout_s=30) == (0, 42)
    assert consumer.asked == [("in", 3, False)] * 4, "never the cached figures: a leader's own answer"


def test_an_error_no_retry_can_mend_is_raised_at_once():
    consumer = _Consumer(KafkaError.UNKNOWN_TOPIC_OR_PART, (0, 1))
    with pytest.raises(KafkaException) as raised:
        watermark_offsets(consumer, "in", 0, timeout_s=30)
    assert raised.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART and len(consumer.asked) == 1


def test_a_leader_that_never_settles_fails_the_read_at_its_deadline(monkeypatch):
    clock = iter(range(0, 1000, 10))  # each look at the clock is 10 s later
    monkeypatch.setattr(watermarks.time, "monotonic", lambda: next(clock))
    consumer = _Consumer(*[KafkaError.NOT_LEADER_FOR_PARTITION] * 10)
    with pytest.raises(KafkaException):
        watermark_offsets(consumer, "in", 0, timeout_s=30)
    assert len(consumer.asked) == 2, "asked at 10 s and 30 s; at 40 s the 30 s were spent"
