"""/proc facts about the processes eosbench launches: a process is gone only when all of it is."""

from __future__ import annotations

import subprocess
import sys
import time

from eosbench.local.processes import proc_stat, process_alive

# The main thread ends at the OS level while a second thread keeps the process (and its open
# sockets) alive for a moment, as a JVM's threads do while a stopped broker exits.
MAIN_THREAD_EXITS_FIRST = """
import ctypes, os, threading, time
threading.Thread(target=lambda: (time.sleep(1.5), os._exit(0))).start()
ctypes.CDLL(None).pthread_exit(None)
"""


def wait_for_state(pid: int, state: str, timeout_s: float = 10.0) -> None:
    """Wait until /proc shows the process in `state`."""
    deadline = time.monotonic() + timeout_s
    while (proc_stat(pid) or ("gone",))[0] != state:
        assert time.monotonic() < deadline, f"pid {pid} never reached state {state}: {proc_stat(pid)}"
        time.sleep(0.01)


def test_a_process_whose_first_thread_ended_is_alive_until_its_last_thread_ends():
    child = subprocess.Popen([sys.executable, "-c", MAIN_THREAD_EXITS_FIRST])
    try:
        wait_for_state(child.pid, "Z")
        assert process_alive(child.pid) and process_alive(child.pid, proc_stat(child.pid)[1])
        assert child.wait(timeout=10) == 0
    finally:
        child.kill()
    assert not process_alive(child.pid)


def test_an_unreaped_zombie_and_another_processes_start_time_are_not_alive():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    wait_for_state(child.pid, "Z")  # exited, not yet reaped
    assert not process_alive(child.pid)
    child.wait()
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        assert process_alive(sleeper.pid) and not process_alive(sleeper.pid, start_ticks="1")
    finally:
        sleeper.kill()
        sleeper.wait()
