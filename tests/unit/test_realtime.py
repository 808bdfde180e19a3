"""Real-time mode's parts that need no broker: its settings, its preconditions, and the Java writer's transforms."""

from __future__ import annotations

import os
import subprocess

import pytest

from conf.stream_settings import StreamSettings
from eosbench.local.environment import check_java
from eosbench.local.jars import pyspark_jars_dir, resolve_bundle
from streaming.process import POISON, TRANSFORMS
from streaming.realtime.writer import precondition_problem


def settings(**fields) -> StreamSettings:
    """Real-time settings with the given changes."""
    return StreamSettings(**{"input_topic": "in", "output_topic": "out", "trigger": "realtime:5 seconds", **fields})


def test_a_realtime_trigger_names_its_checkpoint_interval_and_takes_a_commit_interval():
    assert settings().realtime_interval == "5 seconds" and settings().commit_interval_ms == 100
    assert settings(commit_interval_ms=50).commit_interval_ms == 50
    assert StreamSettings(input_topic="in", output_topic="out", trigger="1 second").realtime_interval is None
    with pytest.raises(ValueError, match=r"--trigger must be available-now, an interval .* got 'realtime:soon'"):
        settings(trigger="realtime:soon")
    with pytest.raises(ValueError, match=r"--commit-interval-ms applies to --trigger realtime:<interval> only"):
        StreamSettings(input_topic="in", output_topic="out", commit_interval_ms=50)
    with pytest.raises(ValueError, match=r"--commit-interval-ms must be at least 1"):
        settings(commit_interval_ms=0)


@pytest.mark.parametrize("trigger, commit_interval_ms, seconds", [
    ("realtime:5 seconds", 100, 0.1), ("realtime:1 minute", 40, 0.04), ("1 second", None, 1.0), ("500 ms", None, 0.5),
    ("2.5 s", None, 2.5), ("1 min", None, 60.0), ("250 milliseconds", None, 0.25), ("available-now", None, None),
])
def test_the_commit_wait_a_job_asks_for_is_its_commit_interval_or_its_trigger(trigger, commit_interval_ms, seconds):
    fields = {"commit_interval_ms": commit_interval_ms} if commit_interval_ms else {}
    assert settings(trigger=trigger, **fields).commit_wait_s == seconds


@pytest.mark.parametrize("fields, slots, speculation, problem", [
    ({}, 4, False, None),
    ({"sink": "kafka-alo"}, 4, False, None),
    ({}, 3, False, "in has 4 partitions but the job has 3 task slots"),
    ({}, 4, True, "spark.speculation is on"),
    ({"sink": "delta", "delta_path": "t"}, 4, False, "real-time mode writes to Kafka only"),
    ({"sink": "kafka-alo", "process": "checksum"}, 4, False, "only --process passthrough"),
    ({"pre_register_partitions": True, "sink_client": "kafka-python"}, 4, False, "cannot register partitions"),
    ({"txn_scope": "slot"}, 4, False, "drop --txn-scope and --sink-client"),
    ({"max_offsets_per_trigger": 10}, 4, False, "drop --max-offsets-per-trigger"),
    ({"observe_visibility": True}, 4, False, "--observe-visibility is measured in micro-batch mode only"),
    ({"source_options": ("maxRecordsPerPartition=10",)}, 4, False, "needs one task per Kafka partition"),
])
def test_realtime_refuses_in_one_line_what_it_cannot_run_exactly_once(fields, slots, speculation, problem):
    found = precondition_problem(settings(**fields), 4, slots, speculation)
    assert (found is None) if problem is None else (problem in found and "\n" not in found)


def test_the_java_writers_transforms_write_the_bytes_pythons_do():
    """The verifier recomputes process(value) in Python, so the Java writer's output must match it byte for byte."""
    jars = resolve_bundle("spark")
    records = [(b"k1", b"hello"), (None, b"x" * 300), (b"k3", None), (b"k4", b"POISON record"), (b"", b"\x00\xff\x10")]
    lines = [f"{process} {key.hex() if key is not None else '-'} {value.hex() if value is not None else '-'}"
             for process in TRANSFORMS for key, value in records]
    ran = subprocess.run([check_java(), "-cp", os.pathsep.join([str(pyspark_jars_dir() / "*"), *map(str, jars)]),
                          "eosbench.spark.RecordProcess"], input="\n".join(lines) + "\n",
                         capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr
    expected = []
    for process in TRANSFORMS:
        for key, value in records:
            result = TRANSFORMS[process](key, value)
            expected.append("POISON" if result is POISON else "-" if result is None else result.hex())
    assert ran.stdout.split() == expected
