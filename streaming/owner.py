"""The pipeline's owner record: the one driver run whose writers may commit, and the transactional ids that the runs
before it may have left writers of.

A transactional id fences only the producers of that id, and one input partition's offset is
committed under several ids over a pipeline's life: slot scope's T(k) for whichever slot holds
the partition in a batch, and another scope's ids after a change of scope. A writer of an older
run (an executor that outlived its driver, frozen or cut off) holds one of them, and a fence
(`init_transactions` on the id) reaches only the producers that exist when it runs: a producer
made after it is fenced by nothing. So a driver claims the pipeline before it writes anything
(`streaming/sink/start.py: claim`):

1. it reads the owner record, which names the run before it and the ids that run, and any run
   whose claim did not finish, may have left writers of;
2. it writes the record with its own run, those ids and its own;
3. it fences those ids, except the family its own tasks take up again anyway (partition scope's
   T(p), each of which its task's init fences before it reads the partition's offset; batch
   scope's one id);
4. it writes the record again with its own ids alone.

Every writer, after each new producer's init and before it reads the offsets it will commit
over, reads the record and stops unless it names its own run (`check_owner`). A writer of an
older run made its producer either before step 3, and that fence ended it, or after step 2, and
it reads a newer run in the record: the two cases overlap, so no window is left. No offset is
written back at the start, so nothing an older writer committed is moved back.

The record is the offset metadata of the group `<app-id>.owner`, which has no members and to
which no transaction commits, on partition 0 of the dead-letter topic (every principal that runs
the sink reads it for `verify`), at that partition's end offset when written, so that a lag
exporter finds nothing to alert on. The driver's offset keeper writes it again before Kafka
would expire it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from conf.failures import authorization_failure
from streaming.group import SCOPES, CommittedOffset, SinkPreconditionError, committed_topic_partitions
from streaming.task_plan import slot_transactional_id, transactional_id

OWNER_GROUP_SUFFIX = ".owner"
_PREFIX = "eosbench owner "
# Each field ends in `;`, as the offset tags' do (streaming/group.py: metadata may come back with stray bytes).
_OWNER_TAG = re.compile(r"eosbench owner run=([0-9a-f]{16});scope=([a-z]+);partitions=(\d+);slots=(\d+);batch=([01]);")


def owner_group(app_id: str) -> str:
    """The group whose offset metadata is the pipeline's owner record."""
    return f"{app_id}{OWNER_GROUP_SUFFIX}"


@dataclass(frozen=True)
class Writers:
    """Transactional ids of a pipeline that writers may hold: T(p) for p < partitions, T(k) for k < slots, and
    `<app-id>.batch`."""

    partitions: int = 0
    slots: int = 0
    batch: bool = False

    @staticmethod
    def of(scope: str, partitions: int, slots: int) -> Writers:
        """The ids a run of `scope` uses: T(p) of every input partition, its G slot ids, or the batch id."""
        return {"partition": Writers(partitions=partitions), "slot": Writers(slots=slots),
                "batch": Writers(batch=True)}[scope]

    def __or__(self, other: Writers) -> Writers:
        return Writers(max(self.partitions, other.partitions), max(self.slots, other.slots), self.batch or other.batch)

    def __bool__(self) -> bool:
        return bool(self.partitions or self.slots or self.batch)

    def without(self, scope: str) -> Writers:
        """These ids less the family of `scope`."""
        return Writers(0 if scope == "partition" else self.partitions, 0 if scope == "slot" else self.slots,
                       self.batch and scope != "batch")

    def txn_ids(self, app_id: str, topic: str) -> list[str]:
        """Every transactional id these writers name; `topic` is the input topic of partition scope's ids."""
        return ([transactional_id(app_id, topic, p) for p in range(self.partitions)]
                + [slot_transactional_id(app_id, k) for k in range(self.slots)]
                + ([f"{app_id}.batch"] if self.batch else []))

    def describe(self) -> str:
        """The ids in words, for a log line."""
        parts = ([f"T(p) for {self.partitions} partitions"] if self.partitions else []) \
            + ([f"slot ids 0..{self.slots - 1}"] if self.slots else []) + (["the batch id"] if self.batch else [])
        return ", ".join(parts) or "none"


@dataclass(frozen=True)
class Owner:
    """The owner record: the run that claimed the pipeline last, its scope, and the ids the next claim must fence."""

    run: str
    scope: str
    fence: Writers


def owner_tag(owner: Owner) -> str:
    """The owner record as offset metadata."""
    return (f"{_PREFIX}run={owner.run};scope={owner.scope};partitions={owner.fence.partitions};"
            f"slots={owner.fence.slots};batch={int(owner.fence.batch)};")


def parse_owner(metadata: str | None) -> Owner | None:
    """The owner record in offset metadata, or None where it holds none."""
    found = _OWNER_TAG.match(metadata or "")
    if found is None or found.group(2) not in SCOPES:
        return None
    return Owner(found.group(1), found.group(2), Writers(int(found.group(3)), int(found.group(4)), found.group(5) == "1"))


def read_owner(consumer, dead_letter_topic: str, app_id: str, timeout_s: float = 60.0) -> Owner | None:
    """The pipeline's owner record, read with `consumer` (whose group is `owner_group(app_id)`); None where there is none."""
    answer = committed_topic_partitions(consumer, dead_letter_topic, [0], owner_group(app_id), timeout_s)
    try:
        return parse_owner(answer[0].metadata)
    except UnicodeDecodeError:  # not text: not an owner record
        return None


def write_owner(consumer, dead_letter_topic: str, app_id: str, owner: Owner) -> None:
    """Write the owner record with `consumer` (of group `owner_group(app_id)`, never joined), at the topic's end."""
    from confluent_kafka import KafkaError, KafkaException, TopicPartition

    from conf.watermarks import watermark_offsets

    end = watermark_offsets(consumer, dead_letter_topic, 0, timeout_s=30)[1]
    try:
        consumer.commit(offsets=[TopicPartition(dead_letter_topic, 0, max(0, end), metadata=owner_tag(owner))],
                        asynchronous=False)
    except KafkaException as exc:
        error = exc.args[0]
        denied = authorization_failure(error, dead_letter_topic if error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
                                       else owner_group(app_id))
        raise denied or exc from None


def check_owner(owner: Owner | None, run: str, app_id: str) -> None:
    """A writer's check after its producer's init: refuse to go on unless the owner record names its own run."""
    if owner is not None and owner.run == run:
        return
    seen = "names no run (it expired or was deleted)" if owner is None else f"names run {owner.run}"
    raise SinkPreconditionError(
        f"the owner record of pipeline {app_id!r} (group {owner_group(app_id)!r}) {seen}, not this writer's run {run}:"
        " a newer driver has claimed the pipeline, so this writer stops without committing. If two drivers run this"
        " app id at once, stop one of them")


def writers_from_tags(committed: dict[int, CommittedOffset], partitions: int) -> Writers:
    """The ids that the runs whose commits the group holds may have used, as their tags name them.

    A slot tag of a release before the owner record names every slot id any run had used (`ids=`).
    Offsets without a tag name nothing: the caller asks the output.
    """
    writers = Writers()
    for c in committed.values():
        if c.scope == "slot":
            writers |= Writers(slots=max(c.slot_ids or 0, *(c.slot or (0, 0))))
        elif c.scope is not None:
            writers |= Writers.of(c.scope, max(partitions, c.partitions or 0), 0)
    return writers
