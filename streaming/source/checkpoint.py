"""Read a micro-batch's offsets from the query's own checkpoint, on whatever Hadoop file system holds it.

Spark writes `<checkpoint>/offsets/<batchId>` before it runs the batch: a version line, a
metadata line, then one JSON line per source, `{"<topic>": {"<partition>": <end offset>}}`.
The sink commits exactly these ends with each transaction, so the group's offsets match the
input's end offsets even when a slice ends in aborted records or transaction markers.

The checkpoint may be on HDFS or an object store (`--checkpoint hdfs://…`), so `CheckpointLog`
reads it through Hadoop's `FileSystem` on the session's JVM, with the session's Hadoop
configuration: the same client, credentials and settings Spark writes it with. The parsers below
it take text and return offsets, so they need no JVM.
"""

from __future__ import annotations

import json
import re

_BATCH_ENTRY = re.compile(r"/(\d+)(?=,[A-Za-z][A-Za-z0-9+.-]*:|$)")


def end_offsets_in_log(text: str, topic: str) -> dict[int, int] | None:
    """{partition: end offset (exclusive)} of one topic in an `offsets/<batchId>` file's text (None: not there)."""
    for line in text.splitlines()[2:]:
        if not line.strip() or line.strip() == "-":
            continue
        offsets = json.loads(line)
        if topic in offsets:
            return {int(partition): int(end) for partition, end in offsets[topic].items()}
    return None


def offsets_in_source_log(text: str) -> dict[str, dict[str, int]]:
    """The offsets in a Kafka source's `sources/<i>/0` file's text (a leading NUL byte, a version line, JSON)."""
    lines = [line for line in text.splitlines() if line.strip()]
    return json.loads(lines[-1]) if lines else {}


def batch_ids_in_listing(listing: str) -> set[int]:
    """The batch ids (all-digit names) in a folder's listing printed as "{<uri>/<name>,<uri>/<name>,...}"."""
    # An entry ends where the next one's scheme starts (",hdfs:"), so a comma inside a folder's path
    # cannot end an entry early.
    return {int(name) for name in _BATCH_ENTRY.findall(listing.removeprefix("{").removesuffix("}"))}


def pending_batch_of(offset_batches: set[int], committed_batches: set[int]) -> int | None:
    """The batch a restarted query runs again: the last one in the offset log without a commit-log entry."""
    return max(offset_batches) if offset_batches and max(offset_batches) not in committed_batches else None


class CheckpointLog:
    """One query's checkpoint, read through Hadoop's FileSystem with the session's Hadoop configuration."""

    def __init__(self, spark, uri: str):
        self.uri = uri
        self._jvm = spark._jvm
        self._hadoop_path = spark._jvm.org.apache.hadoop.fs.Path
        self._root = self._hadoop_path(uri)
        self._fs = self._root.getFileSystem(spark._jsc.hadoopConfiguration())
        # {(batch id, topic): ends} of the batches read last: a batch starts where the one before ended,
        # and a file in the offset log never changes, so each batch costs one read on the JVM, not two.
        self._ends_read: dict[tuple[int, str], dict[int, int]] = {}

    def _call(self, method: str, relative: str):
        """`FileSystem.<method>(<checkpoint>/<relative>)`; None when the file or folder does not exist."""
        from py4j.protocol import Py4JJavaError

        try:
            return getattr(self._fs, method)(self._hadoop_path(self._root, relative))
        except Py4JJavaError as exc:
            if exc.java_exception.getClass().getName() == "java.io.FileNotFoundException":
                return None
            raise

    def _read(self, relative: str) -> str | None:
        """The text of one file under the checkpoint, None when it does not exist."""
        stream = self._call("open", relative)
        if stream is None:
            return None
        try:
            return bytes(stream.readAllBytes()).decode(errors="replace")
        finally:
            stream.close()

    def _batch_ids(self, folder: str) -> set[int]:
        statuses = self._call("listStatus", folder)
        if statuses is None:
            return set()
        # Printed on the JVM, "{<uri>/0,<uri>/1,...}": three calls for the folder instead of three for
        # each of its entries (Spark keeps about 100). py4j passes no Path[] where Object[] is declared,
        # so ArrayUtils.toString(Object) it is.
        from py4j.protocol import Py4JError

        try:
            listing = self._jvm.org.apache.commons.lang3.ArrayUtils.toString(
                self._jvm.org.apache.hadoop.fs.FileUtil.stat2Paths(statuses))
        except Py4JError:
            # S3A lists an S3AFileStatus[], which py4j will not pass as FileStatus[] either: name by name
            # then, once per log folder at start.
            return {int(name) for name in (status.getPath().getName() for status in statuses) if name.isdigit()}
        return batch_ids_in_listing(listing)

    def batch_end_offsets(self, batch_id: int, topic: str) -> dict[int, int]:
        """Return {partition: end offset (exclusive)} of one batch for one topic."""
        text = self._read(f"offsets/{batch_id}")
        ends = None if text is None else end_offsets_in_log(text, topic)
        if ends is None:
            raise FileNotFoundError(f"no offsets for {topic} in {self.uri}/offsets/{batch_id}")
        self._ends_read = {key: value for key, value in self._ends_read.items() if key[0] >= batch_id - 1}
        self._ends_read[(batch_id, topic)] = ends
        return dict(ends)

    def batch_start_offsets(self, batch_id: int, topic: str) -> dict[int, int]:
        """Return {partition: start offset} of one batch's ranges, as Spark's Kafka source plans them.

        A batch starts where the previous one ended (`offsets/<batchId - 1>`); the query's first
        batch starts at its initial offsets. A partition missing from both is new, and the source
        reads it from its earliest offset, 0 unless data was lost (which fails the query unless
        failOnDataLoss=false); it is left out, and the sink takes its start from the source's plan.
        """
        if (batch_id - 1, topic) in self._ends_read:
            return dict(self._ends_read[(batch_id - 1, topic)])
        previous = self._read(f"offsets/{batch_id - 1}") if batch_id > 0 else None
        if previous is not None and (ends := end_offsets_in_log(previous, topic)) is not None:
            return ends
        return {int(partition): int(start) for partition, start in self.initial_offsets().get(topic, {}).items()}

    def resumed_batch(self, topic: str) -> tuple[int, dict[int, int]] | None:
        """The batch a query restarted on this checkpoint runs first, and its start offsets; None before any query started.

        The batch after the last one in the commit log starts where that one ended; a batch in
        the offset log without a commit-log entry runs again from its own start. (Real-time mode
        writes an epoch's entry in the offset log when the epoch ends, so an epoch cut short is
        not in it at all, and the next one starts where the last logged one ended.)
        """
        logged = self._batch_ids("offsets")
        if not logged:
            initial = self.initial_offsets().get(topic)
            return None if initial is None else (0, {int(p): int(start) for p, start in initial.items()})
        last = max(logged)
        if last in self._batch_ids("commits"):
            return last + 1, self.batch_end_offsets(last, topic)
        return last, self.batch_start_offsets(last, topic)

    def pending_batch(self) -> int | None:
        """The batch a restarted query runs again: the last one in the offset log without a commit-log entry."""
        return pending_batch_of(self._batch_ids("offsets"), self._batch_ids("commits"))

    def initial_offsets(self, source_index: int = 0) -> dict[str, dict[str, int]]:
        """The offsets the query started from, as Spark's Kafka source recorded them in `sources/<i>/0`.

        The first batch's progress report has no start offset; these are its start.
        """
        text = self._read(f"sources/{source_index}/0")
        return {} if text is None else offsets_in_source_log(text)
