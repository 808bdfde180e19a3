"""The transforms' contract and the sinks' routing: a tombstone is data and carried as one, poison is dead-lettered."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from streaming.process import POISON, TRANSFORMS, SourceSlice

VALUES = [b"plain", None, b"POISON record"]  # a record, a tombstone, a poison record


def three_records() -> SourceSlice:
    """in[0] offsets 0..2 holding VALUES, keyed 0..2."""
    keys = [b"0", b"1", b"2"]
    return SourceSlice(keys=keys, values=list(VALUES), offsets=[0, 1, 2], timestamps=[0] * 3,
                       src=[b"in:0:%d" % o for o in range(3)], in_ts=[b"0"] * 3, topic="in", partition=0)


@pytest.mark.parametrize("name", sorted(TRANSFORMS))
def test_every_transform_carries_a_tombstone_and_refuses_only_poison(name):
    transform = TRANSFORMS[name]
    plain, tombstone, poison = (transform(b"7", value) for value in VALUES)
    assert isinstance(plain, bytes) and tombstone is None and poison is POISON


class RecordingProducer:
    """Keeps what the sink produces: (topic, value, key)."""

    def __init__(self):
        self.sent: list[tuple[str, bytes | None, bytes]] = []

    def produce(self, topic, value=None, key=None, headers=None):
        """Keep the record."""
        self.sent.append((topic, value, key))

    def poll(self, timeout=0):
        """Nothing to serve."""
        return 0


def test_the_transactional_sink_writes_a_tombstone_to_the_output_and_only_poison_to_the_dead_letters():
    from streaming.sink import task as sink_task

    plan = SimpleNamespace(process="passthrough", output_topic="out", dead_letter_topic="out.dlq", output_partitioning="key")
    records = three_records()
    results = sink_task._process(plan, records)
    headers = sink_task._transaction_headers(plan, b"0:1:abc", [results])
    assert headers == {"out": ("eos.txn", b"0:1:abc:2"), "out.dlq": ("eos.txn", b"0:1:abc:1")}
    producer = RecordingProducer()
    assert sink_task._produce_slice(producer, plan, records, results, headers)[:2] == (2, 1)
    assert producer.sent == [("out", b"plain", b"0"), ("out", None, b"1"), ("out.dlq", b"POISON record", b"2")]


def test_the_baseline_sinks_route_a_tombstone_to_the_output_and_only_poison_to_the_dead_letters():
    import pyarrow as pa

    from streaming.sink.baselines import processed_rows

    settings = SimpleNamespace(process="checksum", output_topic="out", dead_letter="out.dlq")
    batch = pa.RecordBatch.from_pydict({
        "topic": ["in"] * 3, "partition": [0] * 3, "offset": [0, 1, 2],
        "timestamp": pa.array([0] * 3, pa.timestamp("us")), "key": [b"0", b"1", b"2"], "value": VALUES})
    [rows] = list(processed_rows(settings)(iter([batch])))
    assert rows.column("topic").to_pylist() == ["out", "out", "out.dlq"]
    assert rows.column("value").to_pylist() == [TRANSFORMS["checksum"](b"0", b"plain"), None, b"POISON record"]


def test_verify_is_told_the_streams_process_and_refuses_an_unknown_one():
    from eosbench.cli import build_parser
    from streaming.verify.verifier import verify

    def parsed(*flags: str):
        return build_parser().parse_args(["verify", "--input-topic", "in", "--output-topic", "out", *flags])
    assert parsed().process == "passthrough" and parsed("--process", "enrich").process == "enrich"
    with pytest.raises(ValueError, match="process must be one of passthrough, checksum, enrich, not 'upper'"):
        verify("127.0.0.1:1", "in", "out", process="upper")
