"""The verifier against records that Kafka's DeleteRecords removed, as retention would: deliveries deleted from the
output are told apart from lost ones, live and at the end, and a duplicate of a deleted input is still a duplicate."""

from __future__ import annotations

from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

from conf.headers import IN_TS_HEADER, SRC_HEADER, transaction_identity, txn_header
from streaming.verify.live_ledger import LiveLedger
from streaming.verify.verifier import _conclude, verify
from tests.integration.produce_helpers import commit_records


def delete_below(bootstrap: str, topic: str, partition: int, offset: int) -> None:
    """Delete a partition's records below an offset: its log start moves there, as retention moves it."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    [future] = admin.delete_records([TopicPartition(topic, partition, offset)], operation_timeout=30).values()
    assert future.result(timeout=30).low_watermark == offset


def fill(bootstrap: str, source: str, keys: range) -> None:
    """Commit one input record per key, in order, to partition 0 (key k at offset k)."""
    commit_records(bootstrap, f"{source}.fill-{keys.start}", [(source, b"%d" % k, b"value-%d" % k, []) for k in keys])


def deliver(bootstrap: str, source: str, sink: str, offsets: range, batch: int, partition: int = 0) -> None:
    """Deliver input offsets (each offset's key and passthrough value) in one sink transaction, as the sink stamps it."""
    identity = transaction_identity("hand", 0, batch)
    commit_records(bootstrap, f"{sink}.sink-{batch}", [
        (sink, b"%d" % o, b"value-%d" % o, [(SRC_HEADER, f"{source}:0:{o}".encode()), (IN_TS_HEADER, b"0"),
                                           txn_header(identity, len(offsets))], partition) for o in offsets])


def test_output_deleted_from_the_front_is_output_deleted_not_lost_or_torn_live_and_at_the_end(bootstrap, new_topic):
    source, sink = new_topic(prefix="in"), new_topic(prefix="out")
    fill(bootstrap, source, range(20))
    ledger, topics = LiveLedger(source), [(source, False), (sink, True)]
    deliver(bootstrap, source, sink, range(0, 5), batch=0)  # output offsets 0..4, its marker at 5
    first = _conclude(ledger.add(*ledger.read_round(bootstrap, topics), None, {0: 5}, {0: 20}))
    assert first.violations == [] and first.output_committed == 5
    for batch in range(1, 4):
        deliver(bootstrap, source, sink, range(5 * batch, 5 * batch + 5), batch=batch)  # 6..10, 12..16, 18..22
    # Gone before the ledger read them: output offsets 6..8, the deliveries of inputs 5..7, the
    # first three of transaction 1's five.
    delete_below(bootstrap, sink, 0, 9)
    live = _conclude(ledger.add(*ledger.read_round(bootstrap, topics), None, {0: 20}, {0: 20}))
    assert live.violations == [], live.violations
    assert (live.output_deleted, live.lost, live.transactions_output_deleted, live.torn) == (3, 0, 1, 0)
    assert live.samples["output_deleted"] == [5, 6, 7]

    # The final verify reads from the log start: transaction 0 is gone whole, transaction 1 shows 2 of 5.
    report = verify(bootstrap, source, sink)
    assert report.violations == [], report.violations
    assert (report.input_committed, report.output_committed, report.output_deleted) == (20, 12, 8)
    assert report.samples["output_deleted"] == list(range(8))
    assert (report.transactions_checked, report.transactions_output_deleted, report.torn) == (3, 1, 0)
    assert report.lost == report.duplicates == report.key_deficit == report.source_deleted == 0

    fill(bootstrap, source, range(20, 21))  # committed, never delivered, above the horizon: still lost
    late = verify(bootstrap, source, sink)
    assert (late.output_deleted, late.lost, late.samples["lost"]) == (8, 1, [20])
    assert late.violations == ["lost: 1", "key_deficit: 1"]


def test_a_second_delivery_of_an_input_record_deleted_since_is_a_duplicate(bootstrap, new_topic):
    source, sink = new_topic(prefix="in"), new_topic(partitions=2, prefix="out")
    fill(bootstrap, source, range(10))
    deliver(bootstrap, source, sink, range(10), batch=0)
    delete_below(bootstrap, source, 0, 5)  # input offsets 0..4 gone; their deliveries stay
    deliver(bootstrap, source, sink, range(2, 3), batch=1, partition=1)  # input 2 delivered again
    report = verify(bootstrap, source, sink)
    assert report.violations == ["duplicates: 1"]
    assert (report.duplicates, report.source_deleted, report.samples["duplicates"]) == (1, 6, [2])
    assert (report.input_committed, report.output_committed, report.lost, report.key_surplus) == (5, 11, 0, 0)
