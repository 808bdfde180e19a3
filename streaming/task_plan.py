"""What the driver ships to a transactional sink task, and how the sink's failures are named.

`TaskPlan` travels in each task's closure (it must pickle); `transactional_id` is T(p) of
partition scope, `slot_transactional_id` T(k) of slot scope; KEEP_COMMITTED marks an offset to re-commit unchanged (the offset keeper's
refresh). The protocol that uses them is `streaming/sink/task.py`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from conf.failures import RunFailed

# In offsets_to_commit: commit the offset Step 2 reads, unchanged (the keeper's refresh).
KEEP_COMMITTED = None


class ExactlyOnceViolation(RunFailed):
    """An invariant of the protocol broke; the job stops rather than write twice or lose."""


class SinkTaskFailed(RuntimeError):
    """A task ran out of retries; Spark retries the whole task."""


@dataclass(frozen=True)
class TaskPlan:
    """Everything a task needs, shipped from the driver in the task's closure (picklable)."""

    app_id: str
    output_topic: str
    dead_letter_topic: str
    process: str
    producer_config: dict
    group_metadata: object
    end_offsets: dict
    max_retries: int
    pre_register: bool
    batch_id: int
    fault: str | None
    txn_scope: str = "partition"
    start_offsets: dict = field(default_factory=dict)  # each partition's range start in this batch
    # (topic, partition, from, until) of each Spark partition, as Spark planned it; None if unknown
    planned_ranges: tuple | None = None
    # A batch the previous run may have committed before it died: Spark runs it again at a restart.
    replayed: bool = False
    sink_client: str = "librdkafka"  # or "kafka-python", the client pre-registration needs
    input_partitions: int = 0  # the input's partition count, recorded in each commit's offset metadata
    # Slot scope: per slot k (the coalesced Spark partition k), the input partitions it holds.
    slot_partitions: tuple[tuple[int, ...], ...] = ()
    txn_slots: int = 0  # slot scope's G, recorded with each commit's slot
    # The driver run that claimed the pipeline (streaming/owner.py), recorded with each commit: a writer stops
    # after a new producer's init unless the owner record names it. Empty only in a plan made without a driver's
    # claim (a test's, a bench's own transactions), which checks nothing.
    run: str = ""
    output_partitioning: str = "key"  # or "input": a record goes to the output partition numbered as its input's
    # Per transactional id, the writer token of its latest init as the driver last heard (streaming/sink/clients.py):
    # a worker's cached producer with another token is fenced already and is replaced before the attempt.
    writers: dict = field(default_factory=dict)


def transactional_id(app_id: str, topic: str, partition: int) -> str:
    """T(p) for partition scope."""
    return f"{app_id}.{topic}.{partition}"


def slot_transactional_id(app_id: str, slot: int) -> str:
    """T(k) for slot scope."""
    return f"{app_id}.slot.{slot}"
