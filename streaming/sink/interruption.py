"""A foreachBatch cut short by `query.stop()` fails with a short error that Spark reads as a stop.

When a query is stopped mid-batch, the batch's Spark action (`save()`, `collect()`) fails with
an InterruptedException or a cancelled job. Spark decides whether such a failure is "stopped" or
"failed" by matching `py4j.protocol.Py4JJavaError: An error occurred while calling((.|\\r\\n|\\r|\\n)*)
(java.lang.InterruptedException|…)` against the whole Python traceback (Spark 4.2's
StreamExecution.PROXY_ERROR). The traceback carries the Java stack trace, and that pattern
recurses once per character in Java's regex engine, so the check dies with a StackOverflowError
that floods stderr with a thousand frames. Re-raising only the error's first two lines keeps
Spark's own verdict (a stop, not a failure) and a readable log.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

# What a stop does to the Spark action a batch is blocked in (the names Spark's check looks for,
# and the cancelled job of the query's job group).
STOP_MARKERS = ("java.lang.InterruptedException", "java.io.InterruptedIOException",
                "java.nio.channels.ClosedByInterruptException", "SPARK_JOB_CANCELLED")


class BatchInterrupted(Exception):
    """The query was stopped while this batch ran; the message is the Java error's first lines."""


@contextmanager
def stop_kept_short(batch_id: int) -> Iterator[None]:
    """Run one foreachBatch body; if a stop interrupts it, raise BatchInterrupted without the Java stack."""
    from py4j.protocol import Py4JJavaError

    try:
        yield
    except Py4JJavaError as exc:
        head = "\n".join(str(exc).splitlines()[:2])
        if not any(marker in head for marker in STOP_MARKERS):
            raise
        raise BatchInterrupted(f"batch {batch_id} stopped: py4j.protocol.Py4JJavaError: {head}") from None
