"""`eosbench broker start --security sasl-ssl`: SCRAM over TLS for clients, ACLs enforced, a ready client.properties."""

from __future__ import annotations

import pytest

from conf.client_config import ClientConfig
from conf.settings import load_properties
from conf.failures import ACLS_HINT, AuthorizationFailure
from eosbench.console.errors import EnvironmentProblem
from eosbench.local.kafka_admin import cluster_metadata, create_topic
from tests.unit.test_cli_errors import run_eosbench


def test_start_prints_the_admins_client_properties(secured_cluster, admin_properties):
    state = str(secured_cluster.settings.state_dir)
    again = run_eosbench("broker", "start", "--security", "sasl-ssl", "--port", "19492", "--heap-mb", "256",
                         "--state-dir", state)
    assert again.returncode == 0, again.stderr
    assert again.stdout.splitlines() == ["127.0.0.1:19492", str(admin_properties)]
    properties = load_properties(admin_properties)
    password = (secured_cluster.settings.state_dir / "security" / "admin.password").read_text()
    assert properties == {
        "bootstrap.servers": "127.0.0.1:19492",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required'
                            f' username="admin" password="{password}";',
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(secured_cluster.settings.state_dir / "security" / "ca.pem"),
    }
    status = run_eosbench("broker", "status", "--state-dir", state)
    assert status.returncode == 0, status.stdout
    assert "cluster: running, 1/1 brokers registered [1]" in status.stdout


def test_plaintext_clients_are_turned_away(secured_bootstrap):
    with pytest.raises(EnvironmentProblem) as refused:
        cluster_metadata(secured_bootstrap, timeout_s=3)
    assert str(refused.value).startswith(f"cannot reach Kafka at {secured_bootstrap} within 3 s")


def test_a_new_scram_user_holds_no_acl(secured_cluster, secured_bootstrap, secured_topic):
    topic = secured_topic()
    alice = ClientConfig.load(secured_cluster.add_scram_user("alice", "alice-secret-1")).connection(None)
    assert topic in cluster_metadata(secured_cluster.connection).topics
    assert topic not in cluster_metadata(alice).topics  # logged in, sees nothing
    with pytest.raises(AuthorizationFailure) as denied:  # the environment's refusal (exit 3), naming the topic
        create_topic(alice, "alice-topic", 1, 1)
    assert str(denied.value) == f"TOPIC_AUTHORIZATION_FAILED on alice-topic: {ACLS_HINT}"
