"""Where the stream's tasks run, found in /proc: executor JVMs, their pyspark daemons and Python workers.

kill-executor, kill-container and zombie-executor act on these processes; this module only finds
them, and says where one that should have ended stands.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from eosbench.local.processes import command_line, descendants, parent_pid, process_name
from streaming.sink.in_flight import IN_FLIGHT_NAME

if TYPE_CHECKING:
    from eosbench.local.spark_cluster import StandaloneCluster
    from eosbench.local.yarn import Container, LocalYarn


class ExecutorHosts(Protocol):
    """What runs the stream's executors: a standalone cluster, or YARN (the soak under faults is one)."""

    spark_cluster: StandaloneCluster | None
    yarn: LocalYarn | None


def executor_containers(hosts: ExecutorHosts) -> list[Container]:
    """The running executor containers of the stream's YARN application, the newest application's if several run.

    A restarted driver submits a new application while its predecessor's containers may still be
    winding down; application ids grow with each submission. The AM is each attempt's container 1.
    """
    running = [c for c in hosts.yarn.containers() if c.state == "RUNNING"] if hosts.yarn else []
    if not running:
        return []
    newest = max((c.application_id for c in running), key=lambda app: tuple(int(n) for n in app.split("_")[1:]))
    return [c for c in running if c.application_id == newest and not c.id.endswith("_000001")]


def executor_pids(hosts: ExecutorHosts) -> list[int]:
    """The executor JVMs' pids: a standalone cluster's, or the stream's YARN executor containers'."""
    if hosts.spark_cluster:
        return hosts.spark_cluster.executor_pids()
    return [pid for container in executor_containers(hosts) for pid in hosts.yarn.container_pids(container.id)]


def pyspark_processes(roots: list[int | None]) -> tuple[list[int], list[int]]:
    """The pyspark.daemon processes below `roots`, and of those the Python workers a daemon forked (the rest are daemons)."""
    pythons = [pid for root in roots if root for pid in descendants(root) if "pyspark.daemon" in command_line(pid)]
    return pythons, [pid for pid in pythons if parent_pid(pid) in pythons]


def executor_with_a_task_in_flight(hosts: ExecutorHosts, timeout_s: float) -> tuple[int, int, int] | None:
    """(executor JVM, its pyspark daemon, the daemon's worker) for a worker seen holding an open transaction; None if
    none was seen within `timeout_s`.

    The sink's task names its thread IN_FLIGHT_NAME between begin and sending its offsets (streaming/sink/in_flight.py),
    and a Python worker runs its task on its main thread, whose name is the process's.
    """
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for jvm in executor_pids(hosts):
            for pid in pyspark_processes([jvm])[1]:
                if process_name(pid) == IN_FLIGHT_NAME:
                    return jvm, parent_pid(pid), pid
        time.sleep(0.01)
    return None


def waiting_in(pid: int) -> str:
    """Where a woken worker that has not ended stands, for the fault's line: its main thread's name (IN_FLIGHT_NAME
    while its task writes into the transaction, the worker's own once it has left it) and what it waits in (kernel
    function and system call number)."""
    try:
        wchan = Path(f"/proc/{pid}/wchan").read_text().strip()
        syscall = Path(f"/proc/{pid}/syscall").read_text().split()[0]
    except (OSError, IndexError):
        return ""
    return f" (its main thread, named {process_name(pid)}, waiting in {wchan or 'nothing'}, system call {syscall})"
