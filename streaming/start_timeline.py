"""A driver's start, step by step: when each step ended, printed as one line once its first batch has committed.

spark-submit's driver (streaming/job.py) marks the steps; `eosbench bench recovery` finds the line
in a relaunched driver's log and splits the time from a kill to its first commit into them.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path


START_TIMELINE = "start timeline "


def process_started_at(pid: int | str = "self") -> float | None:
    """When a process began, in wall-clock seconds (Linux's /proc; None elsewhere)."""
    try:
        ticks = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
        booted = next(int(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines()
                      if line.startswith("btime "))
    except (OSError, ValueError, IndexError, StopIteration):
        return None
    return booted + ticks / os.sysconf("SC_CLK_TCK")


class StartTimeline:
    """When each step of the driver's start ended, in wall-clock seconds, printed once its first batch has committed.

    A restart after a crash is these steps end to end: spark-submit's JVM up to this Python
    driver (`python`: the process began), its imports (`main`), the Spark session (`session`), the
    sink's start checks, claim and fences (`sink`), the source (`source`: in slot scope its slot map
    settled, with Spark's the starting offsets), the query's start (`query`), Spark planning the
    first batch (`first_batch`: its tasks begin), and that batch run and committed
    (`first_commit`). `eosbench bench recovery` reads the line from the driver's log.
    """

    def __init__(self):
        self.marks: dict[str, float] = {}
        started = process_started_at()
        if started is not None:
            self.marks["python"] = started

    def mark(self, step: str, at: float | None = None) -> None:
        """Note that `step` ended now (or at `at`); a step keeps its first mark."""
        self.marks.setdefault(step, time.time() if at is None else at)

    def line(self) -> str:
        """The one line the driver prints: START_TIMELINE and the marks as JSON."""
        return START_TIMELINE + json.dumps({step: round(at, 3) for step, at in self.marks.items()})
