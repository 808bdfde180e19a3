"""conf.settings and conf.local_servers: client config parsing, cluster shape and broker config rendering."""

from pathlib import Path

import pytest
from pydantic import ValidationError

from conf.local_servers import ClusterSettings
from conf.settings import SettingsError, load_jar_bundles, load_properties, parse_kv_pairs


def test_kv_pairs_keep_equals_signs_in_values_and_later_pairs_win():
    assert parse_kv_pairs(["acks=all", "sasl.jaas.config=a=b", "acks=1"]) == {
        "acks": "1",
        "sasl.jaas.config": "a=b",
    }


@pytest.mark.parametrize("bad", ["acks", "=all", " =x"])
def test_kv_pairs_reject_entries_without_a_key(bad):
    with pytest.raises(SettingsError):
        parse_kv_pairs([bad])


def test_properties_file_handles_comments_separators_and_continuations(tmp_path: Path):
    path = tmp_path / "producer.properties"
    path.write_text("# comment\n! also a comment\n\nacks = all\nlinger.ms:5\nclient.id=a\\\n  b\n")
    assert load_properties(path) == {"acks": "all", "linger.ms": "5", "client.id": "ab"}


def test_properties_file_that_is_missing_is_a_settings_error(tmp_path: Path):
    with pytest.raises(SettingsError, match="cannot read"):
        load_properties(tmp_path / "absent.properties")


def test_single_node_uses_replication_factor_one(tmp_path: Path):
    settings = ClusterSettings(state_dir=tmp_path)
    rendered = settings.render_server_properties(settings.nodes()[0])
    assert "offsets.topic.replication.factor=1\n" in rendered
    assert "transaction.state.log.replication.factor=1\n" in rendered
    assert "transaction.state.log.min.isr=1\n" in rendered
    assert "controller.quorum.voters=1@127.0.0.1:9192\n" in rendered
    assert "broker.session.timeout.ms=30000\n" in rendered  # one node never fences itself over a stall
    assert settings.bootstrap_servers == "127.0.0.1:9092"
    assert "=$" not in rendered


def test_three_nodes_replicate_three_ways_with_two_in_sync(tmp_path: Path):
    settings = ClusterSettings(brokers=3, port=29092, state_dir=tmp_path)
    nodes = settings.nodes()
    assert [(n.node_id, n.client, n.controller, n.jmx_exporter) for n in nodes] == [
        (1, 29092, 29192, 29292),
        (2, 29093, 29193, 29293),
        (3, 29094, 29194, 29294),
    ]
    rendered = settings.render_server_properties(nodes[1])
    assert "node.id=2\n" in rendered
    assert "controller.quorum.voters=1@127.0.0.1:29192,2@127.0.0.1:29193,3@127.0.0.1:29194\n" in rendered
    assert "min.insync.replicas=2\n" in rendered
    assert "broker.session.timeout.ms=9000\n" in rendered
    assert "transaction.state.log.replication.factor=3\n" in rendered
    assert "offsets.topic.replication.factor=3\n" in rendered
    assert f"log.dirs={tmp_path / 'node-2' / 'data'}\n" in rendered


def test_extra_server_properties_come_last_and_a_cluster_without_them_keeps_its_recorded_shape(tmp_path: Path):
    settings = ClusterSettings(state_dir=tmp_path, server_properties={"offsets.retention.minutes": "1"})
    assert settings.render_server_properties(settings.nodes()[0]).endswith("\noffsets.retention.minutes=1\n")
    assert "server_properties" not in ClusterSettings(state_dir=tmp_path).model_dump()
    with pytest.raises(ValidationError, match="not a one-line broker property"):
        ClusterSettings(server_properties={"a": "1\nb=2"})


def test_a_plaintext_cluster_keeps_its_listeners_and_its_recorded_shape(tmp_path: Path):
    settings = ClusterSettings(state_dir=tmp_path)
    rendered = settings.render_server_properties(settings.nodes()[0])
    assert "listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9192\n" in rendered
    assert "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT\n" in rendered
    assert "authorizer.class.name" not in rendered and "\nsasl." not in rendered
    assert "security" not in settings.model_dump()  # clusters recorded before --security keep their shape


def test_a_sasl_ssl_cluster_speaks_scram_over_tls_and_authenticates_controllers_by_certificate(tmp_path: Path):
    settings = ClusterSettings(state_dir=tmp_path, security="sasl-ssl", brokers=3)
    values = {"keystore": "/s/k.pem", "truststore": "/s/ca.pem", "admin_user": "admin", "admin_password": "pw",
              "broker_cn": "eosbench-broker"}
    rendered = settings.render_server_properties(settings.nodes()[0], values)
    for line in ("listeners=SASL_SSL://127.0.0.1:9092,CONTROLLER://127.0.0.1:9192",
                 "advertised.listeners=SASL_SSL://127.0.0.1:9092",
                 "inter.broker.listener.name=SASL_SSL",
                 "listener.security.protocol.map=SASL_SSL:SASL_SSL,CONTROLLER:SSL",
                 "sasl.enabled.mechanisms=SCRAM-SHA-512",
                 "sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512",
                 "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram."
                 'ScramLoginModule required username="admin" password="pw";',
                 "ssl.keystore.location=/s/k.pem", "ssl.truststore.location=/s/ca.pem",
                 "listener.name.controller.ssl.client.auth=required",
                 "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                 "super.users=User:admin;User:CN=eosbench-broker", "allow.everyone.if.no.acl.found=false"):
        assert f"\n{line}\n" in rendered, line
    assert settings.model_dump(mode="json")["security"] == "sasl-ssl"
    with pytest.raises(SettingsError, match="needs its security material"):
        settings.render_server_properties(settings.nodes()[0])


@pytest.mark.parametrize("field,value", [("brokers", 2), ("heap_mb", 8192), ("port", 80), ("security", "tls")])
def test_cluster_shape_is_validated(field, value):
    with pytest.raises(ValidationError):
        ClusterSettings(**{field: value})


def test_jar_bundles_name_kafka_tools_jmx_agent_spark_delta_hdfs_yarn_s3_and_the_peers():
    bundles = load_jar_bundles()
    assert set(bundles) == {"kafka", "jmx-exporter", "spark", "hdfs", "yarn", "s3proxy", "s3a", "kafka-streams", "flink"}
    artifacts = {gav.rsplit(":", 1)[0] for bundle in bundles.values() for gav in bundle.artifacts}
    assert {
        "org.apache.kafka:kafka_2.13",
        "org.apache.kafka:kafka-tools",
        "io.prometheus.jmx:jmx_prometheus_javaagent",
        "org.apache.spark:spark-sql-kafka-0-10_2.13",
        "io.delta:delta-spark_4.2_2.13",
    } <= artifacts


def test_metrics_linger_defaults_to_two_scrape_intervals_of_the_shipped_prometheus_config(tmp_path: Path):
    from conf.produce_settings import ProduceSettings
    from conf.settings import prometheus_scrape_interval_s
    from conf.stream_settings import StreamSettings

    config = tmp_path / "prometheus.yml"
    config.write_text("global:\n  scrape_interval: 15s\n")
    assert prometheus_scrape_interval_s(config) == 15.0
    interval = prometheus_scrape_interval_s()
    produce = dict(topic="t", num_records=10, record_size=10, throughput=-1)
    assert ProduceSettings(**produce, metrics_port=9400).metrics_linger_s == 2 * interval > 0
    assert ProduceSettings(**produce).metrics_linger_s == 0  # nothing served, nothing to keep
    assert ProduceSettings(**produce, metrics_port=9400, metrics_linger=0).metrics_linger_s == 0
    assert StreamSettings(input_topic="a", output_topic="b", metrics_port=9401).metrics_linger_s == 2 * interval
    with pytest.raises(ValidationError, match="--metrics-linger"):
        StreamSettings(input_topic="a", output_topic="b", metrics_linger=-1)


def test_visibility_is_observed_only_when_asked_and_only_for_the_transactional_sink(tmp_path):
    from conf.stream_settings import StreamSettings

    assert not StreamSettings(input_topic="a", output_topic="b").visibility_observed
    assert StreamSettings(input_topic="a", output_topic="b", observe_visibility=True).visibility_observed
    assert StreamSettings(input_topic="a", output_topic="b", visibility_log=tmp_path / "v.log").visibility_observed
    assert not StreamSettings(input_topic="a", output_topic="b", sink="kafka-alo").visibility_observed
    with pytest.raises(ValidationError, match="--observe-visibility and --visibility-log apply to --sink kafka-eos"):
        StreamSettings(input_topic="a", output_topic="b", sink="kafka-alo", observe_visibility=True)
