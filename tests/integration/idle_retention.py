"""Two streams left idle past offsets.retention.minutes, run in the background from the session's start.

The broker's shortest retention is a minute, so the scenario is mostly a wait: the conftest starts
it before the first integration test and test_offset_retention.py, which the collection puts last,
judges it, so that the minute overlaps the rest of the suite instead of adding to it. Both streams
are processes of their own (the session's SparkSession stays free for the tests that run meanwhile).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from conf.local_servers import ClusterSettings
from eosbench.local.broker import LocalCluster
from eosbench.local.kafka_admin import create_topic
from tests.integration.produce_helpers import commit_keys, produce

SHORT_RETENTION_PORT = 19700
RETENTION_S = 60
SOURCE, SINK = "retention-in", "retention-out"
RT_SOURCE, RT_SINK = "retention-rt-in", "retention-rt-out"
# Each stream runs past a retention after its idle partitions' last commit; in the background the
# margin costs the suite nothing.
RUN_S = RETENTION_S + 20
LATER_RECORDS_AT_S = 30


@dataclass
class StreamExit:
    """How one background stream ended: its exit code, its stderr's tail, and its JSON summary (if written)."""

    returncode: int
    errors: str
    summary: dict | None


class IdleRetentionRun:
    """The short-retention broker, the filled inputs, and a micro-batch and a real-time stream running idle."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.cluster = LocalCluster(ClusterSettings(
            port=SHORT_RETENTION_PORT, heap_mb=256, state_dir=folder / "broker",
            server_properties={"offsets.retention.minutes": str(RETENTION_S // 60),
                               "offsets.retention.check.interval.ms": "1000"}))
        self.bootstrap = self.cluster.settings.bootstrap_servers
        self.checkpoint = folder / "checkpoint"
        self._streams: dict[str, subprocess.Popen] = {}
        self._later: threading.Timer | None = None
        self._exits: dict[str, StreamExit] | None = None
        self._started: Future | None = None

    def start(self) -> None:
        """Start the broker, fill both inputs and launch both streams, all in the background; return at once."""
        self._starting = ThreadPoolExecutor(1)
        self._started = self._starting.submit(self._start)
        self._starting.shutdown(wait=False)  # the start already submitted runs on

    def _start(self) -> None:
        self.cluster.start(fresh=True)
        for topic, partitions in ((SOURCE, 3), (SINK, 3), (f"{SINK}.dlq", 1), (RT_SOURCE, 2), (RT_SINK, 2),
                                  (f"{RT_SINK}.dlq", 1)):
            create_topic(self.bootstrap, topic, partitions, 1)
        produce(self.bootstrap, SOURCE, 3_000, records_per_transaction=300, abort_ratio=0.3, seed=9)
        produce(self.bootstrap, RT_SOURCE, 1_000, records_per_transaction=100, abort_ratio=0.3, seed=10)
        # The real-time writer's tasks run all along but commit only what they write, so before, nothing
        # refreshed an idle partition's offset; the micro-batch stream commits only batches with records.
        self._streams = {
            "micro-batch": self._stream(SOURCE, SINK, "retention", self.checkpoint, "1 second"),
            "real-time": self._stream(RT_SOURCE, RT_SINK, "retention-rt", self.folder / "rt-checkpoint",
                                      "realtime:5 seconds"),
        }
        # Half a minute in, partition 0 of each input alone gets more records; the other partitions stay
        # idle after the first batch (epoch), for longer than the retention, while the streams run.
        self._later = threading.Timer(LATER_RECORDS_AT_S, lambda: [
            commit_keys(self.bootstrap, topic, range(100_000, 100_050)) for topic in (SOURCE, RT_SOURCE)])
        self._later.start()

    def _stream(self, source: str, sink: str, app_id: str, checkpoint: Path, trigger: str) -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, "-m", "eosbench.cli", "stream", "--input-topic", source, "--output-topic", sink,
             "--bootstrap-server", self.bootstrap, "--app-id", app_id, "--checkpoint", str(checkpoint),
             "--trigger", trigger, "--timeout-s", str(RUN_S), "--output-json", str(self.folder / f"{app_id}.json")],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

    def wait(self) -> dict[str, StreamExit]:
        """Wait for both streams to end (each at its timeout) and say how each ended."""
        if self._exits is None:
            self._started.result()  # a start that failed fails the test that judges it, with its own error
            self._later.join()
            self._exits = {}
            for mode, process in self._streams.items():
                _, errors = process.communicate(timeout=RUN_S + 240)
                summary_file = Path(process.args[process.args.index("--output-json") + 1])
                summary = json.loads(summary_file.read_text()) if summary_file.exists() else None
                self._exits[mode] = StreamExit(process.returncode, errors[-3000:], summary)
        return self._exits

    def stop(self) -> None:
        """Kill any stream still running and stop the broker."""
        if self._started is not None:
            self._started.exception()  # a start still under way would leave processes behind the stop
        if self._later is not None:
            self._later.cancel()
        for process in self._streams.values():
            if process.poll() is None:
                process.kill()
                process.communicate()
        self.cluster.stop()
