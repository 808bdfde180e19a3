"""--command-config on the secured cluster: the topics commands and the pre-registering producer over SASL_SSL.

The whole pipeline over --command-config (produce with aborts, stream, verify, exact multisets) is
test_secrets_hidden.py's run, which also searches its every artifact for the password.
"""

from __future__ import annotations

from streaming.verify.verifier import read_index, wait_until_stable
from tests.unit.test_cli_errors import run_eosbench


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
    from streaming.sink.preregister import PreRegisteringProducer

    topic = secured_topic()
    producer = PreRegisteringProducer(secured_cluster.connection.librdkafka(), f"{topic}.prereg", f"{topic}.group")
    producer.init_transactions(30)
    producer.begin_transaction()
    for key in (b"1", b"2", b"3"):
        producer.produce(topic, b"value", key)
    producer.commit_transaction(30)
    producer.purge()
    # commit_transaction returns once the coordinator has logged the commit; the markers reach the
    # partition after, and until then the last stable offset hides the records (seen at load 20).
    assert wait_until_stable(secured_cluster.connection, [topic], timeout_s=60) == []
    committed = read_index(secured_cluster.connection, topic, "read_committed", with_src=False)
    assert sorted(committed.seq.tolist()) == [1, 2, 3]
