"""How many records one sink transaction takes: never more than it can produce within transaction.timeout.ms.

A transaction older than `transaction.timeout.ms` is aborted by its coordinator, and a retry of
the same records is aborted again, so an uncapped slice that takes too long can never commit.
`take_records` cuts Step 3's records where a transaction must stop, and `offsets_for` gives the
offsets that transaction commits: each partition's batch end where it took everything, else the
offset of the first record it left, where Step 3 of the next transaction starts.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import fields, replace

from streaming.process import SourceSlice
from streaming.group import CommittedOffset
from streaming.task_plan import KEEP_COMMITTED, TaskPlan

# A transaction must commit within transaction.timeout.ms, or the coordinator aborts it and every
# retry repeats it. So once a worker has seen how fast it produces, a transaction takes only the
# records it can produce and flush in this share of the timeout (the rest is for the commit), and
# a slice larger than that commits in several transactions, each with the offset of its last
# record's successor: Step 3 of the next one starts there. An attempt that overran halves what
# the next one takes, so a slowdown the estimate missed converges within the retries.
TXN_TIMEOUT_SHARE = 0.5
DEFAULT_TRANSACTION_TIMEOUT_MS = 60_000  # librdkafka's and kafka-python's transaction.timeout.ms
_RECORDS_PER_SECOND: dict[str, float] = {}  # per output topic, on this worker
_RECORDS_CAP: dict[str, int] = {}  # per output topic, set when an attempt overran


def produce_budget_s(plan: TaskPlan) -> float:
    """How long a transaction may spend producing and flushing its records."""
    timeout_ms = float(plan.producer_config.get("transaction.timeout.ms", DEFAULT_TRANSACTION_TIMEOUT_MS))
    return timeout_ms / 1000.0 * TXN_TIMEOUT_SHARE


def records_per_transaction(plan: TaskPlan) -> int | None:
    """The most records one transaction takes on this worker (None: no limit learnt yet)."""
    rate, cap = _RECORDS_PER_SECOND.get(plan.output_topic), _RECORDS_CAP.get(plan.output_topic)
    limits = [limit for limit in (cap, None if rate is None else int(rate * produce_budget_s(plan))) if limit]
    return max(1, min(limits)) if limits else None


def learn_rate(plan: TaskPlan, records: int, seconds: float, overran: bool) -> None:
    """Note how fast this worker produced; an overrun also halves what the next transaction takes."""
    if records and seconds > 0:
        _RECORDS_PER_SECOND[plan.output_topic] = records / seconds
    if overran:
        _RECORDS_CAP[plan.output_topic] = max(1, records // 2)
    elif plan.output_topic in _RECORDS_CAP and records >= _RECORDS_CAP[plan.output_topic]:
        del _RECORDS_CAP[plan.output_topic]  # the rate alone bounds it again


def _cut(records: SourceSlice, start: int, stop: int) -> SourceSlice:
    """Records [start, stop) of a slice, as a slice of their own."""
    return replace(records, **{f.name: getattr(records, f.name)[start:stop] for f in fields(records)
                               if isinstance(getattr(records, f.name), list)})


def _first_kept(records: SourceSlice, keep_from: int) -> int:
    """The index of the slice's first record at or above keep_from (offsets ascend)."""
    return bisect_left(records.offsets, keep_from)


def kept_records(records: SourceSlice, keep_from: int) -> SourceSlice:
    """S' of one slice (Step 3): its records at or above keep_from; the slice itself, uncopied, when it keeps them all."""
    first = _first_kept(records, keep_from)
    return records if first == 0 else _cut(records, first, len(records))


def take_records(pending: list[tuple[SourceSlice, int]], cap: int | None
                 ) -> tuple[list[tuple[SourceSlice, int]], list[tuple[SourceSlice, int]]]:
    """Split Step 3's (slice, keep_from) pairs into what one transaction writes (at most `cap` kept records) and the rest."""
    if cap is None:
        return pending, []
    taken: list[tuple[SourceSlice, int]] = []
    room = cap
    for index, (records, keep_from) in enumerate(pending):
        first = _first_kept(records, keep_from)
        if len(records) - first <= room:
            taken.append((records, keep_from))
            room -= len(records) - first
            continue
        cut = first + room
        if room:
            taken.append((_cut(records, 0, cut), keep_from))
        return taken, [(_cut(records, cut, len(records)), keep_from), *pending[index + 1:]]
    return taken, []


def offsets_for(offsets_to_commit: dict, committed: dict[int, CommittedOffset],
                rest: list[tuple[SourceSlice, int]]) -> dict:
    """Step 3's offsets to commit: each batch end above c, or, where records are left for a later
    transaction, the offset of the first of them; KEEP_COMMITTED commits c itself."""
    resume_at: dict[int, int] = {}
    for records, keep_from in rest:
        first = _first_kept(records, keep_from)
        if first < len(records) and records.partition not in resume_at:
            resume_at[records.partition] = records.offsets[first]
    to_commit = {}
    for (t, p), end in offsets_to_commit.items():
        c = committed[p].offset
        if end is KEEP_COMMITTED:
            if c >= 0:
                to_commit[(t, p)] = c
        elif resume_at.get(p, end) > c:
            to_commit[(t, p)] = resume_at.get(p, end)
    return to_commit
