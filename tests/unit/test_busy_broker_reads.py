"""Reads of the brokers' settings and ACLs that a busy broker leaves unanswered: None, never a crash."""

from __future__ import annotations

from concurrent.futures import Future
from types import SimpleNamespace

from conf import failures
from streaming import group as sink_group


class SlowAdmin:
    """An AdminClient whose broker never answers DescribeConfigs."""

    def __init__(self, *_args, **_kwargs):
        pass

    def list_topics(self, timeout):
        """One broker."""
        return SimpleNamespace(brokers={1: None})

    def describe_configs(self, resources):
        """A future that never completes."""
        return {resource: Future() for resource in resources}


def test_a_broker_too_busy_to_answer_gives_no_setting_instead_of_a_timeout(monkeypatch):
    import confluent_kafka.admin

    monkeypatch.setattr(confluent_kafka.admin, "AdminClient", SlowAdmin)
    real_result = Future.result
    monkeypatch.setattr(Future, "result", lambda self, timeout=None: real_result(self, timeout=0.01))
    assert sink_group.brokers_offsets_retention_minutes("127.0.0.1:1") is None


class SlowTopicAdmin(SlowAdmin):
    """An AdminClient whose broker never answers DescribeTopics."""

    def describe_topics(self, topics, include_authorized_operations):
        """A future per topic that never completes."""
        return {topic: Future() for topic in topics.topic_names}


def test_a_broker_too_busy_to_say_which_topic_was_refused_leaves_the_failure_naming_them_all(monkeypatch):
    import confluent_kafka.admin

    monkeypatch.setattr(confluent_kafka.admin, "AdminClient", SlowTopicAdmin)
    real_result = Future.result
    monkeypatch.setattr(Future, "result", lambda self, timeout=None: real_result(self, timeout=0.01))
    assert failures.unauthorized_topic({"bootstrap.servers": "127.0.0.1:1"}, [("in", "READ"), ("out", "WRITE")]) is None
