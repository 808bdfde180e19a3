"""The least-privilege ACL set of one pipeline (input filler → stream → verify), worked out, not guessed.

Pure: no client, no broker. `kafka_admin.create_acls` applies what `pipeline_acls` returns, and
`eosbench acls` prints it the way `kafka-acls --list` does.

Each ACL below is there because a request of the pipeline needs it (Kafka 4.3's KafkaApis and
StandardAuthorizer); nothing else is granted:

- READ on the input topic: Spark's source fetches it; the sink's TxnOffsetCommit needs READ on
  every topic whose offsets it commits; verify reads it.
- WRITE on the input topic, and on the filler's transactional id: `eosbench produce` (transactional,
  so InitProducerId, AddPartitionsToTxn, Produce and EndTxn; a transactional producer needs no
  IDEMPOTENT_WRITE on the cluster).
- WRITE on the output and dead-letter topics: the sink's Produce and AddPartitionsToTxn. The
  dead-letter topic must exist and be visible even when no record is poisoned: `stream` refuses
  to start without it, since creating it is a right the principal does not hold. `eosbench acls
  --apply` (an admin) creates it, shaped like the output, along with the ACLs.
- READ on the output and dead-letter topics: verify; and the sink's owner record is the offset of
  the dead-letter topic's partition 0 in its own group (an OffsetCommit needs READ on the topic).
- READ on group `<app-id>`: the sink's AddOffsetsToTxn and TxnOffsetCommit, and the OffsetFetch of
  Step 2 and `verify --app-id` (which need DESCRIBE, implied by READ).
- READ on group `<app-id>.owner`: the owner record, which the driver writes when it claims the
  pipeline (OffsetCommit) and every writer reads after its producer's init (OffsetFetch).
- WRITE on the transactional ids prefixed `<app-id>.`: the sink's producers, `<app-id>.<topic>.<p>`
  in partition scope and `<app-id>.batch` in batch scope (FindCoordinator's DESCRIBE is implied).

Kafka's implications keep the set short: READ, WRITE, DELETE and ALTER imply DESCRIBE on the same
resource, so no DESCRIBE is listed. Not granted, on purpose: CREATE (topics are made by an admin
first), DESCRIBE_CONFIGS on the cluster (the sink then assumes Kafka's offsets.retention.minutes,
or takes --offsets-retention-minutes), and any group of Spark's own source (it assigns partitions
and commits nothing, so it never asks a group coordinator). The integration test runs the whole
pipeline with exactly this set, and fails the run for each ACL taken away.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import groupby

# `eosbench produce` names its transactional id `performance-producer-<uuid>` unless given one.
DEFAULT_PRODUCER_TRANSACTIONAL_ID_PREFIX = "performance-producer-"


@dataclass(frozen=True, order=True)
class Acl:
    """One ALLOW ACL: a principal may do `operation` on a resource pattern, from any host."""

    resource_type: str  # TOPIC, GROUP or TRANSACTIONAL_ID, as Kafka's ResourceType names them
    name: str
    pattern_type: str  # LITERAL or PREFIXED
    operation: str  # READ or WRITE, as Kafka's AclOperation names them
    principal: str
    host: str = "*"
    why: str = field(default="", compare=False)

    @property
    def resource(self) -> str:
        """The resource pattern as Kafka's ResourcePattern.toString() prints it."""
        return f"ResourcePattern(resourceType={self.resource_type}, name={self.name}, patternType={self.pattern_type})"

    @property
    def entry(self) -> str:
        """The access control entry as Kafka's AccessControlEntry.toString() prints it."""
        return f"(principal={self.principal}, host={self.host}, operation={self.operation}, permissionType=ALLOW)"


@dataclass(frozen=True)
class PipelineAccess:
    """What `eosbench acls` is asked about: one principal running one pipeline."""

    app_id: str
    principal: str
    input_topic: str
    output_topic: str
    dead_letter_topic: str | None = None  # None: <output-topic>.dlq, the stream's default
    producer_transactional_id: str | None = None  # None: the prefix `eosbench produce` generates ids under

    def __post_init__(self) -> None:
        kind, _, name = self.principal.partition(":")
        if not kind or not name:
            raise ValueError(f"--principal must look like User:NAME, got {self.principal!r}")
        for flag, value in (("--app-id", self.app_id), ("--input-topic", self.input_topic),
                            ("--output-topic", self.output_topic)):
            if not value:
                raise ValueError(f"{flag} must not be empty")

    @property
    def dead_letter(self) -> str:
        """The dead-letter topic the stream writes poison records to."""
        return self.dead_letter_topic or f"{self.output_topic}.dlq"


def pipeline_acls(access: PipelineAccess) -> list[Acl]:
    """The least-privilege ACLs of the pipeline, sorted by resource (see the module docstring for each one)."""
    p = access.principal
    filler_id = access.producer_transactional_id
    acls = [
        Acl("TOPIC", access.input_topic, "LITERAL", "READ", p,
            why="the stream's source, the sink's offset commits (TxnOffsetCommit) and verify read it"),
        Acl("TOPIC", access.input_topic, "LITERAL", "WRITE", p, why="the input filler (eosbench produce) writes it"),
        Acl("TOPIC", access.output_topic, "LITERAL", "WRITE", p, why="the sink writes it"),
        Acl("TOPIC", access.output_topic, "LITERAL", "READ", p, why="verify reads it"),
        Acl("TOPIC", access.dead_letter, "LITERAL", "WRITE", p, why="the sink writes poison records to it"),
        Acl("TOPIC", access.dead_letter, "LITERAL", "READ", p,
            why="verify reads it; the sink's owner record is an offset of its partition 0"),
        Acl("GROUP", access.app_id, "LITERAL", "READ", p,
            why="the sink commits its offsets in each transaction and reads them back (Step 2, verify --app-id)"),
        Acl("GROUP", f"{access.app_id}.owner", "LITERAL", "READ", p,
            why="the owner record: the driver run that may write, written at its start, read by every new producer"),
        Acl("TRANSACTIONAL_ID", f"{access.app_id}.", "PREFIXED", "WRITE", p,
            why="the sink's producers: <app-id>.<topic>.<partition>, or <app-id>.batch"),
        Acl("TRANSACTIONAL_ID", filler_id or DEFAULT_PRODUCER_TRANSACTIONAL_ID_PREFIX,
            "LITERAL" if filler_id else "PREFIXED", "WRITE", p, why="the input filler's transactions"),
    ]
    unique = {acl: None for acl in acls}  # a dead-letter topic named like the input, say, is granted once
    return sorted(unique)


def client_principal(security: dict[str, str]) -> str:
    """The principal a client with these librdkafka security settings is known by (User:NAME where they do not tell)."""
    if "sasl.username" in security:
        return f"User:{security['sasl.username']}"
    if security.get("security.protocol", "PLAINTEXT").upper() == "PLAINTEXT":
        return "User:ANONYMOUS"
    return "User:NAME"  # a certificate's distinguished name, as the broker's principal builder maps it


def apply_command(access: PipelineAccess, admin_config: str = "ADMIN.properties") -> str:
    """The `eosbench acls … --apply` line an admin runs to grant this pipeline's set and create its dead-letter topic."""
    words = ["eosbench acls", "--app-id", access.app_id, "--principal", access.principal, "--input-topic",
             access.input_topic, "--output-topic", access.output_topic]
    if access.dead_letter_topic:
        words += ["--dead-letter-topic", access.dead_letter_topic]
    if access.producer_transactional_id:
        words += ["--producer-transactional-id", access.producer_transactional_id]
    return " ".join(words + ["--apply", "--command-config", admin_config])


def render_acls(acls: Iterable[Acl], heading: str = "Current") -> str:
    """The ACLs as `kafka-acls --list` prints them, one block per resource pattern ("Current ACLs for resource ...").

    `heading` replaces "Current": "Required" for a set not applied yet, "Adding" as `kafka-acls --add` says.
    """
    blocks = []
    for resource, entries in groupby(sorted(acls), key=lambda acl: acl.resource):
        lines = "\n".join(f"\t{acl.entry}" for acl in entries)
        blocks.append(f"{heading} ACLs for resource `{resource}`: \n {lines} \n")
    return "\n".join(blocks)
