"""The transaction oracles, against the real broker: what read_committed must and must not see."""

from __future__ import annotations

import threading
import time
from collections import Counter

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from tests.integration.kafka_reads import read_all, sequence_numbers


def transactional_producer(bootstrap: str, transactional_id: str) -> Producer:
    """A producer that has already called init_transactions."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id})
    producer.init_transactions(30)
    return producer


def produce_range(producer: Producer, topic: str, seqs: range) -> None:
    """Produce one record per sequence number, key = the number in ASCII."""
    for seq in seqs:
        producer.produce(topic, key=str(seq).encode(), value=b"v")


def transaction(producer: Producer, topic: str, seqs: range, commit: bool = True) -> None:
    """One whole transaction of one record per sequence number, committed or aborted."""
    producer.begin_transaction()
    produce_range(producer, topic, seqs)
    if commit:
        producer.commit_transaction(30)
    else:
        producer.flush(30)  # abort_transaction purges unsent records; these must reach the log first
        producer.abort_transaction(30)


def test_commit_100_read_committed_sees_exactly_100(bootstrap, new_topic):
    topic = new_topic()
    producer = transactional_producer(bootstrap, f"{topic}.tx")
    transaction(producer, topic, range(100))
    assert Counter(sequence_numbers(read_all(bootstrap, topic))) == Counter(range(100))


def test_abort_hides_everything_from_read_committed_but_not_from_read_uncommitted(bootstrap, new_topic):
    topic = new_topic()
    producer = transactional_producer(bootstrap, f"{topic}.tx")
    transaction(producer, topic, range(100), commit=False)
    assert read_all(bootstrap, topic, "read_committed") == []
    assert Counter(sequence_numbers(read_all(bootstrap, topic, "read_uncommitted"))) == Counter(range(100))


def test_abort_then_commit_25_shows_exactly_those_25(bootstrap, new_topic):
    topic = new_topic()
    producer = transactional_producer(bootstrap, f"{topic}.tx")
    transaction(producer, topic, range(0, 50), commit=False)
    transaction(producer, topic, range(50, 75))
    assert Counter(sequence_numbers(read_all(bootstrap, topic))) == Counter(range(50, 75))
    assert Counter(sequence_numbers(read_all(bootstrap, topic, "read_uncommitted"))) == Counter(range(75))


def test_offsets_sent_with_memberless_group_metadata_commit_only_with_the_transaction(bootstrap, new_topic):
    source, sink = new_topic(), new_topic()
    group = f"{source}.group"
    # A consumer that never subscribes has no member id and generation -1: the group metadata
    # the transactional sink builds once on the driver and ships to its tasks.
    memberless = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    group_metadata = memberless.consumer_group_metadata()
    source_partition = TopicPartition(source, 0)

    def committed_offset() -> int:
        return memberless.committed([source_partition], timeout=30)[0].offset

    producer = transactional_producer(bootstrap, f"{sink}.tx")
    producer.begin_transaction()
    produce_range(producer, sink, range(100))
    producer.send_offsets_to_transaction([TopicPartition(source, 0, 100)], group_metadata, 30)
    producer.abort_transaction(30)
    assert committed_offset() < 0, "an aborted transaction must not move the group's offset"

    producer.begin_transaction()
    produce_range(producer, sink, range(100))
    producer.send_offsets_to_transaction([TopicPartition(source, 0, 100)], group_metadata, 30)
    producer.commit_transaction(30)
    assert committed_offset() == 100
    assert Counter(sequence_numbers(read_all(bootstrap, sink))) == Counter(range(100))
    memberless.close()


def _as_rows(index) -> list[tuple[int, int, int]]:
    return sorted(zip(index.partition.tolist(), index.offset.tolist(), index.seq.tolist()))


def test_incremental_indexes_read_what_a_whole_read_reads_across_open_aborted_and_late_commits(bootstrap, new_topic):
    from streaming.verify.verifier import IncrementalIndexes, read_index

    topic = new_topic(partitions=2)
    first, second = (transactional_producer(bootstrap, f"{topic}.tx{n}") for n in (1, 2))
    indexes = IncrementalIndexes()

    def read_both_ways(expected_seqs: range | list[int]) -> None:
        held = indexes.read(bootstrap, topic, "read_committed", with_src=False)
        whole = read_index(bootstrap, topic, "read_committed", with_src=False)
        assert _as_rows(held) == _as_rows(whole)
        assert Counter(held.seq.tolist()) == Counter(expected_seqs)

    transaction(first, topic, range(0, 40))
    read_both_ways(range(0, 40))
    # An open transaction holds the last stable offset back: the committed one after it waits too.
    first.begin_transaction()
    produce_range(first, topic, range(40, 60))
    first.flush(30)
    transaction(second, topic, range(60, 80))
    read_both_ways(range(0, 40))
    first.commit_transaction(30)
    read_both_ways(range(0, 80))
    transaction(first, topic, range(80, 100), commit=False)
    transaction(second, topic, range(100, 110))
    read_both_ways([*range(0, 80), *range(100, 110)])
    read_both_ways([*range(0, 80), *range(100, 110)])  # nothing new: nothing added


def test_a_read_of_a_topic_still_being_written_ends_at_the_offsets_it_began_with(bootstrap, new_topic):
    from streaming.verify.verifier import read_index

    topic = new_topic(partitions=2)
    writer = transactional_producer(bootstrap, f"{topic}.tx")
    writing = threading.Event()
    stop = threading.Event()

    def write_until_stopped() -> None:
        seq = 0
        while not stop.is_set():
            transaction(writer, topic, range(seq, seq + 50))
            seq += 50
            writing.set()
    thread = threading.Thread(target=write_until_stopped, daemon=True)
    thread.start()
    try:
        assert writing.wait(30)
        time.sleep(1)  # a backlog, so that the reader is still catching up while commits land
        during = read_index(bootstrap, topic, "read_committed", with_src=False, timeout_s=30)
    finally:
        stop.set()
        thread.join(60)
    after = read_index(bootstrap, topic, "read_committed", with_src=False)
    assert after.seq.size > during.seq.size > 0
    assert _as_rows(during) == _as_rows(after.below(during.end_offsets))


@pytest.mark.parametrize("arithmetic", ["whole", "ledger"])
def test_a_live_verify_waits_for_an_output_transaction_that_holds_committed_output_back(bootstrap, new_topic,
                                                                                       arithmetic):
    """The three-broker soak's false loss: one task's transaction, blocked after a broker kill, held
    an output partition's last stable offset while another task's committed output sat behind it.
    Both live verifies: over everything held, and the soak's ledger, whose second round clears the loss it carried."""
    from streaming.verify.live_ledger import LiveLedger, verify_live
    from streaming.verify.verifier import verify

    ledger = LiveLedger()

    def live_verify(stable_timeout_s: float):
        if arithmetic == "whole":
            return verify(bootstrap, source, sink, app_id, live=True, stable_timeout_s=stable_timeout_s)
        return verify_live(bootstrap, source, sink, app_id, None, ledger, stable_timeout_s=stable_timeout_s)

    source, sink = new_topic(), new_topic()
    app_id = f"{source}.app"
    transaction(transactional_producer(bootstrap, f"{source}.tx"), source, range(10))  # offsets 0-9, marker 10
    blocked = transactional_producer(bootstrap, f"{sink}.blocked")
    blocked.begin_transaction()
    blocked.produce(sink, key=b"3", value=b"v", headers=[("eos.src", f"{source}:0:3".encode())])
    blocked.flush(30)
    memberless = Consumer({"bootstrap.servers": bootstrap, "group.id": app_id, "enable.auto.commit": False})
    committing = transactional_producer(bootstrap, f"{sink}.committing")
    committing.begin_transaction()
    for seq in range(10):
        committing.produce(sink, key=str(seq).encode(), value=b"v", headers=[("eos.src", f"{source}:0:{seq}".encode())])
    committing.send_offsets_to_transaction([TopicPartition(source, 0, 11)], memberless.consumer_group_metadata(), 30)
    committing.commit_transaction(30)
    memberless.close()

    held_back = live_verify(1)
    assert held_back.lost == 10 and held_back.output_committed == 0
    assert [line.split(":")[0] for line in held_back.hanging_partitions] == [f"{sink}[0]"]

    aborting = threading.Timer(2.0, lambda: blocked.abort_transaction(30))
    aborting.start()
    started = time.monotonic()
    try:
        waited = live_verify(30)
    finally:
        aborting.join()
    assert time.monotonic() - started >= 2.0
    assert waited.violations == [] and waited.hanging_partitions == []
    assert waited.input_committed == waited.output_committed == 10 and waited.lost == waited.duplicates == 0


def test_verify_catches_a_planted_torn_transaction_and_a_reordered_pair(bootstrap, new_topic):
    """Jepsen's torn transaction (committed, but fewer records than it declares) and a pair of one
    input partition written out of input order, both planted straight into the output."""
    import json
    import subprocess
    import sys

    from conf.headers import transaction_identity, txn_header
    from streaming.verify.verifier import verify

    source, sink = new_topic(), new_topic()
    transaction(transactional_producer(bootstrap, f"{source}.tx"), source, range(6))  # offsets 0-5
    writer = transactional_producer(bootstrap, f"{sink}.planted")
    whole, torn, reordering = (transaction_identity("planted", 0, batch) for batch in (0, 1, 2))
    for identity, declared, offsets in ((whole, 2, (0, 1)), (torn, 3, (2, 3)), (reordering, 2, (5, 4))):
        writer.begin_transaction()
        for offset in offsets:
            writer.produce(sink, key=str(offset).encode(), value=b"v",
                           headers=[("eos.src", f"{source}:0:{offset}".encode()), txn_header(identity, declared)])
        writer.commit_transaction(30)

    report = verify(bootstrap, source, sink)
    assert (report.transactions_checked, report.torn, report.samples["torn"]) == (3, 1, [torn.decode()])
    assert (report.reordered, report.samples["reordered"]) == (1, [4])
    assert report.lost == report.duplicates == report.aborted_reads == 0
    assert report.violations == ["reordered: 1", "torn: 1"] and not report.ok

    cli = subprocess.run([sys.executable, "-m", "eosbench.cli", "verify", "--bootstrap-server", bootstrap,
                          "--input-topic", source, "--output-topic", sink], capture_output=True, text=True, timeout=120)
    assert cli.returncode == 1
    assert cli.stderr.strip().splitlines()[-1] == "eosbench: verify failed: reordered: 1; torn: 1"
    assert json.loads(cli.stdout)["samples"]["torn"] == [torn.decode()]
