"""What retention (or compaction) deleted from the output and the dead letters, told apart from losses.

Once an output or dead-letter partition's log start has moved past records no read saw
(`TopicIndex.trimmed`), their inputs look undelivered and their transactions short. They are
counted as `output_deleted` and `transactions_output_deleted` (no violation) where the deletion
explains them, and as `lost` and `torn` where it cannot:

- within one output topic-partition q, the records delivered for one input partition p appear
  in increasing eos.src order (the sink commits p's transactions in order; `reordered` checks
  it), and retention deletes a prefix of q. So every deleted record of p in q named a source
  below the lowest surviving source of p in q;
- a topic's horizon for p, H(p), is the highest of those lowest survivors over its trimmed
  partitions, where a trimmed partition holding no survivor of p counts as above every offset
  (all of p's records there may be gone), and below every offset if no partition was trimmed;
- a committed input record of p at offset o that was never delivered is `output_deleted` when
  o < H(p) of the topic it belongs in: the dead letters if `process` refuses it, else the
  output, either when its expected digest is unknown;
- a transaction of a topic that shows fewer records than its eos.txn declares was cut by the
  trim when it names a source of some p below H(p), or holds the lowest survivor of p in a
  trimmed partition (`transaction_cut`): p's transactions cover runs of its offsets one after
  another, so the record just after one it lost in a trimmed partition q is either its own, then
  the lowest survivor of p in q, or a later transaction's, then all its sources lie below H(p).
  A short transaction with records in a trimmed partition that are all above the lowest
  survivor of their input partition there lost nothing to the trim, and is still torn;
- compaction keeps only a key's last record, so on a compacted topic a missing delivery is
  `output_deleted` when it is a tombstone (removed after delete.retention.ms) or when the topic
  holds its key from a source that may come later in the same partition: another input
  partition's, one without a source, or a later offset of its own partition. An earlier one of
  its own partition cannot have displaced it. Transactions are not judged on a compacted topic.
"""

from __future__ import annotations

import numpy as np

from streaming.verify.topic_index import POISON_DIGEST, TOMBSTONE_DIGEST, UNKNOWN_DIGEST, TopicIndex, _bounds

NOTHING = np.iinfo(np.int64).min  # the horizon of a topic no trim reached: below every offset
EVERYTHING = np.iinfo(np.int64).max  # a trimmed partition without a survivor of p: above every offset

Trims = dict[int, dict[int, int]]  # per trimmed partition, per input partition, the lowest surviving source


def survivors(topic: TopicIndex) -> Trims:
    """Per trimmed partition of a topic, each input partition's lowest source among the records after the trim."""
    trims: Trims = {}
    for partition, start in topic.trimmed.items():
        after = ((topic.partition == partition) & (topic.offset >= start)
                 & (topic.src_partition >= 0) & (topic.src_offset >= 0))
        trims[partition] = lowest_sources(topic.src_partition[after], topic.src_offset[after])
    return trims


def lowest_sources(partitions: np.ndarray, offsets: np.ndarray) -> dict[int, int]:
    """The lowest offset named in each input partition."""
    lowest = np.full(int(partitions.max(initial=-1)) + 1, EVERYTHING, dtype=np.int64)
    np.minimum.at(lowest, partitions, offsets)
    return {partition: int(offset) for partition, offset in enumerate(lowest.tolist()) if offset != EVERYTHING}


def horizons(trims: Trims, partitions: np.ndarray) -> np.ndarray:
    """H(p) of one topic for each input partition given."""
    horizon = np.full(partitions.size, NOTHING, dtype=np.int64)
    for lowest in trims.values():
        horizon = np.maximum(horizon, _bounds(partitions, lowest, missing=EVERYTHING))
    return horizon


def belongs(digests: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(in the output, in the dead letters): where a committed input record's delivery belongs, both if unknown."""
    unknown = digests == UNKNOWN_DIGEST
    return (digests != POISON_DIGEST) | unknown, (digests == POISON_DIGEST) | unknown


def below_horizons(partitions: np.ndarray, offsets: np.ndarray, digests: np.ndarray, out_trims: Trims,
                   dead_trims: Trims) -> np.ndarray:
    """Which missing deliveries of committed input records lie below the horizon of the topic they belong in."""
    in_out, in_dead = belongs(digests)
    return ((in_out & (offsets < horizons(out_trims, partitions)))
            | (in_dead & (offsets < horizons(dead_trims, partitions))))


def cut_records(topic: TopicIndex, trims: Trims) -> np.ndarray:
    """Which records show that a trim may have cut their transaction (`transaction_cut`, record by record)."""
    named = (topic.src_partition >= 0) & (topic.src_offset >= 0)
    cut = named & (topic.src_offset < horizons(trims, topic.src_partition))
    for partition, lowest in trims.items():
        at = topic.partition == partition
        cut[at] |= ~named[at] | (topic.src_offset[at] <= _bounds(topic.src_partition[at], lowest, missing=EVERYTHING))
    return cut


def transaction_cut(lowest: dict[tuple[int, int], int], trims: Trims) -> bool:
    """Whether a trim may have cut a short transaction, from its lowest source per (its partition, input partition).

    It may if it names a source of some p below H(p) (its records deleted from a trimmed
    partition named lower sources than the survivors there), or if it holds the lowest survivor
    of p in a trimmed partition (its records there may straddle the log start). It holds it when
    it has a record of p there at or below that survivor: in a read from the log start only the
    survivor itself, and in a live read also records it read before the trim. A record without a
    source in a trimmed partition cannot be placed, so it counts too.
    """
    pairs = [(q, p) for q, p in lowest if p >= 0]
    if any(q in trims and (p < 0 or offset <= trims[q].get(p, EVERYTHING)) for (q, p), offset in lowest.items()):
        return True
    sources = np.array([p for _, p in pairs], dtype=np.int64)
    return bool(np.any(np.array([lowest[pair] for pair in pairs], dtype=np.int64) < horizons(trims, sources)))


def displaced_by_compaction(missing: TopicIndex, topic: TopicIndex) -> np.ndarray:
    """Which missing deliveries a compacted topic may have removed: tombstones, keys it holds from a later source."""
    keys, ids = np.unique(np.concatenate((topic.seq, missing.seq)), return_inverse=True)
    held, wanted = ids[:topic.seq.size], ids[topic.seq.size:]
    # One pair per (key, source partition); a record without a source (-1) or from another topic
    # (-2) is a partition of its own, so that it counts as another partition's.
    width = int(max(topic.src_partition.max(initial=0), missing.partition.max(initial=0))) + 3
    pairs = held * width + topic.src_partition + 2
    order = np.lexsort((topic.src_offset, pairs))
    last = np.ones(order.size, dtype=bool)
    last[:-1] = pairs[order][1:] != pairs[order][:-1]
    pair, highest = pairs[order][last], topic.src_offset[order][last]  # sorted, each pair once, its highest source
    own = wanted * width + missing.partition + 2
    has_own = later_own = np.zeros(own.size, dtype=bool)
    if pair.size:
        at = np.minimum(np.searchsorted(pair, own), pair.size - 1)
        has_own = pair[at] == own
        later_own = has_own & (highest[at] > missing.offset)
    other = np.bincount(pair // width, minlength=keys.size)[wanted] - has_own > 0
    return (missing.digest == TOMBSTONE_DIGEST) | other | later_own
