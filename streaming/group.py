"""The sink's consumer group: its committed offsets, the scope that wrote them, and how long they live.

The group `<app-id>` never has members; only the sink's transactions commit its offsets. Two
facts about such a group shape the sink:

- **Its offsets expire, one partition at a time.** Kafka's group coordinator treats a group that
  has no protocol type (a "simple" group) as a standalone committer and drops each partition's
  offset `offsets.retention.minutes` after that partition's last commit (Kafka 4.3,
  `ClassicGroup.offsetExpirationCondition`). The sink therefore re-commits the offsets of
  partitions no batch has committed lately (`OffsetKeeper`, below), and a query without a
  checkpoint refuses to guess where a partition that holds data but has no offset left off
  (`streaming/source/starting_offsets.py`).
- **Each commit says who made it.** Its metadata (`offset_tag`) names the scope, the input's
  partition count and a token of the attempt: a retry whose commit call failed tells by the token
  whether that commit landed, and a partition added after the last commit is told from one whose
  offset expired.
- **Two transaction scopes must never share it.** Partition scope commits with `T(p)`, slot
  scope with `<app-id>.slot.<k>`, batch scope with `<app-id>.batch`; none fences another. Every
  sink commit therefore carries offset metadata naming its scope, and a sink refuses a group
  whose offsets another scope wrote. A commit also names the driver run that made it
  (`run=<token>`), and a slot scope commit its slot and the slot count (`slot=<k>/<G>`), so that a
  driver knows which slot each partition was last committed by. Which transactional ids a run
  may have left writers of, and which run may write now, is the owner record's
  (`streaming/owner.py`), not the tag's: a tag is only as old as its partition's last commit.
"""

from __future__ import annotations

import logging
import math
import re
import secrets
import threading
import time
from dataclasses import dataclass

from conf.client_config import Connection, connection
from conf.failures import authorization_failure
from conf.settings import SettingsError

SCOPE_TAG_PREFIX = "eosbench txn-scope="
# The whole tag: `eosbench txn-scope=<scope>;partitions=<count>;token=<16 hex>;run=<16 hex>;` and, in slot
# scope, `slot=<k>/<G>;`. Each field ends in `;` because metadata may come back with stray bytes after
# it (see _tag_in). Tags of earlier releases are read too: without `run=`, and in slot scope
# `slot=<k>/<G>;ids=<N>;run=<16 hex>;` (N: the slot ids any run had used) or `slot=<k>/<G>;` alone.
_TAG = re.compile(r"eosbench txn-scope=([a-z]+);partitions=(\d+);token=([0-9a-f]{16});(?:run=([0-9a-f]{16});)?"
                  r"(?:slot=(\d+)/(\d+);(?:ids=(\d+);run=([0-9a-f]{16});)?)?")
# Each committed() call's bound: a refused coordinator lookup shows only between calls (_refused_lookup).
COMMITTED_CALL_S = 5.0
SCOPES = ("partition", "slot", "batch")
# Kafka's own default for offsets.retention.minutes (7 days), assumed when the brokers cannot be asked.
KAFKA_DEFAULT_OFFSETS_RETENTION_MINUTES = 10080
_SINK_LOG = logging.getLogger("eosbench.sink")  # the sink's log (streaming/sink/task.py gives it its handler)


class SinkPreconditionError(SettingsError):
    """The query or the group is such that the protocol cannot hold; nothing was committed."""


class OffsetsHeldOpen(Exception):
    """A stable read found offsets still unstable (held by an open transaction, as a rule) after its caller's wait."""


@dataclass(frozen=True)
class CommittedOffset:
    """One partition's committed offset in the sink's group, with what the commit's metadata tells of it."""

    offset: int  # -1 where the group has none
    scope: str | None  # None: no commit, or a commit that is not the sink's (a reset, an older eosbench)
    # The input's partition count when the commit was made: a partition numbered at or above it is
    # newer than that commit, so it has no offset of its own by right (None: an older tag).
    partitions: int | None = None
    token: str | None = None  # the attempt that made the commit (new_commit_token), None: an older tag
    slot: tuple[int, int] | None = None  # slot scope: (k, G), the slot that committed it and the slot count
    # Slot scope, in a tag of a release before the owner record: how many slot ids (0..N-1) any run had used.
    slot_ids: int | None = None
    run: str | None = None  # the driver run that made the commit, None: an older tag


def new_commit_token() -> str:
    """A token that names one commit attempt, so that a retry can tell whether that attempt's commit landed."""
    return secrets.token_hex(8)


def offset_tag(scope: str, partitions: int, token: str, run: str = "", slot: tuple[int, int] | None = None) -> str:
    """The offset metadata of a sink commit: its scope, the input's partition count, the attempt's token, the driver run
    (where one claimed the pipeline) and in slot scope its slot (k, G)."""
    tag = f"{SCOPE_TAG_PREFIX}{scope};partitions={partitions};token={token};" + (f"run={run};" if run else "")
    return tag if slot is None else f"{tag}slot={slot[0]}/{slot[1]};"


def new_run() -> str:
    """A token that names one driver run of a pipeline (the owner record's, and `run=` in its commits' metadata)."""
    return secrets.token_hex(8)


def _tag_in(tp) -> tuple:
    """(scope, partition count, token, slot, slot ids, run) of a committed offset's metadata, where it is a sink's tag.

    librdkafka copies a committed offset's metadata by its length, without a terminator, and
    confluent-kafka reads the copy as a C string; confluent-kafka writes its own terminator
    (so its tags read back whole), but metadata another client wrote can come back with bytes
    of whatever follows it in memory. So every field of the tag ends in `;`, an older tag (the
    scope alone) is matched by its known prefix, and metadata that is not even text is not a sink's.
    """
    try:
        metadata = tp.metadata or ""
    except UnicodeDecodeError:
        return None, None, None, None, None, None
    whole = _TAG.match(metadata)
    if whole and whole.group(1) in SCOPES:
        slot = (int(whole.group(5)), int(whole.group(6))) if whole.group(5) else None
        slot_ids = int(whole.group(7)) if whole.group(7) else None
        return whole.group(1), int(whole.group(2)), whole.group(3), slot, slot_ids, whole.group(4) or whole.group(8)
    rest = metadata[len(SCOPE_TAG_PREFIX):] if metadata.startswith(SCOPE_TAG_PREFIX) else ""
    return next((scope for scope in SCOPES if rest.startswith(scope)), None), None, None, None, None, None


def commit_run(tp) -> str | None:
    """The driver run named in a committed offset's metadata, or None (not a sink's commit, or an older tag)."""
    return _tag_in(tp)[5]


def read_committed_offsets(consumer, topic: str, partitions, group: str, timeout_s: float = 60.0,
                           held_s: float | None = None) -> dict[int, CommittedOffset]:
    """The committed offsets of `group` (the consumer's) (stable, when the consumer is read_committed) with their scopes."""
    answer = committed_topic_partitions(consumer, topic, partitions, group, timeout_s, held_s)
    return {tp.partition: CommittedOffset(tp.offset if tp.offset >= 0 else -1, *_tag_in(tp)) for tp in answer}


def committed_topic_partitions(consumer, topic: str, partitions, group: str, timeout_s: float = 60.0,
                               held_s: float | None = None) -> list:
    """The committed offsets of `group` (the consumer's) as Kafka's TopicPartitions, their metadata untouched.

    An error, for the whole request or for one partition, is never read as "no commit", which
    would send the sink back to the start of the partition: a passing one (the coordinator moving
    or loading, a pending transaction's offsets) is retried until the timeout, an authorization
    refusal names the group or topic, any other raises. With `held_s`, offsets still unstable
    after that many seconds raise OffsetsHeldOpen instead of waiting on.
    """
    from confluent_kafka import KafkaError, KafkaException, TopicPartition

    passing = {KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError.COORDINATOR_NOT_AVAILABLE,
               KafkaError.UNSTABLE_OFFSET_COMMIT, KafkaError.REQUEST_TIMED_OUT, KafkaError.NETWORK_EXCEPTION,
               KafkaError._TRANSPORT, KafkaError._TIMED_OUT}
    started = time.monotonic()
    deadline = started + timeout_s
    while True:
        try:
            answer = consumer.committed([TopicPartition(topic, p) for p in partitions],
                                        timeout=min(held_s or COMMITTED_CALL_S, max(1.0, deadline - time.monotonic())))
            error = next((tp.error for tp in answer if tp.error is not None), None)
        except KafkaException as exc:
            error = exc.args[0]
        if error is None:
            break
        if error.code() == KafkaError._TIMED_OUT:
            error = _refused_lookup(consumer) or error
        # librdkafka retries an unstable offset itself until the call's timeout, so a held offset
        # mostly shows as that timeout; a slow coordinator looks the same, and the caller's remedy
        # (a new producer) is safe for both.
        if error.code() in (KafkaError.UNSTABLE_OFFSET_COMMIT, KafkaError._TIMED_OUT) and held_s is not None \
                and time.monotonic() - started >= held_s:
            raise OffsetsHeldOpen(f"the offsets of {group!r} on {topic} are not stable after"
                                  f" {time.monotonic() - started:.1f} s ({error.str()})")
        if not (error.retriable() or error.code() in passing) or time.monotonic() >= deadline:
            denied = authorization_failure(error, topic if error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED else group)
            raise denied or KafkaException(error)
        time.sleep(0.2)
    return answer


def _refused_lookup(consumer):
    """A refused coordinator lookup waiting on the consumer's queue, if any.

    librdkafka reports a FindCoordinator that the group's ACLs refuse on the consumer's queue, not
    to committed(), which only times out; these consumers never assign partitions, so their queue
    holds errors alone.
    """
    from conf.failures import authorization_error_name

    while (message := consumer.poll(0)) is not None:
        error = message.error()
        if error is not None and authorization_error_name(error):
            return error
    return None


def auto_scope(committed: dict[int, CommittedOffset], group: str, realtime: bool, owner_scope: str | None = None,
               output_scope: str | None = None) -> tuple[str, str]:
    """`--txn-scope auto`: the scope to run and why, from the group's committed offsets, the scope of the run the owner
    record names (`streaming/owner.py`), and, for offsets no sink tagged, the scope of the newest records this
    pipeline left in its output.

    A group keeps the scope that wrote its offsets, since the sink refuses the other scopes' groups,
    and a pipeline keeps the scope of its last run where its offsets do not say (none committed,
    or reset by `kafka-consumer-groups --reset-offsets`, which writes no metadata). Offsets no sink
    tagged on a pipeline with neither an owner record nor records in its output (an eosbench
    older than both, which ran partition scope alone) keep partition scope. A new pipeline gets
    slot scope, whose transactions a batch do not grow with the partition count; real-time mode
    commits per partition only.
    """
    if realtime:
        return "partition", "auto: real-time mode commits per input partition"
    scopes = sorted({c.scope for c in committed.values() if c.scope is not None})
    if len(scopes) > 1:
        raise SinkPreconditionError(
            f"--txn-scope auto: group {group!r} holds offsets committed with several scopes ({', '.join(scopes)});"
            " name the scope with --txn-scope, or use a new --app-id")
    if scopes:
        return scopes[0], f"auto: group {group!r} holds offsets {scopes[0]} scope committed"
    if owner_scope is not None:
        return owner_scope, f"auto: the owner record of {group!r} names a run of {owner_scope} scope"
    if any(c.offset >= 0 for c in committed.values()):
        if output_scope is not None:
            return output_scope, (f"auto: group {group!r} holds offsets with no scope tag, and this pipeline's newest"
                                  f" output records are {output_scope} scope's")
        return "partition", f"auto: group {group!r} holds offsets with no scope tag, kept as partition scope"
    return "slot", f"auto: group {group!r} has no committed offsets"


def check_scope(committed: dict[int, CommittedOffset], topic: str, group: str, scope: str) -> None:
    """Refuse a group whose offsets the other transaction scope committed."""
    foreign = sorted(p for p, c in committed.items() if c.scope not in (None, scope))
    if foreign:
        other = committed[foreign[0]].scope
        raise SinkPreconditionError(
            f"group {group!r} holds offsets of {topic} committed with --txn-scope {other} (partitions"
            f" {', '.join(map(str, foreign))}); a --txn-scope {scope} sink would not fence that scope's"
            f" transactions. Keep --txn-scope {other}, or use a new --app-id")


def brokers_offsets_retention_minutes(bootstrap: str | Connection) -> int | None:
    """The brokers' offsets.retention.minutes (the smallest), or None if their configuration is not
    readable (a principal without DescribeConfigs on the cluster)."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

    from conf.client_log import CLIENT_LOG

    admin = AdminClient(connection(bootstrap).librdkafka(), logger=CLIENT_LOG)
    try:
        brokers = admin.list_topics(timeout=30).brokers
        futures = admin.describe_configs([ConfigResource(ResourceType.BROKER, str(b)) for b in brokers])
        return min(int(future.result(timeout=30)["offsets.retention.minutes"].value) for future in futures.values())
    # TimeoutError: a broker too busy to answer in 30 s (seen after 3,000 transactions a batch at
    # 1,000 partitions) is a broker whose setting is not readable, not a reason to stop the job.
    except (KafkaException, KeyError, ValueError, TimeoutError):
        return None


def offsets_retention_minutes(settings) -> int:
    """The retention the keeper works to: --offsets-retention-minutes, else the brokers', else Kafka's default (with a warning)."""
    retention = settings.offsets_retention_minutes or brokers_offsets_retention_minutes(settings.connection)
    if retention is None:
        retention = KAFKA_DEFAULT_OFFSETS_RETENTION_MINUTES
        _SINK_LOG.warning("offsets.retention.minutes: the brokers' configuration is not readable, assuming Kafka's"
                          " default %d; set --offsets-retention-minutes if the brokers expire offsets sooner", retention)
    return retention


class OffsetKeeper:
    """Re-commits the group offsets of partitions that no transaction committed lately, so none expires.

    The sink's group has no members, so the broker drops each partition's offset
    offsets.retention.minutes after its last commit (see this module's docstring). A partition
    that receives nothing, or a whole pipeline that runs no micro-batch, never commits again, and
    a later `--starting-offsets group` would start that partition over. This driver thread
    re-commits such a partition's offset once it has gone a third of the retention without a
    commit, in a transaction of the partition's own transactional id (`<app-id>.batch` in batch
    scope) with the sink's own Steps 1-5: the producer's init fences every other writer of that
    id, Step 2 reads c after it, and the transaction commits exactly c, so an offset never moves
    back. It holds the sink's lock, so it runs between batches and never fences a running task.

    `sink` is the TransactionalSink (or real-time mode's `RealTimeOffsets`): its `lock`,
    `settings`, `input_partitions()`, `recommit()` and `renew_owner()` (the owner record, a
    member-less group's offset too, written when the driver claimed the pipeline), and, where the
    driver does not see the commits, `commit_tokens()`, from which the keeper learns which
    partitions committed since it last looked (every commit writes a new token into the offset
    metadata).
    """

    def __init__(self, sink, retention_minutes: int):
        self.sink = sink
        self.refresh_after_s = retention_minutes * 60.0 / 3
        self.wake_s = min(self.refresh_after_s / 4, 60.0)
        self._last_commit: dict[int, float] = {}  # partition -> monotonic time; unknown until the first commit
        self._tokens: dict[int, str | None] = {}  # watching the group: each partition's commit token when last read
        self._owner_written = time.monotonic()  # the driver's claim wrote the owner record just now
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def committed(self, partitions) -> None:
        """Note that the group's offsets of these partitions were committed just now."""
        now = time.monotonic()
        for partition in partitions:
            self._last_commit[partition] = now

    def watch(self) -> None:
        """Note as committed now each partition whose commit token changed since the last look (a sink whose
        commits the driver does not see, real-time mode's, provides `commit_tokens()`).

        The first look only records the tokens: a token seen once says nothing of when it was
        committed, so such a partition stays unknown, and is refreshed at the first wake-up,
        until it changes.
        """
        tokens = self.sink.commit_tokens()
        self.committed(p for p, token in tokens.items() if p in self._tokens and self._tokens[p] != token)
        self._tokens.update(tokens)

    def start(self) -> None:
        """Start refreshing in the background."""
        if hasattr(self.sink, "commit_tokens"):
            self.watch()
        self._thread = threading.Thread(target=self._run, name="eosbench-offset-keeper", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop refreshing (waits for a refresh under way)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=120)

    def _run(self) -> None:
        while not self._stop.wait(self.wake_s):
            try:
                self.refresh()
            except Exception as exc:  # a failed refresh is retried at the next wake-up; the query goes on
                _SINK_LOG.warning("offset keeper: re-committing the group's offsets failed, will retry: %s",
                                  str(exc).splitlines()[0] if str(exc) else type(exc).__name__)

    def refresh(self) -> list[int]:
        """Re-commit the offsets of partitions not committed for a third of the retention, and the owner record once as
        old; return the partitions."""
        if time.monotonic() - self._owner_written >= self.refresh_after_s:
            self.sink.renew_owner()
            self._owner_written = time.monotonic()
        if hasattr(self.sink, "commit_tokens"):
            self.watch()
        with self.sink.lock:  # judged under the lock: the batch it waited for may have committed them all
            now = time.monotonic()
            stale = [p for p in self.sink.input_partitions()
                     if now - self._last_commit.get(p, -math.inf) >= self.refresh_after_s]
            if not stale:
                return []
            refreshed = self.sink.recommit(stale)
        self.committed(stale)  # those without an offset have nothing to refresh until a batch commits one
        if refreshed:
            _SINK_LOG.info("offset keeper: re-committed the group's offsets of %s partitions %s",
                           self.sink.settings.input_topic, refreshed)
        return refreshed
