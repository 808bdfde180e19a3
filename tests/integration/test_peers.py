"""The peer engines on the session broker: Kafka Streams and Flink, exactly-once through a SIGKILL.

Each peer runs as eosbench runs it (eosbench/local/peers.py's command line, its jars compiled on
first use), is killed with SIGKILL while it copies, and is launched again: Kafka Streams takes its
old static members' places and fences their transactional ids, Flink resumes from its newest
retained checkpoint and aborts the transactions its sink left open. The verifier then finds every
committed input record delivered once, nothing from an aborted one, each value the transform's.
"""

from __future__ import annotations

import signal
import time

import pytest

from eosbench.local.kafka_admin import create_topic
from eosbench.local.peers import PEER_ENGINES, PeerSettings, peer_command
from eosbench.local.processes import Child
from streaming.verify import verify
from tests.integration.produce_helpers import produce

PROCESS = "checksum"


def delivered(bootstrap: str, settings: PeerSettings):
    """The verifier's report on what the peer has committed so far."""
    return verify(bootstrap, settings.input_topic, settings.output_topic, None, settings.dead_letter_topic,
                  process=PROCESS)


def wait_for(condition, timeout_s: float, what: str, child: Child):
    """Poll until `condition()` returns something true, failing with the peer's last words after the timeout."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        assert child.alive(), f"the peer exited ({child.exit_code()}): {child.last_lines(5)}"
        time.sleep(1)
    pytest.fail(f"{what} within {timeout_s:g} s; the peer's last words: {child.last_lines(5)}")


@pytest.mark.parametrize("engine", PEER_ENGINES)
def test_each_peer_is_exactly_once_through_a_sigkill_and_a_relaunch(bootstrap, new_topic, tmp_path, engine):
    source, sink = new_topic(partitions=2, prefix="in"), new_topic(partitions=2, prefix="out")
    settings = PeerSettings(engine, "exactly-once", source, sink, f"app-{sink}", tmp_path / "state", process=PROCESS,
                            heap_mb=384)
    create_topic(bootstrap, settings.dead_letter_topic, 2, 1)
    produce(bootstrap, source, 3_000, records_per_transaction=100, abort_ratio=0.3, seed=41)
    peer = Child(engine, tmp_path / "logs")
    peer.start(peer_command(settings, bootstrap))
    try:
        wait_for(lambda: delivered(bootstrap, settings).output_committed, 120, "no output", peer)
        # More input while it copies, so that the kill lands with work in flight.
        produce(bootstrap, source, 6_000, records_per_transaction=100, abort_ratio=0.3, seed=41, resume=True)
        peer.kill(signal.SIGKILL)
        peer.start(peer_command(settings, bootstrap))
        report = wait_for(lambda: (r := delivered(bootstrap, settings)).output_committed >= r.input_committed and r,
                          180, "the relaunched peer did not deliver every committed record", peer)
    finally:
        peer.kill(signal.SIGTERM)
    assert report.violations == [], report.violations
    assert report.duplicates == report.lost == report.aborted_reads == report.unexpected == 0
    assert report.output_committed == report.input_committed > 0 and report.dead_lettered == 0
    assert report.input_aborted > 0, "the input must hold aborted transactions for this to mean anything"
