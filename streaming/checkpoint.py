"""Read a micro-batch's end offsets from the query's own offset log.

Spark writes `<checkpoint>/offsets/<batchId>` before it runs the batch: a version line, a
metadata line, then one JSON line per source, `{"<topic>": {"<partition>": <end offset>}}`.
The sink commits exactly these ends with each transaction, so the group's offsets match the
input's end offsets even when a slice ends in aborted records or transaction markers.
"""

from __future__ import annotations

import json
from pathlib import Path


def batch_end_offsets(checkpoint_dir: Path, batch_id: int, topic: str) -> dict[int, int]:
    """Return {partition: end offset (exclusive)} of one batch for one topic."""
    path = Path(checkpoint_dir) / "offsets" / str(batch_id)
    lines = path.read_text().splitlines()
    for line in lines[2:]:
        if not line.strip() or line.strip() == "-":
            continue
        offsets = json.loads(line)
        if topic in offsets:
            return {int(partition): int(end) for partition, end in offsets[topic].items()}
    raise FileNotFoundError(f"no offsets for {topic} in {path}")


def batch_start_offsets(checkpoint_dir: Path, batch_id: int, topic: str) -> dict[int, int]:
    """Return {partition: start offset} of one batch's ranges, as Spark's Kafka source plans them.

    A batch starts where the previous one ended (`offsets/<batchId - 1>`); the query's first batch
    starts at its initial offsets. A partition missing from both is new, and Spark reads it from
    its earliest offset, 0 unless data was lost (which fails the query by default); it counts as 0.
    """
    if batch_id > 0 and (Path(checkpoint_dir) / "offsets" / str(batch_id - 1)).exists():
        return batch_end_offsets(checkpoint_dir, batch_id - 1, topic)
    return {int(partition): int(start) for partition, start in initial_offsets(checkpoint_dir).get(topic, {}).items()}


def pending_batch(checkpoint_dir: Path) -> int | None:
    """The batch a restarted query runs again: the last one in the offset log without a commit-log entry."""
    def batch_ids(folder: str) -> set[int]:
        path = Path(checkpoint_dir) / folder
        return {int(entry.name) for entry in path.iterdir() if entry.name.isdigit()} if path.is_dir() else set()
    offsets = batch_ids("offsets")
    return max(offsets) if offsets and max(offsets) not in batch_ids("commits") else None


def initial_offsets(checkpoint_dir: Path, source_index: int = 0) -> dict[str, dict[str, int]]:
    """The offsets the query started from, as Spark's Kafka source recorded them in `sources/<i>/0`.

    The first batch's progress report has no start offset; these are its start.
    """
    path = Path(checkpoint_dir) / "sources" / str(source_index) / "0"
    if not path.exists():
        return {}
    lines = [line for line in path.read_bytes().decode(errors="replace").splitlines() if line.strip()]
    return json.loads(lines[-1]) if lines else {}
