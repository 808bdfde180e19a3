"""The soak's live verify as a running account: each round reads and judges only what is new.

`verify(live=True)` does its arithmetic again over every record held after every fault, so a
soak's rounds grow with its topics: in the cluster soak 3468dc17 the verify took 11 s at 0.2
million records and 2 minutes at 5 million. `LiveLedger` keeps what the checks need of the past
instead of the records:
- for each input partition, the sequence number at each committed offset, and the digest of
  what `process` makes of its value (streaming/verify/topic_index.py);
- for each input partition, which offsets some record has been delivered for, and how often a
  judged record has been delivered for each;
- the deliveries not judged yet (their source lies above the stable offsets read), and those
  judged but not yet counted by the key view (their source lies above the group's offsets);
- the committed input records expected but not delivered (the losses), and the keys whose
  deliveries and expectations do not balance;
- the last source offset of each (input partition, output partition) pair, and each sink
  transaction's visible records and declared size (and, while it is not known whole, its
  lowest source per output and input partition);
- per output or dead-letter partition whose log start a read found past the offset it had read
  to (records it never saw were deleted), each input partition's lowest source read since.
A round then costs what its new records cost. Round for round, its counts equal those of
`judge_records` over everything held, and tests/unit/test_live_ledger.py holds the two together.
Its samples are the first ids found, not the smallest. The final verify still reads everything
afresh, with `verify`. Bounds that move back (group offsets or last stable offsets lower than
before, which an exactly-once sink never commits) keep the records already expected as expected.

Per-offset arrays start at the lowest offset held, which is each input partition's log start
(retention deletes below it and moves it up for ever), so they cost about 21 bytes per offset
from there, never from offset 0. A delivery whose source lies below the log start is counted as
`source_deleted` when it arrives and judged for duplicates only (two deliveries naming one
source are a duplicate whether or not the source still exists): deliveries of an offset below
the arrays are counted in a dict, which holds only such deliveries. Lost records below the log
start are dropped; a log start that moves up later does not undo the judgements made before.

Output that retention deleted before a round read it is told from lost output as the final
verify tells it (streaming/verify/deleted.py), from the records read after the gap: the split
of the losses into `lost` and `output_deleted`, and of short transactions into `torn` and
`transactions_output_deleted`, is made at every report, so a loss counted in one round moves to
`output_deleted` once a later round finds the trim that explains it (or back, while a trimmed
partition holds no survivor of its input partition yet). Compaction of the output is not
judged live: the final verify judges it.
"""

from __future__ import annotations

import functools
import threading

import numpy as np
from confluent_kafka import KafkaException

from conf.client_config import Connection
from streaming.verify.deleted import Trims, below_horizons, lowest_sources, transaction_cut
from streaming.process import TRANSFORMS
from streaming.verify.topic_index import UNKNOWN_DIGEST, TopicIndex, _bounds, read_index
from streaming.verify.verifier import live_bounds
from streaming.verify.checks import (DEFAULT_PROCESS, SAMPLE, VerifyReport, _below, _conclude, _members,
                                     claimed_digests, deleted_sources, judgeable, named_sources, reordered_pairs,
                                     value_mismatches)

_EMPTY = np.zeros(0, dtype=np.int64)
_NO_RECORD = np.iinfo(np.int64).min  # below every key_id: no committed record at this offset
READ_TIMEOUT_S = 60.0
READ_AHEAD_TIMEOUT_S = 10.0  # a read ahead gives up soon: the round reads whatever it left


class _ByOffset:
    """One growable array per input partition, indexed by offset from the lowest offset it holds."""

    def __init__(self, dtype, fill):
        self.dtype, self.fill = dtype, fill
        self.arrays: dict[int, np.ndarray] = {}
        self.bases: dict[int, int] = {}  # per partition, the offset at index 0

    def span(self, partition: int, low: int, high: int) -> tuple[np.ndarray, int]:
        """The partition's array and its base offset, grown to hold offsets low..high-1 (doubling upwards)."""
        array, base = self.arrays.get(partition), self.bases.get(partition, low)
        if array is None:
            array = np.full(max(high - low, 1024), self.fill, dtype=self.dtype)
        elif low < base or high > base + array.size:
            new_base = min(base, low)
            grown = np.full(max(max(high, base + array.size) - new_base, 2 * array.size), self.fill, dtype=self.dtype)
            grown[base - new_base:base - new_base + array.size] = array
            array, base = grown, new_base
        self.arrays[partition], self.bases[partition] = array, base
        return array, base

    def lookup(self, partitions: np.ndarray, offsets: np.ndarray) -> np.ndarray:
        """The values at (partition, offset); `fill` where nothing was ever set."""
        values = np.full(offsets.size, self.fill, dtype=self.dtype)
        for partition, array in self.arrays.items():
            base = self.bases[partition]
            inside = (partitions == partition) & (offsets >= base) & (offsets < base + array.size)
            values[inside] = array[offsets[inside] - base]
        return values

    def window(self, partition: int, low: int, high: int) -> np.ndarray:
        """The partition's values at offsets low..high-1 that it holds (a view, clipped to what it holds)."""
        array, base = self.arrays[partition], self.bases[partition]
        return array[max(low - base, 0):max(high - base, 0)]


class _Transactions:
    """One topic's sink transactions: visible records, declared size, and where those not known whole lie."""

    def __init__(self) -> None:
        self.visible: dict[int, int] = {}
        self.declared: dict[int, int] = {}
        # Per transaction not judged yet, or judged and short so far: its lowest source per (output
        # partition, input partition), which tells when it is judged and whether a trim cut it (-1
        # for the input partition of records without a source).
        self.lowest_source: dict[int, dict[tuple[int, int], int]] = {}
        self.judged: set[int] = set()
        self.short: set[int] = set()  # judged, with fewer records visible than declared
        self.names: dict[int, str] = {}

    def add(self, topic: TopicIndex) -> None:
        """Count the records of a new read."""
        self.names.update(topic.txn_names)
        stamped = topic.txn >= 0
        tokens, first, visible = np.unique(topic.txn[stamped], return_index=True, return_counts=True)
        declared = topic.txn_records[stamped][first]
        for token, count, size in zip(tokens.tolist(), visible.tolist(), declared.tolist()):
            self.visible[token] = self.visible.get(token, 0) + count
            self.declared.setdefault(token, size)
            if token in self.short and self.visible[token] >= self.declared[token]:
                self.short.discard(token)  # whole at last: it can never be short again
                self._forget(token)
        # Records of a transaction judged whole can tell nothing more.
        rows = stamped & _members(topic.txn, np.array([t for t in tokens.tolist()
                                                       if t not in self.judged or t in self.short], dtype=np.int64))
        named = named_sources(topic.src_partition[rows], topic.src_offset[rows])
        columns = (topic.txn[rows], topic.partition[rows], np.where(named, topic.src_partition[rows], -1),
                   np.where(named, topic.src_offset[rows], -1))
        # each (transaction, output partition, input partition)'s lowest source: its group's first row in this order
        order = np.lexsort(columns[::-1])
        token, out_partition, partition, offset = (values[order] for values in columns)
        first_of_group = np.ones(token.size, dtype=bool)
        first_of_group[1:] = ((token[1:] != token[:-1]) | (out_partition[1:] != out_partition[:-1])
                              | (partition[1:] != partition[:-1]))
        for t, q, p, o in zip(*(values[first_of_group].tolist() for values in (token, out_partition, partition,
                                                                                 offset))):
            lowest = self.lowest_source.setdefault(t, {})
            lowest[(q, p)] = min(o, lowest.get((q, p), o))

    def judge(self, cutoff: dict[int, int]) -> None:
        """Judge every transaction one of whose records names a source below the group's offsets."""
        for token, lowest in list(self.lowest_source.items()):
            if token not in self.judged and any(partition >= 0 and offset < cutoff.get(partition, 0)
                                                for (_, partition), offset in lowest.items()):
                self.judged.add(token)
                if self.visible[token] < self.declared[token]:
                    self.short.add(token)
                else:
                    self._forget(token)

    def torn(self, trims: Trims) -> tuple[list[str], list[str]]:
        """The identities of the judged transactions with fewer records visible than declared: (torn, cut by a trim)."""
        torn, cut = [], []
        for token in self.short:
            (cut if transaction_cut(self.lowest_source.get(token, {}), trims) else torn).append(self.names[token])
        return sorted(torn), sorted(cut)

    def _forget(self, token: int) -> None:
        self.lowest_source.pop(token, None)


class LiveLedger:
    """A running soak's live verify: reads only what is new and judges it against what it keeps of the past."""

    def __init__(self, input_topic: str | None = None, process: str = DEFAULT_PROCESS) -> None:
        """A ledger of one pipeline: its input topic (which eos.src must name) and the stream's process."""
        self._input_topic, self._process = input_topic, process
        self._next: dict[str, dict[int, int]] = {}  # per topic, the offset after the last record read
        self._ahead: dict[str, list[TopicIndex]] = {}  # per topic, records read ahead of the next round
        self._reading = threading.Lock()
        self._ends: dict[int, int] = {}  # the input's end offsets at its latest read
        self._log_start: dict[int, int] = {}  # the input's highest log starts read
        self._committed_seq = _ByOffset(np.int64, _NO_RECORD)
        self._expected_digest = _ByOffset(np.int64, UNKNOWN_DIGEST)  # what process makes of each committed record
        self._delivered_any = _ByOffset(bool, False)
        self._deliveries = _ByOffset(np.int32, 0)  # judged deliveries of each input offset from the log start
        self._deliveries_below: dict[tuple[int, int], int] = {}  # those of offsets below it (deleted sources)
        # (seq, source partition, source offset, claimed digest, source deleted when it arrived)
        self._unjudged = (_EMPTY, _EMPTY, _EMPTY, _EMPTY, np.zeros(0, dtype=bool))
        self._keys_pending = (_EMPTY, _EMPTY, _EMPTY)
        self._expected_below: dict[int, int] = {}
        self._lost = (_EMPTY, _EMPTY, _EMPTY)  # (source partition, source offset, seq)
        self._keys, self._balance = _EMPTY, _EMPTY  # keys with deliveries - expectations != 0, sorted
        self._last_source: dict[tuple[str, int, int], int] = {}
        self._transactions: dict[str, _Transactions] = {}
        # Per output topic, per partition whose records a read found deleted unread, the log start
        # it found (the latest such), and each input partition's lowest source read after it.
        self._trimmed: dict[str, dict[int, int]] = {}
        self._trims: dict[str, Trims] = {}
        self._counts = dict(output_committed=0, dead_lettered=0, duplicates=0, unexpected=0, aborted_reads=0,
                            reordered=0, wrong_value=0, wrongly_dead_lettered=0, source_deleted=0)
        self._samples: dict[str, list] = {name: [] for name in self._counts
                                          if name not in ("output_committed", "dead_lettered")}

    def read_round(self, bootstrap: str | Connection, topics: list[tuple[str, bool]]) -> list[TopicIndex]:
        """A round's records of each (topic, with eos headers) after those read before, read-ahead included.

        All or nothing: once a topic's records are read its offsets move on, so a read that fails
        keeps every topic's records read so far for the next try, which then judges them all.
        """
        with self._reading:
            chunks = {topic: self._ahead.pop(topic, []) for topic, _ in topics}
            try:
                for topic, with_src in topics:
                    chunks[topic].append(self._read_new(bootstrap, topic, with_src, READ_TIMEOUT_S))
            except BaseException:
                self._ahead.update(chunks)
                raise
        return [functools.reduce(TopicIndex.concatenated, chunks[topic]) for topic, _ in topics]

    def read_ahead(self, bootstrap: str | Connection, topics: list[tuple[str, bool]]) -> None:
        """Read what is new now, for the next round to judge; a read that fails leaves nothing behind.

        A read_committed read returns records below the last stable offset, which never change, so
        reading part of a round's records early and the rest at the round gives what one read at
        the round gives. The soak reads ahead while it waits for a recovery, when its own process
        is idle, so that a round's verify reads only the last few seconds.
        """
        for topic, with_src in topics:
            with self._reading:
                try:
                    chunk = self._read_new(bootstrap, topic, with_src, READ_AHEAD_TIMEOUT_S)
                except (KafkaException, TimeoutError, ValueError, RuntimeError):
                    return  # a broker down or paused: the round reads it all
                self._ahead.setdefault(topic, []).append(chunk)

    def _read_new(self, bootstrap: str | Connection, topic: str, with_src: bool, timeout_s: float) -> TopicIndex:
        held = self._next.setdefault(topic, {})
        chunk = read_index(bootstrap, topic, "read_committed", with_src, timeout_s=timeout_s, start_offsets=dict(held),
                           source_topic=self._input_topic if with_src else None,
                           process=None if with_src else TRANSFORMS[self._process])
        held.update(chunk.read_to())
        return chunk

    def add(self, committed_in: TopicIndex, out: TopicIndex, dead: TopicIndex | None, cutoff: dict[int, int],
            stable: dict[int, int], topics: tuple[str, str] = ("out", "dead")) -> VerifyReport:
        """Take a round's new records (input read_committed, output, dead letters) and return the report so far."""
        self._ends = committed_in.end_offsets or self._ends
        for partition, start in committed_in.log_start.items():
            self._log_start[partition] = max(start, self._log_start.get(partition, start))
        for partition in np.unique(committed_in.partition):
            inside = committed_in.partition == partition
            offsets = committed_in.offset[inside]
            for held, values in ((self._committed_seq, committed_in.seq), (self._expected_digest, committed_in.digest)):
                array, base = held.span(int(partition), int(offsets.min()), int(offsets.max()) + 1)
                array[offsets - base] = values[inside]
        self._counts["output_committed"] += int(out.seq.size)
        written = [(topics[0], out)] + ([(topics[1], dead)] if dead is not None else [])
        if dead is not None:
            self._counts["dead_lettered"] += int(dead.seq.size)
        delivered = TopicIndex.concatenated(out, dead) if dead is not None else out
        deleted = deleted_sources(delivered.src_partition, delivered.src_offset, self._log_start)
        self._tally("source_deleted", delivered.seq[deleted])
        arrived = (delivered.seq, delivered.src_partition, delivered.src_offset, claimed_digests(out, dead), deleted)
        self._mark_delivered(delivered.src_partition[~deleted], delivered.src_offset[~deleted])
        self._unjudged = tuple(np.concatenate((held, new)) for held, new in zip(self._unjudged, arrived))
        self._judge(stable)
        newly_expected = self._expect(stable, cutoff)
        self._count_keys(cutoff, newly_expected[2])
        for name, topic in written:
            self._reorder(name, topic)
            self._transactions.setdefault(name, _Transactions()).add(topic)
            self._survivors(name, topic)
        return self._report(stable, cutoff, topics)

    def _survivors(self, name: str, topic: TopicIndex) -> None:
        """Follow each trimmed partition's lowest source per input partition, from its latest trim on."""
        trimmed, trims = self._trimmed.setdefault(name, {}), self._trims.setdefault(name, {})
        for partition, start in topic.trimmed.items():
            trimmed[partition], trims[partition] = start, {}  # a new trim: the survivors are those after it
        named = named_sources(topic.src_partition, topic.src_offset)
        for partition, start in trimmed.items():
            after = named & (topic.partition == partition) & (topic.offset >= start)
            lowest = trims[partition]
            for source, offset in lowest_sources(topic.src_partition[after], topic.src_offset[after]).items():
                lowest[source] = min(offset, lowest.get(source, offset))

    def _mark_delivered(self, partitions: np.ndarray, offsets: np.ndarray) -> None:
        for partition in np.unique(partitions[partitions >= 0]):
            named = offsets[(partitions == partition) & (offsets >= 0)]
            if named.size:
                array, base = self._delivered_any.span(int(partition), int(named.min()), int(named.max()) + 1)
                array[named - base] = True

    def _judge(self, stable: dict[int, int]) -> None:
        """Judge each delivery whose source now lies below the stable offsets: duplicate, unexpected, aborted read, value."""
        judged = judgeable(self._unjudged[1], self._unjudged[2], stable)
        seq, partition, offset, claimed, deleted = (values[judged] for values in self._unjudged)
        self._unjudged = tuple(values[~judged] for values in self._unjudged)
        self._count_deliveries(seq, partition, offset)
        seq, partition, offset, claimed = (values[~deleted] for values in (seq, partition, offset, claimed))
        in_input = (offset >= 0) & (offset < _bounds(partition, self._ends))
        from_committed = in_input & (self._committed_seq.lookup(partition, offset) != _NO_RECORD)
        self._tally("unexpected", seq[~in_input])
        self._tally("aborted_reads", seq[in_input & ~from_committed])
        wrong_value, wrongly_dead = (from_committed & wrong for wrong in value_mismatches(
            self._expected_digest.lookup(partition, offset), claimed))
        self._tally("wrong_value", seq[wrong_value])
        self._tally("wrongly_dead_lettered", seq[wrongly_dead])
        self._keys_pending = tuple(np.concatenate((held, new)) for held, new in
                                   zip(self._keys_pending, (seq, partition, offset)))

    def _count_deliveries(self, seq: np.ndarray, partition: np.ndarray, offset: np.ndarray) -> None:
        """Count judged deliveries per source they name, deleted or not: each beyond a source's first is a duplicate."""
        named = named_sources(partition, offset)
        for source_partition in np.unique(partition[named]).tolist():
            at = named & (partition == source_partition)
            sources, times = np.unique(offset[at], return_counts=True)
            # Offsets below both the log start and the array's base go to a dict, so that a
            # delivery of a long-deleted source does not stretch the array down towards 0.
            counts, base = self._deliveries.arrays.get(source_partition), self._deliveries.bases.get(source_partition)
            floor = self._log_start.get(source_partition, 0) if counts is None else min(
                base, self._log_start.get(source_partition, base))
            dense = sources >= floor
            before = np.zeros(sources.size, dtype=np.int64)
            if dense.any():
                counts, base = self._deliveries.span(source_partition, int(sources[dense].min()),
                                                     int(sources[dense].max()) + 1)
                before[dense] = counts[sources[dense] - base]
                counts[sources[dense] - base] += times[dense].astype(np.int32)
            for i in np.flatnonzero(~dense).tolist():
                key = (source_partition, int(sources[i]))
                before[i] = self._deliveries_below.get(key, 0)
                self._deliveries_below[key] = int(before[i] + times[i])
            self._counts["duplicates"] += int((np.maximum(before + times - 1, 0) - np.maximum(before - 1, 0)).sum())
            twice = sources[before + times > 1]
            self._samples["duplicates"] += np.unique(seq[at][_members(offset[at], twice)])[
                :SAMPLE - len(self._samples["duplicates"])].tolist()

    def _expect(self, stable: dict[int, int], cutoff: dict[int, int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Add the committed input newly below both bounds to what must be delivered; return it."""
        partitions, offsets, seqs = [], [], []
        for partition, array in self._committed_seq.arrays.items():
            base = self._committed_seq.bases[partition]
            since = max(self._expected_below.get(partition, base), self._log_start.get(partition, base))
            below = min(stable.get(partition, 0), cutoff.get(partition, 0), base + array.size)
            if below <= since:
                continue
            window = self._committed_seq.window(partition, since, below)
            at = np.flatnonzero(window != _NO_RECORD)
            partitions.append(np.full(at.size, partition, dtype=np.int64))
            offsets.append(at + since)
            seqs.append(window[at])
            self._expected_below[partition] = below
        new = tuple(np.concatenate(parts) if parts else _EMPTY for parts in (partitions, offsets, seqs))
        candidates = tuple(np.concatenate((held, fresh)) for held, fresh in zip(self._lost, new))
        delivered = self._delivered_any.lookup(candidates[0], candidates[1])
        deleted = deleted_sources(candidates[0], candidates[1], self._log_start)
        self._lost = tuple(values[~delivered & ~deleted] for values in candidates)
        return new

    def _count_keys(self, cutoff: dict[int, int], expected_keys: np.ndarray) -> None:
        """Move the judged deliveries whose source is below the group's offsets into the key balance."""
        seq, partition, offset = self._keys_pending
        counted = _below(partition, offset, cutoff)
        self._keys_pending = tuple(values[~counted] for values in self._keys_pending)
        keys = np.concatenate((self._keys, seq[counted], expected_keys))
        weights = np.concatenate((self._balance, np.ones(int(counted.sum()), dtype=np.int64),
                                  -np.ones(expected_keys.size, dtype=np.int64)))
        unique, inverse = np.unique(keys, return_inverse=True)
        balance = np.bincount(inverse, weights=weights, minlength=unique.size).astype(np.int64)
        self._keys, self._balance = unique[balance != 0], balance[balance != 0]

    def _reorder(self, name: str, topic: TopicIndex) -> None:
        """Count falls in each (input partition, output partition) pair, continuing from its last source."""
        if topic.seq.size == 0:
            return
        order = np.lexsort((topic.offset, topic.partition, topic.src_partition))
        source_partition, partition, source = (values[order] for values in
                                               (topic.src_partition, topic.partition, topic.src_offset))
        last_of_pair = np.ones(order.size, dtype=bool)  # each pair's row at its highest output offset
        last_of_pair[:-1] = (source_partition[1:] != source_partition[:-1]) | (partition[1:] != partition[:-1])
        pairs = list(zip(source_partition[last_of_pair].tolist(), partition[last_of_pair].tolist()))
        carried = [(pair, self._last_source[(name, *pair)]) for pair in pairs if (name, *pair) in self._last_source]
        virtual = len(carried)
        joined = TopicIndex(
            np.concatenate((np.full(virtual, -1, dtype=np.int64), topic.seq)),
            np.concatenate((np.array([pair[1] for pair, _ in carried], dtype=np.int64), topic.partition)),
            np.concatenate((np.full(virtual, -1, dtype=np.int64), topic.offset)),
            np.concatenate((np.array([pair[0] for pair, _ in carried], dtype=np.int64), topic.src_partition)),
            np.concatenate((np.array([last for _, last in carried], dtype=np.int64), topic.src_offset)),
            _EMPTY, _EMPTY, {})
        self._tally("reordered", reordered_pairs(joined))  # a carried row is first in its pair, never counted
        for pair, last in zip(pairs, source[last_of_pair].tolist()):
            self._last_source[(name, *pair)] = last

    def _tally(self, name: str, seqs: np.ndarray) -> None:
        self._counts[name] += int(seqs.size)
        self._samples[name] += seqs[:SAMPLE - len(self._samples[name])].tolist()

    def _report(self, stable: dict[int, int], cutoff: dict[int, int], topics: tuple[str, str]) -> VerifyReport:
        report = VerifyReport("", "", process=self._process)
        report.input_committed = sum(int(np.count_nonzero(self._committed_seq.window(
            partition, self._log_start.get(partition, 0), stable.get(partition, 0)) != _NO_RECORD))
            for partition in self._committed_seq.arrays)
        for name, value in self._counts.items():
            setattr(report, name, value)
        # The split is made now, not when a record was first expected: a later round may find the
        # trim that explains a loss counted before.
        partition, offset, seq = self._lost
        gone = below_horizons(partition, offset, self._expected_digest.lookup(partition, offset),
                              *(self._trims.get(name, {}) for name in topics))
        report.lost, report.output_deleted = int(np.count_nonzero(~gone)), int(np.count_nonzero(gone))
        # The key view does not expect the records whose delivery is gone.
        keys, inverse = np.unique(np.concatenate((self._keys, seq[gone])), return_inverse=True)
        weights = np.concatenate((self._balance, np.ones(int(gone.sum()), dtype=np.int64)))
        balance = np.bincount(inverse, weights=weights, minlength=keys.size).astype(np.int64)
        report.key_surplus, report.key_deficit = int(balance[balance > 0].sum()), int(-balance[balance < 0].sum())
        torn: list[str] = []
        cut: list[str] = []
        for name, transactions in self._transactions.items():
            transactions.judge(cutoff)
            report.transactions_checked += len(transactions.judged)
            torn_here, cut_here = transactions.torn(self._trims.get(name, {}))
            torn += torn_here
            cut += cut_here
        report.torn, report.transactions_output_deleted = len(torn), len(cut)
        report.samples = {**{name: list(values) for name, values in self._samples.items()},
                          "lost": seq[~gone][:SAMPLE].tolist(), "output_deleted": seq[gone][:SAMPLE].tolist(),
                          "torn": torn[:SAMPLE], "transactions_output_deleted": cut[:SAMPLE],
                          "key_surplus": keys[balance > 0][:SAMPLE].tolist(),
                          "key_deficit": keys[balance < 0][:SAMPLE].tolist()}
        return report


def verify_live(bootstrap: str | Connection, input_topic: str, output_topic: str, app_id: str,
                dead_letter_topic: str | None, ledger: LiveLedger, stable_timeout_s: float = 90.0) -> VerifyReport:
    """`verify(live=True)` for a pipeline with eos headers, reading and judging only what came since the last round."""
    outputs = [output_topic] + ([dead_letter_topic] if dead_letter_topic else [])
    cutoff, stable, hanging = live_bounds(bootstrap, input_topic, app_id, outputs, stable_timeout_s)
    committed_in, out, *dead_letters = ledger.read_round(bootstrap, [(input_topic, False), (output_topic, True)]
                                                         + ([(dead_letter_topic, True)] if dead_letter_topic else []))
    dead = dead_letters[0] if dead_letters else None
    report = ledger.add(committed_in, out, dead, cutoff, stable)
    report.input_topic, report.output_topic = input_topic, output_topic
    report.hanging_partitions += hanging
    return _conclude(report)
