"""Two streams left idle past offsets.retention.minutes, run in the background from the session's start.

The broker's shortest retention is a minute, so the scenario is mostly a wait: the conftest starts
it before the first integration test and test_offset_retention.py, which the collection puts last,
judges what it found, so that the minute overlaps the rest of the suite instead of adding to it.
Everything that needs the group's offsets is read in the background, right as the streams end:
a minute after their last commit the broker drops them, long before the judging test runs. The
streams are processes of their own (the session's SparkSession stays free for the tests meanwhile).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from conf.local_servers import ClusterSettings
from eosbench.local.broker import LocalCluster
from eosbench.local.kafka_admin import create_topic
from streaming.verify import group_offsets, stable_and_end_offsets, verify
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


@dataclass
class IdleRetentionFindings:
    """What the scenario saw: each stream's end, the offsets at that moment, and the verifies."""

    exits: dict[str, StreamExit] = field(default_factory=dict)
    end_offsets: dict[int, int] = field(default_factory=dict)  # the micro-batch input's, read_committed
    group_offsets: dict[int, int] = field(default_factory=dict)  # the micro-batch group's, as the streams ended
    realtime_group_offsets: dict[int, int] = field(default_factory=dict)
    realtime_report: object = None
    resumed: StreamExit | None = None  # the micro-batch stream again, its checkpoint lost: from the group's offsets
    report: object = None  # the micro-batch pipeline's verify after the resumed run


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
        self._streams: list[subprocess.Popen] = []
        self._later: threading.Timer | None = None
        self._running: Future | None = None

    def start(self) -> None:
        """Run the whole scenario in the background; return at once."""
        running = ThreadPoolExecutor(1)
        self._running = running.submit(self._run)
        running.shutdown(wait=False)  # the scenario already submitted runs on

    def findings(self) -> IdleRetentionFindings:
        """Wait for the scenario to end and return what it found (or raise what stopped it)."""
        return self._running.result(timeout=RUN_S + 600)

    def _run(self) -> IdleRetentionFindings:
        self.cluster.start(fresh=True)
        try:
            return self._scenario()
        finally:
            self.cluster.stop()

    def _scenario(self) -> IdleRetentionFindings:
        found = IdleRetentionFindings()
        for topic, partitions in ((SOURCE, 3), (SINK, 3), (f"{SINK}.dlq", 1), (RT_SOURCE, 2), (RT_SINK, 2),
                                  (f"{RT_SINK}.dlq", 1)):
            create_topic(self.bootstrap, topic, partitions, 1)
        produce(self.bootstrap, SOURCE, 3_000, records_per_transaction=300, abort_ratio=0.3, seed=9)
        produce(self.bootstrap, RT_SOURCE, 1_000, records_per_transaction=100, abort_ratio=0.3, seed=10)
        # The real-time writer's tasks run all along but commit only what they write, so before, nothing
        # refreshed an idle partition's offset; the micro-batch stream commits only batches with records.
        streams = {
            "micro-batch": self._stream(SOURCE, SINK, "retention", self.checkpoint, "--trigger", "1 second",
                                        "--timeout-s", str(RUN_S)),
            "real-time": self._stream(RT_SOURCE, RT_SINK, "retention-rt", self.folder / "rt-checkpoint",
                                      "--trigger", "realtime:5 seconds", "--timeout-s", str(RUN_S)),
        }
        # Half a minute in, partition 0 of each input alone gets more records; the other partitions stay
        # idle after the first batch (epoch), for longer than the retention, while the streams run.
        self._later = threading.Timer(LATER_RECORDS_AT_S, lambda: [
            commit_keys(self.bootstrap, topic, range(100_000, 100_050)) for topic in (SOURCE, RT_SOURCE)])
        self._later.start()
        self._later.join()
        found.exits = {mode: self._ended(process) for mode, process in streams.items()}
        ends = {p: end for p, (_, end) in stable_and_end_offsets(self.bootstrap, SOURCE).items()}
        found.end_offsets = ends
        found.group_offsets = group_offsets(self.bootstrap, "retention", SOURCE, sorted(ends))
        found.realtime_group_offsets = group_offsets(self.bootstrap, "retention-rt", RT_SOURCE, [0, 1])
        found.realtime_report = verify(self.bootstrap, RT_SOURCE, RT_SINK, "retention-rt", f"{RT_SINK}.dlq")
        shutil.rmtree(self.checkpoint)  # a lost checkpoint: resume from the group's offsets
        found.resumed = self._ended(self._stream(SOURCE, SINK, "retention", self.checkpoint,
                                                 "--starting-offsets", "group"))
        found.report = verify(self.bootstrap, SOURCE, SINK, "retention", f"{SINK}.dlq")
        return found

    def _stream(self, source: str, sink: str, app_id: str, checkpoint: Path, *flags: str) -> subprocess.Popen:
        summary = self.folder / f"{app_id}-{len(self._streams)}.json"
        process = subprocess.Popen(
            [sys.executable, "-m", "eosbench.cli", "stream", "--input-topic", source, "--output-topic", sink,
             "--bootstrap-server", self.bootstrap, "--app-id", app_id, "--checkpoint", str(checkpoint), *flags,
             "--output-json", str(summary)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self._streams.append(process)
        return process

    @staticmethod
    def _ended(process: subprocess.Popen) -> StreamExit:
        _, errors = process.communicate(timeout=RUN_S + 240)
        summary_file = Path(process.args[process.args.index("--output-json") + 1])
        summary = json.loads(summary_file.read_text()) if summary_file.exists() else None
        return StreamExit(process.returncode, errors[-3000:], summary)

    def stop(self) -> None:
        """Kill any stream still running; the scenario's own end stops the broker."""
        if self._later is not None:
            self._later.cancel()
        for process in self._streams:
            if process.poll() is None:
                process.kill()
                process.communicate()
        if self._running is not None:
            self._running.exception()  # a scenario still under way would leave its broker behind
