"""The verifier's pure checks on hand-made indexes: torn, reordered, matching by key, group offsets, values, log start."""

from __future__ import annotations

import numpy as np
import pytest

from conf.headers import read_txn_header, transaction_identity, txn_header, txn_pipeline
from streaming.verify.topic_index import FOREIGN_SOURCE, POISON_DIGEST, TOMBSTONE_DIGEST, UNKNOWN_DIGEST
from streaming.verify.checks import (TopicIndex, VerifyReport, _conclude, _judge, _members, committed_floors,
                                     group_offset_mismatches, judge_records, reordered_pairs, sources_by_key,
                                     torn_transactions)

A, B, C, E = "0:3:00000000000000a", "1:3:00000000000000b", "*:4:00000000000000c", "0:2:00000000000000e"


def output(rows: list[tuple], names: tuple[str, ...] = (A, B, C, E)) -> TopicIndex:
    """An output topic's index from (seq, partition, offset, src partition, src offset, eos.txn or None, size)."""
    columns = list(zip(*rows)) if rows else [()] * 7
    tokens = [token(name) if name else -1 for name in columns[5]]
    as_array = lambda values: np.asarray(values, dtype=np.int64)  # noqa: E731
    return TopicIndex(*(as_array(c) for c in columns[:5]), as_array(tokens), as_array(columns[6]), {},
                      {token(name): name for name in names})


def token(identity: str) -> int:
    """The attempt token a verifier keeps for a transaction identity."""
    return read_txn_header(txn_header(identity.encode(), 1)[1])[1]


def test_a_transaction_with_fewer_records_than_declared_is_torn_and_named():
    index = output([(1, 0, 0, 0, 0, A, 2), (2, 1, 0, 0, 1, A, 2),  # whole: 2 of 2, over two output partitions
                    (3, 0, 1, 1, 0, B, 3), (4, 0, 2, 1, 1, B, 3),  # torn: 2 of 3
                    (5, 1, 1, 2, 0, None, 0)])  # no eos.txn (the at-least-once sink): not judged
    assert torn_transactions(index, np.ones(5, dtype=bool)) == (2, [B], [])


def test_a_transaction_is_judged_once_any_of_its_records_is_settled():
    index = output([(1, 0, 0, 0, 0, A, 2), (3, 0, 1, 1, 0, B, 3), (4, 0, 2, 1, 1, B, 3)])
    assert torn_transactions(index, np.array([False, False, False])) == (0, [], [])
    assert torn_transactions(index, np.array([False, False, True])) == (1, [B], [])


def test_an_extra_copy_of_a_record_is_a_duplicate_not_a_torn_transaction():
    index = output([(1, 0, 0, 0, 0, A, 1), (1, 0, 1, 0, 0, A, 1)])
    assert torn_transactions(index, np.ones(2, dtype=bool)) == (1, [], [])


def test_an_empty_topic_has_nothing_to_judge():
    assert torn_transactions(output([]), np.zeros(0, dtype=bool)) == (0, [], [])
    assert reordered_pairs(output([])).tolist() == []


def test_a_reordered_pair_is_counted_within_an_input_and_output_partition_pair():
    index = output([(10, 0, 0, 0, 5, A, 1), (11, 0, 1, 0, 3, A, 1),  # in[0] -> out[0]: 5 then 3, reordered
                    (12, 1, 0, 0, 1, A, 1), (13, 0, 2, 1, 9, B, 1),  # another output partition, another input
                    (14, 1, 1, 0, 4, A, 1), (15, 0, 3, 0, 6, A, 1)])  # in order within out[1] and on in out[0]
    assert reordered_pairs(index).tolist() == [11]


def test_interleaved_input_partitions_and_adjacent_duplicates_are_not_reordered():
    index = output([(1, 0, 0, 0, 1, A, 1), (2, 0, 1, 1, 0, B, 1), (3, 0, 2, 0, 2, A, 1), (3, 0, 3, 0, 2, A, 1)])
    assert reordered_pairs(index).tolist() == []


def test_each_attempt_has_its_own_identity_naming_pipeline_partition_and_batch_and_its_size_per_topic():
    first, second = transaction_identity("app:x", 2, 9), transaction_identity("app:x", 2, 9)
    batch = transaction_identity("app:x", None, 9)
    assert first != second and first.startswith(b"app:x:2:9:") and batch.startswith(b"app:x:*:9:")
    name, value = txn_header(first, 1000)
    assert name == "eos.txn" and value == first + b":1000"
    token = int(first.rsplit(b":", 1)[1], 16)
    assert read_txn_header(value) == (first, token, 1000) and token < 2 ** 60
    assert txn_pipeline(value) == b"app:x", "an app id holding ':' is read whole, the other fields from the right"
    assert txn_pipeline(b"2:9:%015x:1000" % token) is None, "a value written before the pipeline field names none"


def headerless(rows: list[tuple]) -> TopicIndex:
    """A copier's output (no eos.src, no eos.txn) from (seq, partition, offset)."""
    return output([(seq, partition, offset, -1, -1, None, 0) for seq, partition, offset in rows])


def test_matching_by_key_names_each_output_records_input_and_prefers_a_committed_one():
    committed = headerless([(10, 0, 0), (11, 0, 1), (20, 1, 0)])
    everything = headerless([(10, 0, 0), (11, 0, 1), (12, 0, 2), (20, 1, 0)])  # 12 was aborted
    delivered = sources_by_key(headerless([(11, 0, 5), (20, 1, 6), (12, 0, 7), (99, 0, 8)]), [committed, everything])
    assert delivered.src_partition.tolist() == [0, 1, 0, -1]
    assert delivered.src_offset.tolist() == [1, 0, 2, -1]
    assert delivered.offset.tolist() == [5, 6, 7, 8] and delivered.txn.tolist() == [-1] * 4


def test_matched_by_key_a_copy_twice_a_missing_key_an_aborted_key_and_a_stranger_are_each_caught():
    committed = headerless([(10, 0, 0), (11, 0, 1), (20, 1, 0)])
    committed.end_offsets = {0: 3, 1: 1}  # offset 0:2 holds the aborted record
    everything = headerless([(10, 0, 0), (11, 0, 1), (12, 0, 2), (20, 1, 0)])
    delivered = sources_by_key(headerless([(10, 0, 0), (10, 0, 1), (12, 0, 2), (99, 0, 3)]), [committed, everything])
    report = VerifyReport("in", "out", match_by="key")
    _judge(report, delivered, np.ones(4, dtype=bool), committed, committed)
    assert (report.duplicates, report.lost, report.aborted_reads, report.unexpected) == (1, 2, 1, 1)
    assert report.samples["duplicates"] == [10] and report.samples["lost"] == [11, 20]
    assert report.samples["aborted_reads"] == [12] and report.samples["unexpected"] == [99]


def test_matching_by_key_against_an_empty_input_leaves_every_source_unknown():
    delivered = sources_by_key(headerless([(1, 0, 0)]), [headerless([])])
    assert delivered.src_partition.tolist() == [-1] and delivered.src_offset.tolist() == [-1]


def test_the_spark_sinks_group_must_sit_exactly_at_each_input_partitions_end():
    ends = {0: 10, 1: 7, 2: 0}
    assert group_offset_mismatches("in", "app", {0: 10, 1: 7, 2: -1}, ends) == []
    assert group_offset_mismatches("in", "app", {0: 9, 1: 8}, ends) == [
        "in[0]: group app at 9, end 10", "in[1]: group app at 8, end 7"]


def test_matched_by_key_a_group_may_stop_anywhere_from_after_the_last_committed_record_to_the_end():
    # Partition 0: committed records at 0..5, then aborted records and markers up to the end, 10.
    # Partition 1: only aborted records, so nothing had to be copied. Partition 2: empty.
    committed = headerless([(seq, 0, seq) for seq in range(6)])
    ends = {0: 10, 1: 4, 2: 0}
    floors = committed_floors(committed, ends)
    assert floors == {0: 6, 1: 0, 2: 0}
    for at_floor_or_end in ({0: 6, 1: -1, 2: -1}, {0: 10, 1: 4, 2: 0}, {0: 8, 1: 2}):
        assert group_offset_mismatches("in", "app", at_floor_or_end, ends, floors) == []
    assert group_offset_mismatches("in", "app", {0: 5, 1: 5, 2: 1}, ends, floors) == [
        "in[0]: group app at 5, outside [6, 10] (after the last committed record, end)",
        "in[1]: group app at 5, outside [0, 4] (after the last committed record, end)",
        "in[2]: group app at 1, outside [0, 0] (after the last committed record, end)"]


@pytest.mark.parametrize("seed", range(5))
def test_members_answers_as_np_isin_does(seed):
    rng = np.random.default_rng(seed)
    values = rng.integers(0, 5_000, 20_000)
    pool = rng.integers(0, 5_000, int(rng.integers(0, 3_000)))  # repeats, gaps, sometimes empty
    assert np.array_equal(_members(values, pool), np.isin(values, pool))
    assert np.array_equal(_members(values, pool[:0]), np.zeros(values.size, dtype=bool))
    assert np.array_equal(_members(values[:0], pool), np.zeros(0, dtype=bool))


def input_partition(inputs: list[tuple], log_start: int = 0) -> TopicIndex:
    """Input partition 0, read read_committed, from (seq, offset, expected digest) rows."""
    seq, offset, digest = (np.asarray(c, dtype=np.int64) for c in (zip(*inputs) if inputs else [(), (), ()]))
    empty = np.zeros(0, dtype=np.int64)
    return TopicIndex(seq, np.zeros(seq.size, dtype=np.int64), offset, empty, empty, empty, empty,
                      {0: int(offset.max(initial=-1)) + 1}, digest=digest, log_start={0: log_start})


def judged(inputs: list[tuple], out: list[tuple], dead: list[tuple] = (), log_start: int = 0,
           compacted_held: list[int] | None = None) -> VerifyReport:
    """judge_records, as the final verify runs it, over input partition 0 and one-partition outputs.

    `inputs` are (seq, offset, expected digest); deliveries are (seq, source offset, value digest),
    with FOREIGN_SOURCE for a source in another topic. `compacted_held`: the input is compacted, and
    these offsets still hold a record (read_uncommitted).
    """
    as_array = lambda values: np.asarray(values, dtype=np.int64)  # noqa: E731
    empty = as_array([])
    committed = input_partition(inputs, log_start)

    def delivered(rows) -> TopicIndex:
        seq, src, digest = (as_array(c) for c in (zip(*rows) if rows else [(), (), ()]))
        src_partition = np.where(src == FOREIGN_SOURCE, FOREIGN_SOURCE, 0)
        return TopicIndex(seq, np.zeros(seq.size, dtype=np.int64), np.arange(seq.size), src_partition,
                          np.where(src == FOREIGN_SOURCE, -1, src), np.full(seq.size, -1), np.zeros(seq.size), {},
                          digest=digest)
    compacted = None
    if compacted_held is not None:
        held = as_array(compacted_held)
        compacted = TopicIndex(held, np.zeros(held.size, dtype=np.int64), held, empty, empty, empty, empty,
                               committed.end_offsets, log_start={0: log_start})
    report = VerifyReport("in", "out")
    judge_records(report, committed, delivered(out), delivered(dead), None, None, compacted)
    return _conclude(report)


def test_a_wrong_value_and_a_good_or_tombstone_record_dead_lettered_each_fail_the_run_apart():
    inputs = [(0, 0, 100), (1, 1, 101), (2, 2, POISON_DIGEST), (3, 3, TOMBSTONE_DIGEST), (4, 4, 104),
              (5, 5, POISON_DIGEST), (6, 6, TOMBSTONE_DIGEST)]
    report = judged(inputs,
                    out=[(0, 0, 100), (1, 1, 999), (3, 3, TOMBSTONE_DIGEST), (5, 5, 555)],  # 1: wrong; 5: poison output
                    dead=[(2, 2, 0), (4, 4, 0), (6, 6, 0)])  # 4, a good record, and 6, a tombstone, dead-lettered
    assert (report.wrong_value, report.wrongly_dead_lettered) == (2, 2)
    assert report.samples["wrong_value"] == [1, 5] and report.samples["wrongly_dead_lettered"] == [4, 6]
    assert report.duplicates == report.lost == report.unexpected == report.key_surplus == report.key_deficit == 0
    assert report.violations == ["wrong_value: 2", "wrongly_dead_lettered: 2"]


def test_poison_dead_lettered_and_a_tombstone_carried_are_right():
    report = judged([(0, 0, POISON_DIGEST), (1, 1, TOMBSTONE_DIGEST), (2, 2, 7)],
                    out=[(1, 1, TOMBSTONE_DIGEST), (2, 2, 7)], dead=[(0, 0, 0)])
    assert report.ok and report.violations == []


def test_a_record_whose_eos_src_names_another_topic_is_unexpected_not_a_delivery_of_the_input():
    # Offset 1 of the input is never delivered; a record of another pipeline names position 0:1 of its own input.
    report = judged([(0, 0, 5), (1, 1, 6)], out=[(0, 0, 5), (1, FOREIGN_SOURCE, 6)])
    assert (report.unexpected, report.lost, report.duplicates) == (1, 1, 0)
    assert report.samples["unexpected"] == [1] and report.samples["lost"] == [1]


def test_deliveries_whose_source_retention_deleted_are_reported_apart_and_judged_no_further():
    # The input's log start is 3: offsets 0..2 were deleted, their deliveries still stand in the output.
    report = judged([(3, 3, 13), (4, 4, 14)], out=[(0, 0, 10), (1, 1, 11), (2, 2, 12), (3, 3, 13), (4, 4, 14)],
                    log_start=3)
    assert report.source_deleted == 3 and report.samples["source_deleted"] == [0, 1, 2]
    assert report.aborted_reads == report.key_surplus == report.unexpected == report.lost == 0
    assert report.ok, report.violations


def test_deliveries_whose_source_compaction_removed_are_reported_apart_only_for_a_compacted_input():
    # Offsets 1 and 2 were committed, delivered, then compacted away; the input ends at offset 4.
    inputs, out = [(0, 0, 10), (3, 3, 13)], [(0, 0, 10), (1, 1, 11), (2, 2, 12), (3, 3, 13)]
    compacted = judged(inputs, out=out, compacted_held=[0, 3])
    assert compacted.source_deleted == 2 and compacted.samples["source_deleted"] == [1, 2]
    assert compacted.ok, compacted.violations
    strict = judged(inputs, out=out)  # a log that deletes never loses a record above its start
    assert strict.aborted_reads == 2 and not strict.ok
    beyond = judged(inputs, out=[*out, (9, 4, 14)], compacted_held=[0, 3])
    assert beyond.source_deleted == 2 and beyond.unexpected == 1, "past the input's end is unexpected, compacted or not"


def test_two_deliveries_of_one_source_are_a_duplicate_though_retention_or_compaction_deleted_it():
    # The input's log start is 3: offset 1 was deleted, and an output record and a dead letter both name it.
    report = judged([(3, 3, 13)], out=[(1, 1, 11), (2, 2, 12), (3, 3, 13)], dead=[(1, 1, 0)], log_start=3)
    assert report.duplicates == 1 and report.samples["duplicates"] == [1]
    assert report.source_deleted == 3, "still a count of the deliveries whose source is gone"
    assert report.aborted_reads == report.key_surplus == report.wrongly_dead_lettered == report.lost == 0
    assert report.violations == ["duplicates: 1"]
    compacted = judged([(0, 0, 10), (3, 3, 13)], out=[(0, 0, 10), (2, 2, 12), (2, 2, 12), (3, 3, 13)],
                       compacted_held=[0, 3])  # offset 2 was committed, delivered twice, then compacted away
    assert (compacted.duplicates, compacted.source_deleted, compacted.aborted_reads) == (1, 2, 0)
    assert compacted.violations == ["duplicates: 1"]


def trimmed(index: TopicIndex, log_start: dict[int, int]) -> TopicIndex:
    """The index as a read finds a topic whose partitions retention trimmed to these log starts."""
    index.log_start, index.trimmed = dict(log_start), dict(log_start)
    return index


def judged_outputs(inputs: list[tuple], out: TopicIndex, dead: TopicIndex | None = None,
                   compacted_outputs: tuple[bool, bool] = (False, False)) -> VerifyReport:
    """judge_records, as the final verify runs it, over input partition 0 and hand-made output indexes."""
    report = VerifyReport("in", "out")
    judge_records(report, input_partition(inputs), out, dead, None, None, compacted_outputs=compacted_outputs)
    return _conclude(report)


def test_inputs_whose_delivery_retention_deleted_from_the_output_are_output_deleted_but_one_above_the_horizon_lost():
    # Input 0..9 went to output partitions 0 and 1; partition 0 was trimmed to offset 4, deleting the
    # deliveries of 0..3. Its lowest survivor names 5, the horizon: 6, missing above it, is lost.
    out = trimmed(output([(5, 0, 4, 0, 5, None, 0), (7, 0, 5, 0, 7, None, 0), (9, 0, 6, 0, 9, None, 0),
                          (4, 1, 0, 0, 4, None, 0), (8, 1, 1, 0, 8, None, 0)]), {0: 4})
    report = judged_outputs([(o, o, 100 + o) for o in range(10)], out)
    assert (report.output_deleted, report.lost) == (4, 1)
    assert report.samples["output_deleted"] == [0, 1, 2, 3] and report.samples["lost"] == [6]
    assert report.violations == ["lost: 1", "key_deficit: 1"], "the key view counts the lost record only"
    untrimmed = output([(5, 0, 4, 0, 5, None, 0), (7, 0, 5, 0, 7, None, 0), (9, 0, 6, 0, 9, None, 0),
                        (4, 1, 0, 0, 4, None, 0), (8, 1, 1, 0, 8, None, 0)])
    assert judged_outputs([(o, o, 100 + o) for o in range(10)], untrimmed).lost == 5, "no trim, no horizon"


def test_a_transaction_the_trim_cut_is_not_torn_and_one_short_above_the_horizon_is():
    # Output partition 0 was trimmed to offset 4: A's two records (sources 0, 1), E's record of source 2
    # and B's of source 4 are gone. E's other record (source 3) is in partition 1, below the horizon 5;
    # B keeps one record in the trimmed partition. C lacks source 9, above the horizon: torn.
    out = trimmed(output([(3, 1, 0, 0, 3, E, 2), (5, 0, 4, 0, 5, B, 3), (6, 1, 1, 0, 6, B, 3),
                          (7, 1, 2, 0, 7, C, 3), (8, 1, 3, 0, 8, C, 3)]), {0: 4})
    report = judged_outputs([(o, o, 100 + o) for o in range(10)], out)
    assert (report.torn, report.transactions_output_deleted, report.transactions_checked) == (1, 2, 3)
    assert report.samples["torn"] == [C] and report.samples["transactions_output_deleted"] == sorted([B, E])
    assert (report.output_deleted, report.lost) == (4, 1)
    assert report.violations == ["lost: 1", "key_deficit: 1", "torn: 1"]


def test_the_dead_letters_horizon_explains_only_records_that_belong_in_the_dead_letters():
    # 2 and 5 are poison; the dead letters were trimmed to offset 1, deleting 2's, so their horizon is 5.
    # 3's digest is unknown, so either horizon serves; 4 belongs in the output, which was not trimmed.
    inputs = [(0, 0, 100), (1, 1, 101), (2, 2, POISON_DIGEST), (3, 3, UNKNOWN_DIGEST), (4, 4, 104),
              (5, 5, POISON_DIGEST), (6, 6, 106)]
    out = output([(0, 0, 0, 0, 0, None, 0), (1, 0, 1, 0, 1, None, 0), (6, 0, 2, 0, 6, None, 0)])
    dead = trimmed(output([(5, 0, 1, 0, 5, None, 0)]), {0: 1})
    report = judged_outputs(inputs, out, dead)
    assert (report.output_deleted, report.lost) == (2, 1)
    assert report.samples["output_deleted"] == [2, 3] and report.samples["lost"] == [4]


def test_on_a_compacted_output_a_delivery_displaced_by_a_later_one_of_its_key_or_a_tombstone_is_output_deleted():
    # Keys 10 and 11 were delivered again later, 12 is a tombstone, 13 is nowhere, and key 14's
    # delivery that is held came from an earlier source than the missing one: it cannot have displaced it.
    inputs = [(10, 0, 100), (11, 1, 101), (10, 2, 102), (12, 3, TOMBSTONE_DIGEST), (13, 4, 104), (11, 5, 105),
              (14, 6, 106), (14, 7, 107)]
    out = output([(10, 0, 2, 0, 2, A, 3), (11, 0, 5, 0, 5, A, 3), (14, 0, 6, 0, 6, B, 2)])
    report = judged_outputs(inputs, out, compacted_outputs=(True, False))
    assert (report.output_deleted, report.lost) == (3, 2)
    assert report.samples["output_deleted"] == [10, 11, 12] and report.samples["lost"] == [13, 14]
    assert report.transactions_checked == report.torn == 0, "compaction leaves no transaction whole to judge"
    assert report.violations == ["lost: 2", "key_deficit: 2"]
    strict = judged_outputs(inputs, out)
    assert (strict.output_deleted, strict.lost, strict.torn) == (0, 5, 2)


def test_a_short_transaction_whose_records_in_the_trimmed_partition_all_lie_above_its_lowest_survivor_is_torn():
    # Partition 0 was trimmed to offset 2: deliveries of 0..2 are gone. A holds the lowest survivor
    # (source 3) and is whole; B's record there (source 5) follows A's, so the trim took nothing of B,
    # and B lacks source 6, which no trim explains.
    out = trimmed(output([(3, 0, 2, 0, 3, A, 2), (4, 1, 0, 0, 4, A, 2), (5, 0, 3, 0, 5, B, 2)]), {0: 2})
    report = judged_outputs([(o, o, 100 + o) for o in range(7)], out)
    assert (report.torn, report.transactions_output_deleted, report.output_deleted, report.lost) == (1, 0, 3, 1)
    assert report.samples["torn"] == [B] and report.samples["lost"] == [6]
