"""The sweep's workload files, the report's arithmetic, the soak's report, its checkpoint and restart-hdfs fault,
the live verifier's bounds, the standalone cluster's readiness checks and the streaming job's steady rate."""

from __future__ import annotations

import http.server
import json
import socket
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from conf.local_servers import SparkClusterSettings
from conf.settings import SettingsError
from conf.workload_settings import load_workload
from eosbench.bench import results
from eosbench.console.errors import BadInput, EnvironmentProblem
from eosbench.bench.report import knee
from eosbench.soak.faults import FAULTS, _java_string_hash
from eosbench.soak.options import SoakOptions
from eosbench.soak.report import FaultRecord, SoakReport, UnplannedExit, report_markdown, write_report
from eosbench.local.spark_cluster import StandaloneCluster
from streaming.verify import topic_index
from streaming.verify import verifier as verify
from streaming.stats import BatchStats, StreamSummary, steady_input_rate
from streaming.verify.topic_index import IncrementalIndexes, TopicIndex, _bounds

WORKLOADS = Path(__file__).resolve().parents[2] / "conf" / "workloads"


@pytest.mark.parametrize("name", sorted(p.stem for p in WORKLOADS.glob("*.yaml")))
def test_every_shipped_workload_loads(name):
    workload = load_workload(WORKLOADS / f"{name}.yaml")
    assert workload.name == name
    g = workload.grid
    assert len(workload.cells()) == (len(g.brokers) * len(g.record_size) * len(g.abort_ratio)
                                     * len(g.records_per_transaction) * len(g.sink))


@pytest.mark.parametrize("text, fragment", [
    ("name: x\nrecords: 10\ngrid: {abort_ratio: [1.0]}\n", "grid.abort_ratio: abort ratios must lie in [0, 1)"),
    ("name: x\ngrid: {sink: [kafka-xa]}\n", "grid.sink.0"),
    ("name: x\nrecord: 10\n", "record: Extra inputs are not permitted"),
    ("- just\n- a list\n", "must be a mapping"),
    ("name: x\nproducer_config: {retry.backoff.ms: [5]}\n", "producer_config.retry.backoff.ms"),
    ("name: [unclosed\n", "is not valid YAML"),
])
def test_bad_workloads_fail_with_one_line(tmp_path, text, fragment):
    path = tmp_path / "w.yaml"
    path.write_text(text)
    with pytest.raises(SettingsError) as raised:
        load_workload(path)
    assert fragment in str(raised.value) and "\n" not in str(raised.value)


def test_producer_properties_in_a_workload_become_strings(tmp_path):
    path = tmp_path / "w.yaml"
    path.write_text("name: x\nproducer_config: {retry.backoff.ms: 5, enable.idempotence: true}\n")
    assert load_workload(path).producer_config == {"retry.backoff.ms": "5", "enable.idempotence": "true"}


def test_knee_is_the_smallest_size_within_a_fifth_of_the_floor():
    assert knee({1: 40.0, 10: 6.0, 100: 1.25, 1000: 1.1, 10000: 1.05}) == 100
    assert knee({1: 1.0, 10: 1.0}) == 1
    assert knee({10: 3.0}) is None


def test_results_rows_have_every_column_and_reject_unknown_ones():
    row = results.new_row(run_id="r", sink="plain-tx", throughput_rps=1.5)
    assert list(row) == [name for name, _ in results.COLUMNS]
    assert row["recorded_at"] and row["brokers"] is None
    with pytest.raises(KeyError, match="not a results column"):
        results.new_row(speed=3)


def test_java_string_hash_matches_java():
    # Values of String.hashCode() printed by the JDK 17 on this machine; Kafka takes Utils.abs of it.
    assert _java_string_hash("hello") == 99162322
    assert _java_string_hash("soak-1.in.0") == 175087979
    assert _java_string_hash("") == 0


def test_live_bounds_keep_only_records_below_each_partitions_offset():
    index = TopicIndex(seq=np.array([10, 11, 12, 13]), partition=np.array([0, 0, 1, 1]), offset=np.array([0, 5, 0, 7]),
                       src_partition=np.array([], dtype=np.int64), src_offset=np.array([], dtype=np.int64),
                       txn=np.array([], dtype=np.int64), txn_records=np.array([], dtype=np.int64),
                       end_offsets={0: 6, 1: 8})
    below = index.below({0: 5, 1: 8})
    assert below.seq.tolist() == [10, 12, 13]
    assert _bounds(np.array([2, 0]), {0: 4}).tolist() == [0, 4]


def _index(seq, partition, offset, ends) -> TopicIndex:
    as_array = lambda values: np.asarray(values, dtype=np.int64)  # noqa: E731
    return TopicIndex(as_array(seq), as_array(partition), as_array(offset), *(as_array([]),) * 4, ends)


def test_incremental_indexes_read_from_the_end_they_read_to_and_append(monkeypatch):
    reads = iter([_index([1, 2, 3], [0, 1, 0], [0, 0, 4], {0: 6, 1: 2}),  # partition 0 ends on a commit marker
                  _index([4, 5], [1, 2], [3, 0], {0: 6, 1: 5, 2: 2}),
                  _index([], [], [], {0: 6, 1: 5, 2: 2})])
    starts = []

    def fake_read_index(bootstrap, topic, isolation, with_src, start_offsets=None, **_):
        starts.append(start_offsets)
        return next(reads)
    monkeypatch.setattr(topic_index, "read_index", fake_read_index)
    indexes = IncrementalIndexes()
    for _ in range(3):
        held = indexes.read("b", "t", "read_committed", with_src=False)
    assert starts == [None, {0: 6, 1: 2}, {0: 6, 1: 5, 2: 2}], "past the last record held, and its commit marker"
    assert held.seq.tolist() == [1, 2, 3, 4, 5] and held.offset.tolist() == [0, 0, 4, 3, 0]
    assert held.end_offsets == {0: 6, 1: 5, 2: 2}
    with pytest.raises(ValueError, match="only a live verify reads incrementally"):
        verify.verify("b", "in", "out", indexes=indexes)


def _report() -> SoakReport:
    report = SoakReport("abc", {"duration_s": "60"}, 0.0, seconds=75.0, finished=True)
    report.faults = [FaultRecord(0, "kill-driver", 10.0, "SIGKILL driver", recovery_s=12.5, first_commit_s=9.5,
                                 records_checked=100),
                     FaultRecord(1, "kill-driver", 30.0, "SIGKILL driver", recovery_s=20.0, first_commit_s=14.0,
                                 records_checked=200),
                     FaultRecord(2, "pause-broker", 50.0, "SIGSTOP", recovery_s=None, records_checked=300)]
    report.final = {"input_committed": 400, "output_committed": 400, "input_aborted": 40, "output_aborted_hidden": 3}
    report.timeline = [(t * 0.5, int(t * 100)) for t in range(150)]
    return report


def test_soak_report_counts_survivals_and_recovery_by_kind(tmp_path):
    report = _report()
    assert not report.ok, "a fault that never recovered fails the soak"
    kinds = report.by_kind()
    assert kinds["kill-driver"] == {"injected": 2, "survived": 2, "recovery_median_s": 20.0, "recovery_max_s": 20.0,
                                    "first_commit_median_s": 14.0, "first_commit_max_s": 14.0}
    assert kinds["pause-broker"]["survived"] == 0 and kinds["pause-broker"]["recovery_median_s"] is None
    assert kinds["pause-broker"]["first_commit_median_s"] is None
    markdown = report_markdown(report)
    assert markdown.startswith("# Soak abc: FAILED")
    assert "| kill-driver | 2 | 2 | 14.0 | 14.0 | 20.0 | 20.0 |" in markdown
    assert "| 1 | 10.0 | kill-driver | SIGKILL driver | 9.5 | 12.5 | 100 |" in markdown
    write_report(report, tmp_path)
    assert json.loads((tmp_path / "report.json").read_text())["by_kind"]["kill-driver"]["injected"] == 2
    assert (tmp_path / "timeline.png").read_bytes()[:4] == b"\x89PNG"
    report.finished = False
    assert report_markdown(report).startswith("# Soak abc: FAILING"), "a running soak's report says so"
    report.stopped = "only 1,900 MB left on the disk of /tmp: the soak stops before its brokers, HDFS and Spark run out of space"
    assert report_markdown(report).splitlines()[:3] == [
        "# Soak abc: STOPPED", "", f"- stopped early, before the drain and the final verify: {report.stopped}"]


def test_soak_report_shows_what_retention_deleted_beside_each_verdict():
    report = _report()
    report.final.update(source_deleted=3, output_deleted=1_200, transactions_output_deleted=4)
    report.faults[1].source_deleted, report.faults[1].output_deleted = 0, 250
    markdown = report_markdown(report)
    assert ("- deleted by retention or compaction (no violation): 3 deliveries whose input record is gone"
            " (source_deleted; still checked for duplicates), 1,200 committed input records whose delivery is gone"
            " (output_deleted), 4 transactions cut short by it (transactions_output_deleted)") in markdown
    rounds = markdown.split("## Rounds")[1]
    assert "| 200 | ok (source_deleted 0, output_deleted 250) |" in rounds and "| 100 | ok |" in rounds


def test_soak_report_says_why_each_unplanned_restart_was_needed(tmp_path):
    report = _report()
    assert "- unplanned restarts: none" in report_markdown(report)
    report.exits = [UnplannedExit(61.5, "stream", 3, "streaming/job.py: error: the streaming query failed: a|b"),
                    UnplannedExit(70.0, "producer", 1, "eosbench: error: fenced"),
                    UnplannedExit(90.0, "stream", 3, "streaming/job.py: error: the streaming query failed: c")]
    assert report.restarts == {"stream": 2, "producer": 1}
    markdown = report_markdown(report)
    assert "- unplanned restarts: stream 2, producer 1 (why: Unplanned exits, below)" in markdown
    assert markdown.split("## Unplanned exits")[1].strip().splitlines()[2:] == [
        "| at (s) | process | exit code | last line |", "|---|---|---|---|",
        "| 61.5 | stream | 3 | streaming/job.py: error: the streaming query failed: a\\|b |",
        "| 70.0 | producer | 1 | eosbench: error: fenced |",
        "| 90.0 | stream | 3 | streaming/job.py: error: the streaming query failed: c |"]
    write_report(report, tmp_path)
    written = json.loads((tmp_path / "report.json").read_text())
    assert written["restarts"] == {"stream": 2, "producer": 1}
    assert written["exits"][0] == {"at_s": 61.5, "process": "stream", "exit_code": 3,
                                   "last_line": "streaming/job.py: error: the streaming query failed: a|b"}


def test_soak_throughput_between_faults_runs_from_each_recovery_to_the_next_fault(tmp_path):
    report = _report()  # 200 offsets/s throughout; kill-driver at 10 s (recovered 22.5 s) and 30 s (50 s)
    # Only 22.5-30 s is a window: the second kill-driver recovered as pause-broker struck, which never recovered.
    assert report.between_faults() == {"windows": 1, "seconds": 7.5, "offsets": 1500, "offsets_per_s": 200.0,
                                       "median_offsets_per_s_by_kind": {"kill-driver": 200.0}}
    write_report(report, tmp_path)
    assert json.loads((tmp_path / "report.json").read_text())["between_faults"]["windows"] == 1
    markdown = (tmp_path / "report.md").read_text()
    assert "- throughput between faults (from each recovery to the next fault): 200 committed input offsets/s" \
           " over 8 s in 1 windows" in markdown
    assert "| kill-driver | 2 | 2 | 14.0 | 14.0 | 20.0 | 20.0 | 200 |" in markdown


def test_soak_visibility_goes_to_the_fault_before_each_commit(tmp_path):
    report = _report()  # started at 0.0; kill-driver at 10 s and 30 s, pause-broker at 50 s
    (tmp_path / "visibility.log").write_text("0:1:a 5.0 0.1\n1:4:b 15.0 0.2\n0:9:c 35.0 0.4\n*:12:d 60.0 2.0\n")
    write_report(report, tmp_path)
    visibility = json.loads((tmp_path / "report.json").read_text())["visibility"]
    assert {period: figures["samples"] for period, figures in visibility.items()} == {
        "all": 4, "before the first fault": 1, "kill-driver": 2, "pause-broker": 1}
    assert (visibility["kill-driver"]["p50_ms"], visibility["kill-driver"]["max_ms"]) == (300.0, 400.0)
    assert "| pause-broker | 1 | 0 | None | None | None | None | — | p50 2000 ms, p99 2000 ms, max 2000 ms (1 transactions) |" in (
        tmp_path / "report.md").read_text()


class _Page(http.server.BaseHTTPRequestHandler):
    """Answers every GET with the class's body, as the master's web UI does with its root page."""

    body = b""

    def do_GET(self):  # noqa: N802 - http.server's name
        self.send_response(200)
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args):
        pass


@pytest.mark.parametrize("body, workers", [
    (b"<!DOCTYPE html><html><body>Spark Master at spark://127.0.0.1:7077</body></html>", 0),
    (json.dumps({"aliveworkers": 2, "workers": []}).encode(), 2),
])
def test_master_state_reads_an_html_root_page_as_not_ready(tmp_path, body, workers):
    page = type("Page", (_Page,), {"body": body})
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), page) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        cluster = StandaloneCluster(SparkClusterSettings(master_ui_port=server.server_address[1], state_dir=tmp_path))
        try:
            assert cluster.alive_workers() == workers
        finally:
            server.shutdown()


def test_cluster_start_refuses_a_taken_master_ui_port(tmp_path):
    # A free master port of the moment, not a fixed one: the integration suite's session cluster
    # may hold 17177 while the unit tests run in the same session.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        master_port = probe.getsockname()[1]
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        ui_port = taken.getsockname()[1]
        cluster = StandaloneCluster(SparkClusterSettings(master_port=master_port, master_ui_port=ui_port,
                                                         state_dir=tmp_path))
        with pytest.raises(EnvironmentProblem, match=f"port {ui_port} on 127.0.0.1 is already in use"):
            cluster.start()
    assert cluster.status()[0].pid is None


def progress_report(batch_id: int, seconds: float, rows: int, duration_ms: dict | None = None) -> SimpleNamespace:
    """What the job reads of one StreamingQueryProgress."""
    stamp = datetime.fromtimestamp(1_800_000_000 + seconds, timezone.utc).isoformat().replace("+00:00", "Z")
    return SimpleNamespace(batchId=batch_id, timestamp=stamp, numInputRows=rows, durationMs=duration_ms or {})


def test_steady_rate_skips_start_up_idle_repeats_and_the_cut_off_last_batch():
    progress = [progress_report(0, 0.0, 500), progress_report(1, 6.0, 100),  # start-up, excluded
                progress_report(2, 7.0, 100), progress_report(3, 7.9, 120), progress_report(3, 9.0, 0),
                progress_report(4, 9.5, 80)]  # the last batch: only its start counts
    assert steady_input_rate(progress) == pytest.approx((100 + 120) / 2.5)
    assert steady_input_rate(progress[:3]) is None


def test_the_summary_gives_median_steps_without_start_up_and_counts_a_missing_step_as_zero():
    summary = StreamSummary()
    for batch_id, driver in enumerate([{"tasks": 9.0}, {"tasks": 5.0}, {"tasks": 0.2, "plan": 0.004},
                                       {"tasks": 0.4}, {"tasks": 0.3, "plan": 0.002}]):
        summary.add(BatchStats(batch_id, driver_seconds=driver))
    progress = [progress_report(0, 0.0, 500, {"addBatch": 9000, "walCommit": 40}),
                progress_report(1, 9.0, 100, {"addBatch": 5000, "walCommit": 30}),
                progress_report(2, 14.0, 100, {"addBatch": 200, "walCommit": 20}),
                progress_report(2, 15.0, 0, {"triggerExecution": 1}),  # an idle trigger repeats batch 2
                progress_report(3, 16.0, 100, {"addBatch": 400, "walCommit": 10}),
                progress_report(4, 17.0, 100, {"addBatch": 300, "walCommit": 30})]
    summary.settle(progress)
    assert summary.input_rows == 900
    assert summary.driver_ms == pytest.approx({"tasks": 300.0, "plan": 2.0})
    assert summary.trigger_ms == {"addBatch": 300, "walCommit": 20}


def test_the_soaks_drain_check_reads_a_cluster_error_as_not_drained_and_keeps_its_reason(monkeypatch):
    import numpy as np
    from confluent_kafka import KafkaError, KafkaException

    from eosbench.soak import live_verify
    from streaming.verify.verifier import TopicIndex

    def hanging(*_args, **_kwargs):
        raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "Failed to get committed offsets: Local: Timed out"))

    pipeline = SimpleNamespace(bootstrap="127.0.0.1:1", input_topic="in", app_id="app", copiers=[])
    monkeypatch.setattr(live_verify, "stable_and_end_offsets", lambda *_: {0: (10, 10), 1: (0, 0)})
    monkeypatch.setattr(live_verify, "group_offsets", hanging)
    verifier = live_verify.LiveVerifier(pipeline)
    empty = np.empty(0, dtype=np.int64)
    monkeypatch.setattr(verifier.indexes, "read",
                        lambda *_args, **_kwargs: TopicIndex(empty, empty, empty, empty, empty, empty, empty, {}))
    assert verifier.drained() is False
    assert verifier.last_read_error == "Failed to get committed offsets: Local: Timed out"
    monkeypatch.setattr(live_verify, "group_offsets", lambda *_: {0: 10})
    assert verifier.drained() is True and verifier.last_read_error is None


def test_a_rounds_verify_that_cannot_read_the_cluster_is_tried_again_then_judged(monkeypatch):
    from confluent_kafka import KafkaError, KafkaException

    from eosbench.soak import live_verify

    # Soak 308a257e died at its 128th fault: a broker's restart moved a leader under the round's read.
    answers = [KafkaException(KafkaError(KafkaError.NOT_LEADER_FOR_PARTITION,
                                         "Failed to get watermark offsets: Broker: Not leader for partition")),
               TimeoutError("soak-in: no end of partition within 60.0 s"),
               verify.VerifyReport("in", "out", input_committed=500, source_deleted=2, output_deleted=7)]

    def verify_live(*_args):
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer
    monkeypatch.setattr(live_verify, "verify_live", verify_live)
    monkeypatch.setattr(live_verify, "wait_until_stable", lambda *_args, **_kwargs: [])
    monkeypatch.setattr(live_verify, "VERIFY_RETRY_PAUSE_S", 0.0)
    pipeline = SimpleNamespace(bootstrap="b", input_topic="in", output_topic="out", dead_letter_topic="out.dlq",
                               app_id="app", copiers=[])
    said: list[str] = []
    record = FaultRecord(0, "kill-broker", 10.0, "SIGKILL broker node 2")
    live_verify.LiveVerifier(pipeline).after_fault(record, said.append)
    assert said == ["verify could not read the cluster (Failed to get watermark offsets: Broker: Not leader for"
                    " partition); trying again",
                    "verify could not read the cluster (soak-in: no end of partition within 60.0 s); trying again"]
    assert record.records_checked == 500 and record.violations == []
    assert (record.source_deleted, record.output_deleted) == (2, 7), "what retention deleted, for the report"
    assert record.samples == {}

    answers[:] = [verify.VerifyReport("in", "out", input_committed=500, aborted_reads=2,
                                      violations=["aborted_reads: 2"], samples={"aborted_reads": [5, 9], "lost": []})]
    found = FaultRecord(1, "kill-broker", 20.0, "")
    live_verify.LiveVerifier(pipeline).after_fault(found, said.append)
    assert found.violations == ["aborted_reads: 2"] and found.samples == {"aborted_reads": [5, 9]}, \
        "a violation's records are named in the report, to be found by"

    monkeypatch.setattr(live_verify, "VERIFY_RETRY_S", 0.0)  # a cluster that stays unreadable ends the soak
    answers[:] = [KafkaException(KafkaError(KafkaError._TRANSPORT))]
    with pytest.raises(KafkaException):
        live_verify.LiveVerifier(pipeline).after_fault(FaultRecord(1, "kill-broker", 20.0, ""), said.append)


def test_each_launch_of_the_soaks_stream_gets_a_fresh_driver_scratch_and_the_soak_removes_the_last(monkeypatch,
                                                                                                   tmp_path):
    from eosbench.soak import pipeline as soak_pipeline

    # A SIGKILLed driver never removes its spark.local.dir (the unpacked executor archive, 320 MB a
    # launch): each launch's goes, with the last, when the soak starts the next one or ends.
    monkeypatch.setattr(soak_pipeline, "resolve_bundle", lambda _name: [Path("/jars/spark-sql-kafka.jar")])
    launched: list[list[str]] = []
    monkeypatch.setattr(soak_pipeline.Child, "start", lambda child, command: launched.append(command))
    pipe = soak_pipeline.Pipeline(SoakOptions(duration_s=60, faults=("kill-driver",)), "r1", "127.0.0.1:9092",
                                  tmp_path, None)
    leftover = pipe.driver_scratch / "spark-1234" / "userFiles-1" / "environment"
    leftover.mkdir(parents=True)
    pipe.start(pipe.stream)
    assert pipe.driver_scratch.is_dir() and list(pipe.driver_scratch.iterdir()) == []
    assert f"spark.local.dir={tmp_path / 'spark-local'}" in launched[0]
    # The driver fetches the archive it unpacks into java.io.tmpdir (111 MB), which a SIGKILL leaves.
    java_options = launched[0][launched[0].index("--driver-java-options") + 1]
    assert f"-Djava.io.tmpdir={tmp_path / 'spark-local'}" in java_options.split()
    leftover.mkdir(parents=True)
    pipe.kill()
    assert not pipe.driver_scratch.exists()
    # On a standalone cluster the executors' java.io.tmpdir (the archive's download) is their work folder.
    monkeypatch.setattr(soak_pipeline, "executor_environment", lambda: SimpleNamespace(
        archives_entry="env.tar.gz#environment", driver_python="/env/bin/python", job_file="/env/job.py"))
    on_cluster = soak_pipeline.Pipeline(SoakOptions(duration_s=60, faults=("kill-driver",), master="spark://h:7077"),
                                        "r2", "127.0.0.1:9092", tmp_path, SimpleNamespace(settings=SimpleNamespace(workers=2)))
    on_cluster.start(on_cluster.stream)
    assert "spark.executor.extraJavaOptions=-Djava.io.tmpdir=." in launched[1]
    assert f"spark.local.dir={tmp_path / 'spark-local'}" in launched[1]


def test_the_soak_stops_in_one_line_before_the_disk_is_full(monkeypatch, tmp_path):
    from collections import namedtuple

    from eosbench.soak import runner

    usage = namedtuple("usage", "total used free")
    free = {tmp_path / "cluster": 1_900 * 1024**2}
    monkeypatch.setattr(runner.shutil, "disk_usage", lambda folder: usage(0, 0, free.get(folder, 50 * 1024**3)))
    (tmp_path / "cluster").mkdir()
    soak = SimpleNamespace(output_dir=tmp_path, cluster=SimpleNamespace(settings=SimpleNamespace(state_dir=tmp_path / "cluster")),
                           spark_cluster=None, hdfs=None, yarn=None, s3=None)
    with pytest.raises(EnvironmentProblem, match=f"only 1,900 MB left on the disk of {tmp_path / 'cluster'}: the soak"
                                                 " stops before its brokers, HDFS and Spark run out of space"):
        runner.Soak._check_disk(soak)
    free.clear()
    runner.Soak._check_disk(soak)


def test_the_standalone_workers_remove_finished_applications_folders():
    env = StandaloneCluster(SparkClusterSettings())._env()
    assert env["SPARK_WORKER_OPTS"].split() == ["-Dspark.worker.cleanup.enabled=true",
                                                "-Dspark.worker.cleanup.interval=60",
                                                "-Dspark.worker.cleanup.appDataTtl=300"]


def test_the_soaks_drain_check_accepts_a_group_stopped_before_an_aborted_tail_and_not_before(monkeypatch):
    """Kafka's copier stops there, and so does real-time mode, which commits {p: last record + 1}."""
    import numpy as np

    from eosbench.soak import live_verify
    from streaming.verify.verifier import TopicIndex

    pipeline = SimpleNamespace(bootstrap="127.0.0.1:1", input_topic="in", app_id="app", copiers=["copier-0"])
    # Committed records at 0..5 of partition 0, then an aborted tail with its marker up to 10.
    offsets = np.arange(6, dtype=np.int64)
    none = np.full(6, -1, dtype=np.int64)
    committed = TopicIndex(offsets, np.zeros(6, dtype=np.int64), offsets, none, none, none, none, {0: 10})
    monkeypatch.setattr(live_verify, "stable_and_end_offsets", lambda *_: {0: (10, 10)})
    verifier = live_verify.LiveVerifier(pipeline)
    monkeypatch.setattr(verifier.indexes, "read", lambda *_args, **_kwargs: committed)
    monkeypatch.setattr(live_verify, "group_offsets", lambda *_: {0: 6})
    assert verifier.match_by == "key" and verifier.drained() is True
    monkeypatch.setattr(live_verify, "group_offsets", lambda *_: {0: 5})
    assert verifier.drained() is False


@pytest.mark.parametrize("pipeline", ["java-copier", "kafka-streams", "flink"])
def test_a_soak_of_another_engine_without_faults_skips_the_spark_only_kinds_and_keeps_kill_driver(pipeline):
    from eosbench.soak.faults import default_faults
    assert default_faults(pipeline) == (("kill-driver", "kill-broker", "pause-broker", "restart-producer"),
                                        ("kill-executor", "delete-checkpoint"))
    assert default_faults("spark") == (("kill-driver", "kill-executor", "kill-broker", "pause-broker",
                                        "delete-checkpoint", "restart-producer"), ())


def test_bench_spark_names_the_flag_to_raise_when_a_trigger_round_measured_too_few_batches():
    from eosbench.bench.spark import trigger_comparison_problem

    at = {"trigger": "1 second", "seconds": 6, "throughput": {"kafka-alo": [5000.0], "kafka-eos": []}}
    assert trigger_comparison_problem(at, 1) == (
        "the 1 second trigger rounds had too few batches in 6 s to compare kafka-eos with kafka-alo (rounds measured:"
        " kafka-alo 1 of 1, kafka-eos 0 of 1); raise --trigger-seconds, or skip them with --trigger-seconds 0")
    at["throughput"]["kafka-eos"].append(4000.0)
    assert trigger_comparison_problem(at, 1) is None
@pytest.mark.parametrize("flags,folder", [
    ({}, "/results/soak/r1"),
    ({"hdfs": True, "hdfs_port": 18020}, "hdfs://127.0.0.1:18020/eosbench/soak"),
    ({"hdfs": True, "checkpoint": "hdfs://127.0.0.1:8020/soak/"}, "hdfs://127.0.0.1:8020/soak"),
    ({"checkpoint": "/mnt/shared/ckpt"}, "/mnt/shared/ckpt"),
])
def test_the_soaks_checkpoint_folder_is_the_flag_else_its_hdfs_else_the_runs_folder(flags, folder):
    assert SoakOptions(duration_s=60, faults=("kill-driver",), **flags).checkpoint_folder(Path("/results/soak/r1")) == folder


def test_restart_hdfs_kills_the_namenode_and_restarts_it_after_a_pause_seeded_by_seed_and_occurrence():
    pauses, waits = [], []

    class FakeHdfs:
        READY_TIMEOUT_S = 120.0

        def restart_namenode(self, pause_s: float) -> int:
            pauses.append(pause_s)
            return 4242

    def wait_for(condition, timeout_s: float, what: str) -> bool:
        while not condition():
            time.sleep(0.01)
        waits.append(what)
        return True

    def inject(seed: int, occurrence: int) -> str:
        soak = SimpleNamespace(options=SoakOptions(duration_s=60, faults=("restart-hdfs",), seed=seed, hdfs=True),
                               hdfs=FakeHdfs(), wait_for=wait_for)
        return FAULTS["restart-hdfs"].inject(soak, occurrence)

    details = [inject(7, 0), inject(7, 1), inject(7, 0), inject(8, 0)]
    # The soak's own wait, which restarts the stream that died on the outage while the NameNode comes back.
    assert waits == ["the NameNode to restart"] * 4
    assert pauses[0] == pauses[2] and len({pauses[0], pauses[1], pauses[3]}) == 3
    assert all(1.0 <= pause <= 5.0 for pause in pauses)
    assert details[0] == f"SIGKILL HDFS NameNode pid 4242; restarted after {pauses[0]:g} s"


def test_restart_s3_kills_the_server_and_restarts_it_with_its_objects_after_a_seeded_pause():
    pauses = []

    class FakeS3:
        def restart(self, pause_s: float = 0.0, wipe: bool = False) -> int:
            assert not wipe, "restart-s3 keeps the objects: S3 does not lose what it acknowledged"
            pauses.append(pause_s)
            return 5151

    def inject(seed: int, occurrence: int) -> str:
        soak = SimpleNamespace(options=SoakOptions(duration_s=60, faults=("restart-s3",), seed=seed,
                                                   checkpoint="s3a://eosbench/soak"), s3=FakeS3())
        return FAULTS["restart-s3"].inject(soak, occurrence)

    details = [inject(7, 0), inject(7, 1), inject(7, 0)]
    assert pauses[0] == pauses[2] != pauses[1] and all(1.0 <= pause <= 5.0 for pause in pauses)
    assert details[0] == f"SIGKILL S3 server pid 5151; restarted after {pauses[0]:g} s, its objects kept"


def test_the_checkpoint_bench_sums_the_two_log_writes_and_sets_each_store_beside_the_local_disk():
    from eosbench.bench.checkpoint import checkpoint_ms, store_roots, summarise, table

    assert checkpoint_ms({"walCommit": 12.0, "commitOffsets": 8.0, "addBatch": 900.0}) == 20.0
    roots = store_roots(Path("results"), "hdfs://127.0.0.1:28020", None)
    assert roots["hdfs"] == "hdfs://127.0.0.1:28020/eosbench/checkpoint-bench"
    assert roots["s3"] == "s3a://eosbench/checkpoint-bench" and Path(roots["local"]).is_absolute()
    rows = [{"store": store, "checkpoint_ms": ms, "walCommit_ms": ms / 2, "commitOffsets_ms": ms / 2,
             "triggerExecution_ms": 10 * ms} for store, ms in
            (("local", 10.0), ("s3", 40.0), ("local", 14.0), ("s3", 60.0), ("local", 12.0), ("s3", 50.0))]
    summary = summarise(rows, ["local", "s3"])
    assert summary["local"]["checkpoint_ms"] == 12.0 and summary["s3"]["checkpoint_ms"] == 50.0
    assert summary["s3"]["vs_local"] == 4.17 and summary["local"]["vs_local"] == 1.0
    assert table(summary)[3] == "| s3 | 50 | 25 | 25 | 500 | 4.17x |"


def test_kill_executor_alternates_a_jvm_and_a_python_worker_and_in_real_time_mode_always_kills_the_jvm(monkeypatch):
    from eosbench.soak import faults

    signalled = []
    monkeypatch.setattr(faults, "send_signal", lambda pid, signum: signalled.append(pid))
    monkeypatch.setattr(faults, "pyspark_processes", lambda roots: ([20, 21], [21]))  # daemon 20 forked worker 21

    def inject(trigger: str, occurrence: int) -> str:
        soak = SimpleNamespace(options=SoakOptions(duration_s=60, faults=("kill-executor",), trigger=trigger,
                                                   master="spark://127.0.0.1:7077"),
                               spark_cluster=SimpleNamespace(executor_pids=lambda: [10, 11]), yarn=None,
                               pipeline=SimpleNamespace(stream=SimpleNamespace(pid=1)))
        return FAULTS["kill-executor"].inject(soak, occurrence)

    assert [inject("1 second", n) for n in range(2)] == ["SIGKILL executor JVM pid 10", "SIGKILL Python worker pid 21"]
    # Real-time mode's tasks write from the executor JVM: an odd round kills it too, where it found nothing to kill.
    assert [inject("realtime:5 seconds", n) for n in range(2)] == ["SIGKILL executor JVM pid 10"] * 2
    assert signalled == [10, 21, 10, 10]


def test_yarn_faults_kill_an_executor_container_never_the_am_and_restart_the_nodemanager_after_a_seeded_pause():
    from eosbench.local.yarn import Container

    killed, pauses = [], []

    class FakeYarn:
        def containers(self):
            # An older application's executor winds down while the restarted driver's runs.
            return [Container(f"container_1_000{app}_01_00000{n}", f"application_1_000{app}", state, 1024, 1)
                    for app, n, state in ((1, 2, "RUNNING"), (2, 1, "RUNNING"), (2, 2, "RUNNING"), (2, 3, "RUNNING"),
                                          (2, 4, "LOCALIZING"))]

        def kill_container(self, container_id):
            killed.append(container_id)
            return [4000 + len(killed)]

        def restart_nodemanager(self, pause_s):
            pauses.append(pause_s)
            return 4242

    soak = SimpleNamespace(options=SoakOptions(duration_s=60, faults=("kill-container",), master="yarn", seed=3),
                           yarn=FakeYarn(), spark_cluster=None)
    details = [FAULTS["kill-container"].inject(soak, occurrence) for occurrence in range(3)]
    assert killed == ["container_1_0002_01_000002", "container_1_0002_01_000003", "container_1_0002_01_000002"]
    assert details[0] == ("SIGKILL executor container container_1_0002_01_000002 (pid 4001); YARN asked for a"
                          " replacement")
    assert FAULTS["restart-nodemanager"].inject(soak, 0) == \
        f"SIGKILL YARN NodeManager pid 4242 and its containers; restarted after {pauses[0]:g} s"
    FAULTS["restart-nodemanager"].inject(soak, 0)
    assert pauses[0] == pauses[1] and 1.0 <= pauses[0] <= 5.0
    assert FAULTS["kill-container"].spark_only and FAULTS["restart-nodemanager"].spark_only
    soak.yarn = SimpleNamespace(containers=lambda: [])
    assert FAULTS["kill-container"].inject(soak, 0) == "no executor container was running; nothing killed"


def test_a_yarn_soaks_stream_is_spark_submit_on_yarn_with_the_streams_settings_and_no_pythonpath(monkeypatch, tmp_path):
    from eosbench.soak import pipeline as soak_pipeline

    monkeypatch.setattr(soak_pipeline, "resolve_bundle", lambda _name: [Path("/jars/spark-sql-kafka.jar")])
    monkeypatch.setattr(soak_pipeline, "executor_environment", lambda: SimpleNamespace(
        archives_entry="env.tar.gz#environment", driver_python="/env/bin/python", job_file="/env/job.py"))
    asked = []

    def cluster_spark_conf(master, conf, yarn_state_dir):
        asked.append((master, yarn_state_dir))
        monkeypatch.setenv("HADOOP_CONF_DIR", "/yarn/conf")
        monkeypatch.delenv("PYTHONPATH", raising=False)
        return {"spark.yarn.dist.archives": "env.tar.gz#environment", **conf}
    monkeypatch.setattr(soak_pipeline, "cluster_spark_conf", cluster_spark_conf)
    monkeypatch.setenv("PYTHONPATH", "/src")
    launched: list[list[str]] = []
    monkeypatch.setattr(soak_pipeline.Child, "start", lambda child, command: launched.append(command))
    options = SoakOptions(duration_s=60, faults=("kill-container",), master="yarn", yarn_state_dir=tmp_path / "yarn")
    pipe = soak_pipeline.Pipeline(options, "r1", "127.0.0.1:9092", tmp_path, None)
    pipe.start(pipe.stream)
    command = launched[0]
    assert asked == [("yarn", tmp_path / "yarn")]
    assert command[command.index("--master") + 1] == "yarn"
    assert "spark.yarn.dist.archives=env.tar.gz#environment" in command and "/env/job.py" in command
    assert "--archives" not in command  # the YARN client refuses an archive added twice to its distributed cache
    assert "PYTHONPATH" not in pipe.stream.env and pipe.stream.env["HADOOP_CONF_DIR"] == "/yarn/conf"
    assert pipe.producer.env["PYTHONPATH"] == "/src"  # the producer runs the soak's own code


def test_a_realtime_soak_streams_in_realtime_mode_and_refuses_what_cannot_run(monkeypatch, tmp_path):
    from eosbench.soak import pipeline as soak_pipeline
    from eosbench.soak.faults import refuse_unrunnable_faults

    monkeypatch.setattr(soak_pipeline, "resolve_bundle", lambda _name: [Path("/jars/spark-sql-kafka.jar")])
    launched: list[list[str]] = []
    monkeypatch.setattr(soak_pipeline.Child, "start", lambda child, command: launched.append(command))
    options = SoakOptions(duration_s=60, faults=("kill-driver",), trigger="realtime:5 seconds", master="local[4]")
    options.validate()
    pipe = soak_pipeline.Pipeline(options, "r1", "127.0.0.1:9092", tmp_path, None)
    pipe.start(pipe.stream)
    command = launched[0]
    assert command[command.index("--trigger") + 1] == "realtime:5 seconds"
    assert "--max-offsets-per-trigger" not in command and "--visibility-log" not in command
    pause_s = options.delivery_timeout_ms / 1000 + 4  # faults.pause_broker's
    assert command[command.index("--producer-props") + 1] == f"transaction.timeout.ms={options.delivery_timeout_ms + 2000}"
    assert options.delivery_timeout_ms + 2000 < pause_s * 1000, "pause-broker outlasts a real-time transaction's timeout"
    refusals = {
        "one task per partition at once, and --master local[2,4] has 2 threads for 4 partitions":
            SoakOptions(duration_s=60, faults=("kill-driver",), trigger="realtime:5 seconds"),
        "--faults kill-executor: with --trigger realtime:5 seconds on a local master":
            SoakOptions(duration_s=60, faults=("kill-executor",), trigger="realtime:5 seconds", master="local[4]"),
        "--trigger must be available-now, an interval such as '1 second', or realtime:<interval>":
            SoakOptions(duration_s=60, faults=("kill-driver",), trigger="realtime:soon"),
        "real-time mode is the Spark job's; --pipeline java-copier runs no Spark":
            SoakOptions(duration_s=60, faults=("kill-driver",), trigger="realtime:5 seconds", pipeline="java-copier"),
    }
    for line, refused in refusals.items():
        with pytest.raises(BadInput) as said:
            refused.validate()
            refuse_unrunnable_faults(refused)
        assert line in str(said.value) and "\n" not in str(said.value)


def test_each_launch_of_a_slot_scope_soaks_stream_draws_its_slot_count_seeded_and_the_report_counts_them(
        monkeypatch, tmp_path):
    from eosbench.soak import pipeline as soak_pipeline
    from eosbench.soak.report import SoakReport, report_markdown

    monkeypatch.setattr(soak_pipeline, "resolve_bundle", lambda _name: [Path("/jars/spark-sql-kafka.jar")])
    launched: list[list[str]] = []
    monkeypatch.setattr(soak_pipeline.Child, "start", lambda child, command: launched.append(command))

    def launches(seed: int) -> list[int]:
        options = SoakOptions(duration_s=60, faults=("kill-driver",), txn_scope="slot", txn_slots=(2, 3, 5), seed=seed)
        options.validate()
        pipe = soak_pipeline.Pipeline(options, "r1", "127.0.0.1:9092", tmp_path, None)
        for _ in range(12):
            pipe.start(pipe.stream)
        return pipe.slot_launches

    drawn = launches(7)
    # What each launch was given is what it ran with, and a seed draws the same slot counts again.
    assert [int(c[c.index("--txn-slots") + 1]) for c in launched] == drawn and launches(7) == drawn
    assert set(drawn) == {2, 3, 5} and any(a != b for a, b in zip(drawn, drawn[1:]))
    report = SoakReport("r1", {}, 0.0, slot_launches=[2, 2, 3, 5])
    assert ("- slot counts (--txn-slots) at the stream's 4 launches: G=2 ×2, G=3 ×1, G=5 ×1;"
            " it changed at 2 relaunches") in report_markdown(report).splitlines()
    # Without --txn-slots the stream chooses its own (the executors' cores) and the report says nothing.
    launched.clear()
    pipe = soak_pipeline.Pipeline(SoakOptions(duration_s=60, faults=("kill-driver",)), "r2", "127.0.0.1:9092",
                                  tmp_path, None)
    pipe.start(pipe.stream)
    assert "--txn-slots" not in launched[0] and pipe.slot_launches == []
    assert "slot counts" not in report_markdown(SoakReport("r2", {}, 0.0))


def test_the_first_commit_after_a_fault_is_the_first_sample_after_it_was_undone_above_the_total_then():
    from eosbench.soak.progress import ProgressSampler
    sampler = ProgressSampler.__new__(ProgressSampler)
    sampler._lock = threading.Lock()
    # The killed run's last commit (120) shows only after the kill was undone at 10.0: it is not the successor's.
    sampler.samples = [(9.0, 100), (9.5, 100), (10.5, 120), (11.0, 120), (14.5, 120), (15.0, 160), (15.5, 200)]
    assert sampler.first_move(10.0, 120) == 15.0
    assert sampler.first_move(10.0, 200) is None
    assert sampler.first_move(15.0, 120) == 15.5, "only samples after the moment count"


def test_recovery_splits_each_relaunch_into_the_drivers_steps_from_the_kill(tmp_path):
    from eosbench.bench.recovery import EngineRecovery, relaunch_steps, start_timelines
    from streaming.start_timeline import START_TIMELINE
    logs = tmp_path / "logs"
    logs.mkdir()
    first = {"python": 100.0, "main": 101.0, "session": 105.0, "first_commit": 112.0}
    second = {"python": 203.0, "main": 204.0, "session": 207.5, "sink": 208.0, "source": 208.5, "query": 209.0,
              "first_batch": 210.0, "first_commit": 211.5}
    (logs / "stream-1.log").write_text(f"noise\n{START_TIMELINE}{json.dumps(first)}\nbatch 0\n")
    (logs / "stream-2.log").write_text(f"{START_TIMELINE}{json.dumps(second)}\n")
    (logs / "stream-3.log").write_text("died before its first batch\n")
    timelines = start_timelines(logs)
    assert timelines == [first, second]
    assert relaunch_steps(timelines, killed_at=200.0) == {
        "python": 3.0, "main": 1.0, "session": 3.5, "sink": 0.5, "source": 0.5, "query": 0.5, "first_batch": 1.0,
        "first_commit": 1.5}
    assert relaunch_steps(timelines, killed_at=300.0) is None, "no launch after that kill printed its timeline"
    measured = EngineRecovery("spark", first_commit_s=[11.5, 9.0, 30.0], recovery_s=[13.0, 12.0, 31.0],
                              steps_s=[{"python": 3.0, "session": 3.5}, {"python": 2.0, "session": 4.5}])
    summary = measured.summary()
    assert summary["first_commit_s"] == {"median": 11.5, "max": 30.0} and summary["recovery_s"]["median"] == 13.0
    assert summary["spark_steps_median_s"] == {"python": 2.5, "session": 4.0} and summary["rounds"] == 3


def test_the_drivers_start_timeline_is_one_line_of_marks_each_kept_at_its_first_time():
    from streaming.start_timeline import START_TIMELINE, StartTimeline, process_started_at
    timeline = StartTimeline()
    began = process_started_at()
    assert began is not None and began <= time.time() and timeline.marks["python"] == began
    timeline.mark("session", 50.0)
    timeline.mark("session", 60.0)
    assert timeline.line() == START_TIMELINE + json.dumps({"python": round(began, 3), "session": 50.0})


def test_recovery_is_plotted_per_engine_with_the_rounds_spread(tmp_path):
    from eosbench.bench.recovery import EngineRecovery, plot
    measured = [EngineRecovery("spark", first_commit_s=[18.0, 20.5], recovery_s=[18.5, 21.0]),
                EngineRecovery("kafka-streams", first_commit_s=[2.6], recovery_s=[3.1]), EngineRecovery("flink")]
    assert plot(measured, tmp_path / "recovery.png", 5000, 16).stat().st_size > 0



def test_a_soak_on_a_busy_cluster_can_wait_longer_for_each_recovery():
    from eosbench.cli import build_parser
    from eosbench.soak.commands import soak_options

    def options(*flags: str) -> SoakOptions:
        return soak_options(build_parser().parse_args(["soak", "--duration", "1m", "--faults", "kill-driver", *flags]))
    assert options().recovery_timeout_s == 240
    assert options("--recovery-timeout", "600").recovery_timeout_s == 600
