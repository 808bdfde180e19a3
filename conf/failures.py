"""Whose fault a failure is, for code that may not import the face: the engines say it, the face maps it.

producers/ and streaming/ may not import eosbench/, so they raise these classes and
eosbench/console/errors.py turns each into the command line's exit code:

- SettingsError (conf/settings.py): bad input, exit 2 (a flag, a property, a file the user named);
- EnvironmentFailure: the environment lacks something, exit 3 (a free port, a reachable broker,
  credentials, a cluster that accepts the work);
- RunFailed: the work ran and its own check failed, exit 1 (fenced by a newer producer, an
  exactly-once violation).

`kafka_failure` and `bind_failure` sort a client's error and a socket's error into those kinds,
so that every engine words and classifies them alike.
"""

from __future__ import annotations

import errno
import re
import socket

from conf.settings import SettingsError

__all__ = ["AuthorizationFailure", "EnvironmentFailure", "RunFailed", "SettingsError", "authorization_failure",
           "bind_failure", "java_error_line", "kafka_failure", "kafka_reason", "streaming_query_failure"]


class EnvironmentFailure(RuntimeError):
    """The machine or the cluster lacks something the run needs: a free port, a broker, credentials."""


class RunFailed(RuntimeError):
    """The work ran and its own check failed: fenced by a newer producer, an exactly-once violation."""


class AuthorizationFailure(EnvironmentFailure):
    """The cluster refused a request for want of an ACL; retrying cannot help, so the run stops at once."""


# Kafka's authorization error names, by the resource whose ACL is missing (Kafka's ResourceType).
_AUTHORIZATION_ERRORS = {"TOPIC_AUTHORIZATION_FAILED": "TOPIC", "GROUP_AUTHORIZATION_FAILED": "GROUP",
                         "TRANSACTIONAL_ID_AUTHORIZATION_FAILED": "TRANSACTIONAL_ID",
                         "CLUSTER_AUTHORIZATION_FAILED": "CLUSTER"}
# The same refusals as the Java client (Spark's source and writer) words them.
_JAVA_AUTHORIZATION = (
    (re.compile(r"TopicAuthorizationException: Not authorized to access topics: \[([^\]]*)\]"),
     "TOPIC_AUTHORIZATION_FAILED"),
    (re.compile(r"GroupAuthorizationException: Not authorized to access group: (\S+)"), "GROUP_AUTHORIZATION_FAILED"),
    (re.compile(r"TransactionalIdAuthorizationException"), "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"),
    (re.compile(r"ClusterAuthorizationException"), "CLUSTER_AUTHORIZATION_FAILED"),
)
ACLS_HINT = "the principal lacks an ACL for it (`eosbench acls` prints what a pipeline needs)"


def authorization_error_name(error: object) -> str | None:
    """Kafka's name of a client error if it is an authorization refusal, else None.

    `error` is a KafkaError, a KafkaException carrying one, or a kafka-python error (whose class
    carries Kafka's name as `message`).
    """
    from confluent_kafka import KafkaError

    carried = isinstance(error, Exception) and error.args and isinstance(error.args[0], KafkaError)
    inner = error.args[0] if carried else error
    name = inner.name() if isinstance(inner, KafkaError) else getattr(type(inner), "message", None)
    return name if name in _AUTHORIZATION_ERRORS else None


def authorization_failure(error: object, resource: str) -> AuthorizationFailure | None:
    """The one-line failure for an authorization refusal on `resource` (librdkafka's errors name no resource), or None."""
    name = authorization_error_name(error)
    return AuthorizationFailure(f"{name} on {resource}: {ACLS_HINT}") if name else None


def unauthorized_topic(client_config: dict[str, str], wanted: list[tuple[str, str]]) -> str | None:
    """The first topic of `wanted` (topic, operation) on which the client's principal may not do that operation.

    A refusal of AddPartitionsToTxn or TxnOffsetCommit does not say which topic it was about; the
    topics' authorized operations (KIP-430, read with DESCRIBE) do. None if every one is allowed.
    """
    from confluent_kafka import KafkaException, TopicCollection
    from confluent_kafka.admin import AdminClient

    from conf.client_log import CLIENT_LOG

    admin = AdminClient(client_config, logger=CLIENT_LOG)
    futures = admin.describe_topics(TopicCollection(list(dict.fromkeys(t for t, _ in wanted))),
                                    include_authorized_operations=True)
    for topic, operation in wanted:
        try:
            allowed = {op.name for op in futures[topic].result(timeout=30).authorized_operations or ()}
        except KafkaException:
            return topic  # not even DESCRIBE
        except TimeoutError:  # a broker too busy to answer: the failure names every topic instead
            return None
        if operation not in allowed:
            return topic
    return None


def java_authorization_failure(text: str, resource: str = "") -> AuthorizationFailure | None:
    """The one-line failure for a Java client's authorization refusal found in `text` (a Spark error), or None.

    Java names the topics and the group; for a transactional id or the cluster, `resource` says which.
    """
    for pattern, name in _JAVA_AUTHORIZATION:
        match = pattern.search(text)
        if match:
            where = match.group(1) if match.groups() else resource or _AUTHORIZATION_ERRORS[name].lower()
            return AuthorizationFailure(f"{name} on {where}: {ACLS_HINT}")
    return None


def java_error_line(text: str) -> str:
    """The line of a py4j error that names the Java exception, rather than 'An error occurred while calling o42.start.'."""
    for line in text.splitlines():
        if re.match(r"^(: )?[\w.$]+(Exception|Error)\b", line.strip()):
            return line.strip().removeprefix(": ")
    return text.strip().splitlines()[0] if text.strip() else "unknown error"


# Spark words a failed query as "[STREAM_FAILED] Query [id = …, runId = …] terminated with
# exception: <cause> SQLSTATE: …", then dumps the query's offsets and plan; only the cause says why.
_QUERY_CAUSE = re.compile(r"terminated with exception: (.+?)(?: SQLSTATE: \w+)?$", re.MULTILINE)
_RAISED = re.compile(r"^[A-Za-z_][\w.]*: \S")  # "ValueError: …", the last line of a Python traceback
# Spark's Kafka source words data loss over several lines and names the partition and offsets in
# the last, "Reason: …"; the grouped source puts them first, on the one line.
_DATA_LOSS = "Some data may have been lost"
_DATA_LOSS_REASON = re.compile(r"^Reason: (.+?)\.?(?: SQLSTATE: \w+)?$", re.MULTILINE)


def streaming_query_failure(error: object) -> EnvironmentFailure:
    """The one-line failure of a streaming query that stopped with an error: its cause, without ids or plan.

    A query stops for good when what it runs on does (a checkpoint store that is down, a broker
    unreachable past the source's retries), so it is the environment's; the driver's log above
    the line keeps Spark's stack trace. An error raised in the Python of foreachBatch reaches
    Spark as a traceback, whose last line names it, unless that Python called into the JVM (the
    checkpoint's file system, say): then the Java exception below the Py4JJavaError names it.
    """
    text = str(error).split("=== Streaming Query ===")[0]
    cause = _QUERY_CAUSE.search(text)
    line = cause[1].strip() if cause else java_error_line(text)
    _, traceback, python_frames = text.partition("Traceback (most recent call last):")
    raised = [frame.strip() for frame in python_frames.splitlines() if _RAISED.match(frame)] if traceback else []
    if raised and raised[-1].startswith("py4j.protocol.Py4JJavaError"):
        line = java_error_line(python_frames.rpartition(raised[-1])[2])
    elif raised:
        line = raised[-1]
    if _DATA_LOSS in line:
        named, _, _ = line.partition(_DATA_LOSS)
        reason = named.strip().rstrip(".") or next((m[1] for m in _DATA_LOSS_REASON.finditer(text)), "")
        line = (f"{reason + ': ' if reason else ''}some data may have been lost (records deleted before they were"
                " read); the source option failOnDataLoss=false goes on without them")
    return EnvironmentFailure(f"the streaming query failed: {line}")


def kafka_failure(error: object, message: str) -> Exception:
    """The failure a Kafka client's error (a KafkaError, or a KafkaException carrying one) stands for."""
    from confluent_kafka import KafkaError

    # The request was wrong, not the cluster: an unknown property or a value of the wrong kind, a
    # topic that does not exist, a transaction.timeout.ms above the brokers' maximum.
    bad_input = {KafkaError._INVALID_ARG, KafkaError._INVALID_TYPE, KafkaError._UNKNOWN_TOPIC,
                 KafkaError._UNKNOWN_PARTITION, KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError.TOPIC_EXCEPTION,
                 KafkaError.TOPIC_ALREADY_EXISTS, KafkaError.INVALID_PARTITIONS,
                 KafkaError.INVALID_REPLICATION_FACTOR, KafkaError.INVALID_CONFIG, KafkaError.POLICY_VIOLATION,
                 KafkaError.INVALID_TRANSACTION_TIMEOUT}
    # A newer producer took the transactional id over: the run itself failed.
    fenced = {KafkaError._FENCED, KafkaError.INVALID_PRODUCER_EPOCH, KafkaError.PRODUCER_FENCED}
    inner = error.args[0] if isinstance(error, Exception) and error.args else error
    code = inner.code() if isinstance(inner, KafkaError) else None
    if code in bad_input:
        return SettingsError(message)
    if code in fenced:
        return RunFailed(message)
    return EnvironmentFailure(message)


def kafka_reason(error: object) -> str:
    """A client error's own words: KafkaError.str(), or the exception's text."""
    inner = error.args[0] if isinstance(error, Exception) and error.args else error
    return inner.str() if hasattr(inner, "str") else str(error)


def bind_failure(exc: OSError, host: str, port: int, flags: str = "--metrics-host/--metrics-port") -> Exception:
    """The failure an OSError from binding a listening socket stands for: a wrong host is bad input, a taken port is not."""
    if isinstance(exc, socket.gaierror) or exc.errno in (errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT):
        return SettingsError(f"{flags}: cannot listen on {host}:{port}: {exc.strerror or exc}"
                             " (the host must be an address of this machine)")
    if exc.errno == errno.EADDRINUSE:
        return EnvironmentFailure(f"{flags}: port {port} on {host} is already in use")
    return EnvironmentFailure(f"{flags}: cannot listen on {host}:{port}: {exc.strerror or exc}")
