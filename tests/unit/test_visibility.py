"""The visibility observer's pairing of commit times with first sightings, without a broker."""

from __future__ import annotations

from streaming.verify.visibility import VisibilityObserver, percentiles, read_log


def observer(tmp_path) -> tuple[VisibilityObserver, list]:
    """An observer that is not reading (its reads are fed by hand), ready since t=100."""
    heard = []
    watching = VisibilityObserver("unused:9092", ["out"], on_sample=lambda txn, s: heard.append((txn, s)),
                                  log=tmp_path / "visibility.log")
    watching.ready_at = 100.0
    return watching, heard


def test_a_sighting_and_a_commit_pair_up_in_either_order(tmp_path):
    watching, heard = observer(tmp_path)
    watching._match(seen={"0:1:a": 100.75})  # seen before the driver heard of the commit
    watching.committed([("0:1:a", 100.5), ("1:1:b", 101.0)])
    watching._match(seen={"1:1:b": 101.25, "0:1:a": 102.0})  # a later record of a timed one changes nothing
    assert heard == [("0:1:a", 0.25), ("1:1:b", 0.25)]
    assert read_log(tmp_path / "visibility.log") == [(100.5, 0.25), (101.0, 0.25)]


def test_a_record_seen_before_its_commit_returned_counts_zero(tmp_path):
    watching, heard = observer(tmp_path)
    watching.committed([("0:2:c", 105.0)])
    watching._match(seen={"0:2:c": 104.9})
    assert heard == [("0:2:c", 0.0)]


def test_commits_before_the_observer_was_ready_are_left_out_and_unseen_ones_counted(tmp_path):
    watching, heard = observer(tmp_path)
    watching.committed([("0:0:d", 99.0), ("0:3:e", 110.0)])
    watching._stop.set()  # nothing is reading: stop() must not wait for the unseen commit
    summary = watching.stop(wait_s=0)
    assert heard == [] and (summary.samples, summary.unseen, summary.left_out) == (0, 1, 1)


def test_percentiles_of_no_samples_are_zero():
    assert percentiles([]) == {"samples": 0, "p50_ms": 0.0, "p99_ms": 0.0, "max_ms": 0.0}
    assert percentiles([0.001, 0.003]) == {"samples": 2, "p50_ms": 2.0, "p99_ms": 2.98, "max_ms": 3.0}
