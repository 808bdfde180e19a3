"""The sink's bound on send_offsets_to_transaction, which librdkafka can ignore (librdkafka#5456)."""

from __future__ import annotations

import logging
import threading

import pytest
from confluent_kafka import KafkaError, KafkaException

from streaming.sink import clients as sink_clients
from streaming.sink import task as sink_task
from streaming.group import CommittedOffset
from streaming.task_plan import TaskPlan

KEY = ("app.in.0", (("bootstrap.servers", "b:9092"),), False)  # a producer's cache key


class BlockedProducer:
    """A producer whose send_offsets_to_transaction never returns until released, as in the soak."""

    def __init__(self):
        self.release = threading.Event()

    def send_offsets_to_transaction(self, offsets, group_metadata, timeout):
        """Block past any timeout."""
        self.release.wait()


class TransactionalProducer:
    """Just enough of a transactional producer for run_transaction over an empty slice."""

    def __init__(self, send_offsets_error: Exception | None = None):
        self.send_offsets_error, self.committed = send_offsets_error, 0

    def begin_transaction(self):
        """Nothing to do without a broker."""

    def flush(self, timeout=None):
        """Nothing is queued."""
        return 0

    def purge(self):
        """Nothing is queued."""

    def send_offsets_to_transaction(self, offsets, group_metadata, timeout):
        """Fail once if told to."""
        if self.send_offsets_error:
            raise self.send_offsets_error

    def commit_transaction(self, timeout):
        """Count the commit."""
        self.committed += 1


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
    monkeypatch.setattr(sink_clients, "SEND_OFFSETS_TIMEOUT_S", 0.05)
    monkeypatch.setattr(sink_clients, "_PRODUCERS", {})
    monkeypatch.setattr(sink_clients, "_ABANDONED", [])


def test_a_blocked_call_abandons_the_producer_and_times_out_as_indefinite():
    blocked = BlockedProducer()
    sink_clients._PRODUCERS[KEY] = blocked
    with pytest.raises(KafkaException) as raised:
        sink_clients.send_offsets(blocked, KEY, ["offsets"], "group")
    assert raised.value.args[0].code() == KafkaError._TIMED_OUT
    assert sink_clients.classify(raised.value) == "indefinite"  # Step 5: a new producer fences the old
    assert sink_clients._PRODUCERS == {}
    assert [producer for producer, _ in sink_clients._ABANDONED] == [blocked]

    blocked.release.set()
    sink_clients._ABANDONED[0][1].join(1)
    sink_clients.send_offsets(AnsweringProducer(), KEY, ["offsets"], "group")
    assert sink_clients._ABANDONED == [], "a producer whose call has returned is let go"


def test_an_answered_call_passes_its_arguments_and_its_error_through():
    answering = AnsweringProducer()
    sink_clients.send_offsets(answering, KEY, ["offsets"], "group")
    assert answering.calls == [(["offsets"], "group", 0.05)]

    fenced = KafkaException(KafkaError(KafkaError._FENCED, "fenced"))
    with pytest.raises(KafkaException) as raised:
        sink_clients.send_offsets(AnsweringProducer(fenced), KEY, ["offsets"], "group")
    assert raised.value is fenced


def run_one_transaction(monkeypatch, producers: list[TransactionalProducer]) -> dict:
    """run_transaction for app.in.0 over an empty slice, each new producer taken from `producers`."""
    def next_producer(plan, key, timings):
        sink_clients._PRODUCERS.setdefault(key, producers.pop(0))
        return sink_clients._PRODUCERS[key]
    monkeypatch.setattr(sink_clients, "cached_producer", next_producer)
    monkeypatch.setattr(sink_clients, "group_offsets_of",
                        lambda plan, topic, partitions, held_s=None: {p: CommittedOffset(-1, None) for p in partitions})
    plan = TaskPlan(app_id="app", output_topic="out", dead_letter_topic="out.dlq", process="passthrough",
                             producer_config={}, group_metadata="group", end_offsets={0: 10}, max_retries=2,
                             pre_register=False, batch_id=7, fault=None)
    return sink_task.run_transaction(plan, "app.in.0", [], {("in", 0): 10})


def test_a_retried_attempt_says_which_phase_failed_and_the_next_producer_commits(monkeypatch, caplog):
    timed_out = KafkaException(KafkaError(KafkaError._TIMED_OUT, "send_offsets_to_transaction still blocked"))
    producers = [TransactionalProducer(timed_out), TransactionalProducer()]
    with caplog.at_level(logging.WARNING, logger="eosbench.sink"):
        stats = run_one_transaction(monkeypatch, producers)
    assert stats["outcome"] == "committed" and stats["retries"] == 1 and producers == []
    assert [producer.committed for producer in sink_clients._PRODUCERS.values()] == [1]
    [line] = [record.getMessage() for record in caplog.records]
    assert line.startswith("app.in.0: attempt 1 of 3 failed in send_offsets after ")
    assert line.endswith("s (indefinite): KafkaError{code=_TIMED_OUT,val=-185,str=\"send_offsets_to_transaction still blocked\"}")


def test_a_cached_producer_found_fenced_at_once_is_logged_below_warning(monkeypatch, caplog):
    fenced = KafkaException(KafkaError(KafkaError._FENCED, "fenced by a newer instance", fatal=True))
    producers = [TransactionalProducer(fenced), TransactionalProducer()]
    with caplog.at_level(logging.INFO, logger="eosbench.sink"):
        stats = run_one_transaction(monkeypatch, producers)
    assert stats["outcome"] == "committed" and stats["fenced"] == 1
    assert [(record.levelno, record.getMessage().split(" after ")[0]) for record in caplog.records] == [
        (logging.INFO, "app.in.0: attempt 1 of 3 failed in send_offsets")]


def test_a_fatal_producers_produce_error_counts_as_fenced():
    # What produce() raised in the sweep once another worker's producer had fenced the cached one.
    fatal = KafkaException(KafkaError(KafkaError._FATAL, "Unable to produce message: Local: Fatal error"))
    assert not fatal.args[0].fatal() and sink_clients.classify(fatal) == "fenced"
