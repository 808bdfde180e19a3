"""What every transactional sink reads, checks and builds on the driver before its query starts, in either mode.

A start is one read, then decisions (docs/design.md, "A start: one read, then decisions"):
`read_start` reads the input's partitions, the group's committed offsets, the owner record, the
output and dead-letter topics' partition counts, whether they were ever written, and the input
partitions without an offset that hold records, with one member-less consumer of the group and one
reader of the owner record; what the output's records prove (`Evidence`) is read only if a
decision asks, and then once. Every decision is a function of that value: the scope `auto`
chooses (`resolved_scope`), the refusals (`check_start`), the ids to fence (`writers_left`) and the
starting offsets (streaming/source/starting_offsets.py). Then the driver run's claim of the
pipeline (`claim`: the owner record and the fence, streaming/owner.py), and the plan of the
driver's own transactions outside a batch (the offset keeper's). The micro-batch sink
(streaming/sink/driver.py) and the real-time writer's driver side (streaming/realtime/writer.py)
share them.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from conf.client_log import CLIENT_LOG
from conf.failures import EnvironmentFailure
from conf.stream_settings import StreamSettings
from conf.watermarks import watermark_offsets
from streaming.sink import clients
from streaming.verify.evidence import Evidence, read_evidence, settle_timeout_s
from streaming.group import (CommittedOffset, SinkPreconditionError, auto_scope, check_scope, new_run,
                                  read_committed_offsets)
from streaming.owner import Owner, Writers, owner_group, read_owner, write_owner, writers_from_tags
from streaming.sink.task import SINK_LOG, run_transaction
from streaming.source.starting_offsets import ever_written
from streaming.task_plan import KEEP_COMMITTED, TaskPlan, transactional_id


@dataclass
class StartRead:
    """What a transactional sink's start reads of Kafka, once, before it decides anything (module docstring)."""

    group_metadata: object  # the member-less consumer's, shipped in every plan
    partitions: list[int]  # the input's
    committed: dict[int, CommittedOffset]  # the group's, with their tags
    owner: Owner | None  # the owner record, or None where no run wrote one
    topic_partitions: dict[str, int | None]  # the output's and the dead-letter topic's; None: missing or hidden
    holding: dict[int, tuple[int, int]]  # input partitions without an offset that hold records: (log start, end)
    written: bool  # whether the output or the dead-letter topic ever held a record or a marker
    read_evidence: Callable[[], Evidence] = field(repr=False, default=lambda: Evidence())
    _evidence: Evidence | None = field(default=None, repr=False)

    def evidence(self) -> Evidence | None:
        """What the output's records prove, read on the first ask and kept; None where it was never written."""
        if not self.written:
            return None
        if self._evidence is None:
            self._evidence = self.read_evidence()
        return self._evidence

    def untagged(self) -> bool:
        """Whether the group holds offsets and none of them names a scope (a reset, or an eosbench older than the tags)."""
        return any(c.offset >= 0 for c in self.committed.values()) and all(c.scope is None for c in self.committed.values())


def read_start(settings: StreamSettings) -> StartRead:
    """Read what every decision of a transactional sink's start needs, with two consumers, closed before it returns."""
    memberless = _memberless_consumer(settings)  # its group metadata is built once and shipped
    owner_reader = _owner_consumer(settings)
    topic, written_topics = settings.input_topic, [settings.output_topic, settings.dead_letter]
    try:
        partitions = sorted(memberless.list_topics(topic, timeout=30).topics[topic].partitions)
        listed = memberless.list_topics(timeout=30).topics
        found = {name: listed.get(name) for name in written_topics}
        topic_partitions = {name: len(meta.partitions) if meta is not None and meta.error is None else None
                            for name, meta in found.items()}
        committed = read_committed_offsets(memberless, topic, partitions, settings.group_id)
        owner = read_owner(owner_reader, settings.dead_letter, settings.app_id)
        bounds = {p: watermark_offsets(memberless, topic, p, timeout_s=30) for p, c in committed.items() if c.offset < 0}
        written = ever_written(memberless, written_topics)
        group_metadata = memberless.consumer_group_metadata()
    finally:
        memberless.close()
        owner_reader.close()

    def evidence() -> Evidence:
        print(f"eosbench: reading {', '.join(written_topics)} for the records this pipeline delivered", file=sys.stderr,
              flush=True)
        return read_evidence(settings.connection, topic, written_topics, settings.app_id, settle_timeout_s(settings),
                             on_progress=lambda line: print(line, file=sys.stderr, flush=True))

    return StartRead(group_metadata, partitions, committed, owner, topic_partitions,
                     {p: (low, high) for p, (low, high) in bounds.items() if high > low}, written, evidence)


def check_start(settings: StreamSettings, start: StartRead) -> None:
    """Refuse, in one line, a start whose topics or group the sink cannot write exactly-once through."""
    if start.topic_partitions.get(settings.dead_letter) is None:
        # Its transactions write poison records there, and the brokers create no topic on demand, so
        # the first poison record would hold its transaction until the producer timed out. `eosbench
        # stream` creates the topic when the principal may; `spark-submit streaming/job.py` asks first.
        raise EnvironmentFailure(
            f"dead-letter topic {settings.dead_letter!r} is missing or hidden from this principal; the sink writes"
            " poison records to it inside its transactions. Create it with the output's partition count, or have"
            f" an admin run `eosbench acls --app-id {settings.app_id} --principal User:<you> --input-topic"
            f" {settings.input_topic} --output-topic {settings.output_topic}"
            f"{f' --dead-letter-topic {settings.dead_letter_topic}' if settings.dead_letter_topic else ''}"
            " --apply --command-config ADMIN.properties`, which creates it with the pipeline's ACLs")
    if settings.output_partitioning == "input":
        for topic in (settings.output_topic, settings.dead_letter):
            count = start.topic_partitions.get(topic) or 0
            if count < len(start.partitions):
                raise SinkPreconditionError(
                    f"--output-partitioning input sends each record to the partition numbered as its input's, but"
                    f" {topic!r} has {count} partitions for {settings.input_topic!r}'s {len(start.partitions)}; add"
                    f" partitions to it (kafka-topics --alter --partitions {len(start.partitions)}) or use"
                    " --output-partitioning key")
    check_scope(start.committed, settings.input_topic, settings.group_id, settings.txn_scope)


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


def resolved_scope(settings: StreamSettings, start: StartRead | None) -> tuple[StreamSettings, str | None]:
    """The settings with `--txn-scope auto` made the scope it chooses, and why (None where the scope was named).

    `start` is the transactional sink's read (None for the other sinks, which have no scope)."""
    if settings.txn_scope != "auto":
        return settings, None
    if settings.sink != "kafka-eos":  # only the transactional sink has a scope
        return settings.model_copy(update={"txn_scope": "partition"}), None
    output_scope = None
    if start.owner is None and start.untagged():  # reset offsets: the output's records tell which scope wrote them
        evidence = start.evidence()
        output_scope = evidence.newest_scope() if evidence else None
    scope, why = auto_scope(start.committed, settings.group_id, settings.realtime_interval is not None,
                            start.owner.scope if start.owner else None, output_scope)
    if settings.source == "grouped" and scope == "partition":
        raise SinkPreconditionError(f"--txn-scope auto chose partition scope ({why}), which --source grouped cannot run"
                                    " (a grouped task holds several Kafka partitions); use --source spark, or a new"
                                    " --app-id for slot scope")
    if settings.txn_slots is not None and scope != "slot":
        raise SinkPreconditionError(f"--txn-slots applies to slot scope only, and --txn-scope auto chose {scope} scope"
                                    f" ({why})")
    return settings.model_copy(update={"txn_scope": scope}), f"txn scope: {scope} ({why})"


def driver_plan(settings: StreamSettings, group_metadata, partitions: list[int], slots: int = 0,
                run: str = "") -> TaskPlan:
    """The plan of a driver's transactions outside a batch (the offset keeper's, the fences)."""
    return TaskPlan(
        app_id=settings.app_id, output_topic=settings.output_topic, dead_letter_topic=settings.dead_letter,
        process=settings.process, producer_config=settings.producer_config(), group_metadata=group_metadata,
        end_offsets={}, max_retries=settings.max_retries, pre_register=False, batch_id=-1, fault=None,
        txn_scope=settings.txn_scope, input_partitions=max(partitions, default=-1) + 1, txn_slots=slots,
        output_partitioning=settings.output_partitioning, run=run)


def writers_left(start: StartRead) -> Writers:
    """The transactional ids that runs before this one may have left writers of.

    The owner record names them. A pipeline without one (last run by a release before it, or
    idle past the offsets' retention) is judged by its offsets' tags, and where those do not say
    (no offsets, or offsets without a tag) by the records it left in its output: every partition,
    slot and batch id an `eos.txn` names. Offsets without a tag beside an output this pipeline never
    wrote are an eosbench's older than the tags, which ran partition scope alone.
    """
    if start.owner is not None:
        return start.owner.fence
    partitions = len(start.partitions)
    writers = writers_from_tags(start.committed, partitions)
    if start.untagged() or not any(c.offset >= 0 for c in start.committed.values()):
        evidence = start.evidence()
        if evidence is not None:
            found = evidence.writers
            writers |= found | Writers(partitions=partitions if found.partitions else 0)
        elif start.untagged():
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


def claim(settings: StreamSettings, start: StartRead, slots: int = 0) -> Claim:
    """Claim the pipeline for a new driver run, before its first write (streaming/owner.py has why it is safe).

    Write the owner record with this run, the ids the runs before may have left writers of (as
    the start read it) and this run's own; fence those ids, but for the family this run's own
    tasks fence before they read an offset (partition scope's T(p), batch scope's id); write it
    with this run's ids alone. A claim that dies half way leaves the ids to fence in the record
    for the next.
    """
    run, scope, partitions = new_run(), settings.txn_scope, start.partitions
    own = Writers.of(scope, len(partitions), slots)
    left = writers_left(start)
    writer = _owner_consumer(settings)
    try:
        write_owner(writer, settings.dead_letter, settings.app_id, Owner(run, scope, left | own))
        fencing = left | own if scope == "slot" else left.without(scope)
        started = time.perf_counter()
        clients.fence(driver_plan(settings, start.group_metadata, partitions, slots, run),
                      fencing.txn_ids(settings.app_id, settings.input_topic))
        seconds = time.perf_counter() - started
        write_owner(writer, settings.dead_letter, settings.app_id, Owner(run, scope, own))
    finally:
        writer.close()
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
