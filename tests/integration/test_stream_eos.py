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
import time
from dataclasses import replace
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from conf.stream_settings import StreamSettings
from eosbench.local.hadoop_fs import fs_shell
from eosbench.local.kafka_admin import create_topic
from streaming import job
from streaming.sink import clients as sink_clients
from streaming.process import SourceSlice
from streaming.sink.task import run_transaction
from streaming.task_plan import TaskPlan, transactional_id
from streaming.verify.verifier import group_offsets, stable_and_end_offsets, verify, wait_until_stable
from tests.integration.kafka_reads import read_all
from tests.integration.produce_helpers import commit_keys, produce
from tests.integration.stream_checks import assert_exactly_once, local_checkpoint, logged_batches


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
    commits = sorted(int(p.name) for p in (local_checkpoint(settings) / "commits").iterdir() if p.name.isdigit())
    for batch_id in commits[-2:]:
        (local_checkpoint(settings) / "commits" / str(batch_id)).unlink()
        (local_checkpoint(settings) / "commits" / f".{batch_id}.crc").unlink(missing_ok=True)
    replay = job.run(spark, settings)
    assert replay.outcomes["skipped_replay"] >= 1
    assert replay.records_out == 0
    assert_exactly_once(bootstrap, settings)


# Slot scope with its checkpoint on HDFS, the cluster setup; the SASL soak's kill-driver rounds
# cover partition scope with a checkpoint on the local disk.
@pytest.mark.parametrize("checkpoint", ["hdfs"], indirect=True)
def test_driver_killed_after_sink_commit_before_spark_commit_log(bootstrap, spark, pipeline, checkpoint):
    settings = pipeline(txn_scope="slot")
    command = [sys.executable, "-m", "eosbench.cli", "stream", "--input-topic", settings.input_topic, "--output-topic",
               settings.output_topic, "--bootstrap-server", bootstrap, "--app-id", settings.app_id, "--checkpoint",
               checkpoint, "--max-offsets-per-trigger", "3000", "--txn-scope", "slot"]
    # Only the crash needs a driver of its own, for the SIGKILL: the restart is the session's, a JVM
    # start cheaper, and reads the same checkpoint and group as a new process would.
    crashed = subprocess.run(command, capture_output=True, text=True, timeout=300,
                             env={**os.environ, "EOSBENCH_FAULT": "kill-driver-after-sink-commit:1"})
    assert crashed.returncode == -9, crashed.stderr[-2000:]
    assert logged_batches(settings) == {"offsets": {0, 1}, "commits": {0}}, "the kill lands before Spark's commit log"
    restarted = job.run(spark, settings)
    assert restarted.outcomes["skipped_replay"] >= 1, "batch 1 is replayed and its committed slots skipped"
    assert_exactly_once(bootstrap, settings)


def test_task_failing_after_produce_before_commit_is_retried_exactly_once(bootstrap, spark, pipeline, monkeypatch):
    settings = pipeline()
    monkeypatch.setenv("EOSBENCH_FAULT", "fail-task-before-commit:0:0")
    summary = job.run(spark, settings)
    assert summary.records_out > 0
    assert_exactly_once(bootstrap, settings)


@pytest.mark.parametrize("failed_attempt", ["failed in its code", "killed after sending its offsets"])
def test_a_retry_on_a_worker_with_an_older_producer_fences_the_failed_attempt_at_once(bootstrap, new_topic,
                                                                                      failed_attempt):
    """Spark retries a failed task on whichever Python worker is free, and that worker may hold T(p)'s
    producer from an earlier batch, never told of the failed attempt's newer one. The failed attempt's
    transaction, with its offsets sent, kept the group's offsets unstable, and the retry's stable read
    waited out its one-minute bound before a new producer fenced that transaction."""
    source, sink = new_topic(), new_topic()
    create_topic(bootstrap, f"{sink}.dlq", 1, 1)
    produce(bootstrap, source, 100, records_per_transaction=100)
    end = wait_and_end(bootstrap, source)
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": f"app-{sink}", "isolation.level": "read_committed"})
    plan = TaskPlan(app_id=f"app-{sink}", output_topic=sink, dead_letter_topic=f"{sink}.dlq", process="passthrough",
                    producer_config={"bootstrap.servers": bootstrap, "linger.ms": "5"},
                    group_metadata=reader.consumer_group_metadata(), end_offsets={0: end}, max_retries=5,
                    pre_register=False, batch_id=0, fault=None, input_partitions=1)
    txn_id, records = transactional_id(plan.app_id, source, 0), input_slice(source, 100)
    key = sink_clients.producer_key(plan, txn_id)
    sink_clients.cached_producer(plan, key, {"init": 0.0})  # this worker's, from an earlier batch
    older = sink_clients._PRODUCERS.pop(key)
    if failed_attempt == "failed in its code":  # on another worker, by the test's fault hook (no task: it always fires)
        with pytest.raises(RuntimeError, match="injected fault"):
            run_transaction(replace(plan, fault="fail-task-before-commit:0:0"), txn_id, [records], {(source, 0): end})
    else:  # an executor killed after send_offsets_to_transaction: nothing can abort its transaction
        killed = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id})
        killed.init_transactions(30)
        killed.begin_transaction()
        killed.produce(sink, b"from the killed attempt", b"0")
        killed.send_offsets_to_transaction([TopicPartition(source, 0, end)], plan.group_metadata, 30)
        assert killed.flush(30) == 0
    sink_clients._PRODUCERS[key] = older  # Spark's retry lands on this worker
    try:
        started = time.monotonic()
        row = run_transaction(plan, txn_id, [records], {(source, 0): end})
        took = time.monotonic() - started
    finally:
        sink_clients.drop_producer(key)
        reader.close()
    assert row["outcome"] == "committed" and row["records_out"] == 100
    assert took < 10, f"the retry took {took:.0f} s: it waited on the failed attempt's open transaction"
    assert sorted(int(k) for k in read_all(bootstrap, sink)) == list(range(100))
    assert group_offsets(bootstrap, plan.app_id, source, [0]) == {0: end}


def wait_and_end(bootstrap: str, topic: str) -> int:
    """Partition 0's end offset, once no transaction is open on it."""
    assert wait_until_stable(bootstrap, [topic], timeout_s=30) == []
    return stable_and_end_offsets(bootstrap, topic)[0][1]


def input_slice(topic: str, records: int) -> SourceSlice:
    """Partition 0 of an input `eosbench produce` filled with one transaction, as a sink task receives it."""
    now_ms = int(time.time() * 1000)
    keys = [str(seq).encode() for seq in range(records)]
    return SourceSlice(keys=keys, values=keys, offsets=list(range(records)), timestamps=[now_ms] * records,
                       src=[f"{topic}:0:{o}".encode() for o in range(records)], in_ts=[str(now_ms).encode()] * records,
                       topic=topic, partition=0)


@pytest.mark.parametrize("checkpoint", ["file-uri", "hdfs"], indirect=True)
def test_lost_checkpoint_resumes_from_group_offsets(bootstrap, spark, pipeline, tmp_path):
    settings = pipeline()
    job.run(spark, settings)
    more = produce(bootstrap, settings.input_topic, 15_000, records_per_transaction=500, abort_ratio=0.3, seed=5,
                   resume=True)
    assert more.first_seq > 0 and more.records_committed > 0
    fs_shell("-rm", "-r", "-f", settings.checkpoint_uri)  # as the soak's delete-checkpoint fault does
    assert not exists_through_hadoop(spark, settings.checkpoint_uri)
    # `eosbench stream` without --txn-scope (auto) keeps the scope that wrote the group's offsets:
    # partition, here, where a new group gets slot scope (test_s3_checkpoint.py).
    summary = tmp_path / "resumed.json"
    command = [sys.executable, "-m", "eosbench.cli", "stream", "--input-topic", settings.input_topic, "--output-topic",
               settings.output_topic, "--bootstrap-server", bootstrap, "--app-id", settings.app_id, "--checkpoint",
               settings.checkpoint, "--starting-offsets", "group", "--max-offsets-per-trigger", "3000",
               "--output-json", str(summary)]
    resumed = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    chosen = (f"txn scope: partition (auto: group {settings.group_id!r} holds offsets partition scope committed);"
              " source: spark (partition scope needs a task per Kafka partition)")
    assert resumed.stdout.splitlines()[0] == chosen, resumed.stdout[:500]
    resumed_summary = json.loads(summary.read_text())
    assert resumed_summary["records_in"] == more.records_committed, "only what came after the group's offsets is read"
    assert resumed_summary["txn_scope"] == "partition"
    assert_exactly_once(bootstrap, settings)


def exists_through_hadoop(spark, uri: str) -> bool:
    """Whether a file or folder is there, asked through the session's Hadoop client (FsShell would start a JVM)."""
    path = spark._jvm.org.apache.hadoop.fs.Path(uri)
    return path.getFileSystem(spark._jsc.hadoopConfiguration()).exists(path)


def test_the_kafka_python_sink_client_is_exactly_once_without_pre_registration(bootstrap, spark, pipeline):
    """`--sink-client kafka-python`: the switched-off arm of bench spark's same-client comparison."""
    settings = pipeline(sink_client="kafka-python")
    summary = job.run(spark, settings)
    report = assert_exactly_once(bootstrap, settings)
    assert summary.records_out == report.output_committed and summary.register_round_trips == 0


def test_batch_scope_is_exactly_once_and_skips_replays(bootstrap, spark, pipeline):
    settings = pipeline(txn_scope="batch")
    summary = job.run(spark, settings)
    assert summary.records_out > 0
    for commit in (local_checkpoint(settings) / "commits").iterdir():
        commit.unlink()
    # The replay reads through the grouped source, on the checkpoint Spark's source wrote.
    assert job.run(spark, settings.model_copy(update={"source": "grouped"})).records_out == 0
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
    first = first_record(bootstrap, settings.output_topic)
    planted.produce(settings.output_topic, b"dup", first.key(), headers=first.headers())  # a second delivery
    planted.flush(30)
    report = verify(bootstrap, settings.input_topic, settings.output_topic)
    assert report.duplicates == 1 and report.samples["duplicates"] == [int(first.key())] and not report.ok

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


def first_record(bootstrap: str, topic: str):
    """The first committed record of a topic's partition 0, headers and all."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "first-record", "isolation.level": "read_committed",
                         "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        message = consumer.poll(30)
        assert message is not None and message.error() is None
        return message
    finally:
        consumer.close()


def _an_aborted_input_offset(bootstrap: str, topic: str) -> tuple[int, int]:
    from streaming.verify.verifier import read_index

    committed = read_index(bootstrap, topic, "read_committed", with_src=False)
    everything = read_index(bootstrap, topic, "read_uncommitted", with_src=False)
    visible = set(zip(committed.partition.tolist(), committed.offset.tolist()))
    for partition, offset in zip(everything.partition.tolist(), everything.offset.tolist()):
        if (partition, offset) not in visible:
            return partition, offset
    raise AssertionError("no aborted input record")


def test_a_split_or_a_shuffle_before_the_sink_is_refused_before_anything_is_written(bootstrap, spark, pipeline):
    from streaming.source.checkpoint import CheckpointLog
    from streaming.sink.driver import SinkPreconditionError, TransactionalSink
    from streaming.reader import read_topic

    settings = pipeline()
    offsets = local_checkpoint(settings) / "offsets"
    offsets.mkdir(parents=True)
    ends = {str(p): end for p, (_, end) in __import__("streaming.verify.verifier", fromlist=["x"])
            .stable_and_end_offsets(bootstrap, settings.input_topic).items()}
    (offsets / "0").write_text('v1\n{}\n' + json.dumps({settings.input_topic: ends}) + "\n")
    sink = TransactionalSink(settings, spark, CheckpointLog(spark, settings.checkpoint_uri))
    batch = read_topic(spark, bootstrap, settings.input_topic)
    with pytest.raises(SinkPreconditionError, match="has 5 Spark partitions for 3 Kafka partitions"):
        sink(batch.repartition(5), 0)
    with pytest.raises(SinkPreconditionError, match="has 1 Spark partitions for 3 Kafka partitions"):
        sink(batch.coalesce(1), 0)
    assert read_all(bootstrap, settings.output_topic, "read_uncommitted") == []


@pytest.mark.parametrize("source", ["spark", "grouped"])
def test_at_least_once_baseline_delivers_every_committed_record(bootstrap, spark, pipeline, source):
    settings = pipeline(sink="kafka-alo", source=source)
    summary = job.run(spark, settings)
    report = verify(bootstrap, settings.input_topic, settings.output_topic)
    assert summary.input_rows == report.input_committed
    assert report.lost == 0 and report.aborted_reads == 0 and report.unexpected == 0
    assert report.output_committed == report.input_committed + report.duplicates


def test_delta_baseline_is_idempotent_across_a_replayed_batch(bootstrap, spark, pipeline, tmp_path):
    from collections import Counter

    # One batch: each is a Delta commit of its own, and a restart runs only the last batch again anyway.
    settings = pipeline(sink="delta", delta_path=tmp_path / "table", max_offsets_per_trigger=None)
    assert job.run(spark, settings).batches == 1
    for commit in (local_checkpoint(settings) / "commits").iterdir():
        commit.unlink()  # Spark runs the batch again; txnAppId/txnVersion make its append a no-op
    # ... read again through the grouped source, on the checkpoint Spark's source wrote.
    assert job.run(spark, settings.model_copy(update={"source": "grouped"})).batches == 1
    committed = verify(bootstrap, settings.input_topic, settings.output_topic).input_committed
    rows = spark.read.format("delta").load(str(settings.delta_path)).selectExpr("cast(key as string) k").collect()
    seen = Counter(int(row.k) for row in rows)
    assert sum(seen.values()) == committed and max(seen.values()) == 1


@pytest.mark.heavy
def test_job_runs_under_plain_spark_submit(bootstrap, pipeline):
    from eosbench.local.jars import resolve_bundle

    settings = pipeline()
    spark_submit = Path(sys.executable).parent / "spark-submit"
    jars = ",".join(str(jar) for jar in resolve_bundle("spark"))
    completed = subprocess.run(
        [str(spark_submit), "--master", "local[2,4]", "--jars", jars, str(Path(job.__file__)),
         "--input-topic", settings.input_topic, "--output-topic", settings.output_topic,
         "--bootstrap-server", bootstrap, "--app-id", settings.app_id, "--checkpoint", str(local_checkpoint(settings))],
        capture_output=True, text=True, timeout=300, env={**os.environ, "PYSPARK_PYTHON": sys.executable})
    assert completed.returncode == 0, completed.stderr[-2000:]
    assert_exactly_once(bootstrap, settings)


def test_driver_metrics_agree_with_the_run_and_the_verifier(bootstrap, spark, pipeline, tmp_path):
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    from streaming.verify.visibility import READY_MARGIN_S, read_log

    settings = pipeline(metrics_port=19501, visibility_log=tmp_path / "visibility.log")
    commits = []
    summary = job.run(spark, settings, on_batch=lambda batch: commits.extend(batch.commits))
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
    # Every commit that wrote records and returned once the observer was reading was seen, once.
    visibility = summary.visibility
    assert len({txn for txn, _ in commits}) == len(commits) > 0
    assert visibility["unseen"] == 0 and visibility["samples"] + visibility["left_out"] == len(commits)
    # The observer is positioned before the first batch, so only commits that returned within its
    # READY_MARGIN_S of the first one are left out; how many batches that is depends on the machine.
    commit_times = sorted(at for _, at in commits)
    left_out, timed_commits = commit_times[:visibility["left_out"]], commit_times[visibility["left_out"]:]
    assert visibility["samples"] > 0 and all(at < commit_times[0] + READY_MARGIN_S for at in left_out)
    logged = read_log(settings.visibility_log)
    assert len(logged) == visibility["samples"] and all(0 <= seconds < 10 for _, seconds in logged)
    assert sorted(commit for commit, _ in logged) == pytest.approx(timed_commits, abs=1e-5)
    assert samples[("eosbench_stream_visibility_seconds_count", ())] == visibility["samples"]


def _markers(bootstrap: str, topic: str) -> int:
    """Offsets taken by transaction markers: the end offsets minus every record, committed or not."""
    from streaming.verify.verifier import read_index, stable_and_end_offsets

    ends = sum(end for _, end in stable_and_end_offsets(bootstrap, topic).values())
    return ends - read_index(bootstrap, topic, "read_uncommitted", with_src=False).seq.size


# ----------------------------------------------------------------------------- what the sink refuses


@pytest.fixture
def data_in_partition_0_only(bootstrap, new_topic, tmp_path):
    """Three input partitions with 30 committed records in partition 0 alone; settings for them."""
    source, sink = new_topic(partitions=3, prefix="in"), new_topic(partitions=3, prefix="out")
    create_topic(bootstrap, f"{sink}.dlq", 1, 1)
    commit_keys(bootstrap, source, range(30))

    def settings(**overrides) -> StreamSettings:
        # Partition scope by name: the split refusals are its own (auto gives the new group slot scope,
        # whose coalesced task takes a split partition's pieces together).
        fields = dict(input_topic=source, output_topic=sink, bootstrap_server=bootstrap, app_id=f"app-{sink}",
                      checkpoint=tmp_path / "checkpoint", txn_scope="partition")
        return StreamSettings(**{**fields, **overrides})

    return settings


def assert_nothing_written(bootstrap: str, settings: StreamSettings) -> None:
    """No group offset, and not even an aborted record, on the output or the dead-letter topic."""
    from streaming.verify.verifier import group_offsets

    assert group_offsets(bootstrap, settings.app_id, settings.input_topic, [0, 1, 2]) == {0: -1, 1: -1, 2: -1}
    for topic in (settings.output_topic, settings.dead_letter):
        assert read_all(bootstrap, topic, "read_uncommitted") == []


@pytest.mark.parametrize("option", ["minPartitions=3", "maxRecordsPerPartition=11"])
def test_a_split_partition_is_refused_before_anything_is_committed(bootstrap, spark, data_in_partition_0_only,
                                                                     option):
    from streaming.sink.driver import SinkPreconditionError

    settings = data_in_partition_0_only(source_options=(option,))
    with pytest.raises(SinkPreconditionError, match=r"batch 0 has 3 Spark partitions for 1 Kafka partitions with"
                                                    r" new offsets") as refused:
        job.run(spark, settings)
    assert "\n" not in str(refused.value)
    assert_nothing_written(bootstrap, settings)


def test_each_task_refuses_a_split_the_driver_did_not_see(bootstrap, spark, data_in_partition_0_only, monkeypatch):
    from streaming.sink.driver import SinkPreconditionError

    monkeypatch.setenv("EOSBENCH_FAULT", "blind-driver-split-check")
    settings = data_in_partition_0_only(source_options=("minPartitions=3",))
    with pytest.raises(SinkPreconditionError, match=r"planned to read in-\w+\[0\] offsets \d+\.\.\d+ of the batch's"
                                                    r" 0\.\.31") as refused:
        job.run(spark, settings)
    assert "\n" not in str(refused.value)
    assert_nothing_written(bootstrap, settings)


def test_source_options_reach_spark_and_an_unsplit_batch_runs(bootstrap, spark, data_in_partition_0_only):
    settings = data_in_partition_0_only(source_options=("minPartitions=1", "kafka.fetch.max.bytes=1048576"))
    summary = job.run(spark, settings)
    assert summary.records_out == 30
    assert wait_until_stable(bootstrap, [settings.output_topic], timeout_s=30) == []
    assert sorted(int(k) for k in read_all(bootstrap, settings.output_topic)) == list(range(30))


def test_a_restart_with_the_other_txn_scope_is_refused(bootstrap, spark, pipeline):
    from confluent_kafka import Consumer

    from streaming.sink.driver import SinkPreconditionError
    from streaming.group import read_committed_offsets

    settings = pipeline()
    job.run(spark, settings)
    shutil.rmtree(local_checkpoint(settings))
    with pytest.raises(SinkPreconditionError, match="committed with --txn-scope partition") as refused:
        job.run(spark, pipeline(txn_scope="batch", starting_offsets="group"))
    assert "\n" not in str(refused.value)
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": settings.app_id, "isolation.level": "read_committed"})
    committed = read_committed_offsets(reader, settings.input_topic, range(3), settings.app_id)
    reader.close()
    assert {c.scope for c in committed.values()} == {"partition"}, "librdkafka's commits carry the scope"
    assert_exactly_once(bootstrap, settings)


def test_a_replay_whose_group_offsets_expired_is_refused(bootstrap, spark, pipeline):
    from kafka import TopicPartition
    from kafka.admin import KafkaAdminClient

    from streaming.sink.driver import SinkPreconditionError

    settings = pipeline()
    job.run(spark, settings)
    # The driver died between the sink's commit and Spark's commit log, and stayed down for longer
    # than offsets.retention.minutes: Spark runs the last batch again, and the group has no offsets.
    last = max(int(p.name) for p in (local_checkpoint(settings) / "commits").iterdir() if p.name.isdigit())
    (local_checkpoint(settings) / "commits" / str(last)).unlink()
    (local_checkpoint(settings) / "commits" / f".{last}.crc").unlink(missing_ok=True)
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.delete_group_offsets(settings.app_id, [TopicPartition(settings.input_topic, p) for p in range(3)])
    admin.close()
    with pytest.raises(SinkPreconditionError, match=rf"batch {last} is run again after a restart, but group"
                                                    rf" '{settings.app_id}' has offset -1 for") as refused:
        job.run(spark, settings)
    assert "\n" not in str(refused.value)
    report = verify(bootstrap, settings.input_topic, settings.output_topic, None, settings.dead_letter)
    assert report.violations == [] and report.output_committed == report.input_committed


def test_a_batch_that_would_skip_committed_records_is_refused(bootstrap, spark, pipeline):
    from streaming.sink.driver import SinkPreconditionError

    settings = pipeline()
    job.run(spark, settings)
    produce(bootstrap, settings.input_topic, 15_000, records_per_transaction=500, abort_ratio=0.3, seed=4, resume=True)
    # A second writer of the checkpoint's last batch id (two drivers, or a log restored from elsewhere) left an
    # offsets entry that ends above what the sink committed for that batch. Before, the next batch started
    # there and committed past the records in between: lost, with nothing to tell.
    before = group_offsets(bootstrap, settings.app_id, settings.input_topic, [0, 1, 2])
    offsets = local_checkpoint(settings) / "offsets"
    last = max(int(p.name) for p in offsets.iterdir() if p.name.isdigit())
    header, metadata, ends = (offsets / str(last)).read_text().splitlines()
    moved = json.loads(ends)
    moved[settings.input_topic]["0"] += 700
    (offsets / str(last)).write_text("\n".join([header, metadata, json.dumps(moved)]))
    (offsets / f".{last}.crc").unlink(missing_ok=True)
    with pytest.raises(SinkPreconditionError, match=rf"^batch {last + 1} starts {settings.input_topic}\[0\] at offset"
                                                    rf" {moved[settings.input_topic]['0']}, but group"
                                                    rf" '{settings.app_id}' committed only up to \d+ and the input holds"
                                                    r" committed records in between") as refused:
        job.run(spark, settings)
    assert "\n" not in str(refused.value)
    assert group_offsets(bootstrap, settings.app_id, settings.input_topic, [0])[0] == before[0], "nothing skipped"
    report = verify(bootstrap, settings.input_topic, settings.output_topic, settings.app_id, settings.dead_letter,
                    live=True)
    assert report.violations == [], "what the group's offsets cover was delivered once each"


# ----------------------------------------------------------------------------- the verifier's multisets


def test_repeated_input_keys_delivered_once_each_pass(bootstrap, spark, new_topic, tmp_path):
    source, sink = new_topic(prefix="in"), new_topic(prefix="out")
    create_topic(bootstrap, f"{sink}.dlq", 1, 1)
    commit_keys(bootstrap, source, [1, 2, 2, 3, 3, 3])
    settings = StreamSettings(input_topic=source, output_topic=sink, bootstrap_server=bootstrap, app_id=f"app-{sink}",
                              checkpoint=tmp_path / "checkpoint")
    job.run(spark, settings)
    report = verify(bootstrap, source, sink, settings.app_id, settings.dead_letter)
    assert report.violations == [] and report.duplicates == report.key_surplus == 0
    assert report.output_committed == report.input_committed == 6


def test_a_record_lost_among_repeated_keys_is_caught(bootstrap, new_topic):
    source, sink = new_topic(prefix="in"), new_topic(prefix="out")
    commit_keys(bootstrap, source, [1, 2, 2, 3])  # offsets 0..3
    writer = Producer({"bootstrap.servers": bootstrap})
    for offset, key in ((0, 1), (1, 2), (3, 3)):  # the second record with key 2 is never delivered
        writer.produce(sink, b"value", str(key).encode(), partition=0, headers=[("eos.src", f"{source}:0:{offset}")])
    writer.flush(30)
    report = verify(bootstrap, source, sink)
    assert report.lost == 1 and report.samples["lost"] == [2] and report.duplicates == 0 and not report.ok
    assert report.key_deficit == 1 and report.samples["key_deficit"] == [2] and report.key_surplus == 0


def test_the_final_verify_finds_a_hanging_transaction_on_the_dead_letter_topic(bootstrap, new_topic):
    source, sink = new_topic(prefix="in"), new_topic(prefix="out")
    dead_letter = new_topic(prefix="dlq")
    hanging = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{dead_letter}.hanging"})
    hanging.init_transactions(30)
    hanging.begin_transaction()
    hanging.produce(dead_letter, b"never ended", b"1")
    hanging.flush(30)
    try:
        report = verify(bootstrap, source, sink, dead_letter_topic=dead_letter)
        assert report.hanging_partitions == [f"{dead_letter}[0]: last stable offset 0 < end 1"] and not report.ok
    finally:
        fencer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{dead_letter}.hanging"})
        fencer.init_transactions(30)  # aborts the open transaction
    assert wait_until_stable(bootstrap, [dead_letter], timeout_s=30) == []  # the abort marker is written
    assert verify(bootstrap, source, sink, dead_letter_topic=dead_letter).ok
