"""The session factory's precedence: the user's Spark settings win over eosbench's defaults (no JVM here)."""

from __future__ import annotations

from streaming.session import DEFAULT_CONF, DEFAULT_MASTER, MONITORING_CONF, session_settings


def test_defaults_fill_only_what_the_user_left_unset():
    # As spark-submit --master local[1] --conf spark.ui.enabled=true would leave them.
    existing = {"spark.master": "local[1]", "spark.ui.enabled": "true", "spark.sql.shuffle.partitions": "7"}
    settings = session_settings(existing)
    assert not set(settings) & set(existing)
    assert settings == {key: value for key, value in DEFAULT_CONF.items() if key not in existing}


def test_nothing_set_gives_every_default_and_the_local_master():
    assert session_settings({}) == {"spark.master": DEFAULT_MASTER, **DEFAULT_CONF}


def test_monitoring_turns_the_ui_on_unless_the_user_set_it():
    assert session_settings({}, monitoring=True)["spark.ui.enabled"] == "true"
    assert session_settings({}, monitoring=True)["spark.ui.port"] == MONITORING_CONF["spark.ui.port"]
    assert "spark.ui.port" not in session_settings({"spark.ui.port": "4050"}, monitoring=True)


def test_the_callers_master_jars_and_conf_are_applied_as_given():
    settings = session_settings({"spark.master": "local[1]", "spark.ui.enabled": "true"}, master="local[3]",
                                jars=["/a.jar", "/b.jar"], conf={"spark.ui.enabled": "false", "spark.x": "1"})
    assert settings["spark.master"] == "local[3]"
    assert settings["spark.jars"] == "/a.jar,/b.jar"
    assert settings["spark.ui.enabled"] == "false" and settings["spark.x"] == "1"


def test_stream_conf_without_a_value_is_one_line_of_bad_input():
    from eosbench.console.errors import EXIT_BAD_INPUT
    from tests.unit.test_cli_errors import assert_one_line_error, run_eosbench

    completed = run_eosbench("stream", "--input-topic", "a", "--output-topic", "b", "--conf", "spark.ui.enabled")
    assert_one_line_error(completed, EXIT_BAD_INPUT, "expected key=value")


def test_the_kafka_consumer_pool_holds_every_input_partition_unless_the_user_sized_it():
    from streaming.session import KAFKA_CONSUMER_CACHE_CAPACITY, consumer_cache_defaults

    assert consumer_cache_defaults(4) == {KAFKA_CONSUMER_CACHE_CAPACITY: "64"}, "never below Spark's own 64"
    assert consumer_cache_defaults(1000) == {KAFKA_CONSUMER_CACHE_CAPACITY: "1266"}
    assert session_settings({}, more_defaults=consumer_cache_defaults(256))[KAFKA_CONSUMER_CACHE_CAPACITY] == "336"
    user = {KAFKA_CONSUMER_CACHE_CAPACITY: "100"}
    assert KAFKA_CONSUMER_CACHE_CAPACITY not in session_settings(user, more_defaults=consumer_cache_defaults(256))
