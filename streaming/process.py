"""The deterministic transforms a record goes through between source and sink.

Determinism is the point: a replayed batch must produce byte-identical output, so that
exactly-once can be checked by comparing ids and values. A transform returns None for a record
it cannot handle (a poison record); the sink sends those to the dead-letter topic inside the
same transaction.
"""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Callable

POISON_PREFIX = b"POISON"

Transform = Callable[[bytes | None, bytes | None], bytes | None]


def passthrough(key: bytes | None, value: bytes | None) -> bytes | None:
    """The value unchanged."""
    if value is not None and value.startswith(POISON_PREFIX):
        return None
    return value


def checksum(key: bytes | None, value: bytes | None) -> bytes | None:
    """The value followed by its CRC-32 as 8 hex digits."""
    if value is None or value.startswith(POISON_PREFIX):
        return None
    return value + b"|" + format(zlib.crc32(value), "08x").encode()


def enrich(key: bytes | None, value: bytes | None) -> bytes | None:
    """A JSON object with the key, the value's length and a SHA-256 prefix."""
    if value is None or value.startswith(POISON_PREFIX):
        return None
    digest = hashlib.sha256(value).hexdigest()[:16]
    return b'{"key":"%s","len":%d,"sha256_16":"%s"}' % (key or b"", len(value), digest.encode())


TRANSFORMS: dict[str, Transform] = {"passthrough": passthrough, "checksum": checksum, "enrich": enrich}


def source_columns() -> list[str]:
    """The Kafka source columns every sink reads, in this order."""
    return ["topic", "partition", "offset", "timestamp", "key", "value"]


def arrow_columns(batch) -> tuple[list, list, list[int], list[int], str | None, int | None]:
    """Return (keys, values, offsets, timestamps in ms, topic, partition) of an Arrow record batch.

    The topic and partition are returned only when the batch holds a single one of each, and
    are None otherwise (a shuffle or a split before the sink).
    """
    import pyarrow.compute as pc

    offsets = batch.column("offset").to_pylist()
    # Spark's timestamps are microseconds; headers and latency use Kafka's milliseconds.
    timestamps = pc.divide(pc.cast(batch.column("timestamp"), "int64"), 1000).to_pylist()
    topics = pc.unique(batch.column("topic")).to_pylist()
    partitions = pc.unique(batch.column("partition")).to_pylist()
    topic = topics[0] if len(topics) == 1 else None
    partition = partitions[0] if len(partitions) == 1 else None
    return batch.column("key").to_pylist(), batch.column("value").to_pylist(), offsets, timestamps, topic, partition
