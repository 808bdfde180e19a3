"""The exactly-once streaming job on the real broker and real Spark.

Every check ends in the verifier's exact multiset comparison of ids (and its other invariants),
plus direct assertions on what the job reports.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka import KafkaException, Producer

from conf.stream_settings import StreamSettings
from eosbench.kafka_admin import create_topic
from streaming import job
from streaming.verify import verify
from tests.integration.kafka_reads import read_all
from tests.integration.produce_helpers import produce


@pytest.fixture
def pipeline(bootstrap, new_topic, tmp_path):
    """A filled input (abort ratio 0.3), an empty output and its dead-letter topic, and settings."""
    source, sink = new_topic(partitions=3, prefix="in"), new_topic(partitions=3, prefix="out")
    create_topic(bootstrap, f"{sink}.dlq", 1, 1)
    produce(bootstrap, source, 12_000, records_per_transaction=500, abort_ratio=0.3, seed=4)

    def settings(**overrides) -> StreamSettings:
        fields = dict(input_topic=source, output_topic=sink, bootstrap_server=bootstrap, app_id=f"app-{sink}",
                      checkpoint=tmp_path / "checkpoint", max_offsets_per_trigger=3_000)
        return StreamSettings(**{**fields, **overrides})

    return settings


def assert_exactly_once(bootstrap: str, settings: StreamSettings, expect_dead: int = 0):
    """The verifier finds nothing, and every committed input id arrived exactly once."""
    report = verify(bootstrap, settings.input_topic, settings.output_topic, settings.app_id, settings.dead_letter)
    assert report.violations == []
    assert report.output_committed + report.dead_lettered == report.input_committed
    assert report.dead_lettered == expect_dead
    assert report.input_aborted > 0, "the input must hold aborted transactions for this to mean anything"
    return report


def test_exactly_once_with_aborted_input_and_eos_headers(bootstrap, spark, pipeline):
    settings = pipeline()
    summary = job.run(spark, settings)
    report = assert_exactly_once(bootstrap, settings)
    assert summary.records_out == report.output_committed
    assert summary.batches >= 3 and summary.outcomes["committed"] >= 3
    assert summary.latency_p99_ms > 0


def test_replayed_batch_is_skipped_not_rewritten(bootstrap, spark, pipeline):
    settings = pipeline()
    job.run(spark, settings)
    # Forget that Spark finished the last batch with records: it replays it with the same ranges,
    # which is what a driver crash between the sink's commit and Spark's commit log looks like.
    commits = sorted(int(p.name) for p in (settings.checkpoint_dir / "commits").iterdir() if p.name.isdigit())
    for batch_id in commits[-2:]:
        (settings.checkpoint_dir / "commits" / str(batch_id)).unlink()
        (settings.checkpoint_dir / "commits" / f".{batch_id}.crc").unlink(missing_ok=True)
    replay = job.run(spark, settings)
    assert replay.outcomes["skipped_replay"] >= 1
    assert replay.records_out == 0
    assert_exactly_once(bootstrap, settings)


def test_driver_killed_after_sink_commit_before_spark_commit_log(bootstrap, pipeline):
    settings = pipeline()
    args = ["--input-topic", settings.input_topic, "--output-topic", settings.output_topic, "--bootstrap-server",
            bootstrap, "--app-id", settings.app_id, "--checkpoint", str(settings.checkpoint_dir),
            "--max-offsets-per-trigger", "3000"]
    summary_file = settings.checkpoint_dir.parent / "restarted.json"
    command = [sys.executable, "-m", "eosbench.cli", "stream", *args, "--output-json", str(summary_file)]
    crashed = subprocess.run(command, capture_output=True, text=True, timeout=300,
                             env={**os.environ, "EOSBENCH_FAULT": "kill-driver-after-sink-commit:1"})
    assert crashed.returncode == -9, crashed.stderr[-2000:]
    assert (settings.checkpoint_dir / "offsets" / "1").exists()
    assert not (settings.checkpoint_dir / "commits" / "1").exists(), "the kill must land before Spark's commit log"
    restarted = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert restarted.returncode == 0, restarted.stderr[-2000:]
    summary = json.loads(summary_file.read_text())
    assert summary["outcomes"]["skipped_replay"] >= 1, "batch 1 is replayed and its committed slices skipped"
    assert_exactly_once(bootstrap, settings)


def test_task_failing_after_produce_before_commit_is_retried_exactly_once(bootstrap, spark, pipeline, monkeypatch):
    settings = pipeline()
    monkeypatch.setenv("EOSBENCH_FAULT", "fail-task-before-commit:0:0")
    summary = job.run(spark, settings)
    assert summary.records_out > 0
    assert_exactly_once(bootstrap, settings)


def test_lost_checkpoint_resumes_from_group_offsets(bootstrap, spark, pipeline):
    settings = pipeline()
    job.run(spark, settings)
    more = produce(bootstrap, settings.input_topic, 15_000, records_per_transaction=500, abort_ratio=0.3, seed=5,
                   resume=True)
    assert more.first_seq > 0 and more.records_committed > 0
    shutil.rmtree(settings.checkpoint_dir)
    resumed = job.run(spark, pipeline(starting_offsets="group"))
    assert resumed.records_in == more.records_committed, "only what came after the group's offsets is read"
    assert_exactly_once(bootstrap, settings)


def test_batch_scope_is_exactly_once_and_skips_replays(bootstrap, spark, pipeline):
    settings = pipeline(txn_scope="batch")
    summary = job.run(spark, settings)
    assert summary.records_out > 0
    for commit in (settings.checkpoint_dir / "commits").iterdir():
        commit.unlink()
    assert job.run(spark, settings).records_out == 0
    assert_exactly_once(bootstrap, settings)


def test_poison_records_go_to_the_dead_letter_topic_in_the_same_transaction(bootstrap, spark, pipeline):
    settings = pipeline()
    poison = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{settings.input_topic}.poison"})
    poison.init_transactions(30)
    poison.begin_transaction()
    for seq in (90_000, 90_001, 90_002):
        poison.produce(settings.input_topic, b"POISON record", str(seq).encode())
    poison.commit_transaction(30)
    summary = job.run(spark, settings)
    assert summary.records_dead_lettered == 3
    assert sorted(int(k) for k in read_all(bootstrap, settings.dead_letter)) == [90_000, 90_001, 90_002]
    assert_exactly_once(bootstrap, settings, expect_dead=3)


def test_zombie_writer_is_fenced_and_its_transaction_never_visible(bootstrap, new_topic):
    topic = new_topic()
    zombie = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{topic}.T"})
    zombie.init_transactions(30)
    zombie.begin_transaction()
    zombie.produce(topic, b"zombie", b"1")
    zombie.flush(30)
    successor = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{topic}.T"})
    successor.init_transactions(30)  # bumps the epoch: fences the zombie, aborts its transaction
    with pytest.raises(KafkaException) as fenced:
        zombie.commit_transaction(30)
    assert fenced.value.args[0].fatal()
    successor.begin_transaction()
    successor.produce(topic, b"successor", b"2")
    successor.commit_transaction(30)
    assert read_all(bootstrap, topic) == [b"2"]


def test_verifier_catches_a_duplicate_a_loss_and_an_aborted_read(bootstrap, spark, pipeline):
    settings = pipeline()
    job.run(spark, settings)
    assert verify(bootstrap, settings.input_topic, settings.output_topic).ok

    planted = Producer({"bootstrap.servers": bootstrap})
    first = read_all(bootstrap, settings.output_topic)[0]
    src = f"{settings.input_topic}:0:0".encode()
    planted.produce(settings.output_topic, b"dup", first, headers=[("eos.src", src)])  # a duplicate id
    planted.flush(30)
    report = verify(bootstrap, settings.input_topic, settings.output_topic)
    assert report.duplicates == 1 and not report.ok

    loss = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{settings.input_topic}.late"})
    loss.init_transactions(30)
    loss.begin_transaction()
    loss.produce(settings.input_topic, b"never streamed", b"77777")
    loss.commit_transaction(30)
    report = verify(bootstrap, settings.input_topic, settings.output_topic)
    assert report.lost == 1 and report.samples["lost"] == [77777]

    aborted_offsets = _an_aborted_input_offset(bootstrap, settings.input_topic)
    planted.produce(settings.output_topic, b"from aborted", b"88888",
                    headers=[("eos.src", f"{settings.input_topic}:{aborted_offsets[0]}:{aborted_offsets[1]}".encode())])
    planted.flush(30)
    report = verify(bootstrap, settings.input_topic, settings.output_topic)
    assert report.aborted_reads == 1 and report.samples["aborted_reads"] == [88888]


def _an_aborted_input_offset(bootstrap: str, topic: str) -> tuple[int, int]:
    from streaming.verify import read_index

    committed = read_index(bootstrap, topic, "read_committed", with_src=False)
    everything = read_index(bootstrap, topic, "read_uncommitted", with_src=False)
    visible = set(zip(committed.partition.tolist(), committed.offset.tolist()))
    for partition, offset in zip(everything.partition.tolist(), everything.offset.tolist()):
        if (partition, offset) not in visible:
            return partition, offset
    raise AssertionError("no aborted input record")


def test_a_split_or_a_shuffle_before_the_sink_is_refused_before_anything_is_written(bootstrap, spark, pipeline):
    from streaming.eos_sink import SinkPreconditionError, TransactionalSink
    from streaming.reader import read_topic

    settings = pipeline()
    offsets = settings.checkpoint_dir / "offsets"
    offsets.mkdir(parents=True)
    ends = {str(p): end for p, (_, end) in __import__("streaming.verify", fromlist=["x"])
            .stable_and_end_offsets(bootstrap, settings.input_topic).items()}
    (offsets / "0").write_text('v1\n{}\n' + json.dumps({settings.input_topic: ends}) + "\n")
    sink = TransactionalSink(settings, spark)
    batch = read_topic(spark, bootstrap, settings.input_topic)
    with pytest.raises(SinkPreconditionError, match="Spark partitions for 3 Kafka partitions"):
        sink(batch.repartition(5), 0)
    with pytest.raises(Exception, match="several input partitions"):
        sink(batch.coalesce(1), 0)
    assert read_all(bootstrap, settings.output_topic) == []


def test_at_least_once_baseline_delivers_every_committed_record(bootstrap, spark, pipeline):
    settings = pipeline(sink="kafka-alo")
    summary = job.run(spark, settings)
    report = verify(bootstrap, settings.input_topic, settings.output_topic)
    assert summary.input_rows == report.input_committed
    assert report.lost == 0 and report.aborted_reads == 0 and report.unexpected == 0
    assert report.output_committed == report.input_committed + report.duplicates


def test_delta_baseline_is_idempotent_across_a_replayed_batch(bootstrap, spark, pipeline, tmp_path):
    from collections import Counter

    settings = pipeline(sink="delta", delta_path=tmp_path / "table")
    job.run(spark, settings)
    for commit in (settings.checkpoint_dir / "commits").iterdir():
        commit.unlink()  # Spark replays every batch; txnAppId/txnVersion make each append a no-op
    job.run(spark, settings)
    committed = verify(bootstrap, settings.input_topic, settings.output_topic).input_committed
    rows = spark.read.format("delta").load(str(settings.delta_path)).selectExpr("cast(key as string) k").collect()
    seen = Counter(int(row.k) for row in rows)
    assert sum(seen.values()) == committed and max(seen.values()) == 1


@pytest.mark.heavy
def test_job_runs_under_plain_spark_submit(bootstrap, pipeline):
    from eosbench.jars import resolve_bundle

    settings = pipeline()
    spark_submit = Path(sys.executable).parent / "spark-submit"
    jars = ",".join(str(jar) for jar in resolve_bundle("spark"))
    completed = subprocess.run(
        [str(spark_submit), "--master", "local[2,4]", "--jars", jars, str(Path(job.__file__)),
         "--input-topic", settings.input_topic, "--output-topic", settings.output_topic,
         "--bootstrap-server", bootstrap, "--app-id", settings.app_id, "--checkpoint", str(settings.checkpoint_dir)],
        capture_output=True, text=True, timeout=300, env={**os.environ, "PYSPARK_PYTHON": sys.executable})
    assert completed.returncode == 0, completed.stderr[-2000:]
    assert_exactly_once(bootstrap, settings)


def test_driver_metrics_agree_with_the_run_and_the_verifier(bootstrap, spark, pipeline):
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    settings = pipeline(metrics_port=19501)
    summary = job.run(spark, settings)
    report = verify(bootstrap, settings.input_topic, settings.output_topic, settings.app_id)
    text = urllib.request.urlopen("http://127.0.0.1:19501/metrics", timeout=5).read().decode()
    checked = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    samples = {(s.name, tuple(sorted((k, v) for k, v in s.labels.items() if k not in ("app_id", "sink")))): s.value
               for family in text_string_to_metric_families(text) for s in family.samples}
    assert samples[("eosbench_stream_output_records_total", ())] == report.output_committed == summary.records_out
    assert samples[("eosbench_stream_input_records_total", ())] == report.input_committed == summary.input_rows
    span = samples[("eosbench_stream_offset_span_total", ())]
    assert span == report.input_committed + report.input_aborted + _markers(bootstrap, settings.input_topic)
    assert samples[("eosbench_stream_aborted_ratio", ())] == pytest.approx(1 - report.input_committed / span)
    assert samples[("eosbench_stream_consumer_lag_records", ())] == 0
    assert samples[("eosbench_sink_transactions_total", (("outcome", "committed"),))] == summary.outcomes["committed"]
    assert samples[("eosbench_stream_end_to_end_latency_seconds_count", ())] == summary.records_out


def _markers(bootstrap: str, topic: str) -> int:
    """Offsets taken by transaction markers: the end offsets minus every record, committed or not."""
    from streaming.verify import read_index, stable_and_end_offsets

    ends = sum(end for _, end in stable_and_end_offsets(bootstrap, topic).values())
    return ends - read_index(bootstrap, topic, "read_uncommitted", with_src=False).seq.size
