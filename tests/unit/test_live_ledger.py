"""The live ledger against the whole-held arithmetic, round for round, on seeded pipelines with every kind of fault.

Each scenario writes input (committed records, aborted ones, markers; poison records and
tombstones; partitions whose log start is past 0), lets the stable offsets and the group's
offsets move up, and delivers output with duplicates, losses, aborted reads, records without a
source or naming another topic, records whose source was deleted (some twice), wrong values,
good records dead-lettered and poison ones output, reorderings, torn and split transactions,
and output partitions whose log start moved past records no read saw. After each
round `LiveLedger.add` gets only the new records, and `judge_records` gets everything held, as
`verify(live=True)` reads it; every count must be equal.
"""

from __future__ import annotations

import numpy as np
import pytest

from streaming.verify.live_ledger import LiveLedger
from streaming.verify.topic_index import FOREIGN_SOURCE, POISON_DIGEST, TOMBSTONE_DIGEST, TopicIndex
from streaming.verify.checks import VerifyReport, judge_records

COUNTS = ("input_committed", "output_committed", "dead_lettered", "duplicates", "lost", "unexpected", "aborted_reads",
          "key_surplus", "key_deficit", "reordered", "transactions_checked", "torn", "wrong_value",
          "wrongly_dead_lettered", "source_deleted", "output_deleted", "transactions_output_deleted")
INPUTS, OUTPUTS = 3, 2
LOG_START = (0, 7, 25)  # per input partition: retention deleted what lay below


def index(rows: list[tuple], ends: dict[int, int], names: dict[int, str] | None = None,
          log_start: dict[int, int] | None = None) -> TopicIndex:
    """An index from (seq, partition, offset, src partition, src offset, txn, txn records[, digest]) rows."""
    width = len(rows[0]) if rows else 7
    columns = [np.asarray(c, dtype=np.int64) for c in (zip(*rows) if rows else [()] * width)]
    return TopicIndex(*columns[:7], dict(ends), dict(names or {}), digest=columns[7] if width > 7 else None,
                      log_start=dict(log_start or {}))


class Pipeline:
    """A seeded input, and a sink that delivers it with the faults a broken one would have."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.log_start = dict(enumerate(LOG_START))
        self.input_end = dict(self.log_start)
        self.committed: dict[int, list[tuple[int, int, int]]] = {p: [] for p in range(INPUTS)}  # (offset, seq, digest)
        self.aborted: dict[int, list[int]] = {p: [] for p in range(INPUTS)}
        self.read_to = dict(self.log_start)  # offsets the ledger's input reads reached
        self.delivered_to = dict(self.log_start)
        self.stable = dict(self.log_start)  # a last stable offset never lies below the log start
        self.cutoff = dict.fromkeys(range(INPUTS), 0)
        self.output_offset = {"out": [0] * OUTPUTS, "dead": [0] * OUTPUTS}
        self.seq = 0
        self.token = 0
        self.deleted_twice = 0
        self.rounds = 0

    def write_input(self) -> None:
        for p in range(INPUTS):
            for _ in range(int(self.rng.integers(0, 40))):
                offset = self.input_end[p]
                if self.rng.random() < 0.15:
                    self.aborted[p].append(offset)
                else:
                    seq = self.seq if self.rng.random() > 0.05 else max(0, self.seq - 3)  # a repeated key now and then
                    kind = self.rng.random()
                    digest = POISON_DIGEST if kind < 0.05 else TOMBSTONE_DIGEST if kind < 0.08 else seq * 7 + 1
                    self.committed[p].append((offset, seq, digest))
                self.seq += 1
                self.input_end[p] += 2 if self.rng.random() < 0.1 else 1  # a marker now and then

    def move_bounds(self) -> None:
        for p in range(INPUTS):
            self.stable[p] = int(self.rng.integers(self.stable[p], self.input_end[p] + 1))
            # a read_committed read reaches the last stable offset at least, and never goes back
            self.read_to[p] = int(self.rng.integers(max(self.stable[p], self.read_to[p]), self.input_end[p] + 1))
            self.cutoff[p] = int(self.rng.integers(self.cutoff[p], self.stable[p] + 1))

    def new_input(self) -> TopicIndex:
        rows = []
        for p in range(INPUTS):
            low = getattr(self, "_input_read", {}).get(p, 0)
            rows += [(seq, p, offset, -1, -1, -1, 0, digest) for offset, seq, digest in self.committed[p]
                     if low <= offset < self.read_to[p]]
        self._input_read = dict(self.read_to)
        return index(rows, self.input_end, log_start=self.log_start)

    def deliver(self) -> tuple[TopicIndex, TopicIndex]:
        """Deliver the committed input up to a point, with faults, in transactions of a few records.

        Now and then, in the first rounds, retention deletes some of a partition's new records
        before they are read (later rounds then have losses and torn transactions above the horizon).
        """
        self.rounds += 1
        rows = {"out": [], "dead": []}
        read_to = {topic: list(offsets) for topic, offsets in self.output_offset.items()}
        names: dict[str, dict[int, str]] = {"out": {}, "dead": {}}
        for p in range(INPUTS):
            upto = int(self.rng.integers(self.delivered_to[p], self.read_to[p] + 1))
            sources = [(offset, seq, digest) for offset, seq, digest in self.committed[p]
                       if self.delivered_to[p] <= offset < upto]
            self.delivered_to[p] = upto
            records = []
            for offset, seq, digest in sources:
                roll = self.rng.random()
                if roll < 0.04:
                    continue  # lost
                records.append(self.routed(seq, p, offset, digest))
                if roll > 0.96:
                    records.append(self.routed(seq, p, offset, digest))  # duplicated
            if self.aborted[p] and self.rng.random() < 0.2:
                records.append(("out", 10_000 + self.seq, p, int(self.rng.choice(self.aborted[p])), 5))  # aborted read
            if self.log_start[p] and self.rng.random() < 0.2:
                deleted = int(self.rng.integers(0, self.log_start[p]))
                records.append(("out", 30_000 + self.seq, p, deleted, 5))  # its source was deleted
                if self.rng.random() < 0.5:
                    records.append(("dead", 30_000 + self.seq, p, deleted, 0))  # and it was delivered twice
                    self.deleted_twice += 1
            if self.rng.random() < 0.1:
                records.append(("out", 20_000 + self.seq, -1, -1, 5))  # no eos.src
            if self.rng.random() < 0.1:
                records.append(("dead", 40_000 + self.seq, FOREIGN_SOURCE, -1, 5))  # eos.src names another topic
            if len(records) > 2 and self.rng.random() < 0.2:
                i = int(self.rng.integers(0, len(records) - 1))
                records[i], records[i + 1] = records[i + 1], records[i]  # reordered
            while records:
                size = int(self.rng.integers(1, 6))
                batch, records = records[:size], records[size:]
                self.token += 1
                for topic in rows:
                    written = [record[1:] for record in batch if record[0] == topic]
                    if not written:
                        continue
                    declared = len(written) + (1 if self.rng.random() < 0.05 else 0)  # torn now and then
                    names[topic][self.token] = f"txn-{self.token}"
                    for seq, src_p, src_o, digest in written:
                        out_p = int(self.rng.integers(0, OUTPUTS))
                        offset = self.output_offset[topic][out_p]
                        self.output_offset[topic][out_p] += 1
                        rows[topic].append((seq, out_p, offset, src_p, src_o, self.token, declared, digest))
                    for out_p in range(OUTPUTS):
                        self.output_offset[topic][out_p] += 1  # the transaction's marker
        ends = {topic: dict(enumerate(self.output_offset[topic])) for topic in rows}
        read = {topic: index(rows[topic], ends[topic], names[topic]) for topic in rows}
        for topic, new in read.items():
            for out_p in range(OUTPUTS):
                if self.rounds <= 8 and self.output_offset[topic][out_p] > read_to[topic][out_p] + 1 \
                        and self.rng.random() < 0.2:
                    start = int(self.rng.integers(read_to[topic][out_p] + 1, self.output_offset[topic][out_p] + 1))
                    read[topic] = new = new.kept((new.partition != out_p) | (new.offset >= start))
                    new.trimmed[out_p] = new.log_start[out_p] = start
        return read["out"], read["dead"]

    def routed(self, seq: int, partition: int, offset: int, digest: int) -> tuple:
        """(topic, seq, source partition, source offset, digest) of one delivery: poison to the dead letters, now and
        then wrongly, or with a wrong value."""
        roll = self.rng.random()
        poison = digest == POISON_DIGEST
        if roll < 0.03:
            poison = not poison  # a good record dead-lettered, or a poison one output
        elif roll < 0.06 and not poison:
            digest += 1  # a wrong value
        return ("dead", seq, partition, offset, 0) if poison else ("out", seq, partition, offset, digest)


@pytest.mark.parametrize("seed", range(12))
def test_the_ledger_counts_what_the_whole_held_arithmetic_counts_after_every_round(seed):
    pipeline, ledger = Pipeline(seed), LiveLedger()
    held_in = held_out = held_dead = None
    for _ in range(15):
        pipeline.write_input()
        pipeline.move_bounds()
        new_in = pipeline.new_input()
        new_out, new_dead = pipeline.deliver()
        held_in, held_out, held_dead = (new if held is None else TopicIndex.concatenated(held, new)
                                        for held, new in ((held_in, new_in), (held_out, new_out), (held_dead, new_dead)))
        whole = VerifyReport("in", "out")
        committed_in = held_in.below(pipeline.stable)
        whole.input_committed, whole.output_committed = int(committed_in.seq.size), int(held_out.seq.size)
        whole.dead_lettered = int(held_dead.seq.size)
        judge_records(whole, committed_in, held_out, held_dead, dict(pipeline.cutoff), dict(pipeline.stable))
        running = ledger.add(new_in, new_out, new_dead, dict(pipeline.cutoff), dict(pipeline.stable))
        assert {name: getattr(running, name) for name in COUNTS} == {name: getattr(whole, name) for name in COUNTS}
    faults = {name: getattr(running, name) for name in ("duplicates", "lost", "aborted_reads", "reordered", "torn",
                                                        "unexpected", "wrong_value", "wrongly_dead_lettered",
                                                        "source_deleted", "output_deleted",
                                                        "transactions_output_deleted")}
    assert all(faults.values()), f"seed {seed} left a fault kind out: {faults}"  # the scenario exercises every check
    assert pipeline.deleted_twice, f"seed {seed} never delivered a deleted source twice"


def test_samples_name_records_that_broke_a_check():
    pipeline, ledger = Pipeline(3), LiveLedger()
    for _ in range(15):
        pipeline.write_input()
        pipeline.move_bounds()
        new_in = pipeline.new_input()
        new_out, new_dead = pipeline.deliver()
        report = ledger.add(new_in, new_out, new_dead, dict(pipeline.cutoff), dict(pipeline.stable))
    assert len(report.samples["lost"]) == min(10, report.lost) and report.samples["torn"][0].startswith("txn-")
    assert all(seq >= 10_000 for seq in report.samples["aborted_reads"])  # the simulator's aborted reads


def test_a_read_ahead_and_the_rounds_read_give_what_one_read_gives(monkeypatch):
    from streaming.verify import live_ledger

    reads = iter([index([(1, 0, 0, -1, -1, -1, 0), (2, 1, 0, -1, -1, -1, 0)], {0: 1, 1: 2}),  # read ahead
                  TimeoutError("no end of partition within 10.0 s"),  # a read ahead during a broker's pause
                  index([(3, 1, 1, -1, -1, -1, 0)], {0: 3, 1: 2})])  # the round's own read
    starts = []

    def fake_read_index(bootstrap, topic, isolation, with_src, timeout_s=60.0, start_offsets=None, **_):
        starts.append((start_offsets, timeout_s))
        read = next(reads)
        if isinstance(read, Exception):
            raise read
        return read
    monkeypatch.setattr(live_ledger, "read_index", fake_read_index)
    ledger = LiveLedger()
    ledger.read_ahead("b", [("in", False)])
    ledger.read_ahead("b", [("in", False)])  # fails: nothing kept, and the next read starts where the first ended
    [round_read] = ledger.read_round("b", [("in", False)])
    # The first read reached partition 1's end, 2, past its last record (a marker at offset 1).
    assert starts == [({}, 10.0), ({0: 1, 1: 2}, 10.0), ({0: 1, 1: 2}, 60.0)]
    assert round_read.seq.tolist() == [1, 2, 3] and round_read.offset.tolist() == [0, 0, 1]
    assert round_read.end_offsets == {0: 3, 1: 2}, "the latest read's end offsets"


def test_a_round_whose_read_fails_keeps_what_it_read_for_the_next_try(monkeypatch):
    from confluent_kafka import KafkaError, KafkaException

    from streaming.verify import live_ledger

    reads = {"in": iter([index([(1, 0, 0, -1, -1, -1, 0)], {0: 1}), index([(2, 0, 1, -1, -1, -1, 0)], {0: 2})]),
             "out": iter([KafkaException(KafkaError(KafkaError.NOT_LEADER_FOR_PARTITION)),
                          index([(1, 0, 0, 0, 0, -1, 0), (2, 0, 1, 0, 1, -1, 0)], {0: 2})])}
    starts = []

    def fake_read_index(bootstrap, topic, isolation, with_src, timeout_s=60.0, start_offsets=None, **_):
        starts.append((topic, start_offsets))
        read = next(reads[topic])
        if isinstance(read, Exception):
            raise read
        return read
    monkeypatch.setattr(live_ledger, "read_index", fake_read_index)
    ledger = LiveLedger()
    with pytest.raises(KafkaException):
        ledger.read_round("b", [("in", False), ("out", True)])
    committed_in, out = ledger.read_round("b", [("in", False), ("out", True)])
    assert starts == [("in", {}), ("out", {}), ("in", {0: 1}), ("out", {})]
    assert committed_in.seq.tolist() == [1, 2], "the input read before the failure is judged at the next try"
    assert out.seq.tolist() == [1, 2]


def test_the_ledger_holds_offsets_from_the_log_start_not_from_zero():
    start = 2_000_000_000  # an input whose offsets reach 2e9: an array from offset 0 would need 16 GB per partition
    committed = index([(seq, 0, start + seq, -1, -1, -1, 0) for seq in range(100)], {0: start + 100},
                      log_start={0: start})
    out = index([(seq, 0, seq, 0, start + seq, -1, 0) for seq in range(100)], {0: 100})
    ledger = LiveLedger()
    report = ledger.add(committed, out, None, {0: start + 100}, {0: start + 100})
    assert (report.input_committed, report.output_committed, report.lost, report.duplicates) == (100, 100, 0, 0)
    held = [array for kept in vars(ledger).values() if hasattr(kept, "arrays") for array in kept.arrays.values()]
    assert len(held) == 4 and sum(array.nbytes for array in held) < 64 * 1024


def test_a_second_delivery_of_a_source_deleted_meanwhile_is_a_duplicate_as_judge_records_counts_it():
    ledger = LiveLedger()
    committed = index([(seq, 0, seq, -1, -1, -1, 0) for seq in range(5)], {0: 5}, log_start={0: 0})
    ledger.add(committed, index([(seq, 0, seq, 0, seq, -1, 0) for seq in range(5)], {0: 5}), None, {0: 5}, {0: 5})
    # Retention moves the input's log start to 3; offset 0 is delivered twice more and offset 1 once, in order,
    # to another output partition.
    trimmed = index([], {0: 5}, log_start={0: 3})
    again = index([(0, 1, 0, 0, 0, -1, 0), (0, 1, 1, 0, 0, -1, 0), (1, 1, 2, 0, 1, -1, 0)], {0: 5, 1: 3})
    report = ledger.add(trimmed, again, None, {0: 5}, {0: 5})
    whole = VerifyReport("in", "out")
    judge_records(whole, TopicIndex.concatenated(committed, trimmed),
                  TopicIndex.concatenated(index([(seq, 0, seq, 0, seq, -1, 0) for seq in range(5)], {0: 5}), again),
                  None, {0: 5}, {0: 5})
    assert report.duplicates == whole.duplicates == 3
    assert report.source_deleted == 3, "counted as they arrive: the deliveries judged before the log start moved stand"
    assert report.samples["duplicates"] == [0, 1]


def test_a_loss_and_a_short_transaction_become_output_deleted_once_a_later_round_finds_the_trim_that_explains_them():
    ledger = LiveLedger()
    in_1 = index([(s, 0, s, -1, -1, -1, 0) for s in range(10)], {0: 10}, log_start={0: 0})
    # Sources 7 and 9 are not delivered yet; transaction 2 shows source 6 and lacks source 7.
    out_1 = index([(s, 0, s, 0, s, -1, 0) for s in range(6)] + [(6, 1, 0, 0, 6, 2, 2), (8, 1, 1, 0, 8, -1, 0)],
                  {0: 6, 1: 2}, {2: "txn-2"})
    first = ledger.add(in_1, out_1, None, {0: 10}, {0: 10})
    assert (first.lost, first.output_deleted, first.torn, first.transactions_output_deleted) == (2, 0, 1, 0)
    # Before the next read, 7 and 9 were delivered to output partition 0 at offsets 6 and 7, and
    # retention deleted them unread: the read starts at the log start, 8, and finds 10 and 11 there.
    # 12 is committed and never delivered, above the horizon 10.
    in_2 = index([(s, 0, s, -1, -1, -1, 0) for s in range(10, 13)], {0: 13}, log_start={0: 0})
    out_2 = index([(10, 0, 8, 0, 10, -1, 0), (11, 0, 9, 0, 11, -1, 0)], {0: 10, 1: 2}, log_start={0: 8})
    out_2.trimmed = {0: 8}
    second = ledger.add(in_2, out_2, None, {0: 13}, {0: 13})
    assert (second.lost, second.output_deleted, second.torn, second.transactions_output_deleted) == (1, 2, 0, 1)
    assert second.samples["output_deleted"] == [7, 9] and second.samples["lost"] == [12]
    assert second.samples["transactions_output_deleted"] == ["txn-2"] and second.key_deficit == 1
    whole = VerifyReport("in", "out")
    judge_records(whole, TopicIndex.concatenated(in_1, in_2), TopicIndex.concatenated(out_1, out_2), None,
                  {0: 13}, {0: 13})
    judged = [name for name in COUNTS if name not in ("input_committed", "output_committed", "dead_lettered")]
    assert {name: getattr(second, name) for name in judged} == {name: getattr(whole, name) for name in judged}
