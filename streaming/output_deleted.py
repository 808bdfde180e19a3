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
  trim when it has a record in a trimmed partition, or names a source of some p below H(p):
  its records in a trimmed partition below the log start all named sources below the lowest
  survivor there, which belongs to a later transaction of p, or to itself;
- compaction keeps only a key's last record, so on a compacted topic a missing delivery is
  `output_deleted` when it is a tombstone (removed after delete.retention.ms) or when the topic
  holds its key from a source that may come later in the same partition: another input
  partition's, one without a source, or a later offset of its own partition. An earlier one of
  its own partition cannot have displaced it. Transactions are not judged on a compacted topic.
"""

from __future__ import annotations

import numpy as np

from streaming.topic_index import POISON_DIGEST, TOMBSTONE_DIGEST, UNKNOWN_DIGEST, TopicIndex, _bounds

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


def below_horizons(missing: TopicIndex, out_trims: Trims, dead_trims: Trims) -> np.ndarray:
    """Which missing deliveries of committed input records lie below the horizon of the topic they belong in."""
    in_out, in_dead = belongs(missing.digest)
    return ((in_out & (missing.offset < horizons(out_trims, missing.partition)))
            | (in_dead & (missing.offset < horizons(dead_trims, missing.partition))))


def cut_records(topic: TopicIndex, trims: Trims) -> np.ndarray:
    """Which records show that a trim may have cut their transaction: in a trimmed partition, or a source below H."""
    named = (topic.src_partition >= 0) & (topic.src_offset >= 0)
    in_trimmed = _bounds(topic.partition, dict.fromkeys(trims, 1)) == 1
    return in_trimmed | (named & (topic.src_offset < horizons(trims, topic.src_partition)))


def transaction_cut(lowest: dict[int, int], partitions: set[int], trims: Trims) -> bool:
    """Whether a short transaction (its lowest source per input partition, its output partitions) was cut by a trim."""
    if partitions & trims.keys():
        return True
    named = np.fromiter(lowest, dtype=np.int64, count=len(lowest))
    return bool(np.any(np.fromiter(lowest.values(), dtype=np.int64, count=len(lowest)) < horizons(trims, named)))


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
