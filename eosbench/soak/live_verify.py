"""The soak's verification while the pipeline runs: after every fault, and once more at the end.

After a fault the stable prefix is checked, and every transaction open at that moment must then
end. The Spark job's output carries eos headers, so its check is `verify_live` on a `LiveLedger`:
each round reads only the records written since the last and judges only them, against what the
ledger keeps of the past (about 21 bytes per input offset from the log start), so a round costs
what its new records cost, after days as after minutes. Kafka's copier writes no headers, so its
output is matched by key with `verify(live=True)`, which reads only the new records but redoes its arithmetic over all of
them. At the end, once the producer is fenced and the stream has drained its input, the full
verifier reads everything afresh.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TypeVar

from confluent_kafka import KafkaException

from conf.failures import kafka_reason
from eosbench.soak.pipeline import Pipeline
from eosbench.soak.report import FaultRecord
from streaming.verify.live_ledger import LiveLedger, verify_live
from streaming.verify.topic_index import IncrementalIndexes
from streaming.verify.verifier import (VerifyReport, committed_floors, group_offset_mismatches, group_offsets,
                              stable_and_end_offsets, verify, wait_until_stable)

T = TypeVar("T")
HANGING_TIMEOUT_S = 60
READ_AHEAD_EVERY_S = 5.0
# A round's verify that cannot read the cluster (a leader still moving after a broker's restart)
# is tried again for this long before the soak gives up; its reads are all or nothing.
VERIFY_RETRY_S = 120.0
VERIFY_RETRY_PAUSE_S = 2.0


class LiveVerifier:
    """Verifies one soak's pipeline: each round incrementally, the end in full."""

    def __init__(self, pipeline: Pipeline):
        self.pipeline = pipeline
        self.ledger = LiveLedger(pipeline.input_topic)  # eos headers: each round reads and judges only the records since the last
        self.indexes = IncrementalIndexes()  # matched by key: each round reads only the records since the last
        self.last_read_error: str | None = None  # why the last look at the group's offsets failed
        # Kafka's copier writes no eos headers: its output meets the input by key, and no torn check applies.
        self.match_by = "key" if pipeline.copiers else "source"
        self._stop_reading_ahead = threading.Event()
        self._reader: threading.Thread | None = None

    def start_reading_ahead(self) -> None:
        """Read the topics ahead of the next round every few seconds, so that a round reads only its last seconds."""
        if self.match_by != "source" or self._reader is not None:
            return
        p = self.pipeline
        topics = [(p.input_topic, False), (p.output_topic, True), (p.dead_letter_topic, True)]

        def read_ahead() -> None:
            while not self._stop_reading_ahead.wait(READ_AHEAD_EVERY_S):
                self.ledger.read_ahead(p.bootstrap, topics)
        self._reader = threading.Thread(target=read_ahead, name="eosbench-soak-read-ahead", daemon=True)
        self._reader.start()

    def stop_reading_ahead(self) -> None:
        """Stop reading ahead (before the final verify, which reads everything afresh)."""
        self._stop_reading_ahead.set()
        if self._reader is not None:
            self._reader.join(timeout=60)

    def after_fault(self, record: FaultRecord, say: Callable[[str], None]) -> None:
        """Verify the stable prefix and wait for every open transaction to end; fill in the round's record."""
        p = self.pipeline
        clock = time.monotonic()
        checked = self._retried(self._verify_round, say)
        record.violations += checked.violations
        record.samples.update({name: checked.samples[name] for name in
                               (line.partition(":")[0] for line in checked.violations) if checked.samples.get(name)})
        record.verify_s = round(time.monotonic() - clock, 1)
        clock = time.monotonic()
        record.violations += [f"hanging: {line}" for line in self._retried(
            lambda: wait_until_stable(p.bootstrap, [p.input_topic, p.output_topic], timeout_s=HANGING_TIMEOUT_S), say)]
        record.stable_after_s = round(time.monotonic() - clock, 1)
        record.records_checked = checked.input_committed
        record.source_deleted, record.output_deleted = checked.source_deleted, checked.output_deleted

    def _verify_round(self) -> VerifyReport:
        p = self.pipeline
        if self.match_by == "source":
            return verify_live(p.bootstrap, p.input_topic, p.output_topic, p.app_id, p.dead_letter_topic, self.ledger)
        return verify(p.bootstrap, p.input_topic, p.output_topic, p.app_id, p.dead_letter_topic, live=True,
                      indexes=self.indexes, match_by=self.match_by)

    @staticmethod
    def _retried(read: Callable[[], T], say: Callable[[str], None]) -> T:
        """Run a read of the cluster, again after a Kafka error or a timeout, until VERIFY_RETRY_S is spent."""
        deadline = time.monotonic() + VERIFY_RETRY_S
        while True:
            try:
                return read()
            except (KafkaException, TimeoutError) as exc:
                if time.monotonic() + VERIFY_RETRY_PAUSE_S >= deadline:
                    raise
                reason = kafka_reason(exc) if isinstance(exc, KafkaException) else str(exc)
                say(f"verify could not read the cluster ({reason}); trying again")
            time.sleep(VERIFY_RETRY_PAUSE_S)

    def drained(self) -> bool:
        """Tell whether the sink group has committed each input partition past its last committed record (at most its end)."""
        p = self.pipeline
        try:
            ends = {partition: end for partition, (_, end) in stable_and_end_offsets(p.bootstrap, p.input_topic).items()}
            committed = group_offsets(p.bootstrap, p.app_id, p.input_topic, sorted(ends))
            if not group_offset_mismatches(p.input_topic, p.app_id, committed, ends):
                self.last_read_error = None
                return True
            # The group may rightly stop after the last committed record, short of an aborted tail
            # or a trailing marker: Kafka's copier does, and so does real-time mode, which commits
            # {p: last record + 1}. The producer is stopped, so the committed input is final; it is
            # read only for a group short of the end.
            floors = committed_floors(self.indexes.read(p.bootstrap, p.input_topic, "read_committed", with_src=False),
                                      ends)
        except KafkaException as exc:
            # Not drained yet, as far as anyone can tell: a broker restarting, or a transaction
            # hanging on __consumer_offsets (UNSTABLE_OFFSET_COMMIT until it ends). The wait's
            # timeout turns a lasting one into a violation that names it.
            self.last_read_error = kafka_reason(exc)
            return False
        self.last_read_error = None
        return not group_offset_mismatches(p.input_topic, p.app_id, committed, ends, floors)

    def final(self) -> VerifyReport:
        """The full verifier over everything the pipeline wrote."""
        p = self.pipeline
        return verify(p.bootstrap, p.input_topic, p.output_topic, p.app_id, p.dead_letter_topic, match_by=self.match_by)
