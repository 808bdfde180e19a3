"""`eosbench bench protocol` on the session broker: every engine copies its input exactly, the
transaction.version feature is back where it was, and the brokers' request counts per transaction
are the ones each protocol version makes."""

from __future__ import annotations

import json
from collections import Counter

from eosbench.bench.protocol import transaction_version
from streaming.verify.verifier import read_index
from tests.integration.kafka_reads import read_all, sequence_numbers
from tests.unit.test_cli_errors import run_eosbench

TV1_ENGINES = ("librdkafka", "kafka-python", "kafka-python+prereg", "java-tv1")


def test_every_engine_copies_exactly_and_each_protocol_makes_its_requests(bootstrap, tmp_path):
    completed = run_eosbench("bench", "protocol", "--bootstrap-server", bootstrap, "--sizes", "3",
                             "--transactions", "4", "--results-dir", str(tmp_path),
                             "--output-json", str(tmp_path / "protocol.json"), timeout=400)
    assert completed.returncode == 0, completed.stderr[-3000:]
    report = json.loads((tmp_path / "protocol.json").read_text())
    # The bench's own reads before and after, and one of ours (each read is a FeatureCommand JVM).
    assert transaction_version(bootstrap) == report["original_transaction_version"] == \
        report["transaction_version_after"] == 2
    engines = ("librdkafka", "kafka-python", "kafka-python+prereg", "java-tv2", "java-tv1")
    assert sorted((row["engine"], row["size"]) for row in report["arms"]) == sorted(
        (engine, size) for engine in engines for size in (3,))
    for size, source in ((int(size), source) for size, source in report["inputs"].items()):
        committed = Counter(sequence_numbers(read_all(bootstrap, source["topic"])))
        assert sum(committed.values()) == source["committed"] > 0
        # The filler aborted some transactions: the log holds more than the committed records.
        assert len(read_all(bootstrap, source["topic"], isolation="read_uncommitted")) > source["committed"]
        for engine in engines:
            output = f"{source['topic']}-{engine.replace('+', '-')}"
            assert Counter(sequence_numbers(read_all(bootstrap, output))) == committed, (engine, size)
    for row in report["arms"]:
        where = (row["engine"], row["size"])
        assert row["transaction_version"] == (2 if row["engine"] == "java-tv2" else 1), where
        assert row["records_per_sec"] > 0 and row["p50_ms"] > 0, where
        assert row["EndTxn_per_txn"] == 1.0, where
        assert row["TxnOffsetCommit_per_txn"] >= 1.0, where
        if row["engine"] in TV1_ENGINES:  # the client adds the partition and the group itself
            assert row["AddPartitionsToTxn_client_per_txn"] >= 1.0, where
            assert row["AddOffsetsToTxn_per_txn"] >= 1.0, where
            assert row["AddPartitionsToTxn_broker_per_txn"] == 0.0, where
        else:  # TV2: the leaders add the output partition and the offsets partition for the client
            assert row["AddPartitionsToTxn_client_per_txn"] == 0.0, where
            assert row["AddOffsetsToTxn_per_txn"] == 0.0, where
            assert row["AddPartitionsToTxn_broker_per_txn"] >= 2.0, where
        if row["engine"].startswith("java"):
            assert row["first_send_p50_ms"] is None, where  # the copier's output has no such time
        else:
            assert row["first_send_p50_ms"] > 0, where
    assert (tmp_path / f"protocol-{report['run_id']}.png").stat().st_size > 0
    assert "| engine | TV | size |" in completed.stdout


def test_on_a_secured_cluster_the_python_engines_copy_exactly_and_the_java_ones_are_skipped(
        secured_cluster, admin_properties, tmp_path):
    # The copier takes only --broker-list, so the Java engines cannot reach this cluster; the
    # kafka-python engine (its own translation of the file) and FeatureCommand (the file itself) can.
    bootstrap = secured_cluster.settings.bootstrap_servers
    completed = run_eosbench("bench", "protocol", "--bootstrap-server", bootstrap, "--command-config",
                             str(admin_properties), "--sizes", "2", "--transactions", "3",
                             "--engines", "kafka-python+prereg", "java-tv2", "java-tv1",
                             "--results-dir", str(tmp_path), "--output-json", str(tmp_path / "protocol.json"), timeout=300)
    assert completed.returncode == 0, completed.stderr[-3000:]
    skipped = ("skipping java-tv2, java-tv1: Kafka's TransactionalMessageCopier takes no client security settings"
               " (only --broker-list), so it cannot reach a secured cluster")
    assert completed.stdout.splitlines()[0] == skipped
    report = json.loads((tmp_path / "protocol.json").read_text())
    assert report["skipped"] == skipped
    assert [row["engine"] for row in report["arms"]] == ["kafka-python+prereg"]
    source = report["inputs"]["2"]

    def keys(topic: str) -> Counter:
        return Counter(read_index(secured_cluster.connection, topic, "read_committed", with_src=False).seq.tolist())

    committed = keys(source["topic"])
    assert sum(committed.values()) == source["committed"] > 0
    assert keys(f"{source['topic']}-kafka-python-prereg") == committed
