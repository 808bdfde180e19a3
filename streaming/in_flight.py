"""A sink task's thread is named while it writes records into an open transaction, so `ps` (and the soak's
zombie-executor) see it: from begin_transaction until its offsets are sent."""

from __future__ import annotations

import ctypes
import sys

# What `ps -o comm` and /proc/<pid>/comm show for a Python worker between begin and sending the offsets.
IN_FLIGHT_NAME = "eosbench-txn"
_PR_SET_NAME, _PR_GET_NAME = 15, 16


def _prctl_name(option: int, name: ctypes.Array) -> None:
    ctypes.CDLL(None).prctl(option, name, 0, 0, 0)


_ORIGINAL = ctypes.create_string_buffer(16)
if sys.platform == "linux":
    _prctl_name(_PR_GET_NAME, _ORIGINAL)


def in_flight(holding: bool) -> None:
    """Name this thread IN_FLIGHT_NAME while it writes into an open transaction, and give its name back after."""
    if sys.platform != "linux":
        return
    _prctl_name(_PR_SET_NAME, ctypes.create_string_buffer(IN_FLIGHT_NAME.encode() if holding else _ORIGINAL.value))
