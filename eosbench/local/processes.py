"""The processes eosbench launches and kills: /proc facts, signals, and supervised children.

The local brokers, the Spark standalone daemons and the soak's producer and stream all run as
children in their own sessions, so that a kill -9 of one (a soak fault) takes exactly that
process and its descendants, never the harness.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import time
from pathlib import Path

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """In the child, before exec: ask Linux for SIGKILL when the supervising process dies."""
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def proc_stat(pid: int) -> tuple[str, str, int] | None:
    """Return (state, start time in clock ticks, parent pid) of a process, or None if it does not exist."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return fields[0], fields[19], int(fields[1])


def parent_pid(pid: int) -> int | None:
    """A process's parent pid, or None if it does not exist."""
    stat = proc_stat(pid)
    return stat[2] if stat else None


def process_name(pid: int) -> str | None:
    """The name of a process's main thread (/proc/<pid>/comm), or None if it does not exist."""
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return None


def process_alive(pid: int, start_ticks: str | None = None) -> bool:
    """Tell whether a process still runs (and, given its start time, is the one that was launched)."""
    stat = proc_stat(pid)
    return stat is not None and (start_ticks is None or stat[1] == start_ticks) and _running(pid, stat[0])


def write_pid_file(path: Path, pid: int) -> None:
    """Record a launched daemon's pid with its start time, so that a recycled pid never passes for it."""
    stat = proc_stat(pid)
    path.write_text(f"{pid} {stat[1] if stat else 0}\n")


def read_pid_file(path: Path) -> int | None:
    """The pid a pid file names, if that process is alive and the one that was launched (its start time matches)."""
    try:
        pid_text, start_ticks = path.read_text().split()
        pid = int(pid_text)
    except (OSError, ValueError):
        return None
    # /proc/<pid>/cmdline is no help here: it reads empty while a JVM starts.
    return pid if process_alive(pid, start_ticks) else None


def _running(pid: int, state: str) -> bool:
    if state != "Z":
        return True
    # A process reads as a zombie once its first thread has ended, while its other threads may
    # still be exiting with its sockets open (a stopped broker's ports were then found busy).
    try:
        return len(os.listdir(f"/proc/{pid}/task")) > 1
    except OSError:
        return False


def send_signal(pid: int, sig: int) -> None:
    """Signal a process, ignoring one that is already gone."""
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def wait_gone(pid: int, timeout_s: float = 10.0) -> None:
    """Wait until a process has exited (or is a zombie) or the timeout passes."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and process_alive(pid):
        time.sleep(0.05)


def kill_all(pids: list[int]) -> None:
    """SIGKILL every process, then wait until each is gone."""
    for pid in pids:
        send_signal(pid, signal.SIGKILL)
    for pid in pids:
        wait_gone(pid)


def descendants(pid: int) -> list[int]:
    """Every live process below `pid`, parents before children."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            stat = proc_stat(int(entry.name))
            if stat is not None and _running(int(entry.name), stat[0]):
                children.setdefault(stat[2], []).append(int(entry.name))
    found, frontier = [], [pid]
    while frontier:
        parent = frontier.pop(0)
        for child in sorted(children.get(parent, [])):
            found.append(child)
            frontier.append(child)
    return found


def command_line(pid: int) -> str:
    """The process's command line with spaces between arguments ('' if it is gone)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


class Child:
    """One supervised child process in its own session, restartable, logging to numbered files.

    The child gets SIGKILL if the supervisor dies (even by kill -9), so a soak never leaves a
    producer or a driver running behind it.
    """

    def __init__(self, name: str, log_dir: Path, env: dict[str, str] | None = None):
        self.name, self.log_dir, self.env = name, log_dir, env
        self.process: subprocess.Popen | None = None
        self.starts = 0

    def start(self, command: list[str]) -> None:
        """Launch the command (its output goes to <log_dir>/<name>-<n>.log)."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.starts += 1
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                            env=self.env, start_new_session=True, preexec_fn=_die_with_parent)

    @property
    def log_path(self) -> Path:
        """The log file of the current (or last) launch."""
        return self.log_dir / f"{self.name}-{self.starts}.log"

    @property
    def pid(self) -> int | None:
        """The launched process's pid, or None before the first start."""
        return self.process.pid if self.process else None

    def alive(self) -> bool:
        """Tell whether the current launch is still running."""
        return self.process is not None and self.process.poll() is None

    def exit_code(self) -> int | None:
        """The last launch's exit status, None while it runs."""
        return self.process.poll() if self.process else None

    def kill(self, sig: int = signal.SIGKILL, timeout_s: float = 30.0) -> None:
        """Signal the whole session (the process and everything it started) and reap it."""
        if self.process is None or self.process.poll() is not None:
            return
        try:
            os.killpg(self.process.pid, sig)
        except ProcessLookupError:
            pass
        try:
            self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=30)
        if sig == signal.SIGKILL:
            # A session leader's death does not kill its group: sweep what is left.
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def last_lines(self, count: int = 3) -> str:
        """The tail of the current log, for error messages."""
        try:
            lines = self.log_path.read_text(errors="replace").strip().splitlines()
        except OSError:
            return ""
        return " | ".join(line.strip() for line in lines[-count:])
