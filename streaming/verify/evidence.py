"""What a pipeline's output and dead-letter topics prove about where it left each input partition.

Three starts read this evidence when the group's offsets cannot be trusted: `--starting-offsets
output` (each partition resumes after the last record delivered from it), a first micro-batch
run again after a restart whose group offsets are gone (`streaming/sink/driver.py`), and a real-time
query resumed likewise (`streaming/realtime/writer.py`). Each asks, per input partition, for the offset
after the highest input record that this pipeline delivered. The answer is only as good as what
the topics still hold, so the read refuses, in one line, wherever it could be too low:

- **An open transaction hides what follows it.** A read_committed reader stops at a partition's
  last stable offset, so one transaction still open on an output partition hides every
  committed record after it, other tasks' included. Right after a crash that is the crashed
  run's own transaction, until its `transaction.timeout.ms` passes. The read first waits, with a
  progress line, until every partition's last stable offset reaches the end offset it had when
  the wait began; a transaction still open after this run's own transaction timeout (and a
  margin) cannot be one of this pipeline's, and the read stops naming its partition.
- **A compacted topic** (`cleanup.policy=compact`) may have dropped any record, a partition's last
  one included: refused.
- **A trimmed partition** (its log start above 0: retention, or DeleteRecords) has lost a prefix.
  The records of one input partition p in one output partition q name increasing input offsets
  (p's transactions commit in order; `verify`'s `reordered` check holds this), so those of p
  that survive in q are its highest there, and q's share of the evidence is intact if any of p's
  records survive in it. A trimmed q that holds none of p's records may have lost p's last ones:
  p's evidence is then `unsure`, and a start that needs it is refused.
- **Only this pipeline's records count.** `eos.txn` names the pipeline (conf/headers.py);
  records of another pipeline, and records without `eos.txn` (an at-least-once sink's), are
  ignored; a record written before `eos.txn` named its pipeline counts as this pipeline's.

The same read tells which transactional ids wrote those records (`eos.txn` names the partition,
the slot or the batch scope each transaction covered), for a driver that must fence them and has
neither an owner record nor tagged offsets to ask (`streaming/owner.py`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from conf.client_config import Connection
from conf.headers import BATCH_SCOPE_PARTITION, SRC_HEADER, TXN_HEADER, txn_covered, txn_pipeline
from conf.stream_settings import StreamSettings
from streaming.group import SinkPreconditionError
from streaming.owner import Writers
from streaming.verify.topic_index import records_to_end, source_position, topic_reader
from streaming.verify.verifier import compacted_topics, wait_until_stable

PROGRESS_EVERY_S = 5.0
# Past this run's own transaction timeout, how long an open transaction may still take to end: the
# coordinator aborts an expired one at its next check, every
# transaction.abort.timed.out.transaction.cleanup.interval.ms (10 s by default), then writes the markers.
SETTLE_MARGIN_S = 15.0


def settle_timeout_s(settings: StreamSettings) -> float:
    """How long a start waits for the outputs' open transactions: this run's transaction timeout, and a margin."""
    return settings.transaction_timeout_s + SETTLE_MARGIN_S


@dataclass
class Evidence:
    """Per input partition, the offset after the highest input record the pipeline delivered, and what may be missing."""

    ends: dict[int, int] = field(default_factory=dict)
    # Each trimmed topic-partition, with the input partitions whose records survive in it.
    trimmed: dict[str, set[int]] = field(default_factory=dict)
    writers: Writers = Writers()  # the transactional ids that wrote the pipeline's records, as eos.txn names them
    newest: dict[str, int] = field(default_factory=dict)  # per scope, the newest timestamp of its records

    def note_writer(self, covered: bytes, timestamp: int) -> None:
        """Count the transaction that covered `covered` (a partition, `slot<k>`, `*`) among the writers."""
        if covered == BATCH_SCOPE_PARTITION.encode():
            scope, writers = "batch", Writers(batch=True)
        elif covered.startswith(b"slot"):
            scope, writers = "slot", Writers(slots=int(covered[4:]) + 1)
        else:
            scope, writers = "partition", Writers(partitions=int(covered) + 1)
        self.writers |= writers
        self.newest[scope] = max(self.newest.get(scope, timestamp), timestamp)

    def newest_scope(self) -> str | None:
        """The scope whose records are the newest, None where the pipeline left none."""
        return max(self.newest, key=self.newest.get) if self.newest else None

    def unsure(self, partition: int) -> list[str]:
        """The trimmed topic-partitions that hold none of this input partition's records: they may have lost its last ones."""
        return sorted(name for name, held in self.trimmed.items() if partition not in held)


def await_stable(bootstrap: str | Connection, topics: list[str], timeout_s: float,
                 on_progress: Callable[[str], None] | None = None) -> None:
    """Return once every partition's last stable offset reaches the end offset it had at the call; refuse past timeout_s."""
    existing = [topic for topic in topics if _exists(bootstrap, topic)]
    reported = time.monotonic()

    def progress(behind: dict[tuple[str, int], tuple[int, int]], waited: float) -> None:
        nonlocal reported
        if on_progress and time.monotonic() - reported >= PROGRESS_EVERY_S:
            reported = time.monotonic()
            (topic, p), (lso, end) = min(behind.items())
            on_progress(f"waiting for the transactions open on {len(behind)} partition(s) of {', '.join(existing)} to"
                        f" end (first: {topic}[{p}], last stable offset {lso} of {end}), at most"
                        f" {timeout_s - waited:.0f} s more")
    hanging = wait_until_stable(bootstrap, existing, timeout_s, on_wait=progress)
    if hanging:
        raise SinkPreconditionError(
            f"{hanging[0]}: a transaction is still open there, and a read_committed reader cannot see the records"
            " committed after it, so where the pipeline left its input cannot be read yet. It is not one of this"
            " pipeline's transactions, which end within this run's transaction.timeout.ms; start again once its"
            " producer has committed or aborted it")


def _exists(bootstrap: str | Connection, topic: str) -> bool:
    reader = topic_reader(bootstrap, "read_committed")
    try:
        found = reader.list_topics(topic, timeout=30).topics.get(topic)
        return found is not None and found.error is None
    finally:
        reader.close()


def read_evidence(bootstrap: str | Connection, input_topic: str, topics: list[str], pipeline: str,
                  settle_timeout_s: float, on_progress: Callable[[str], None] | None = None) -> Evidence:
    """Read the pipeline's evidence from the topics (output, dead letters), refusing a compacted one and waiting out open transactions."""
    folded = compacted_topics(bootstrap, topics)
    if folded:
        raise SinkPreconditionError(
            f"{folded[0]} is compacted (cleanup.policy=compact): compaction may have removed any record, a partition's"
            f" last one included, so it cannot show where the pipeline left {input_topic}")
    await_stable(bootstrap, topics, settle_timeout_s, on_progress)
    evidence = Evidence()
    mine = pipeline.encode()
    for topic in topics:
        def report(read: int, total: int, topic: str = topic) -> None:
            on_progress(f"reading {topic} for the last delivered {input_topic} offsets: {read:,} of about"
                        f" {total:,} records")
        reader = topic_reader(bootstrap, "read_committed")
        try:
            records = records_to_end(reader, topic, on_progress=report if on_progress else None)
            try:
                bounds = next(records)
            except ValueError:  # a topic that does not exist holds nothing
                continue
            trimmed = {q: evidence.trimmed.setdefault(f"{topic}[{q}]", set()) for q, (low, _) in bounds.items() if low > 0}
            for message in records:
                headers = dict(message.headers() or ())
                txn = headers.get(TXN_HEADER)
                if txn is None or txn_pipeline(txn) not in (mine, None):
                    continue
                partition, offset = source_position(headers.get(SRC_HEADER), input_topic)
                if partition < 0:
                    continue
                evidence.ends[partition] = max(evidence.ends.get(partition, 0), offset + 1)
                evidence.note_writer(txn_covered(txn), message.timestamp()[1])
                if message.partition() in trimmed:
                    trimmed[message.partition()].add(partition)
        finally:
            reader.close()
    return evidence
