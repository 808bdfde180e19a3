"""`--source spark|grouped|auto` on stream, bench spark and soak, and what the grouped source refuses (no broker)."""

from __future__ import annotations

import pytest

from conf.stream_settings import StreamSettings
from eosbench.bench import spark as bench
from eosbench.cli import build_parser
from streaming.sink import start as sink_start
from streaming.group import CommittedOffset, SinkPreconditionError
from tests.unit.test_start_decisions import start_read


def settings(**fields) -> StreamSettings:
    """Stream settings with two topics and the given fields."""
    return StreamSettings(input_topic="in", output_topic="out", **fields)


def test_the_grouped_source_runs_slot_and_batch_scope_and_the_baseline_sinks_and_refuses_the_rest_in_one_line():
    assert settings().source == "auto"
    for fields in ({"txn_scope": "slot"}, {"txn_scope": "batch"}, {"txn_scope": "auto"}, {"sink": "kafka-alo"},
                   {"sink": "delta", "delta_path": "t"}):
        assert settings(source="grouped", **fields).source == "grouped"
    with pytest.raises(ValueError, match="a grouped task holds several Kafka partitions"):
        settings(source="grouped", txn_scope="partition")
    with pytest.raises(ValueError, match="real-time mode keeps Spark's source"):
        settings(source="grouped", txn_scope="auto", trigger="realtime:5 seconds")
    with pytest.raises(ValueError, match="set by the job"):
        settings(source="grouped", txn_scope="slot", source_options=("slots=4",))


@pytest.mark.parametrize("source", ["spark", "grouped"])
@pytest.mark.parametrize("tag, chosen", [("partition", "partition"), ("slot", "slot"), ("batch", "batch"), (None, "slot")])
def test_auto_keeps_the_scope_each_tag_names_on_either_source_but_partition_scope_on_the_grouped_one(
        source, tag, chosen):
    start = start_read({0: CommittedOffset(5 if tag else -1, tag), 1: CommittedOffset(-1, None)})
    if source == "grouped" and chosen == "partition":
        with pytest.raises(SinkPreconditionError, match=r"^--txn-scope auto chose partition scope .* which --source"
                                                        r" grouped cannot run"):
            sink_start.resolved_scope(settings(source=source, txn_scope="auto"), start)
        return
    resolved, why = sink_start.resolved_scope(settings(source=source, txn_scope="auto"), start)
    assert resolved.txn_scope == chosen, why
    assert why.endswith("has no committed offsets)" if tag is None else f"holds offsets {tag} scope committed)")


@pytest.mark.parametrize("fields, chosen, why", [
    ({"txn_scope": "slot"}, "grouped", "micro-batch: a task and one kept consumer per slot, not per partition"),
    ({"txn_scope": "batch"}, "grouped", "micro-batch"),
    ({"sink": "kafka-alo"}, "grouped", "micro-batch"),
    ({"sink": "delta", "delta_path": "t"}, "grouped", "micro-batch"),
    ({"txn_scope": "slot", "source_options": ("failOnDataLoss=false", "kafka.fetch.max.bytes=1048576")}, "grouped",
     "micro-batch"),
    ({"txn_scope": "partition"}, "spark", "partition scope needs a task per Kafka partition"),
    ({"txn_scope": "partition", "trigger": "realtime:5 seconds"}, "spark", "real-time mode reads with Spark's source"),
    ({"txn_scope": "slot", "source_options": ("minPartitions=4",)}, "spark",
     "--source-options minPartitions is Spark's source's alone"),
])
def test_auto_reads_with_the_grouped_source_wherever_it_applies_and_says_why(fields, chosen, why):
    resolved, said = settings(**fields).chosen_source()
    assert resolved.source == chosen and said.startswith(f"source: {chosen} ({why}"), said
    assert settings(source="spark", **fields).chosen_source() == (settings(source="spark", **fields), None)


def test_stream_and_soak_take_one_source_and_bench_spark_several():
    parse = build_parser().parse_args
    assert parse(["stream", "--input-topic", "i", "--output-topic", "o"]).source == "auto"
    assert parse(["stream", "--input-topic", "i", "--output-topic", "o", "--source", "grouped"]).source == "grouped"
    assert parse(["soak", "--duration", "1m", "--source", "grouped"]).source == "grouped"
    assert parse(["soak", "--duration", "1m"]).source == "auto"
    assert parse(["bench", "spark"]).sources == ["spark"]
    assert parse(["bench", "spark", "--source", "spark", "grouped"]).sources == ["spark", "grouped"]


def test_bench_spark_runs_every_sink_the_grouped_source_can_run_again_on_it():
    arms = {bench.GROUPED_ARM: ()}
    assert bench.arm_variants(["kafka-alo", "kafka-eos", "kafka-eos+slot", "kafka-eos+batch"], arms) == [
        "kafka-alo", "kafka-eos", "kafka-eos+slot", "kafka-eos+batch",
        "kafka-alo@grouped", "kafka-eos+slot@grouped", "kafka-eos+batch@grouped"]
    grouped = settings(**bench.variant_fields("kafka-eos+slot@grouped", arms))
    assert (grouped.source, grouped.txn_scope, grouped.source_options) == ("grouped", "slot", ())
    assert settings(**bench.variant_fields("kafka-eos+slot", arms)).source == "spark"


def test_bench_spark_times_the_default_beside_both_sources_on_every_sink():
    arms = {bench.GROUPED_ARM: (), bench.AUTO_ARM: ()}
    assert bench.arm_variants(["kafka-eos", "kafka-eos+slot"], arms) == [
        "kafka-eos", "kafka-eos+slot", "kafka-eos+slot@grouped", "kafka-eos@auto", "kafka-eos+slot@auto"]
    default = settings(**bench.variant_fields("kafka-eos+slot@auto", arms))
    assert (default.source, default.txn_scope) == ("auto", "slot")
    assert build_parser().parse_args(["bench", "spark", "--source", "spark", "grouped", "auto"]).sources == [
        "spark", "grouped", "auto"]


def test_bench_spark_refuses_the_grouped_source_alone_and_an_arm_labelled_grouped():
    from eosbench.console.errors import EXIT_BAD_INPUT
    from tests.unit.test_cli_errors import assert_one_line_error, run_eosbench

    completed = run_eosbench("bench", "spark", "--bootstrap-server", "127.0.0.1:1", "--source", "grouped")
    assert_one_line_error(completed, EXIT_BAD_INPUT, "--source: bench spark measures the grouped source beside")
    completed = run_eosbench("bench", "spark", "--bootstrap-server", "127.0.0.1:1", "--source-arm",
                             "grouped:kafka.fetch.max.wait.ms=5")
    assert_one_line_error(completed, EXIT_BAD_INPUT, "--source-arm grouped: that label is --source grouped's arm")


def test_the_default_transaction_scope_is_auto_for_stream_soak_and_settings():
    from streaming.job import settings_from_args

    parse = build_parser().parse_args
    streamed = settings_from_args(parse(["stream", "--input-topic", "i", "--output-topic", "o"]))
    assert streamed.txn_scope == "auto" and StreamSettings(input_topic="i", output_topic="o").txn_scope == "auto"
    assert parse(["soak", "--duration", "1m"]).txn_scope == "auto"
    # The bench's kafka-eos arms name partition scope: each arm's group is new, where auto would choose slot.
    assert {bench.VARIANTS[v]["txn_scope"] for v in ("kafka-eos", "kafka-eos+kafka-python", "kafka-eos+prereg")} == {
        "partition"}


def test_auto_knows_every_option_the_grouped_source_takes():
    import re
    from pathlib import Path

    from conf.stream_settings import _JOB_SOURCE_OPTIONS, GROUPED_SOURCE_OPTIONS

    java = (Path(__file__).parents[2] / "streaming" / "source" / "jvm" / "GroupedKafkaProvider.java").read_text()
    declared = re.search(r"Set<String> OPTIONS = Set\.of\(([^;]*)\);", java).group(1)
    taken = set(re.findall(r'"([a-z.]+)"', declared))
    # The job sets the rest itself; any other option a user gives keeps Spark's source under auto.
    assert taken - set(_JOB_SOURCE_OPTIONS) == GROUPED_SOURCE_OPTIONS
