"""The options the job gives Spark's Kafka source: eosbench's defaults, and the user's --source-options over them."""

from __future__ import annotations

import pytest

from conf.client_config import ClientConfig
from conf.settings import SettingsError
from conf.stream_settings import SOURCE_FETCH_MAX_WAIT_MS, SOURCE_OPTION_DEFAULTS, StreamSettings


def settings(**fields) -> StreamSettings:
    return StreamSettings(input_topic="in", output_topic="out", **fields)


class RecordingReader:
    """Spark's DataStreamReader as far as `job.source` uses it; options fold as Spark folds them (case-blind, last wins)."""

    def __init__(self):
        self.options_given: dict[str, str] = {}

    def format(self, name):
        assert name == "kafka"
        return self

    def options(self, **options):
        for key, value in options.items():
            self.option(key, value)
        return self

    def option(self, key, value):
        for known in [k for k in self.options_given if k.lower() == key.lower()]:
            del self.options_given[known]
        self.options_given[key] = str(value)
        return self

    def load(self):
        return self.options_given


class RecordingSpark:
    def __init__(self):
        self.readStream = RecordingReader()


class ResumedCheckpoint:
    """A checkpoint whose query has started: the job asks Kafka nothing for its starting offsets."""

    def initial_offsets(self):
        return {"in": {"0": 0}}


def source_options(settings: StreamSettings) -> dict[str, str]:
    from streaming import job

    return job.source(RecordingSpark(), settings, ResumedCheckpoint())


def test_a_micro_batch_source_waits_1_ms_for_a_fetch_that_finds_nothing():
    assert SOURCE_OPTION_DEFAULTS == {SOURCE_FETCH_MAX_WAIT_MS: "1"}
    assert settings().source_option_defaults() == {"kafka.fetch.max.wait.ms": "1"}
    assert settings(trigger="1 second").source_option_defaults() == {"kafka.fetch.max.wait.ms": "1"}
    given = source_options(settings(trigger="1 second"))
    assert given["kafka.fetch.max.wait.ms"] == "1"
    assert given["kafka.isolation.level"] == "read_committed", "the job's own options are still there"


def test_other_source_options_leave_the_default_in_place():
    chosen = settings(source_options=("failOnDataLoss=false", "kafka.fetch.max.bytes=1048576"))
    assert chosen.source_option_defaults() == {"kafka.fetch.max.wait.ms": "1"}
    given = source_options(chosen)
    assert given["kafka.fetch.max.wait.ms"] == "1"
    assert given["failOnDataLoss"] == "false" and given["kafka.fetch.max.bytes"] == "1048576"


@pytest.mark.parametrize("name", ["kafka.fetch.max.wait.ms", "kafka.FETCH.MAX.WAIT.MS"])
def test_the_users_own_wait_wins_in_any_case(name):
    chosen = settings(source_options=(f"{name}=500",))
    assert chosen.source_option_defaults() == {}, "Spark reads option names case-blind: this is the user's value"
    given = source_options(chosen)
    assert [key for key in given if key.lower() == "kafka.fetch.max.wait.ms"] == [name]
    assert given[name] == "500"


def test_real_time_mode_keeps_kafkas_own_wait():
    # Its tasks poll at the log's end all the time and never look offsets up behind a fetch.
    chosen = settings(trigger="realtime:5 seconds")
    assert chosen.source_option_defaults() == {}
    assert not any(key.lower() == "kafka.fetch.max.wait.ms" for key in source_options(chosen))


def test_command_config_cannot_carry_the_wait_so_source_options_is_the_one_way_to_set_it():
    with pytest.raises(SettingsError, match="fetch.max.wait.ms: not a connection or security property"):
        ClientConfig.from_properties({"fetch.max.wait.ms": "500"})


def test_the_demos_batch_reads_take_the_same_wait():
    # read_topic reads every partition to its end, where the held fetch would cost each task the whole wait.
    from streaming.reader import read_topic

    class BatchSpark:
        def __init__(self):
            self.read = RecordingReader()

    given = read_topic(BatchSpark(), "127.0.0.1:9092", "in")
    assert given["kafka.fetch.max.wait.ms"] == "1"
    assert given["endingOffsets"] == "latest"
