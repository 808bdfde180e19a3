"""What Step 2 of a sink transaction refuses once it has read c: the checks that stop a write before it begins.

Each runs after the producer's init and the read of the group's offsets (streaming/sink/task.py),
so it judges offsets no other writer of the same id can move any more, and costs nothing where
the offsets are as they should be: a batch that would skip committed records (`check_no_skip`),
and a replayed batch whose offsets expired (`check_replay_has_its_offsets`). A writer of an older
driver run is stopped by the owner record (`streaming/owner.py: check_owner`).
"""

from __future__ import annotations

from streaming.sink import clients
from streaming.group import CommittedOffset, SinkPreconditionError
from streaming.task_plan import KEEP_COMMITTED, TaskPlan


def check_no_skip(plan: TaskPlan, topic: str, committed: dict[int, CommittedOffset], offsets_to_commit: dict) -> None:
    """Refuse to commit a batch that starts above the group's offset c where the input holds committed records in between.

    Every batch after the first starts where the one before ended, and the sink committed that
    end, so c equals the start; a start above c means the checkpoint's offset log ends a batch
    above what the sink committed for it (two drivers that wrote one batch id, a log edited or
    restored), and committing this batch's end would skip the records in between for good. c
    below the start is harmless where only aborted records and markers lie between (a real-time
    run's last commit stops at its last record). The first batch starts at the query's starting
    offsets, which `--starting-offsets latest` places above c by intent. Costs nothing where c is
    the start: c is Step 2's read.
    """
    if plan.batch_id <= 0:
        return
    for (_, p), end in offsets_to_commit.items():
        start = plan.start_offsets.get(p)
        c = committed[p].offset
        if end is KEEP_COMMITTED or start is None or not 0 <= c < start:
            continue
        first = clients.committed_record_between(plan, topic, p, c, start)
        if first is not None:
            raise SinkPreconditionError(
                f"batch {plan.batch_id} starts {topic}[{p}] at offset {start}, but group {plan.app_id!r} committed only up"
                f" to {c} and the input holds committed records in between (the first at {first}): the checkpoint's"
                f" offset log ends the batch before above what the sink committed for it (two drivers on one"
                f" checkpoint, or a log edited or restored), and going on would skip them. Delete the checkpoint and"
                f" start with --starting-offsets group, which resumes at the group's offsets")


def check_replay_has_its_offsets(plan: TaskPlan, topic: str, committed: dict[int, CommittedOffset],
                                  offsets_to_commit: dict) -> None:
    """Refuse a replayed batch whose partition's group offset is below the batch's start.

    The previous batch ended in the sink's commits, so every partition's offset was at least the
    batch's start. Lower (none at all, mostly) means the offset expired or was deleted while the
    job was down, and then nothing tells whether the run that died committed this batch's slice:
    Step 3 would write it again.
    """
    below = [p for (_, p), end in offsets_to_commit.items()
             if end is not KEEP_COMMITTED and committed[p].offset < plan.start_offsets.get(p, -1)]
    if below:
        p = below[0]
        raise SinkPreconditionError(
            f"batch {plan.batch_id} is run again after a restart, but group {plan.app_id!r} has offset"
            f" {committed[p].offset} for {topic}[{p}], below the batch's start {plan.start_offsets[p]}: it expired"
            " (offsets.retention.minutes) or was deleted, and the sink cannot tell which of the batch's records it"
            " already wrote. Delete the query's checkpoint and start with --starting-offsets output, which resumes"
            " each partition after the last record the output and dead-letter topics hold from it")
