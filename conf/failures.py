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
import socket

from conf.settings import SettingsError

__all__ = ["EnvironmentFailure", "RunFailed", "SettingsError", "bind_failure", "kafka_failure", "kafka_reason"]


class EnvironmentFailure(RuntimeError):
    """The machine or the cluster lacks something the run needs: a free port, a broker, credentials."""


class RunFailed(RuntimeError):
    """The work ran and its own check failed: fenced by a newer producer, an exactly-once violation."""


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
