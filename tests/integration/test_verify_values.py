"""The verifier on real data: any key, a tombstone and poison through the real job, then a wrong value and a good
record dead-lettered, each caught apart."""

from __future__ import annotations

from conf.headers import IN_TS_HEADER, SRC_HEADER, transaction_identity, txn_header
from conf.stream_settings import StreamSettings
from eosbench.local.kafka_admin import create_topic
from streaming import job
from streaming.verify.topic_index import TOMBSTONE_DIGEST, read_index
from streaming.verify.verifier import verify
from tests.integration.produce_helpers import commit_records as commit

ORDINARY = 1_000


def test_any_key_and_a_tombstone_stream_through_and_a_wrong_value_or_a_good_dead_letter_fails(bootstrap, spark,
                                                                                               new_topic, tmp_path):
    source, sink = new_topic(prefix="in"), new_topic(prefix="out")
    dead_letter = f"{sink}.dlq"
    create_topic(bootstrap, dead_letter, 1, 1)
    special = [(None, b"a null key"), (b"order-7", b"a key that is no number"), (b"5000", None),
               (b"5001", b"POISON record")]
    commit(bootstrap, f"{source}.fill", [(source, key, value, []) for key, value in special]
           + [(source, str(seq).encode(), b"value-%d" % seq, []) for seq in range(ORDINARY)])
    settings = StreamSettings(input_topic=source, output_topic=sink, bootstrap_server=bootstrap, app_id=f"app-{sink}",
                              checkpoint=tmp_path / "checkpoint", process="checksum")
    job.run(spark, settings)

    report = verify(bootstrap, source, sink, settings.app_id, dead_letter, process="checksum")
    assert report.violations == [], report.violations
    assert (report.input_committed, report.output_committed, report.dead_lettered) == (ORDINARY + 4, ORDINARY + 3, 1)
    assert report.wrong_value == report.wrongly_dead_lettered == report.source_deleted == report.key_surplus == 0
    out = read_index(bootstrap, sink, "read_committed", with_src=True)
    assert out.digest.tolist().count(TOMBSTONE_DIGEST) == 1, "the tombstone is carried as one"
    assert verify(bootstrap, source, sink, None, dead_letter).wrong_value == ORDINARY + 2, "checked against its process"

    # Two late input records, delivered by hand: one with a wrong value, one good one to the dead letters.
    late = [(b"9000", b"late-0"), (b"9001", b"late-1")]
    commit(bootstrap, f"{source}.late", [(source, key, value, []) for key, value in late])
    written = read_index(bootstrap, source, "read_committed", with_src=False)
    at = dict(zip(written.seq.tolist(), written.offset.tolist()))
    identity = transaction_identity("planted", 0, 999)
    commit(bootstrap, f"{sink}.planted", [
        (sink, b"9000", b"not what checksum makes", [(SRC_HEADER, f"{source}:0:{at[9000]}".encode()),
                                                    (IN_TS_HEADER, b"0"), txn_header(identity, 1)]),
        (dead_letter, b"9001", b"late-1", [(SRC_HEADER, f"{source}:0:{at[9001]}".encode()),
                                           (IN_TS_HEADER, b"0"), txn_header(identity, 1)])])
    report = verify(bootstrap, source, sink, None, dead_letter, process="checksum")
    assert report.violations == ["wrong_value: 1", "wrongly_dead_lettered: 1"]
    assert report.samples["wrong_value"] == [9000] and report.samples["wrongly_dead_lettered"] == [9001]
    assert report.lost == report.duplicates == report.key_surplus == report.torn == 0 and not report.ok
