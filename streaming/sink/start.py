"""What every transactional sink checks and builds on the driver before its query starts, in either mode.

The member-less group metadata its transactions commit with, the input's partitions and their
committed offsets (once the topics and the group's scope pass the checks), the driver run's claim
of the pipeline (`claim`: the owner record and the fence, streaming/owner.py), and the plan
of the driver's own transactions outside a batch (the offset keeper's). The micro-batch sink
(streaming/sink/driver.py) and the real-time writer's driver side (streaming/realtime/writer.py) share them.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass

from conf.client_log import CLIENT_LOG
from conf.failures import EnvironmentFailure
from conf.stream_settings import StreamSettings
from streaming.sink import clients
from streaming.verify.evidence import Evidence, read_evidence, settle_timeout_s
from streaming.group import (CommittedOffset, SinkPreconditionError, auto_scope, check_scope, new_run,
                                  read_committed_offsets)
from streaming.owner import Owner, Writers, owner_group, read_owner, write_owner, writers_from_tags
from streaming.sink.task import SINK_LOG, run_transaction
from streaming.source.starting_offsets import ever_written
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


def _owner_consumer(settings: StreamSettings):
    """A consumer of the owner record's group that never joins it."""
    from confluent_kafka import Consumer

    return Consumer(settings.connection.librdkafka(**{"group.id": owner_group(settings.app_id),
                                                       "enable.auto.commit": False}), logger=CLIENT_LOG)


def _output_evidence(settings: StreamSettings) -> Evidence | None:
    """What the output and dead-letter topics hold of this pipeline, read whole; None where they were never written."""
    topics = [settings.output_topic, settings.dead_letter]
    consumer = _owner_consumer(settings)
    try:
        if not ever_written(consumer, topics):
            return None
    finally:
        consumer.close()
    print(f"eosbench: the group {settings.group_id!r} and the owner record do not say which transactional ids wrote"
          f" this pipeline's records: reading {', '.join(topics)} for them", file=sys.stderr, flush=True)
    return read_evidence(settings.connection, settings.input_topic, topics, settings.app_id, settle_timeout_s(settings),
                         on_progress=lambda line: print(line, file=sys.stderr, flush=True))


def _untagged(committed: dict[int, CommittedOffset]) -> bool:
    """Whether the group holds offsets and none of them names a scope (a reset, or an eosbench older than the tags)."""
    return any(c.offset >= 0 for c in committed.values()) and all(c.scope is None for c in committed.values())


def resolved_scope(settings: StreamSettings) -> tuple[StreamSettings, str | None]:
    """The settings with `--txn-scope auto` made the scope it chooses, and why (None where the scope was named)."""
    if settings.txn_scope != "auto":
        return settings, None
    if settings.sink != "kafka-eos":  # only the transactional sink has a scope
        return settings.model_copy(update={"txn_scope": "partition"}), None
    consumer = _memberless_consumer(settings)
    owner_reader = _owner_consumer(settings)
    try:
        topic = settings.input_topic
        partitions = sorted(consumer.list_topics(topic, timeout=30).topics[topic].partitions)
        committed = read_committed_offsets(consumer, topic, partitions, settings.group_id)
        owner = read_owner(owner_reader, settings.dead_letter, settings.app_id)
    finally:
        consumer.close()
        owner_reader.close()
    output_scope = None
    if owner is None and _untagged(committed):  # reset offsets: the output's records tell which scope wrote them
        evidence = _output_evidence(settings)
        output_scope = evidence.newest_scope() if evidence else None
    scope, why = auto_scope(committed, settings.group_id, settings.realtime_interval is not None,
                            owner.scope if owner else None, output_scope)
    if settings.source == "grouped" and scope == "partition":
        raise SinkPreconditionError(f"--txn-scope auto chose partition scope ({why}), which --source grouped cannot run"
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
                run: str = "") -> TaskPlan:
    """The plan of a driver's transactions outside a batch (the offset keeper's, the fences)."""
    return TaskPlan(
        app_id=settings.app_id, output_topic=settings.output_topic, dead_letter_topic=settings.dead_letter,
        process=settings.process, producer_config=settings.producer_config(), group_metadata=group_metadata,
        end_offsets={}, max_retries=settings.max_retries, pre_register=False, batch_id=-1, fault=None,
        txn_scope=settings.txn_scope, input_partitions=max(partitions, default=-1) + 1, txn_slots=slots,
        output_partitioning=settings.output_partitioning, run=run)


def writers_left(settings: StreamSettings, owner: Owner | None, committed: dict[int, CommittedOffset],
                 partitions: int) -> Writers:
    """The transactional ids that runs before this one may have left writers of.

    The owner record names them. A pipeline without one (last run by a release before it, or
    idle past the offsets' retention) is judged by its offsets' tags, and where those do not say
    (no offsets, or offsets without a tag) by the records it left in its output: every partition,
    slot and batch id an `eos.txn` names. Offsets without a tag beside an output this pipeline never
    wrote are an eosbench's older than the tags, which ran partition scope alone.
    """
    if owner is not None:
        return owner.fence
    writers = writers_from_tags(committed, partitions)
    if _untagged(committed) or not any(c.offset >= 0 for c in committed.values()):
        evidence = _output_evidence(settings)
        if evidence is not None:
            found = evidence.writers
            writers |= found | Writers(partitions=partitions if found.partitions else 0)
        elif _untagged(committed):
            writers |= Writers(partitions=partitions)
    return writers


@dataclass
class Claim:
    """A driver run's claim of its pipeline: its run, its own ids, and what it fenced."""

    run: str
    scope: str
    own: Writers
    fenced: Writers
    seconds: float

    def renew(self, settings: StreamSettings) -> None:
        """Write the owner record again, before Kafka expires it, unless a newer run has claimed the pipeline since."""
        reader = _owner_consumer(settings)
        try:
            owner = read_owner(reader, settings.dead_letter, settings.app_id)
            if owner is not None and owner.run != self.run:
                SINK_LOG.warning("the owner record of %s names run %s, not this driver's run %s: a newer driver has"
                                 " claimed the pipeline, and this driver's writers stop at their next producer",
                                 settings.app_id, owner.run, self.run)
                return
            write_owner(reader, settings.dead_letter, settings.app_id, Owner(self.run, self.scope, self.own))
        finally:
            reader.close()


def claim(settings: StreamSettings, group_metadata, partitions: list[int], committed: dict[int, CommittedOffset],
          slots: int = 0) -> Claim:
    """Claim the pipeline for a new driver run, before its first write (streaming/owner.py has why it is safe).

    Read the owner record; write it with this run, the ids the runs before may have left writers
    of and this run's own; fence those ids, but for the family this run's own tasks fence before
    they read an offset (partition scope's T(p), batch scope's id); write it with this run's ids
    alone. A claim that dies half way leaves the ids to fence in the record for the next.
    """
    run, scope = new_run(), settings.txn_scope
    own = Writers.of(scope, len(partitions), slots)
    reader = _owner_consumer(settings)
    try:
        left = writers_left(settings, read_owner(reader, settings.dead_letter, settings.app_id), committed,
                            len(partitions))
        write_owner(reader, settings.dead_letter, settings.app_id, Owner(run, scope, left | own))
        fencing = left | own if scope == "slot" else left.without(scope)
        started = time.perf_counter()
        clients.fence(driver_plan(settings, group_metadata, partitions, slots, run),
                      fencing.txn_ids(settings.app_id, settings.input_topic))
        seconds = time.perf_counter() - started
        write_owner(reader, settings.dead_letter, settings.app_id, Owner(run, scope, own))
    finally:
        reader.close()
    SINK_LOG.info("run %s claimed pipeline %s (%s scope): fenced %s in %.2f s", run, settings.app_id, scope,
                  fencing.describe(), seconds)
    return Claim(run, scope, own, fencing, seconds)


def partition_recommits(plan: TaskPlan, topic: str, partitions: list[int]) -> list[dict]:
    """Partition scope's keeper refresh: each partition's offset re-committed unchanged by T(p); the transactions' rows."""
    return [run_transaction(plan, transactional_id(plan.app_id, topic, p), [], {(topic, p): KEEP_COMMITTED})
            for p in partitions]


def recommit_partitions(plan: TaskPlan, topic: str, partitions: list[int]) -> list[int]:
    """partition_recommits' committed partitions."""
    return sorted(p for row in partition_recommits(plan, topic, partitions) for p in row["committed_partitions"])
