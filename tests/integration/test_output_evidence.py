"""`--starting-offsets output` is never too early: an open transaction, another pipeline's records, a compacted or
trimmed output, and a partition with no evidence, on the real broker.

The way back after a lost checkpoint and lost group offsets reads where each input partition was
left from the output (streaming/verify/evidence.py). Each test plays what the output looks like
right after the failure that makes a user take it, and expects an exact restart or a one-line
refusal, never a start below what was written. Most need no Spark: the start is resolved before
the query is.
"""

from __future__ import annotations

import shutil

import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from conf.stream_settings import StreamSettings
from eosbench.local.kafka_admin import create_topic
from streaming import job
from streaming.group import SinkPreconditionError
from streaming.sink.start import read_start
from streaming.source.starting_offsets import resolve_starting_offsets
from streaming.verify.evidence import read_evidence
from streaming.verify.verifier import wait_until_stable
from tests.integration.produce_helpers import produce
from tests.integration.stream_checks import assert_exactly_once, committed_records, deliver


def delete_group(bootstrap: str, group: str) -> None:
    """Delete the sink's group whole, as offsets.retention.minutes would empty it."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.delete_consumer_groups([group]).values():
        future.result(timeout=30)


def starts(bootstrap: str, source: str, sink: str, group: str, settle_timeout_s: float = 20.0) -> str:
    """`--starting-offsets output`'s answer for this pipeline, decided from the start's one read of Kafka."""
    written_topics = [sink, f"{sink}.dlq"]
    start = read_start(StreamSettings(input_topic=source, output_topic=sink, bootstrap_server=bootstrap, app_id=group))
    return resolve_starting_offsets("output", group, source, written_topics, start.committed, start.holding,
                                    start.written,
                                    lambda: read_evidence(bootstrap, source, written_topics, group, settle_timeout_s))


def test_a_crash_then_an_immediate_restart_from_the_output_is_exact(bootstrap, spark, new_topic, tmp_path):
    source, sink = new_topic(partitions=2, prefix="in"), new_topic(partitions=1, prefix="out")
    create_topic(bootstrap, f"{sink}.dlq", 1, 1)
    produce(bootstrap, source, 2_000, records_per_transaction=100, abort_ratio=0.3, seed=61)
    settings = StreamSettings(input_topic=source, output_topic=sink, bootstrap_server=bootstrap, app_id=f"app-{sink}",
                              checkpoint=tmp_path / "checkpoint", producer_props=("transaction.timeout.ms=5000",))
    job.run(spark, settings)
    ends = {p: max(offset for offset, *_ in committed_records(bootstrap, source, p, 0)) + 1 for p in (0, 1)}
    produce(bootstrap, source, 4_000, records_per_transaction=100, abort_ratio=0.3, seed=61, resume=True)

    # The run that crashed: partition 0's task had its transaction open on the output when partition 1's
    # committed after it, on the same output partition; then the driver died, the checkpoint was lost and
    # the group's offsets with it. A read_committed reader stops at partition 0's open transaction.
    crashed = {p: Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{settings.app_id}.{source}.{p}",
                            "transaction.timeout.ms": 5000}) for p in (0, 1)}
    for producer in crashed.values():
        producer.init_transactions(30)
        producer.begin_transaction()
    deliver(crashed[0], settings.app_id, source, sink, 0, committed_records(bootstrap, source, 0, ends[0]))
    deliver(crashed[1], settings.app_id, source, sink, 1, committed_records(bootstrap, source, 1, ends[1]))
    crashed[1].commit_transaction(30)
    shutil.rmtree(tmp_path / "checkpoint")
    delete_group(bootstrap, settings.app_id)

    resumed = job.run(spark, settings.model_copy(update={"starting_offsets": "output"}))
    assert resumed.records_out == len(committed_records(bootstrap, source, 0, ends[0])), \
        "partition 0 resumes where its committed output ends, partition 1 after what its last transaction wrote"
    assert_exactly_once(bootstrap, settings)


def test_an_open_foreign_transaction_stops_the_restart_and_other_pipelines_records_do_not_count(bootstrap, new_topic):
    source, sink = new_topic(partitions=2, prefix="in"), new_topic(partitions=1, prefix="out")
    create_topic(bootstrap, f"{sink}.dlq", 1, 1)
    produce(bootstrap, source, 600, records_per_transaction=100, seed=62)
    inputs = [committed_records(bootstrap, source, p, 0) for p in (0, 1)]
    mine = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"app-{sink}.{source}.0"})
    mine.init_transactions(30)
    mine.begin_transaction()
    deliver(mine, f"app-{sink}", source, sink, 0, inputs[0][:50])
    deliver(mine, f"app-{sink}", source, sink, 1, inputs[1][:10])
    mine.commit_transaction(30)
    # Another pipeline writes the same output, naming records far ahead in the same input.
    other = Producer({"bootstrap.servers": bootstrap, "transactional.id": "another-pipeline"})
    other.init_transactions(30)
    other.begin_transaction()
    deliver(other, "another-pipeline", source, sink, 1, [(250, b"k", b"v", 0)])
    deliver(other, "another-pipeline", source, sink, 0, [(280, b"k", b"v", 0)])
    other.commit_transaction(30)
    assert starts(bootstrap, source, sink, f"app-{sink}") == (
        f'{{"{source}": {{"0": {inputs[0][49][0] + 1}, "1": {inputs[1][9][0] + 1}}}}}'), \
        "each partition after this pipeline's own last record, whatever another pipeline wrote of the same input"

    other.begin_transaction()  # a writer that is not this pipeline keeps a transaction open on the output
    other.produce(sink, b"v", b"k", partition=0)
    assert other.flush(30) == 0
    with pytest.raises(SinkPreconditionError, match=rf"^{sink}\[0\]: last stable offset \d+ still below \d+ after 2 s: a"
                                                    r" transaction is still open there, .* It is not one of this"
                                                    r" pipeline's transactions") as refused:
        starts(bootstrap, source, sink, f"app-{sink}", settle_timeout_s=2.0)
    assert "\n" not in str(refused.value)
    other.abort_transaction(30)


def test_a_compacted_or_trimmed_output_and_a_partition_without_evidence_are_refused(bootstrap, new_topic):
    source, sink = new_topic(partitions=2, prefix="in"), new_topic(partitions=2, prefix="out")
    create_topic(bootstrap, f"{sink}.dlq", 1, 1)
    produce(bootstrap, source, 600, records_per_transaction=100, seed=63)
    group = f"app-{sink}"
    writer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{group}.{source}.0"})
    writer.init_transactions(30)
    first = committed_records(bootstrap, source, 0, 0)
    for output_partition, records in ((0, first[:40]), (1, first[40:60])):
        writer.begin_transaction()
        deliver(writer, group, source, sink, 0, records, output_partition)
        writer.commit_transaction(30)
    assert wait_until_stable(bootstrap, [sink], timeout_s=30) == []

    # Input partition 1 holds records, and neither the group nor the output says where it was left.
    with pytest.raises(SinkPreconditionError, match=rf"^--starting-offsets output: {source}\[1\] holds records"
                                                    rf" \(offsets 0\.\.\d+\) but group '{group}' has no offset for it"):
        starts(bootstrap, source, sink, group)
    writer.begin_transaction()  # input partition 1's evidence: now only its start is in doubt, not its place
    deliver(writer, group, source, sink, 1, committed_records(bootstrap, source, 1, 0)[:10], 1)
    writer.commit_transaction(30)
    second = committed_records(bootstrap, source, 1, 0)
    assert starts(bootstrap, source, sink, group) == f'{{"{source}": {{"0": {first[59][0] + 1}, "1": {second[9][0] + 1}}}}}'

    # Retention deletes output partition 1's oldest records: those were the last records delivered from
    # input partition 0 and the only ones of input partition 1, so neither's place can be read any more.
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.delete_records([TopicPartition(sink, 1, 21)]).values():
        future.result(timeout=30)
    with pytest.raises(SinkPreconditionError, match=rf"^--starting-offsets output: {sink}\[1\] has lost its oldest"
                                                    rf" records .* holds none that this pipeline delivered from"
                                                    rf" {source}\[0\]"):
        starts(bootstrap, source, sink, group)

    compacted = f"{sink}-compacted"
    for future in admin.create_topics([NewTopic(compacted, 1, 1, config={"cleanup.policy": "compact"})]).values():
        future.result(timeout=30)
    create_topic(bootstrap, f"{compacted}.dlq", 1, 1)
    with pytest.raises(SinkPreconditionError, match=rf"^{compacted} is compacted \(cleanup.policy=compact\)"):
        starts(bootstrap, source, compacted, group)
