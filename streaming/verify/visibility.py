"""Visibility latency: from `commit_transaction` returning to a read_committed reader first seeing the records.

A transaction's records become visible when the transaction markers are written and each output
partition's last stable offset (LSO) moves past them; Kafka's coordinator answers EndTxn before
it writes the markers, so a commit that has returned can stay invisible, and under faults (a
broker killed or paused between the two) for long. Two clocks meet here:

- the commit side: every sink transaction that wrote records reports the wall-clock time at which
  its `commit_transaction` returned, beside its identity (`BatchStats.commits`; the identity is
  the first three fields of the records' `eos.txn`, conf/headers.py). A
  header cannot carry it: a header is written before the commit, the wrong moment. A commit
  whose return was lost (the retry found it landed) reports nothing: its moment is unknown;
- the reader side: a `VisibilityObserver` in the driver starts a reader process (this module
  run with `-m`) that reads the output and the dead-letter topic read_committed from their
  ends, and reports the wall-clock time at which it first receives a record of each identity.
  Its fetches wait at most `FETCH_WAIT_MS` at the broker, which bounds how late it can notice a
  record. Both clocks are the one machine's wall clock in a local run; across machines, their
  offset adds to every sample.

The reader is a process of its own because it looks at every record: as a thread of the driver's
Python it held the interpreter lock for each fetch's records, beside the thread that runs
foreachBatch and the thread that hears of each commit, and reported a visibility p99 twice as
long (docs/benchmarks.md, "What the visibility observer costs"). The process reports each
identity once, so what reaches the driver is a line per transaction, not per record. It ends
when its standard input closes: the observer stopped, or the driver died.

A transaction is timed when both sides have reported, in either order (the driver hears of a
commit only when its batch ends, often after the records were seen). A record seen before its
commit call returned (the reader won the race with the committing thread) counts as 0 s.
Transactions committed before the observer was reading (and for `READY_MARGIN_S` after) are left
out: it may have missed them.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from confluent_kafka import Consumer, TopicPartition

from conf.client_config import Connection, connection, connection_of
from conf.client_log import CLIENT_LOG
from conf.failures import EnvironmentFailure
from conf.headers import TXN_HEADER, read_txn_header
from conf.watermarks import watermark_offsets

FETCH_WAIT_MS = 10
READY_MARGIN_S = 1.0
# A record seen whose commit is never reported (the driver died first) is forgotten after this long.
FORGET_UNMATCHED_S = 600.0


def percentiles(seconds: list[float]) -> dict:
    """{samples, p50_ms, p99_ms, max_ms} of visibility samples given in seconds (zeros without any)."""
    if not seconds:
        return {"samples": 0, "p50_ms": 0.0, "p99_ms": 0.0, "max_ms": 0.0}
    ms = np.asarray(seconds) * 1000
    return {"samples": len(seconds), "p50_ms": float(np.percentile(ms, 50)), "p99_ms": float(np.percentile(ms, 99)),
            "max_ms": float(ms.max())}


@dataclass
class VisibilitySummary:
    """The samples of one run: how many, their p50/p99, and how many commits were never seen."""

    samples: int
    p50_ms: float
    p99_ms: float
    max_ms: float
    unseen: int  # commits reported but no record seen before the observer stopped
    left_out: int  # commits reported that returned before the observer was reading (READY_MARGIN_S)


class VisibilityObserver:
    """Times each committed sink transaction's first visibility to a read_committed reader (module docstring)."""

    def __init__(self, bootstrap: str | Connection, topics: list[str],
                 on_sample: Callable[[str, float], None] | None = None, log: Path | None = None):
        self.connection, self.topics, self.on_sample, self.log = connection(bootstrap), topics, on_sample, log
        self.samples: list[float] = []
        self.left_out = 0
        self._seen: dict[str, float] = {}  # identity -> when first received, awaiting its commit time
        self._committed: dict[str, float] = {}  # identity -> when its commit returned, awaiting its records
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ready = threading.Event()
        self.ready_at = float("inf")  # wall clock once every partition is positioned at its end
        self._error: str | None = None
        self._reader: subprocess.Popen | None = None
        self._thread = threading.Thread(target=self._hear, name="eosbench-visibility", daemon=True)

    def start(self, timeout_s: float = 60.0) -> VisibilityObserver:
        """Start the reader process on the topics' current ends; return once it is positioned."""
        # Its own import path is the driver's: under spark-submit the job's modules come from --py-files.
        environment = {**os.environ, "PYTHONPATH": os.pathsep.join(path for path in sys.path if path)}
        self._reader = subprocess.Popen([sys.executable, "-m", "streaming.verify.visibility"], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True, env=environment)
        # The settings go through the pipe, not the command line, which any user of the machine can read.
        self._reader.stdin.write(json.dumps({"config": self.connection.librdkafka(), "topics": self.topics}) + "\n")
        self._reader.stdin.flush()
        self._thread.start()
        if not self._ready.wait(timeout_s):
            self._end_reader()
            raise EnvironmentFailure(f"the visibility observer could not position itself on {self.topics} in {timeout_s:g} s")
        if self._error is not None:
            self._end_reader()
            raise EnvironmentFailure(f"the visibility observer could not read {self.topics}: {self._error}")
        return self

    def _hear(self) -> None:
        """Take the reader's lines: `ready AT` once, then `seen IDENTITY AT` per transaction, or `error MESSAGE`."""
        for line in self._reader.stdout:
            kind, _, rest = line.rstrip("\n").partition(" ")
            if kind == "seen":
                identity, _, at = rest.rpartition(" ")
                self._match(seen={identity: float(at)})
            elif kind == "ready":
                self.ready_at = float(rest)
                self._ready.set()
            elif kind == "error":
                self._error = rest
                self._ready.set()
        self._ready.set()  # the reader ended before it was positioned: start() reports it
        if self._error is None and not self._stop.is_set():
            self._error = f"the reader process ended (exit {self._reader.wait()})"

    def _end_reader(self) -> None:
        if self._reader is None:
            return
        try:
            self._reader.stdin.close()  # the reader's signal to stop
        except OSError:
            pass
        try:
            self._reader.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._reader.kill()
            self._reader.wait()

    def committed(self, commits: Iterable[tuple[str, float]]) -> None:
        """Report commits: (transaction identity, wall-clock seconds when commit_transaction returned)."""
        commits = list(commits)
        timed = {txn: at for txn, at in commits if at >= self.ready_at}
        self.left_out += len(commits) - len(timed)
        self._match(committed=timed)

    def _match(self, seen: dict[str, float] | None = None, committed: dict[str, float] | None = None) -> None:
        timed = []
        with self._lock:
            for txn, at in (seen or {}).items():
                if txn in self._committed:
                    commit = self._committed.pop(txn)
                    timed.append((txn, commit, at - commit))
                elif txn not in self._seen:
                    self._seen[txn] = at
            for txn, at in (committed or {}).items():
                if txn in self._seen:
                    timed.append((txn, at, self._seen.pop(txn) - at))
                else:
                    self._committed[txn] = at
            if seen and len(self._seen) > 1000:
                horizon = time.time() - FORGET_UNMATCHED_S
                self._seen = {txn: at for txn, at in self._seen.items() if at >= horizon}
            timed = [(txn, commit, max(0.0, seconds)) for txn, commit, seconds in timed]
            self.samples += [seconds for _, _, seconds in timed]
        if self.log is not None and timed:
            with self.log.open("a") as log:
                log.writelines(f"{txn} {commit:.6f} {seconds:.6f}\n" for txn, commit, seconds in timed)
        if self.on_sample:
            for txn, _, seconds in timed:
                self.on_sample(txn, seconds)

    def stop(self, wait_s: float = 10.0) -> VisibilitySummary:
        """Wait up to `wait_s` for the commits reported to become visible, stop reading, and summarise."""
        deadline = time.monotonic() + wait_s
        while self._committed and time.monotonic() < deadline and self._thread.is_alive():
            time.sleep(0.05)
        self._stop.set()
        self._end_reader()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        with self._lock:
            return VisibilitySummary(**percentiles(self.samples), unseen=len(self._committed), left_out=self.left_out)


def read_log(path: Path) -> list[tuple[float, float]]:
    """(commit time, visibility seconds) of each line a VisibilityObserver appended, over every run that wrote it."""
    if not path.exists():
        return []
    return [(float(commit), float(seconds)) for _, commit, seconds in
            (line.split() for line in path.read_text().splitlines() if line.strip())]


def _report_first_sightings(config: dict[str, str], topics: list[str]) -> None:
    """The reader process: read `topics` read_committed from their ends, print each identity the first time it is seen."""
    consumer = Consumer(connection_of(config).librdkafka(**{
        "group.id": "eosbench-visibility", "isolation.level": "read_committed", "enable.auto.commit": False,
        "fetch.wait.max.ms": FETCH_WAIT_MS}), logger=CLIENT_LOG)
    try:
        assignment = []
        for topic in topics:
            for p in consumer.list_topics(topic, timeout=30).topics[topic].partitions:
                # a read_committed client's high watermark is the last stable offset
                stable = watermark_offsets(consumer, topic, p, timeout_s=30)[1]
                assignment.append(TopicPartition(topic, p, stable))
        consumer.assign(assignment)
    except Exception as exc:  # noqa: BLE001 - handed to the driver's start() as one line
        print(f"error {type(exc).__name__}: {exc}".replace("\n", " "), flush=True)
        consumer.close()
        return
    # A transaction whose markers were written just before the stable offsets were read lies below
    # them, although its commit call may return a little later; the margin keeps such a
    # transaction out rather than count it as never seen.
    print(f"ready {time.time() + READY_MARGIN_S:.6f}", flush=True)
    stopped = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stopped.set()), daemon=True).start()
    reported: dict[str, float] = {}  # identity -> when first seen; a transaction spans partitions and fetches
    next_forget = time.time() + FORGET_UNMATCHED_S
    try:
        while not stopped.is_set():
            messages = consumer.consume(10_000, timeout=0.05)
            received = time.time()
            lines = []
            for message in messages:
                if message.error() is not None:
                    continue  # a passing fetch error; the reader carries on
                for name, value in message.headers() or ():
                    if name == TXN_HEADER:
                        identity = read_txn_header(value)[0].decode()
                        if identity not in reported:
                            reported[identity] = received
                            lines.append(f"seen {identity} {received:.6f}\n")
                        break
            if lines:
                sys.stdout.write("".join(lines))
                sys.stdout.flush()
            if received >= next_forget:  # once per horizon, not per fetch: the dict holds a horizon's transactions
                reported = {identity: at for identity, at in reported.items() if at >= received - FORGET_UNMATCHED_S}
                next_forget = received + FORGET_UNMATCHED_S
    except BrokenPipeError:
        pass  # the driver is gone
    finally:
        consumer.close()


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C stops the driver, which closes our stdin
    order = json.loads(sys.stdin.readline())
    _report_first_sightings(order["config"], order["topics"])
