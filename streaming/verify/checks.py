"""The exactly-once verifier's arithmetic: every check of docs/design.md's "What the verifier judges", over integers.

Only integers are kept (sequence numbers, partitions, offsets), in numpy arrays, so millions of
records fit in a few tens of megabytes; payloads are never held (streaming/verify/topic_index.py reads
topics into them). Checks:

- every committed input record is delivered exactly once: the multiset of (partition, offset)
  named by the eos.src headers of the output and dead-lettered records equals the committed
  input's (partition, offset) (no duplicate, no loss), and nothing delivered names an offset
  the input does not hold, or another topic than the input (unexpected);
- each delivery carries what `process` makes of its source (by 63-bit digests,
  streaming/verify/topic_index.py): an output record's value must be `process(input value)`
  (`wrong_value` otherwise, a poison source's included), and a dead-lettered record's source
  must be one `process` refuses (`wrongly_dead_lettered` otherwise). Output and dead letters are
  judged apart, so a good record sent to the dead letters fails the run. A tombstone is data:
  its output must be a tombstone. `verify(process=…)` names the stream's transform; matched by
  key (Kafka's copier) a value must arrive unchanged;
- as a second view, the delivered keys equal the committed input's keys as multisets, counting
  each key as often as it occurs (an input may repeat keys; a set would hide a loss among them).
  Any key is allowed: a null key and a key that is no sequence number are counted by their ids
  (`key_id`), so samples quote those ids;
- the input is judged from each partition's log start: retention deletes what lies below it, so
  a delivered record whose source lies below is counted as `source_deleted` (no violation) and
  kept out of the value, aborted-read and key checks: it can be neither told apart from an
  aborted read nor checked. Duplicates are counted before that question: two deliveries naming
  one input position are a duplicate whether or not its record still exists (or ever did);
- no output record stems from an aborted input (its eos.src names a committed input offset);
- order is kept within each input partition (`reordered`): the sink writes a record to the
  output partition its key hashes to (murmur2, as Java's producer), so the records of one input
  partition spread over the output partitions and Kafka orders them only within each one. For
  every (input partition, output topic-partition) pair, the records read in output-offset order
  must name increasing input offsets in eos.src; each adjacent pair whose later record names a
  lower input offset is one reordered pair (an equal offset is a duplicate, counted there);
- every committed transaction is visible whole (`torn`, Jepsen's name): the transactional sink
  stamps each record with its transaction's identity and the number of records that
  transaction wrote to the record's topic (the eos.txn header, conf/headers.py); read
  read_committed, each identity must show exactly that many records in the topic, and fewer is
  a torn transaction. Records without eos.txn (the at-least-once sink's) are not judged;
- the output and the dead letters are judged from each partition's log start too: where
  retention (or compaction) deleted deliveries no read saw, a committed input record whose
  delivery the deletion explains is counted as `output_deleted`, not `lost`, and a transaction
  it cut as `transactions_output_deleted`, not `torn` (no violation; streaming/verify/deleted.py
  says when a deletion explains them, and when not). No transaction is judged on a compacted
  output or dead-letter topic;
- `match_by="key"` judges a pipeline whose output carries no eos headers (Kafka's own
  TransactionalMessageCopier, which the soak runs as `--pipeline java-copier`): each delivered
  record's source is the input record holding its key (keys are the producer's run-unique
  sequence numbers; a committed record is preferred, else an aborted one, which is an aborted
  read), and every check above then runs on those sources except `torn`, which needs eos.txn
  (no record carries it, so no transaction is judged: transactions_checked stays 0). A live verify
  finds sources among the committed input only, so an aborted read is judged by the final verify;
- the sink group's committed offsets equal the input's end offsets (when --app-id is given).
  Matched by key, a group offset may also lie below the end, down to the offset after the
  partition's last committed input record: Kafka's copier commits offsets only in a
  transaction that holds records, so after a tail of aborted input records and their marker
  it has nothing to copy and no commit to move its group past them (what lies between is
  aborted records and markers only, which the copier rightly skips).

`streaming.verify.verifier` reads the topics, the offsets and the hanging transactions, and assembles the
report; the soak's `streaming.verify.live_ledger`
keeps a running account held equal to `judge_records`.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

import numpy as np

from conf.stream_settings import StreamSettings
from streaming.verify.deleted import (Trims, belongs, below_horizons, cut_records, displaced_by_compaction,
                                      survivors)
from streaming.verify.topic_index import FOREIGN_SOURCE, POISON_DIGEST, UNKNOWN_DIGEST, TopicIndex, _bounds

SAMPLE = 10  # ids quoted per violation in the report
DEFAULT_PROCESS = StreamSettings.model_fields["process"].default  # what `eosbench stream` runs without --process


@dataclass
class VerifyReport:
    """The JSON report of `eosbench verify`; `ok` is False on any violation."""

    input_topic: str
    output_topic: str
    input_committed: int = 0
    input_aborted: int = 0
    output_committed: int = 0
    output_aborted_hidden: int = 0
    dead_lettered: int = 0
    duplicates: int = 0  # deliveries naming one input position beyond its first (by eos.src), deleted or not
    lost: int = 0  # committed input records never delivered (by eos.src)
    unexpected: int = 0  # delivered records whose eos.src names no offset of the input
    aborted_reads: int = 0  # delivered records whose eos.src names an input offset that is no committed record
    key_surplus: int = 0  # second view: deliveries of a key beyond the times the input holds it
    key_deficit: int = 0  # second view: times an input key occurs beyond its deliveries
    reordered: int = 0  # adjacent pairs of one input partition, in one output partition, whose input offset falls
    transactions_checked: int = 0  # committed sink transactions judged all-or-nothing (by eos.txn)
    torn: int = 0  # of those, transactions with fewer records visible in a topic than their eos.txn declares
    wrong_value: int = 0  # output records whose value is not what process makes of their source's
    wrongly_dead_lettered: int = 0  # dead-lettered records whose source process accepts
    source_deleted: int = 0  # deliveries whose source lies below the input's log start: judged for duplicates only
    output_deleted: int = 0  # committed input records whose delivery retention or compaction deleted (no violation)
    transactions_output_deleted: int = 0  # short transactions that a trim of their topic cut: not torn
    compacted_topics: list[str] = field(default_factory=list)  # final verify: no transaction is judged on an output one
    process: str = DEFAULT_PROCESS  # the transform values are checked against (matched by key: none, a copy)
    match_by: str = "source"  # how output meets input: eos.src headers, or "key" for a pipeline without them
    hanging_partitions: list[str] = field(default_factory=list)
    group_offset_mismatches: list[str] = field(default_factory=list)
    samples: dict[str, list] = field(default_factory=dict)  # record ids; transaction identities for the transactions
    violations: list[str] = field(default_factory=list)
    ok: bool = True

    def to_json(self) -> str:
        """Serialise as indented JSON."""
        return json.dumps(asdict(self), indent=2)


def _members(values: np.ndarray, pool: np.ndarray) -> np.ndarray:
    """Which values occur in pool, as np.isin answers, by one sort and a binary search.

    np.isin (numpy 2.4) took 10.5 s for two million packed ids against two million, 3.4 s with
    kind="sort"; this takes 0.25 s. The soak's live verify asks it after every fault, over every
    record held, so it set how long a soak's rounds grew.
    """
    if pool.size == 0:
        return np.zeros(values.size, dtype=bool)
    ordered = np.sort(pool)
    return ordered[np.minimum(np.searchsorted(ordered, values), ordered.size - 1)] == values


def _lookup(values: np.ndarray, pool: np.ndarray, pool_values: np.ndarray, missing: int) -> np.ndarray:
    """For each value, the pool_values entry at its place in pool (which holds each once); `missing` where absent."""
    if pool.size == 0:
        return np.full(values.size, missing, dtype=np.int64)
    order = np.argsort(pool, kind="stable")
    ordered = pool[order]
    at = np.minimum(np.searchsorted(ordered, values), ordered.size - 1)
    return np.where(ordered[at] == values, pool_values[order][at], missing)


def _pack(partition: np.ndarray, offset: np.ndarray) -> np.ndarray:
    return (partition.astype(np.int64) << 40) | offset.astype(np.int64)


def reordered_pairs(topic: TopicIndex) -> np.ndarray:
    """The ids of records whose eos.src offset is below the one before them in their (input, output) partition pair.

    The module docstring defines the check: one topic's records, grouped by input partition and
    output partition, in output-offset order.
    """
    if topic.seq.size < 2:
        return topic.seq[:0]
    order = np.lexsort((topic.offset, topic.partition, topic.src_partition))
    pair = _pack(topic.src_partition[order], topic.partition[order])
    src = topic.src_offset[order]
    falls = np.concatenate(([False], (pair[1:] == pair[:-1]) & (src[1:] < src[:-1])))
    return topic.seq[order][falls]


def sources_by_key(delivered: TopicIndex, inputs: list[TopicIndex]) -> TopicIndex:
    """The delivered records with eos.src filled from the first input index that holds each one's key (-1 where none)."""
    src_partition = np.full(delivered.seq.size, -1, dtype=np.int64)
    src_offset = np.full(delivered.seq.size, -1, dtype=np.int64)
    for source in inputs:
        if source.seq.size == 0:
            continue
        order = np.argsort(source.seq, kind="stable")
        keys = source.seq[order]
        at = np.minimum(np.searchsorted(keys, delivered.seq), keys.size - 1)
        found = (src_offset < 0) & (keys[at] == delivered.seq)
        src_partition[found] = source.partition[order][at[found]]
        src_offset[found] = source.offset[order][at[found]]
    return TopicIndex(delivered.seq, delivered.partition, delivered.offset, src_partition, src_offset,
                      delivered.txn, delivered.txn_records, delivered.end_offsets, delivered.txn_names,
                      digest=delivered.digest, log_start=delivered.log_start, trimmed=delivered.trimmed)


def torn_transactions(topic: TopicIndex, settled: np.ndarray,
                      cut: np.ndarray | None = None) -> tuple[int, list[str], list[str]]:
    """(transactions judged, identities of the torn ones, of those cut by a trim) in one topic read read_committed.

    A transaction is judged when one of its records is `settled` (all of them, in a final
    verify); it is torn when it shows fewer records than its eos.txn header declares, unless one
    of its records is `cut` evidence (`cut_records`): then a trim of the topic cut it.
    """
    stamped = topic.txn >= 0
    tokens, first, inverse, visible = np.unique(topic.txn[stamped], return_index=True, return_inverse=True,
                                                return_counts=True)
    judged, trimmed = np.zeros(tokens.size, dtype=bool), np.zeros(tokens.size, dtype=bool)
    np.logical_or.at(judged, inverse, settled[stamped])
    if cut is not None:
        np.logical_or.at(trimmed, inverse, cut[stamped])
    short = judged & (visible < topic.txn_records[stamped][first])
    names = lambda chosen: sorted(topic.txn_names[int(token)] for token in tokens[chosen])  # noqa: E731
    return int(np.count_nonzero(judged)), names(short & ~trimmed), names(short & trimmed)


def judge_records(report: VerifyReport, committed_in: TopicIndex, out: TopicIndex, dead: TopicIndex | None,
                  cutoff: dict[int, int] | None, stable: dict[int, int] | None,
                  compacted_input: TopicIndex | None = None, compacted_outputs: tuple[bool, bool] = (False, False)
                  ) -> None:
    """The record, value, key, order and whole-transaction checks over everything held (live: cutoff and stable given).

    `compacted_input` is the whole input read read_uncommitted when the input is compacted: a
    delivery whose source is missing from it, although above the log start, was compacted away.
    `compacted_outputs` says whether the output and the dead-letter topic compact.
    """
    delivered = TopicIndex.concatenated(out, dead) if dead is not None else out
    deleted = deleted_sources(delivered.src_partition, delivered.src_offset, committed_in.log_start)
    if compacted_input is not None:
        deleted |= compacted_away(delivered, compacted_input)
    report.source_deleted = int(np.count_nonzero(deleted))
    report.samples["source_deleted"] = delivered.seq[deleted][:SAMPLE].tolist()
    committed_in = committed_in.from_log_start()
    expected = committed_in.below(cutoff) if cutoff is not None else committed_in
    judged = judgeable(delivered.src_partition, delivered.src_offset, stable)
    missing = _judge(report, delivered, judged, committed_in, expected, claimed_digests(out, dead), deleted)
    written = [(out, survivors(out), compacted_outputs[0])] + (
        [(dead, survivors(dead), compacted_outputs[1])] if dead is not None else [])
    gone = np.zeros(expected.seq.size, dtype=bool)
    gone[missing] = _output_deleted(report, expected.kept(missing), written)
    # The key view counts what was delivered for the records that had to be: in a live run, those
    # whose source is below the group's offsets; and not the records whose delivery is gone.
    _judge_keys(report, delivered.seq[judged & ~deleted & _below(delivered.src_partition, delivered.src_offset,
                                                                 cutoff)], expected.seq[~gone])
    reordered = np.concatenate([reordered_pairs(topic) for topic, _, _ in written])
    report.reordered, report.samples["reordered"] = int(reordered.size), reordered[:SAMPLE].tolist()
    torn: list[str] = []
    cut: list[str] = []
    for topic, trims, compacted in written:
        if compacted:  # compaction removes records of committed transactions: none can be judged whole
            continue
        checked, torn_here, cut_here = torn_transactions(topic, _below(topic.src_partition, topic.src_offset, cutoff),
                                                         cut_records(topic, trims))
        report.transactions_checked += checked
        torn += torn_here
        cut += cut_here
    report.torn, report.samples["torn"] = len(torn), torn[:SAMPLE]
    report.transactions_output_deleted, report.samples["transactions_output_deleted"] = len(cut), cut[:SAMPLE]


def _output_deleted(report: VerifyReport, missing: TopicIndex,
                    written: list[tuple[TopicIndex, Trims, bool]]) -> np.ndarray:
    """Split the missing deliveries into lost and output_deleted; return which are output_deleted."""
    gone = below_horizons(missing.partition, missing.offset, missing.digest, written[0][1],
                          written[1][1] if len(written) > 1 else {})
    for (topic, _, compacted), belongs_here in zip(written, belongs(missing.digest)):
        if compacted:
            gone |= belongs_here & displaced_by_compaction(missing, topic)
    report.lost, report.output_deleted = int(np.count_nonzero(~gone)), int(np.count_nonzero(gone))
    report.samples.update({"lost": missing.seq[~gone][:SAMPLE].tolist(),
                           "output_deleted": missing.seq[gone][:SAMPLE].tolist()})
    return gone


def committed_floors(committed_in: TopicIndex, ends: dict[int, int]) -> dict[int, int]:
    """Per input partition, the offset after its last committed record (0 where it holds none)."""
    after_last = committed_in.next_offsets()
    return {partition: after_last.get(partition, 0) for partition in ends}


def group_offset_mismatches(topic: str, group: str, offsets: dict[int, int], ends: dict[int, int],
                            floors: dict[int, int] | None = None) -> list[str]:
    """One line per partition whose group offset is wrong: not its end, or with floors, outside [floor, end].

    `floors` (from `committed_floors`) serve a group that may stop after the last committed record,
    short of a tail of aborted records and markers. A partition without
    a committed offset (-1) counts as at 0.
    """
    lines = []
    for partition, end in sorted(ends.items()):
        offset = offsets.get(partition, -1)
        low = end if floors is None else floors[partition]
        if low <= max(offset, 0) <= end:
            continue
        if floors is None:
            lines.append(f"{topic}[{partition}]: group {group} at {offset}, end {end}")
        else:
            lines.append(f"{topic}[{partition}]: group {group} at {offset}, outside [{low}, {end}]"
                         f" (after the last committed record, end)")
    return lines


def _below(partitions: np.ndarray, offsets: np.ndarray, bounds: dict[int, int] | None) -> np.ndarray:
    """Which (partition, offset) pairs lie under a per-partition bound; all of them without bounds."""
    if bounds is None:
        return np.ones(offsets.size, dtype=bool)
    return (partitions >= 0) & (offsets < _bounds(partitions, bounds))


def _judge(report: VerifyReport, delivered: TopicIndex, judged: np.ndarray, committed_in: TopicIndex,
           expected: TopicIndex, claimed: np.ndarray | None = None, deleted: np.ndarray | None = None) -> np.ndarray:
    """The record view: the (partition, offset) each delivered record names, against the input's, and its value.

    `claimed` is what each delivery claims of its source (`claimed_digests`); None: all are output.
    `deleted` marks the deliveries whose source is gone: they count towards duplicates only.
    Returns which expected records were not delivered, all counted as lost here.
    """
    delivered_src = _pack(delivered.src_partition, delivered.src_offset)
    committed_src = _pack(committed_in.partition, committed_in.offset)
    # Two deliveries naming one source are a duplicate whatever became of the source since.
    sources, deliveries = np.unique(delivered_src[judged & named_sources(delivered.src_partition,
                                                                         delivered.src_offset)], return_counts=True)
    report.duplicates = int((deliveries - 1).sum())
    if deleted is not None:
        judged = judged & ~deleted
    from_committed = _members(delivered_src, committed_src)
    wrong_value, wrongly_dead = (judged & from_committed & wrong for wrong in value_mismatches(
        _lookup(delivered_src, committed_src, committed_in.digest, UNKNOWN_DIGEST),
        delivered.digest if claimed is None else claimed))
    report.wrong_value, report.wrongly_dead_lettered = int(np.count_nonzero(wrong_value)), int(np.count_nonzero(wrongly_dead))
    in_input = (delivered.src_offset >= 0) & _below(delivered.src_partition, delivered.src_offset,
                                                    committed_in.end_offsets)
    lost = ~_members(_pack(expected.partition, expected.offset), delivered_src)
    unexpected = judged & ~in_input
    aborted = judged & in_input & ~from_committed
    report.lost, report.unexpected, report.aborted_reads = (int(np.count_nonzero(m)) for m in (lost, unexpected, aborted))
    duplicated = _members(delivered_src, sources[deliveries > 1])
    report.samples.update({"duplicates": np.unique(delivered.seq[duplicated])[:SAMPLE].tolist(),
                           "lost": expected.seq[lost][:SAMPLE].tolist(),
                           "unexpected": delivered.seq[unexpected][:SAMPLE].tolist(),
                           "aborted_reads": delivered.seq[aborted][:SAMPLE].tolist(),
                           "wrong_value": delivered.seq[wrong_value][:SAMPLE].tolist(),
                           "wrongly_dead_lettered": delivered.seq[wrongly_dead][:SAMPLE].tolist()})
    return lost


def judgeable(partitions: np.ndarray, offsets: np.ndarray, stable: dict[int, int] | None) -> np.ndarray:
    """Which deliveries can be judged now: those whose source is below the stable offsets read (live), or names another topic."""
    return _below(partitions, offsets, stable) | (partitions == FOREIGN_SOURCE)


def named_sources(partitions: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Which deliveries name an input position (eos.src of the input topic, or a source found by key)."""
    return (partitions >= 0) & (offsets >= 0)


def deleted_sources(partitions: np.ndarray, offsets: np.ndarray, log_start: dict[int, int]) -> np.ndarray:
    """Which deliveries name an input offset below its partition's log start: retention deleted their source."""
    return named_sources(partitions, offsets) & (offsets < _bounds(partitions, log_start))


def compacted_away(delivered: TopicIndex, compacted_input: TopicIndex) -> np.ndarray:
    """Which deliveries name an input offset inside the log that no record holds any more: compaction removed it.

    Only for a compacted input: in any other log the only offsets without a record are
    transaction markers, and a delivery naming one is a sink's error (an aborted read).
    """
    inside = ((delivered.src_partition >= 0) & (delivered.src_offset >= 0)
              & (delivered.src_offset < _bounds(delivered.src_partition, compacted_input.end_offsets)))
    held = _members(_pack(delivered.src_partition, delivered.src_offset),
                    _pack(compacted_input.partition, compacted_input.offset))
    return inside & ~held


def claimed_digests(out: TopicIndex, dead: TopicIndex | None) -> np.ndarray:
    """What each delivery (output, then dead letters) says process made of its source: its value's digest, or refusal."""
    if dead is None:
        return out.digest
    return np.concatenate((out.digest, np.full(dead.seq.size, POISON_DIGEST, dtype=np.int64)))


def value_mismatches(expected: np.ndarray, claimed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(wrong values, wrongly dead-lettered): deliveries whose claim is not their source's expected digest."""
    wrong = (expected != UNKNOWN_DIGEST) & (claimed != UNKNOWN_DIGEST) & (expected != claimed)
    refused = claimed == POISON_DIGEST
    return wrong & ~refused, wrong & refused


def _judge_keys(report: VerifyReport, delivered_keys: np.ndarray, expected_keys: np.ndarray) -> None:
    """The key view: each key delivered as many times as the committed input holds it."""
    keys, index = np.unique(np.concatenate((delivered_keys, expected_keys)), return_inverse=True)
    surplus = (np.bincount(index[: delivered_keys.size], minlength=keys.size)
               - np.bincount(index[delivered_keys.size:], minlength=keys.size))
    report.key_surplus, report.key_deficit = int(surplus[surplus > 0].sum()), int(-surplus[surplus < 0].sum())
    report.samples.update({"key_surplus": keys[surplus > 0][:SAMPLE].tolist(),
                           "key_deficit": keys[surplus < 0][:SAMPLE].tolist()})


def _conclude(report: VerifyReport) -> VerifyReport:
    # source_deleted and output_deleted are no violations: they count what retention or compaction
    # deleted, which a correct pipeline cannot prevent.
    for name, count in (("duplicates", report.duplicates), ("lost", report.lost), ("unexpected", report.unexpected),
                        ("aborted_reads", report.aborted_reads), ("key_surplus", report.key_surplus),
                        ("key_deficit", report.key_deficit), ("reordered", report.reordered), ("torn", report.torn),
                        ("wrong_value", report.wrong_value), ("wrongly_dead_lettered", report.wrongly_dead_lettered)):
        if count:
            report.violations.append(f"{name}: {count}")
    report.violations += [f"hanging: {h}" for h in report.hanging_partitions]
    report.violations += [f"group offset: {m}" for m in report.group_offset_mismatches]
    report.ok = not report.violations
    return report
