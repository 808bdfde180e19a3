"""--command-config end to end on the secured cluster: produce with aborts, stream, verify, all over SASL_SSL."""

from __future__ import annotations

import json
from collections import Counter

from conf.client_config import ClientConfig
from streaming.verify import read_index
from tests.integration.produce_helpers import committed_ids, produce
from tests.unit.test_cli_errors import run_eosbench


def test_produce_stream_verify_over_sasl_ssl_deliver_each_committed_record_once(
        secured_cluster, admin_properties, secured_topic, tmp_path):
    source, sink = secured_topic(partitions=2), secured_topic(partitions=2)
    config = ["--command-config", str(admin_properties)]  # bootstrap.servers comes from the file too
    produced = produce(None, source, 4_000, records_per_transaction=200, abort_ratio=0.3, seed=16,
                       command_config=admin_properties)
    expected = committed_ids(produced.transactions)
    assert 0 < sum(expected.values()) < 4_000  # some transactions were aborted

    streamed = run_eosbench("stream", "--input-topic", source, "--output-topic", sink, "--app-id", "secured",
                            "--checkpoint", str(tmp_path / "checkpoint"), *config, timeout=600)
    assert streamed.returncode == 0, streamed.stderr[-3000:]
    assert json.loads(streamed.stdout[streamed.stdout.index("{\n"):])["records_out"] == sum(expected.values())

    verified = run_eosbench("verify", "--input-topic", source, "--output-topic", sink, "--app-id", "secured", *config)
    assert verified.returncode == 0, verified.stderr
    report = json.loads(verified.stdout)
    assert (report["ok"], report["input_committed"], report["output_committed"]) == (True, sum(expected.values()),
                                                                                      sum(expected.values()))
    output = read_index(ClientConfig.load(admin_properties).connection(None), sink, "read_committed", with_src=True)
    assert Counter(output.seq.tolist()) == expected


def test_topics_commands_speak_sasl_ssl(admin_properties):
    config = ["--command-config", str(admin_properties)]
    created = run_eosbench("topics", "create", "cc-topic", "--partitions", "2", *config)
    assert (created.returncode, created.stdout.strip()) == (0, "created topic cc-topic (2 partitions, replication"
                                                               " factor 1)"), created.stderr
    described = run_eosbench("topics", "describe", "cc-topic", *config)
    assert described.stdout.splitlines()[0] == "Topic: cc-topic\tPartitionCount: 2"
    deleted = run_eosbench("topics", "delete", "cc-topic", *config)
    assert (deleted.returncode, deleted.stdout.strip()) == (0, "deleted topic cc-topic")


def test_the_pre_registering_producer_commits_over_sasl_ssl(secured_cluster, secured_topic):
    from streaming.preregister import PreRegisteringProducer

    topic = secured_topic()
    producer = PreRegisteringProducer(secured_cluster.connection.librdkafka(), f"{topic}.prereg", f"{topic}.group")
    producer.init_transactions(30)
    producer.begin_transaction()
    for key in (b"1", b"2", b"3"):
        producer.produce(topic, b"value", key)
    producer.commit_transaction(30)
    producer.purge()
    committed = read_index(secured_cluster.connection, topic, "read_committed", with_src=False)
    assert sorted(committed.seq.tolist()) == [1, 2, 3]
