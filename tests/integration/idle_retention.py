"""Two streams left idle past offsets.retention.minutes, run in the background from the session's start.

The broker's shortest retention is a minute, so the scenario is mostly a wait: the conftest starts
it with the soaks and test_offset_retention.py, which the collection puts last, judges what it
found, so that the wait overlaps the rest of the suite instead of adding to it. The streams are
processes of their own (the session's SparkSession stays free for the tests meanwhile).

What it judges is the keeper, not how fast a loaded machine starts a JVM: the group's offsets are
sampled every two seconds while the streams run, for longer than a retention past their first
commit, and the lost-checkpoint resume starts while the idle micro-batch stream still runs and
keeps them. Once a stream stops, nothing refreshes its offsets and the broker drops them 40 to 60
s later; a resume that started only after the stop raced that (at a load of 15, it lost).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from conf.local_servers import ClusterSettings
from eosbench.local.broker import LocalCluster
from eosbench.local.kafka_admin import create_topic
from streaming.verify.verifier import group_offsets, stable_and_end_offsets, verify
from tests.integration.produce_helpers import commit_keys, produce

SHORT_RETENTION_PORT = 19700
RETENTION_S = 60
SOURCE, SINK = "retention-in", "retention-out"
RT_SOURCE, RT_SINK = "retention-rt-in", "retention-rt-out"
# How long past a stream's first complete set of offsets the samples must show every offset kept: a
# retention, and the broker's check interval with room to spare.
JUDGED_S = RETENTION_S + 20
# Each stream runs well past that: a stream's first batch may take long to come on a loaded machine
# (at a load of 20-40 the first complete set of offsets came 78 s in, and 150 s left 72 s of the 80
# judged). It runs in the background beside the soaks, so the margin costs the suite nothing.
RUN_S = RETENTION_S + 240
LATER_RECORDS_AT_S = 30
SAMPLE_EVERY_S = 2.0


@dataclass
class StreamExit:
    """How one background stream ended: its exit code, its stderr's tail, and its JSON summary (if written)."""

    returncode: int
    errors: str
    summary: dict | None


@dataclass
class OffsetSamples:
    """A group's committed offsets, read every SAMPLE_EVERY_S while its stream ran: (seconds since start, offsets)."""

    samples: list[tuple[float, dict[int, int]]] = field(default_factory=list)

    def kept_from_first_commit(self) -> tuple[float, list[tuple[float, dict[int, int]]]]:
        """How long the samples ran past the first one in which every partition had an offset, and those after it
        that miss one (an offset the broker dropped)."""
        first = next((at for at, offsets in self.samples if min(offsets.values()) >= 0), None)
        if first is None:
            return 0.0, []
        after = [(at, offsets) for at, offsets in self.samples if at >= first]
        return after[-1][0] - first, [(at, offsets) for at, offsets in after if min(offsets.values()) < 0]


@dataclass
class IdleRetentionFindings:
    """What the scenario saw: each stream's end, its group's offsets while it ran, and the verifies."""

    exits: dict[str, StreamExit] = field(default_factory=dict)
    end_offsets: dict[int, int] = field(default_factory=dict)  # the micro-batch input's, read_committed
    offsets: dict[str, OffsetSamples] = field(default_factory=dict)  # each stream's group, while it ran
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
        return self._running.result(timeout=RUN_S + 900)

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
        samplers = {"micro-batch": ("retention", SOURCE, [0, 1, 2]), "real-time": ("retention-rt", RT_SOURCE, [0, 1])}
        found.offsets = {mode: OffsetSamples() for mode in samplers}
        started = time.monotonic()
        resumed = None
        while any(process.poll() is None for process in streams.values()):
            for mode, (group, topic, partitions) in samplers.items():
                if streams[mode].poll() is None and (mode != "micro-batch" or resumed is None):
                    found.offsets[mode].samples.append((time.monotonic() - started,
                                                        group_offsets(self.bootstrap, group, topic, partitions)))
            kept_s, _ = found.offsets["micro-batch"].kept_from_first_commit()
            if resumed is None and kept_s >= JUDGED_S:
                # The checkpoint lost: the stream again from the group's offsets, which the idle stream's keeper
                # keeps until the new driver claims the pipeline; the resume reads them as it starts, and from its
                # claim on the old stream's keeper stops (its input is idle, so the two never write at once).
                resumed = self._stream(SOURCE, SINK, "retention", self.folder / "checkpoint-lost",
                                       "--starting-offsets", "group")
            time.sleep(SAMPLE_EVERY_S)
        self._later.join()
        found.exits = {mode: self._ended(process) for mode, process in streams.items()}
        found.end_offsets = {p: end for p, (_, end) in stable_and_end_offsets(self.bootstrap, SOURCE).items()}
        # The verifies judge delivery alone: the group's offsets were judged while the streams ran, and by now,
        # with every stream stopped, nothing keeps them (they go a minute after their last refresh).
        found.realtime_report = verify(self.bootstrap, RT_SOURCE, RT_SINK, None, f"{RT_SINK}.dlq")
        if resumed is not None:
            found.resumed = self._ended(resumed)
            found.report = verify(self.bootstrap, SOURCE, SINK, None, f"{SINK}.dlq")
        return found

    def _stream(self, source: str, sink: str, app_id: str, checkpoint: Path, *flags: str) -> subprocess.Popen:
        """Start `eosbench stream` as a process; its stderr goes to a file, which nothing has to drain meanwhile."""
        named = self.folder / f"{app_id}-{len(self._streams)}"
        with open(named.with_suffix(".stderr"), "w") as errors:
            process = subprocess.Popen(
                [sys.executable, "-m", "eosbench.cli", "stream", "--input-topic", source, "--output-topic", sink,
                 "--bootstrap-server", self.bootstrap, "--app-id", app_id, "--checkpoint", str(checkpoint), *flags,
                 "--output-json", str(named.with_suffix(".json"))],
                stdout=subprocess.DEVNULL, stderr=errors)
        self._streams.append(process)
        return process

    @staticmethod
    def _ended(process: subprocess.Popen) -> StreamExit:
        process.wait(timeout=RUN_S + 240)
        named = Path(process.args[process.args.index("--output-json") + 1])
        summary = json.loads(named.read_text()) if named.exists() else None
        return StreamExit(process.returncode, named.with_suffix(".stderr").read_text()[-3000:], summary)

    def stop(self) -> None:
        """Kill any stream still running; the scenario's own end stops the broker."""
        if self._later is not None:
            self._later.cancel()
        for process in self._streams:
            if process.poll() is None:
                process.kill()
                process.wait()
        if self._running is not None:
            self._running.exception()  # a scenario still under way would leave its broker behind
