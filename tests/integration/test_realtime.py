"""Real-time mode (`--trigger realtime:<interval>`) on the real broker and real Spark, under the faults that replay an epoch.

Every check ends in the verifier's exact multiset comparison of ids by eos.src. The driver's
SIGKILL mid-epoch and broker kills mid-transaction are the real-time CI soak's rounds
(tests/integration/test_soak.py), judged the same way.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from conf.stream_settings import StreamSettings
from eosbench.local.kafka_admin import create_topic
from streaming import job
from streaming.quiet_stop import STOP_NOISE_LOGGERS
from streaming.group import SinkPreconditionError
from streaming.verify.verifier import verify
from tests.integration.kafka_reads import read_all
from tests.integration.produce_helpers import produce
from tests.integration.stream_checks import assert_exactly_once, local_checkpoint


@contextmanager
def console_lines(spark) -> Iterator[list[str]]:
    """The lines the driver's log4j console prints in the block, caught by a second appender beside it on the root."""
    log4j = spark.sparkContext._jvm.org.apache.logging.log4j
    context = log4j.LogManager.getContext(False)
    configuration, writer = context.getConfiguration(), spark.sparkContext._jvm.java.io.StringWriter()
    layout = log4j.core.layout.PatternLayout.newBuilder().withPattern("%p %c: %m%n%ex").build()
    appender = log4j.core.appender.WriterAppender.createAppender(layout, None, writer, f"test-{uuid.uuid4().hex}",
                                                                  False, True)
    appender.start()
    configuration.getRootLogger().addAppender(appender, None, None)
    context.updateLoggers()
    lines: list[str] = []
    try:
        yield lines
    finally:
        configuration.getRootLogger().removeAppender(appender.getName())
        context.updateLoggers()
        appender.stop()
        lines.extend(writer.toString().splitlines())


@pytest.fixture
def realtime_pipeline(bootstrap, new_topic, tmp_path):
    """A two-partition input filled with aborted and committed transactions and three poison records, and settings."""
    source, sink = new_topic(partitions=2, prefix="rtin"), new_topic(partitions=2, prefix="rtout")
    create_topic(bootstrap, f"{sink}.dlq", 1, 1)
    produce(bootstrap, source, 6_000, records_per_transaction=300, abort_ratio=0.3, seed=7)
    poison = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{source}.poison"})
    poison.init_transactions(30)
    poison.begin_transaction()
    for seq in (90_000, 90_001, 90_002):
        poison.produce(source, b"POISON record", str(seq).encode(), partition=seq % 2)
    poison.commit_transaction(30)

    def settings(**overrides) -> StreamSettings:
        fields = dict(input_topic=source, output_topic=sink, bootstrap_server=bootstrap, app_id=f"app-{sink}",
                      checkpoint=str(tmp_path / "checkpoint"), trigger="realtime:1 minute", timeout_s=8.0)
        return StreamSettings(**{**fields, **overrides})

    return settings


def test_realtime_writer_is_exactly_once_through_a_stop_mid_epoch_and_a_lost_checkpoint(bootstrap, spark,
                                                                                         realtime_pipeline):
    settings = realtime_pipeline()
    # The query stops inside its first epoch (a minute long): Spark never logs the epoch as done,
    # its tasks are killed, any transaction open is aborted, and the next run reads the epoch again.
    with console_lines(spark) as console:
        job.run(spark, settings)
        # What the stop silenced speaks again: an error after it is printed.
        spark.sparkContext._jvm.org.apache.logging.log4j.LogManager.getLogger(STOP_NOISE_LOGGERS[0]).error("after")
    stop_noise = [line for line in console if line.startswith(("ERROR", "\tat ", "Caused by"))
                  or "Lost task" in line or "Failed to cancel job group" in line]
    assert stop_noise == ["ERROR org.apache.spark.util.Utils: after"], "\n".join(console)
    written = len(read_all(bootstrap, settings.output_topic)) + len(read_all(bootstrap, settings.dead_letter))
    first = assert_exactly_once(bootstrap, settings, expect_dead=3)
    assert written == first.input_committed, "the whole backlog committed inside the unfinished epoch"
    more = produce(bootstrap, settings.input_topic, 8_000, records_per_transaction=200, abort_ratio=0.3, seed=8,
                   resume=True)
    replayed = job.run(spark, realtime_pipeline(trigger="realtime:5 seconds", timeout_s=7.0))
    assert replayed.records_skipped == written, "the epoch is read again from its start, and what was committed dropped"
    assert replayed.records_out == more.records_committed and replayed.outcomes["committed"] >= 2
    assert replayed.latency_p99_ms > 0
    assert_exactly_once(bootstrap, settings, expect_dead=3)

    shutil.rmtree(local_checkpoint(settings))
    last = produce(bootstrap, settings.input_topic, 9_000, records_per_transaction=100, abort_ratio=0.3, seed=9,
                   resume=True)
    resumed = job.run(spark, realtime_pipeline(trigger="realtime:5 seconds", timeout_s=7.0, starting_offsets="group",
                                               txn_scope="auto"))
    assert resumed.records_skipped == 0 and resumed.records_out == last.records_committed
    assert resumed.txn_scope == "partition" and resumed.txn_scope_chosen.endswith("real-time mode commits per input partition)")
    assert_exactly_once(bootstrap, settings, expect_dead=3)
    assert sorted(int(k) for k in read_all(bootstrap, settings.dead_letter)) == [90_000, 90_001, 90_002]


def test_realtime_refuses_what_it_cannot_run_exactly_once(spark, realtime_pipeline):
    from streaming.realtime.writer import precondition_problem

    assert precondition_problem(realtime_pipeline(), 2, 1, speculation=False) == (
        f"{realtime_pipeline().input_topic} has 2 partitions but the job has 1 task slots: real-time mode runs one"
        " task per partition, all at once; give it at least 2 (local[2], or executors x cores)")
    with pytest.raises(SinkPreconditionError, match=r"minPartitions: real-time mode needs one task per Kafka partition"):
        job.run(spark, realtime_pipeline(source_options=("minPartitions=4",)))


def test_a_resumed_realtime_query_whose_group_offsets_vanished_is_refused_and_output_is_the_way_back(
        bootstrap, spark, realtime_pipeline, capsys):
    from confluent_kafka.admin import AdminClient

    settings = realtime_pipeline()
    job.run(spark, settings)  # stopped inside its first epoch: the writer committed, Spark logged no epoch
    first = assert_exactly_once(bootstrap, settings, expect_dead=3)
    admin = AdminClient({"bootstrap.servers": bootstrap})  # the offsets expire while the job is down
    for future in admin.delete_consumer_groups([settings.app_id]).values():
        future.result(timeout=30)

    # Before: the resumed epoch kept every record (no c to filter by) and wrote the backlog twice.
    flags = ["--input-topic", settings.input_topic, "--output-topic", settings.output_topic, "--bootstrap-server",
             bootstrap, "--app-id", settings.app_id, "--checkpoint", settings.checkpoint_uri, "--trigger",
             "realtime:5 seconds", "--timeout-s", "5"]
    capsys.readouterr()
    with pytest.raises(SystemExit) as exited:
        job.main(flags)
    assert exited.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith(
        f"streaming/job.py: error: epoch 0 is run again after a restart, but group '{settings.app_id}' has no offset"
        f" for {settings.input_topic} partition(s) 0, 1 although the output holds records of it")
    untouched = verify(bootstrap, settings.input_topic, settings.output_topic, None, settings.dead_letter)
    assert untouched.violations == [] and untouched.output_committed == first.output_committed

    shutil.rmtree(local_checkpoint(settings))
    more = produce(bootstrap, settings.input_topic, 7_000, records_per_transaction=250, abort_ratio=0.3, seed=8,
                   resume=True)
    resumed = job.run(spark, realtime_pipeline(trigger="realtime:5 seconds", timeout_s=6.0, starting_offsets="output"))
    assert resumed.records_out == more.records_committed and resumed.records_skipped == 0
    assert_exactly_once(bootstrap, settings, expect_dead=3)


def _writer(spark, bootstrap: str, app_id: str, output: str, **client):
    """The real-time writer built by hand on the driver's JVM (as RealTimeWriter builds it), and its counters."""
    from streaming.stats import LATENCY_BOUNDS_MS

    writer_class = spark.sparkContext._jvm.eosbench.spark.RealTimeTransactionalWriter
    gateway = spark.sparkContext._gateway
    bounds = gateway.new_array(gateway.jvm.double, len(LATENCY_BOUNDS_MS))
    for index, bound in enumerate(LATENCY_BOUNDS_MS):
        bounds[index] = float(bound)
    counters = writer_class.Counters()
    writer = writer_class({"bootstrap.servers": bootstrap, **client}, {"transaction.timeout.ms": "60000"}, app_id, "",
                          output, f"{output}.dlq", "passthrough", False, 600_000, 1, 0, counters,
                          writer_class.LatencyHistogram(bounds))
    return writer, counters


def _rows(spark, topic: str):
    """Three rows of partition 0 as the Kafka source hands them to the writer (Java Rows with the source's schema)."""
    from datetime import datetime

    frame = spark.createDataFrame([(str(offset + 1).encode(), b"value", topic, 0, offset, datetime.now())
                                   for offset in range(3)],
                                  "key binary, value binary, topic string, partition int, offset long, timestamp timestamp")
    return list(frame._jdf.collectAsList())


def test_the_realtime_writer_fails_its_task_rather_than_lose_a_row_and_keys_idle_clients_by_their_settings(
        bootstrap, spark, new_topic):
    from py4j.protocol import Py4JJavaError

    source, sink = new_topic(partitions=1, prefix="rtw-in"), new_topic(partitions=1, prefix="rtw-out")
    create_topic(bootstrap, f"{sink}.dlq", 1, 1)
    rows = _rows(spark, source)
    thread = spark.sparkContext._jvm.java.lang.Thread
    producers, transactions = 5, 3  # RealTimeTransactionalWriter.Counters' slots

    # An interrupt before the partition's c is known: before, the row was dropped and the task went on.
    writer, counters = _writer(spark, bootstrap, f"app-{sink}", sink)
    writer.open(0, 0)
    thread.currentThread().interrupt()
    try:
        with pytest.raises(Py4JJavaError, match="InterruptException"):
            writer.process(rows[0])
    finally:
        thread.interrupted()  # this py4j thread serves the test's later calls
    writer.close(spark.sparkContext._jvm.java.lang.RuntimeException("failed"))  # a failed task's close

    # An interrupt that stops the epoch's last commit: before, close() returned as if the kept row were written.
    writer, counters = _writer(spark, bootstrap, f"app-{sink}", sink)
    writer.open(0, 1)
    writer.process(rows[0])  # kept: the commit interval (10 minutes) has not passed
    thread.currentThread().interrupt()
    try:
        with pytest.raises(Py4JJavaError, match="1 rows of epoch 1 were not committed"):
            writer.close(None)
    finally:
        thread.interrupted()
    assert list(counters.value())[transactions] == 0

    # An idle producer is handed only to a writer with the same client settings, not just the same T(p).
    writer, counters = _writer(spark, bootstrap, f"app-{sink}", sink)
    writer.open(0, 2)
    writer.process(rows[1])
    writer.close(None)
    assert list(counters.value())[producers] == 1 and list(counters.value())[transactions] == 1
    writer, counters = _writer(spark, bootstrap, f"app-{sink}", sink, **{"client.id": "another-setting"})
    writer.open(0, 3)
    writer.process(rows[1])  # c is now past it: dropped, but the producer is taken first
    writer.close(None)
    assert list(counters.value())[producers] == 1, "a producer of other settings is built, not borrowed"

    # A newer producer of T(0) holds the partition's offset open, as a failed attempt on another executor
    # leaves it (its offsets sent, never committed). Before, the next writer on this JVM took its idle
    # producer, which fenced nothing, and its offset read waited out 60 s for a stable offset, then
    # failed the task; now the read gives way after a second to a new producer, which fences the newer
    # one and aborts its transaction, and the row is committed once.
    newer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"app-{sink}.{source}.0"})
    newer.init_transactions(30)
    newer.begin_transaction()
    group = Consumer({"bootstrap.servers": bootstrap, "group.id": f"app-{sink}"})
    newer.send_offsets_to_transaction([TopicPartition(source, 0, 2)], group.consumer_group_metadata(), 30)
    group.close()
    writer, counters = _writer(spark, bootstrap, f"app-{sink}", sink)
    writer.open(0, 4)
    writer.process(rows[2])
    writer.close(None)
    assert list(counters.value())[producers] == 1 and list(counters.value())[transactions] == 1
    with pytest.raises(KafkaException, match="(?i)fenc"):
        newer.commit_transaction(30)
    assert sorted(int(key) for key in read_all(bootstrap, sink)) == [2, 3], "each row once, the newer one's nothing"
