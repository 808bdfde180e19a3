"""A sink task's thread name while it holds an open transaction: what the soak's zombie-executor looks for."""

import threading
from pathlib import Path

from streaming.sink.in_flight import IN_FLIGHT_NAME, in_flight


def _name_of_this_thread() -> str:
    return Path(f"/proc/self/task/{threading.get_native_id()}/comm").read_text().strip()


def test_a_thread_is_named_while_it_holds_a_transaction_and_gets_its_name_back():
    before = _name_of_this_thread()
    in_flight(True)
    try:
        assert _name_of_this_thread() == IN_FLIGHT_NAME
    finally:
        in_flight(False)
    assert _name_of_this_thread() == before
