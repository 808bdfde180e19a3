"""What every transactional sink checks and builds on the driver before its query starts, in either mode.

The member-less group metadata its transactions commit with, the input's partitions and their
committed offsets (once the topics and the group's scope pass the checks), and the plan of the
driver's own transactions outside a batch (the offset keeper's). The micro-batch sink
(streaming/eos_sink.py) and the real-time writer's driver side (streaming/realtime.py) share them.
"""

from __future__ import annotations

from conf.client_log import CLIENT_LOG
from conf.failures import EnvironmentFailure
from conf.stream_settings import StreamSettings
from streaming.sink_group import (CommittedOffset, SinkPreconditionError, auto_scope, check_scope,
                                  read_committed_offsets)
from streaming.sink_task import run_transaction
from streaming.task_plan import KEEP_COMMITTED, TaskPlan, transactional_id


def _check_dead_letter_topic(client, settings: StreamSettings) -> None:
    """Refuse a sink whose dead-letter topic is missing or hidden, before any batch.

    Its transactions write poison records there, and the brokers create no topic on demand, so
    the first poison record would hold its transaction until the producer timed out. `eosbench
    stream` creates the topic when the principal may; `spark-submit streaming/job.py` asks first.
    """
    found = client.list_topics(settings.dead_letter, timeout=30).topics.get(settings.dead_letter)
    if found is None or found.error is not None:
        raise EnvironmentFailure(
            f"dead-letter topic {settings.dead_letter!r} is missing or hidden from this principal; the sink writes"
            " poison records to it inside its transactions. Create it with the output's partition count, or have"
            f" an admin run `eosbench acls --app-id {settings.app_id} --principal User:<you> --input-topic"
            f" {settings.input_topic} --output-topic {settings.output_topic}"
            f"{f' --dead-letter-topic {settings.dead_letter_topic}' if settings.dead_letter_topic else ''}"
            " --apply --command-config ADMIN.properties`, which creates it with the pipeline's ACLs")


def _check_output_partitions(client, settings: StreamSettings, input_partitions: int) -> None:
    """Refuse `--output-partitioning input` when the output or dead-letter topic has fewer partitions than the input."""
    for topic in (settings.output_topic, settings.dead_letter):
        found = client.list_topics(topic, timeout=30).topics.get(topic)
        count = len(found.partitions) if found is not None and found.error is None else 0
        if count < input_partitions:
            raise SinkPreconditionError(
                f"--output-partitioning input sends each record to the partition numbered as its input's, but"
                f" {topic!r} has {count} partitions for {settings.input_topic!r}'s {input_partitions}; add"
                f" partitions to it (kafka-topics --alter --partitions {input_partitions}) or use"
                " --output-partitioning key")


def _memberless_consumer(settings: StreamSettings):
    """A consumer of the sink's group that never joins it: its metadata is member-less (generation -1, no member id)."""
    from confluent_kafka import Consumer

    return Consumer(settings.connection.librdkafka(**{
        "group.id": settings.group_id, "isolation.level": "read_committed", "enable.auto.commit": False}),
        logger=CLIENT_LOG)


def resolved_scope(settings: StreamSettings) -> tuple[StreamSettings, str | None]:
    """The settings with `--txn-scope auto` made the scope it chooses, and why (None where the scope was named)."""
    if settings.txn_scope != "auto":
        return settings, None
    if settings.sink != "kafka-eos":  # only the transactional sink has a scope
        return settings.model_copy(update={"txn_scope": "partition"}), None
    consumer = _memberless_consumer(settings)
    try:
        topic = settings.input_topic
        partitions = sorted(consumer.list_topics(topic, timeout=30).topics[topic].partitions)
        committed = read_committed_offsets(consumer, topic, partitions, settings.group_id)
    finally:
        consumer.close()
    scope, why = auto_scope(committed, settings.group_id, settings.realtime_interval is not None)
    if settings.source == "grouped" and scope != "slot":
        raise SinkPreconditionError(f"--txn-scope auto chose {scope} scope ({why}), which --source grouped cannot run"
                                    " (a grouped task holds several Kafka partitions); use --source spark, or a new"
                                    " --app-id for slot scope")
    if settings.txn_slots is not None and scope != "slot":
        raise SinkPreconditionError(f"--txn-slots applies to slot scope only, and --txn-scope auto chose {scope} scope"
                                    f" ({why})")
    return settings.model_copy(update={"txn_scope": scope}), f"txn scope: {scope} ({why})"


def checked_group(settings: StreamSettings) -> tuple[object, list[int], dict[int, CommittedOffset]]:
    """The sink group's member-less metadata, the input's partitions and their committed offsets, once the
    topics and the group's scope pass the checks every transactional sink makes before it writes."""
    memberless = _memberless_consumer(settings)  # its group metadata is built once and shipped
    try:
        topic = settings.input_topic
        partitions = sorted(memberless.list_topics(topic, timeout=30).topics[topic].partitions)
        _check_dead_letter_topic(memberless, settings)
        if settings.output_partitioning == "input":
            _check_output_partitions(memberless, settings, len(partitions))
        committed = read_committed_offsets(memberless, topic, partitions, settings.group_id)
        check_scope(committed, topic, settings.group_id, settings.txn_scope)
        return memberless.consumer_group_metadata(), partitions, committed
    finally:
        memberless.close()


def driver_plan(settings: StreamSettings, group_metadata, partitions: list[int], slots: int = 0,
                slot_ids: int = 0, run: str = "", runs_before: frozenset[str] = frozenset()) -> TaskPlan:
    """The plan of a driver's transactions outside a batch (the offset keeper's, the slot fence)."""
    return TaskPlan(
        app_id=settings.app_id, output_topic=settings.output_topic, dead_letter_topic=settings.dead_letter,
        process=settings.process, producer_config=settings.producer_config(), group_metadata=group_metadata,
        end_offsets={}, max_retries=settings.max_retries, pre_register=False, batch_id=-1, fault=None,
        txn_scope=settings.txn_scope, input_partitions=max(partitions, default=-1) + 1, txn_slots=slots,
        output_partitioning=settings.output_partitioning, slot_ids=slot_ids, run=run, runs_before=runs_before)


def recommit_partitions(plan: TaskPlan, topic: str, partitions: list[int]) -> list[int]:
    """Partition scope's keeper refresh: each partition's offset re-committed unchanged by T(p); return those committed."""
    rows = [run_transaction(plan, transactional_id(plan.app_id, topic, p), [], {(topic, p): KEEP_COMMITTED})
            for p in partitions]
    return sorted(p for row in rows for p in row["committed_partitions"])
