"""A sink task's thread is named while it writes records into an open transaction, so `ps` (and the soak's
zombie-executor) see it: from begin_transaction until its offsets are sent."""

from __future__ import annotations

import ctypes
import sys

# What `ps -o comm` and /proc/<pid>/comm show for a Python worker between begin and sending the offsets.
IN_FLIGHT_NAME = "eosbench-txn"
_PR_SET_NAME, _PR_GET_NAME = 15, 16
# Loaded and built once: the sink names its thread twice a transaction.
_LIBC = ctypes.CDLL(None) if sys.platform == "linux" else None
_IN_FLIGHT = ctypes.create_string_buffer(IN_FLIGHT_NAME.encode())
_ORIGINAL = ctypes.create_string_buffer(16)
if _LIBC is not None:
    _LIBC.prctl(_PR_GET_NAME, _ORIGINAL, 0, 0, 0)


def in_flight(holding: bool) -> None:
    """Name this thread IN_FLIGHT_NAME while it writes into an open transaction, and give its name back after."""
    if _LIBC is not None:
        _LIBC.prctl(_PR_SET_NAME, _IN_FLIGHT if holding else _ORIGINAL, 0, 0, 0)
