"""`bench spark --source-arm`: every sink again with other Spark source options, side by side in one run (no broker)."""

from __future__ import annotations

import argparse
from contextlib import contextmanager
from types import SimpleNamespace

import pytest

from conf.stream_settings import StreamSettings
from eosbench.bench import spark as bench
from eosbench.bench import spark_figures as figures
from eosbench.bench.commands import source_arm
from eosbench.cli import build_parser

KAFKA_DEFAULT = {"kafka-default": ("kafka.fetch.max.wait.ms=500",)}


def test_an_arm_is_a_label_and_source_options_checked_as_the_stream_checks_them():
    assert source_arm("kafka-default:kafka.fetch.max.wait.ms=500") == ("kafka-default", ("kafka.fetch.max.wait.ms=500",))
    assert source_arm("w10:kafka.fetch.max.wait.ms=10, failOnDataLoss=false") == (
        "w10", ("kafka.fetch.max.wait.ms=10", "failOnDataLoss=false"))
    for bad, why in [("kafka.fetch.max.wait.ms=500", "expected LABEL:K=V"), ("a b:x=1", "expected LABEL:K=V"),
                     ("x:", "expected LABEL:K=V"), ("x:novalue", "expected key=value"),
                     ("x:startingOffsets=latest", "set by the job"),
                     ("x:kafka.ssl.keystore.location=/k", "security settings come from --command-config")]:
        with pytest.raises(argparse.ArgumentTypeError, match=why):
            source_arm(bad)


def test_the_flag_takes_several_arms_and_defaults_to_none():
    parse = build_parser().parse_args
    assert parse(["bench", "spark"]).source_arms == []
    args = parse(["bench", "spark", "--source-arm", "kafka-default:kafka.fetch.max.wait.ms=500",
                  "w10:kafka.fetch.max.wait.ms=10"])
    assert dict(args.source_arms) == {"kafka-default": ("kafka.fetch.max.wait.ms=500",),
                                      "w10": ("kafka.fetch.max.wait.ms=10",)}


def test_a_label_given_twice_is_one_line_of_bad_input():
    from eosbench.console.errors import EXIT_BAD_INPUT
    from tests.unit.test_cli_errors import assert_one_line_error, run_eosbench

    completed = run_eosbench("bench", "spark", "--bootstrap-server", "127.0.0.1:1",
                             "--source-arm", "x:kafka.fetch.max.wait.ms=500", "x:kafka.fetch.max.wait.ms=10")
    assert_one_line_error(completed, EXIT_BAD_INPUT, "--source-arm: each LABEL once")


def test_the_latency_run_times_a_named_transactional_sink_that_the_run_measures():
    from eosbench.console.errors import EXIT_BAD_INPUT
    from tests.unit.test_cli_errors import assert_one_line_error, run_eosbench

    parse = build_parser().parse_args
    assert parse(["bench", "spark"]).latency_sink == "kafka-eos"
    assert parse(["bench", "spark", "--latency-sink", "kafka-eos+slot"]).latency_sink == "kafka-eos+slot"
    completed = run_eosbench("bench", "spark", "--bootstrap-server", "127.0.0.1:1", "--sink", "kafka-alo", "kafka-eos",
                             "--latency-sink", "kafka-eos+slot")
    assert_one_line_error(completed, EXIT_BAD_INPUT, "--latency-sink kafka-eos+slot: not among --sink")
    completed = run_eosbench("bench", "spark", "--latency-sink", "kafka-alo")
    assert completed.returncode == EXIT_BAD_INPUT and "invalid choice: 'kafka-alo'" in completed.stderr


def test_every_sink_runs_again_in_each_arm_with_the_arms_options_over_the_jobs_defaults():
    assert bench.arm_variants(["kafka-alo", "kafka-eos"], KAFKA_DEFAULT) == [
        "kafka-alo", "kafka-eos", "kafka-alo@kafka-default", "kafka-eos@kafka-default"]
    assert bench.arm_variants(["kafka-eos"], {}) == ["kafka-eos"]
    own = StreamSettings(input_topic="i", output_topic="o", **bench.variant_fields("kafka-eos+slot", KAFKA_DEFAULT))
    armed = StreamSettings(input_topic="i", output_topic="o",
                           **bench.variant_fields("kafka-eos+slot@kafka-default", KAFKA_DEFAULT))
    assert own.txn_scope == armed.txn_scope == "slot"
    assert own.source_option_defaults() == {"kafka.fetch.max.wait.ms": "1"} and own.extra_source_options() == {}
    assert armed.source_option_defaults() == {} and armed.extra_source_options() == {"kafka.fetch.max.wait.ms": "500"}
    assert (figures.sink_of("kafka-eos+slot@kafka-default"), figures.arm_of("kafka-eos+slot@kafka-default")) == (
        "kafka-eos+slot", "@kafka-default")


def test_an_arms_topics_and_app_ids_are_its_own():
    tags = [bench.variant_tag(v) for v in bench.arm_variants(list(bench.VARIANTS), {"slot": ("a=1",), "batch": ("a=2",)})]
    assert len(set(tags)) == len(tags), "kafka-eos@slot must not share kafka-eos+slot's topics"
    assert all(set(tag) <= set("abcdefghijklmnopqrstuvwxyz0123456789-") for tag in tags)


def test_the_scaling_table_sets_each_arm_against_kafka_alo_with_the_same_source_options():
    report = {"partitions": 64, "median_records_per_sec": {"kafka-alo": 100.0, "kafka-eos": 120.0,
                                                           "kafka-alo@kafka-default": 50.0,
                                                           "kafka-eos@kafka-default": 40.0},
              "scaling": {}}
    ratios = {row.split(" | ")[1]: row.split(" | ")[3] for row in figures.scaling_table([report])[2:]}
    assert ratios == {"kafka-alo": "1.00", "kafka-eos": "1.20", "kafka-alo@kafka-default": "1.00",
                      "kafka-eos@kafka-default": "0.80"}


def test_the_latency_run_reads_the_runs_partitions_with_the_arms_source_options(monkeypatch):
    from streaming.stats import BatchStats

    created, ran = [], []
    monkeypatch.setattr(bench, "create_topic", lambda bootstrap, topic, partitions, replication:
                        created.append((topic, partitions)))

    @contextmanager
    def fed(connection, topic, rate, records):
        yield

    def run(spark, settings, on_batch):
        ran.append(settings)
        for batch_id, seconds in enumerate([3.0, 2.0, 0.5, 0.7, 0.6]):
            on_batch(BatchStats(batch_id=batch_id, duration_s=seconds))
        return SimpleNamespace(records_in=0, visibility=None, trigger_ms={}, driver_ms={})

    monkeypatch.setattr(bench, "fed_input", fed)
    monkeypatch.setattr(bench.job, "run", run)

    def settings_for(variant, tag, **extra):
        return StreamSettings(input_topic="src", output_topic=f"src-{tag}",
                              **{**bench.variant_fields(variant, KAFKA_DEFAULT), **extra})

    latency = bench._latency_run("127.0.0.1:9092", settings_for, 1000.0, 30, None, 64, observe_visibility=False,
                                 variant="kafka-eos@kafka-default")
    assert created == [("src-latency-arm-kafka-default-live", 64)]
    assert ran[0].input_topic == "src-latency-arm-kafka-default-live" and ran[0].trigger == "1 second"
    assert ran[0].extra_source_options() == {"kafka.fetch.max.wait.ms": "500"}
    assert latency["partitions"] == 64 and latency["median_batch_s"] == 0.6 and latency["max_batch_s"] == 3.0


def test_the_source_requests_of_a_drain_are_counted_per_batch_beside_the_coordinators():
    from collections import Counter

    before = Counter({"FetchConsumer": 1000, "ListOffsets": 40, "EndTxn": 5})
    # 4 batches: 64 partitions' fetches and prefetches, and two look-ups after each poll.
    after = before + Counter({"FetchConsumer": 512, "ListOffsets": 520, "EndTxn": 256})
    assert figures.source_requests_per_batch(before, after, 4) == {"FetchConsumer": 128.0, "ListOffsets": 130.0}
    assert figures.source_requests_per_batch(before, after, 0) == {"FetchConsumer": 0.0, "ListOffsets": 0.0}
    assert "FetchConsumer" not in figures.request_rates(before, after, 8.0, 256, 4), "the coordinator's figures are apart"
