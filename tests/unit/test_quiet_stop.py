"""The order of a quiet stop, on a fake query: a micro-batch query is stopped once its batch in flight has ended (or
the wait is up), its killed tasks' loggers are off only from the stop until its tasks have ended, and they come back
even when the stop fails. What log4j prints is checked on real Spark (tests/integration/test_realtime.py)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from streaming import quiet_stop


class _FakeQuery:
    """A query whose trigger is active, its last finished batch `batch_id`, until `polls` status reads have passed."""

    def __init__(self, events: list[str], polls: int | None, fail_stop: bool = False):
        self.events, self.polls, self.fail_stop, self.batch_id = events, polls, fail_stop, 4
        self._jsq = SimpleNamespace(status=self._status,
                                    lastProgress=lambda: SimpleNamespace(batchId=lambda: self.batch_id))

    def _status(self):
        if self.polls is not None:
            self.polls -= 1
            if self.polls <= 0 and self.batch_id == 4:
                self.batch_id = 5  # the batch in flight ends: its progress is the last
                self.events.append("batch 5 ended")
        return SimpleNamespace(isTriggerActive=lambda: True)

    def stop(self):
        self.events.append("stop")
        if self.fail_stop:
            raise RuntimeError("the stop failed")


@pytest.fixture
def events(monkeypatch) -> list[str]:
    happened: list[str] = []
    monkeypatch.setattr(quiet_stop, "silence", lambda spark, names: happened.append("silence") or {"x": None})
    monkeypatch.setattr(quiet_stop, "restore", lambda spark, levels: happened.append(f"restore {levels}"))
    monkeypatch.setattr(quiet_stop, "wait_for_tasks_to_end", lambda spark, most_s: happened.append("tasks ended"))
    return happened


def test_a_micro_batch_query_is_stopped_after_its_batch_in_flight_and_silenced_only_from_the_stop(events):
    quiet_stop.stop_quietly(None, _FakeQuery(events, polls=3), between_batches=True)
    assert events == ["batch 5 ended", "silence", "stop", "tasks ended", "restore {'x': None}"]


def test_a_batch_that_does_not_end_in_time_is_stopped_all_the_same(events, monkeypatch):
    monkeypatch.setattr(quiet_stop, "BATCH_END_S", 0.1)
    quiet_stop.stop_quietly(None, _FakeQuery(events, polls=None), between_batches=True)
    assert events == ["silence", "stop", "tasks ended", "restore {'x': None}"]


def test_a_real_time_query_is_stopped_at_once_and_the_loggers_come_back_even_when_the_stop_fails(events):
    query = _FakeQuery(events, polls=3, fail_stop=True)
    with pytest.raises(RuntimeError, match="the stop failed"):
        quiet_stop.stop_quietly(None, query)
    assert events == ["silence", "stop", "restore {'x': None}"] and query.polls == 3
