"""Admin-side Kafka operations of the face: reachability, topics, transactional readiness."""

from __future__ import annotations

import time
from dataclasses import dataclass

from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, ClusterMetadata, NewTopic

from conf.client_config import Connection, connection
from conf.client_log import CLIENT_LOG
from conf.failures import authorization_failure
from eosbench.console.errors import BadInput, EnvironmentProblem, kafka_security_failure


def admin_client(bootstrap: str | Connection) -> AdminClient:
    """Return an AdminClient for the cluster (a bootstrap string: PLAINTEXT; a Connection: as --command-config says)."""
    return AdminClient(connection(bootstrap).librdkafka(), logger=CLIENT_LOG)


def cluster_metadata(bootstrap: str | Connection, timeout_s: float = 5.0) -> ClusterMetadata:
    """Return the cluster's metadata, or fail with one line if no broker answers in time.

    Every command asks this first, so a refused login or certificate ends the command here, as
    soon as the client reports it, with the line that says which (console/errors.py).
    """
    target = connection(bootstrap)
    errors: list[KafkaError] = []
    admin = AdminClient(target.librdkafka(error_cb=errors.append), logger=CLIENT_LOG)
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return admin.list_topics(timeout=min(1.0, max(0.1, deadline - time.monotonic())))
        except KafkaException as exc:
            admin.poll(0)  # serves error_cb: an authentication or TLS error shows only there
            for error in errors:
                line = kafka_security_failure(error.str(), dict(target.security), target.bootstrap)
                if line:
                    raise EnvironmentProblem(line) from exc
            if time.monotonic() >= deadline:
                raise EnvironmentProblem(
                    f"cannot reach Kafka at {bootstrap} within {timeout_s:g} s ({_reason(exc)});"
                    " is the broker running? try `eosbench broker start`"
                ) from exc


def _reason(exc: KafkaException) -> str:
    error = exc.args[0] if exc.args else None
    return error.str() if isinstance(error, KafkaError) else str(exc)


def under_replicated(bootstrap: str | Connection) -> list[str]:
    """Name every partition whose in-sync replicas are fewer than its replicas (none: fully replicated)."""
    metadata = cluster_metadata(bootstrap)
    return [f"{topic.topic}-{partition.id}" for topic in metadata.topics.values()
            for partition in topic.partitions.values()
            if partition.leader < 0 or len(partition.isrs) < len(partition.replicas)]


def wait_transactions_ready(bootstrap: str | Connection, expected_brokers: int, timeout_s: float) -> float:
    """Block until every broker is registered and a transactional producer can init; return seconds."""
    started = time.monotonic()
    deadline = started + timeout_s
    while True:
        try:
            brokers = len(admin_client(bootstrap).list_topics(timeout=2).brokers)
        except KafkaException:
            brokers = 0
        if brokers >= expected_brokers:
            break
        if time.monotonic() > deadline:
            raise EnvironmentProblem(
                f"only {brokers} of {expected_brokers} brokers registered at {bootstrap}"
                f" within {timeout_s:g} s; see `eosbench broker logs`"
            )
        time.sleep(0.25)
    probe = Producer(connection(bootstrap).librdkafka(**{"transactional.id": "eosbench.readiness-probe"}),
                     logger=CLIENT_LOG)
    try:
        probe.init_transactions(max(1.0, deadline - time.monotonic()))
    except KafkaException as exc:
        raise EnvironmentProblem(
            f"the cluster at {bootstrap} did not accept transactions within {timeout_s:g} s"
            f" ({_reason(exc)}); see `eosbench broker logs`"
        ) from exc
    finally:
        probe.flush(1)
    return time.monotonic() - started


@dataclass(frozen=True)
class TopicDescription:
    """Partitions, replicas and ISR of one topic."""

    name: str
    partitions: dict[int, tuple[int, list[int], list[int]]]  # id -> (leader, replicas, isr)

    def render(self) -> str:
        """Format like `kafka-topics --describe`."""
        lines = [f"Topic: {self.name}\tPartitionCount: {len(self.partitions)}"]
        for pid, (leader, replicas, isr) in sorted(self.partitions.items()):
            lines.append(
                f"\tTopic: {self.name}\tPartition: {pid}\tLeader: {leader}"
                f"\tReplicas: {','.join(map(str, replicas))}\tIsr: {','.join(map(str, isr))}"
            )
        return "\n".join(lines)


def create_topic(bootstrap: str | Connection, name: str, partitions: int, replication_factor: int) -> None:
    """Create a topic and wait until every partition has a leader."""
    if partitions < 1 or replication_factor < 1:
        raise BadInput("--partitions and --replication-factor must be at least 1")
    brokers = len(cluster_metadata(bootstrap).brokers)
    if replication_factor > brokers:
        raise BadInput(f"--replication-factor {replication_factor} exceeds the {brokers} broker(s) available")
    admin = admin_client(bootstrap)  # must outlive the future, or librdkafka cancels it
    future = admin.create_topics([NewTopic(name, partitions, replication_factor)])[name]
    try:
        future.result(timeout=30)
    except KafkaException as exc:
        error = exc.args[0]
        if isinstance(error, KafkaError) and error.code() == KafkaError.TOPIC_ALREADY_EXISTS:
            raise BadInput(f"topic {name!r} already exists") from exc
        # A principal without CREATE is the environment's doing, not the input's (exit 3).
        raise authorization_failure(exc, name) or BadInput(f"cannot create topic {name!r}: {_reason(exc)}") from exc
    _wait_for_leaders(bootstrap, name, partitions)


def create_dead_letter_topic(bootstrap: str | Connection, output_topic: str, dead_letter: str) -> tuple[int, int] | None:
    """Create the dead-letter topic shaped like the output unless the principal sees it; (partitions, replication) if made.

    Like the output, so that dead letters spread as the output does: the output's partition count,
    and its replication factor, capped by the brokers registered now.
    """
    metadata = cluster_metadata(bootstrap)
    if dead_letter in metadata.topics:
        return None
    output = describe_topic(bootstrap, output_topic)
    replication = min(max(len(replicas) for _, replicas, _ in output.partitions.values()), len(metadata.brokers))
    create_topic(bootstrap, dead_letter, len(output.partitions), replication)
    return len(output.partitions), replication


def _wait_for_leaders(bootstrap: str | Connection, name: str, partitions: int, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        topic = cluster_metadata(bootstrap).topics.get(name)
        if topic and len(topic.partitions) == partitions and all(
            p.leader >= 0 for p in topic.partitions.values()
        ):
            return
        time.sleep(0.1)
    raise EnvironmentProblem(f"topic {name!r} has partitions without a leader after {timeout_s:g} s")


def describe_topic(bootstrap: str | Connection, name: str) -> TopicDescription:
    """Return a topic's partitions, or fail with one line if it does not exist."""
    topic = cluster_metadata(bootstrap).topics.get(name)
    if topic is None or topic.error is not None:
        raise BadInput(f"topic {name!r} does not exist at {bootstrap}")
    return TopicDescription(
        name=name,
        partitions={
            pid: (p.leader, list(p.replicas), list(p.isrs)) for pid, p in topic.partitions.items()
        },
    )


def delete_topics(bootstrap: str | Connection, names: list[str]) -> None:
    """Delete topics and wait until the metadata no longer lists them."""
    existing = cluster_metadata(bootstrap).topics
    missing = [name for name in names if name not in existing]
    if missing:
        raise BadInput(f"topic {missing[0]!r} does not exist at {bootstrap}")
    admin = admin_client(bootstrap)  # must outlive the futures
    for name, future in admin.delete_topics(names, operation_timeout=30).items():
        try:
            future.result(timeout=30)
        except KafkaException as exc:
            raise BadInput(f"cannot delete topic {name!r}: {_reason(exc)}") from exc
    deadline = time.monotonic() + 30
    while any(name in cluster_metadata(bootstrap).topics for name in names):
        if time.monotonic() > deadline:
            raise EnvironmentProblem(f"topics {names} still listed 30 s after deletion")
        time.sleep(0.1)


def create_scram_user(bootstrap: Connection, user: str, password: str,
                      mechanism: str = "SCRAM-SHA-512", iterations: int = 8192) -> None:
    """Create (or reset) a SCRAM user's credential; `bootstrap` must connect as a principal allowed to ALTER the cluster (an admin)."""
    from confluent_kafka.admin import ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

    upsertion = UserScramCredentialUpsertion(
        user, ScramCredentialInfo(ScramMechanism[mechanism.replace("-", "_")], iterations), password.encode())
    admin = admin_client(bootstrap)  # must outlive the future
    try:
        admin.alter_user_scram_credentials([upsertion])[user].result(timeout=30)
        # The broker that will authenticate the user learns of it from the metadata log a moment later.
        deadline = time.monotonic() + 30
        while True:
            try:
                admin.describe_user_scram_credentials([user])[user].result(timeout=10)
                return
            except KafkaException:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
    except KafkaException as exc:
        raise EnvironmentProblem(f"cannot create SCRAM user {user!r}: {_reason(exc)}") from exc


def _acl_binding(acl):
    """An Acl of acl_set as confluent-kafka's AclBinding (ALLOW)."""
    from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, ResourcePatternType, ResourceType

    return AclBinding(ResourceType[acl.resource_type], acl.name, ResourcePatternType[acl.pattern_type],
                      acl.principal, acl.host, AclOperation[acl.operation], AclPermissionType.ALLOW)


def create_acls(bootstrap: str | Connection, acls: list) -> None:
    """Create these ACLs (acl_set.Acl); an ACL that already exists is left as it is, as kafka-acls --add does."""
    admin = admin_client(bootstrap)  # must outlive the futures
    for binding, future in admin.create_acls([_acl_binding(acl) for acl in acls], request_timeout=30).items():
        try:
            future.result(timeout=30)
        except KafkaException as exc:
            raise _acl_failure(exc, bootstrap, f"cannot create the ACL {binding}") from exc


def delete_acls(bootstrap: str | Connection, acls: list) -> None:
    """Delete exactly these ACLs (acl_set.Acl)."""
    from confluent_kafka.admin import AclBindingFilter

    admin = admin_client(bootstrap)
    filters = [AclBindingFilter(b.restype, b.name, b.resource_pattern_type, b.principal, b.host, b.operation,
                                b.permission_type) for b in map(_acl_binding, acls)]
    for future in admin.delete_acls(filters, request_timeout=30).values():
        try:
            future.result(timeout=30)
        except KafkaException as exc:
            raise _acl_failure(exc, bootstrap, "cannot delete ACLs") from exc


def principal_acls(bootstrap: str | Connection, principal: str) -> list:
    """Every ALLOW ACL the cluster holds for this principal, as acl_set.Acl (kafka-acls --list --principal)."""
    from confluent_kafka.admin import (AclBindingFilter, AclOperation, AclPermissionType, ResourcePatternType,
                                       ResourceType)

    from eosbench.local.acl_set import Acl

    admin = admin_client(bootstrap)
    query = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, principal, None, AclOperation.ANY,
                             AclPermissionType.ALLOW)
    try:
        bindings = admin.describe_acls(query, request_timeout=30).result(timeout=30)
    except KafkaException as exc:
        raise _acl_failure(exc, bootstrap, "cannot list ACLs") from exc
    return sorted(Acl(b.restype.name, b.name, b.resource_pattern_type.name, b.operation.name, b.principal, b.host)
                  for b in bindings)


def _acl_failure(exc: KafkaException, bootstrap: str | Connection, what: str) -> Exception:
    """One line for a refused ACL request: no authorizer, or a principal that may not alter ACLs."""
    error = exc.args[0] if exc.args else None
    code = error.code() if isinstance(error, KafkaError) else None
    if code == KafkaError.SECURITY_DISABLED:
        return EnvironmentProblem(f"{what}: the cluster at {bootstrap} has no authorizer (SECURITY_DISABLED);"
                                  " ACLs need authorizer.class.name set on every broker")
    if code == KafkaError.CLUSTER_AUTHORIZATION_FAILED:
        return EnvironmentProblem(f"{what}: CLUSTER_AUTHORIZATION_FAILED: the --command-config principal may not"
                                  " alter ACLs (it needs ALTER on the cluster, or to be a super user)")
    return EnvironmentProblem(f"{what} at {bootstrap}: {_reason(exc)}")
