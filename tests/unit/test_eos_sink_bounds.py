"""The sink's bound on send_offsets_to_transaction, which librdkafka can ignore (librdkafka#5456)."""

from __future__ import annotations

import threading

import pytest
from confluent_kafka import KafkaError, KafkaException

from streaming import eos_sink


class BlockedProducer:
    """A producer whose send_offsets_to_transaction never returns until released, as in the soak."""

    def __init__(self):
        self.release = threading.Event()

    def send_offsets_to_transaction(self, offsets, group_metadata, timeout):
        """Block past any timeout."""
        self.release.wait()


class AnsweringProducer:
    """A producer whose send_offsets_to_transaction answers at once, with an optional error."""

    def __init__(self, error: Exception | None = None):
        self.error, self.calls = error, []

    def send_offsets_to_transaction(self, offsets, group_metadata, timeout):
        """Record the call; raise the given error."""
        self.calls.append((offsets, group_metadata, timeout))
        if self.error:
            raise self.error


@pytest.fixture(autouse=True)
def short_bound(monkeypatch):
    monkeypatch.setattr(eos_sink, "SEND_OFFSETS_TIMEOUT_S", 0.05)
    monkeypatch.setattr(eos_sink, "_PRODUCERS", {})
    monkeypatch.setattr(eos_sink, "_ABANDONED", [])


def test_a_blocked_call_abandons_the_producer_and_times_out_as_indefinite():
    blocked = BlockedProducer()
    eos_sink._PRODUCERS["app.in.0"] = blocked
    with pytest.raises(KafkaException) as raised:
        eos_sink._send_offsets(blocked, "app.in.0", ["offsets"], "group")
    assert raised.value.args[0].code() == KafkaError._TIMED_OUT
    assert eos_sink._classify(raised.value) == "indefinite"  # Step 5: a new producer fences the old
    assert eos_sink._PRODUCERS == {}
    assert [producer for producer, _ in eos_sink._ABANDONED] == [blocked]

    blocked.release.set()
    eos_sink._ABANDONED[0][1].join(1)
    eos_sink._send_offsets(AnsweringProducer(), "app.in.0", ["offsets"], "group")
    assert eos_sink._ABANDONED == [], "a producer whose call has returned is let go"


def test_an_answered_call_passes_its_arguments_and_its_error_through():
    answering = AnsweringProducer()
    eos_sink._send_offsets(answering, "app.in.1", ["offsets"], "group")
    assert answering.calls == [(["offsets"], "group", 0.05)]

    fenced = KafkaException(KafkaError(KafkaError._FENCED, "fenced"))
    with pytest.raises(KafkaException) as raised:
        eos_sink._send_offsets(AnsweringProducer(fenced), "app.in.1", ["offsets"], "group")
    assert raised.value is fenced
