"""The least-privilege ACL set of a pipeline, and its kafka-acls --list rendering (pure: no broker)."""

from __future__ import annotations

import pytest

from eosbench.local.acl_set import Acl, PipelineAccess, apply_command, client_principal, pipeline_acls, render_acls


def _rows(acls: list[Acl]) -> list[tuple[str, str, str, str]]:
    return [(acl.resource_type, acl.name, acl.pattern_type, acl.operation) for acl in acls]


def test_the_set_is_exactly_what_the_pipeline_needs():
    access = PipelineAccess("eosbench-x", "User:alice", "in", "out", producer_transactional_id="fill-1")
    assert _rows(pipeline_acls(access)) == [
        ("GROUP", "eosbench-x", "LITERAL", "READ"),
        ("GROUP", "eosbench-x.owner", "LITERAL", "READ"),
        ("TOPIC", "in", "LITERAL", "READ"),
        ("TOPIC", "in", "LITERAL", "WRITE"),
        ("TOPIC", "out", "LITERAL", "READ"),
        ("TOPIC", "out", "LITERAL", "WRITE"),
        ("TOPIC", "out.dlq", "LITERAL", "READ"),
        ("TOPIC", "out.dlq", "LITERAL", "WRITE"),
        ("TRANSACTIONAL_ID", "eosbench-x.", "PREFIXED", "WRITE"),
        ("TRANSACTIONAL_ID", "fill-1", "LITERAL", "WRITE"),
    ]
    assert {(acl.principal, acl.host) for acl in pipeline_acls(access)} == {("User:alice", "*")}


def test_without_a_filler_id_the_prefix_produce_generates_is_granted():
    acls = pipeline_acls(PipelineAccess("a", "User:alice", "in", "out", dead_letter_topic="dead"))
    assert ("TRANSACTIONAL_ID", "performance-producer-", "PREFIXED", "WRITE") in _rows(acls)
    assert [row for row in _rows(acls) if row[1] == "dead"] == [("TOPIC", "dead", "LITERAL", "READ"),
                                                                  ("TOPIC", "dead", "LITERAL", "WRITE")]


def test_a_topic_named_twice_is_granted_once():
    acls = pipeline_acls(PipelineAccess("a", "User:alice", "in", "out", dead_letter_topic="in"))
    assert len(acls) == len(set(acls)) == 8


@pytest.mark.parametrize("principal", ["alice", "User:", ":alice"])
def test_a_principal_needs_its_kind(principal):
    with pytest.raises(ValueError) as refused:
        PipelineAccess("a", principal, "in", "out")
    assert str(refused.value) == f"--principal must look like User:NAME, got {principal!r}"


def test_the_rendering_reads_like_kafka_acls_list():
    acls = pipeline_acls(PipelineAccess("app", "User:alice", "in", "out", producer_transactional_id="f"))
    text = render_acls([acl for acl in acls if acl.name in ("in", "app.")])
    assert text == (
        "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=in, patternType=LITERAL)`: \n"
        " \t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)\n"
        "\t(principal=User:alice, host=*, operation=WRITE, permissionType=ALLOW) \n"
        "\n"
        "Current ACLs for resource `ResourcePattern(resourceType=TRANSACTIONAL_ID, name=app., patternType=PREFIXED)`: \n"
        " \t(principal=User:alice, host=*, operation=WRITE, permissionType=ALLOW) \n")
    assert render_acls(acls, heading="Required").startswith("Required ACLs for resource `ResourcePattern(resourceType=GROUP")


def test_the_admin_command_names_the_pipeline_and_only_the_flags_that_differ_from_their_defaults():
    assert apply_command(PipelineAccess("app", "User:alice", "in", "out")) == (
        "eosbench acls --app-id app --principal User:alice --input-topic in --output-topic out"
        " --apply --command-config ADMIN.properties")
    named = PipelineAccess("app", "User:alice", "in", "out", dead_letter_topic="dead", producer_transactional_id="f")
    assert apply_command(named, "admin.properties").endswith(
        "--dead-letter-topic dead --producer-transactional-id f --apply --command-config admin.properties")


@pytest.mark.parametrize("security,principal", [
    ({"security.protocol": "SASL_SSL", "sasl.username": "alice"}, "User:alice"),
    ({}, "User:ANONYMOUS"),
    ({"security.protocol": "SSL"}, "User:NAME"),
])
def test_the_client_principal_is_read_from_its_settings_where_they_tell(security, principal):
    assert client_principal(security) == principal
