"""Real-time mode (`--trigger realtime:<interval>`) on the real broker and real Spark, under the faults that replay an epoch.

Every check ends in the verifier's exact multiset comparison of ids by eos.src. The driver's
SIGKILL mid-epoch and broker kills mid-transaction are the real-time CI soak's rounds
(tests/integration/test_soak.py), judged the same way.
"""

from __future__ import annotations

import pytest
from confluent_kafka import Producer

from conf.stream_settings import StreamSettings
from eosbench.local.hadoop_fs import fs_shell
from eosbench.local.kafka_admin import create_topic
from streaming import job
from streaming.sink_group import SinkPreconditionError
from tests.integration.kafka_reads import read_all
from tests.integration.produce_helpers import produce
from tests.integration.stream_checks import assert_exactly_once


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
    job.run(spark, settings)
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

    fs_shell("-rm", "-r", "-f", settings.checkpoint_uri)
    last = produce(bootstrap, settings.input_topic, 9_000, records_per_transaction=100, abort_ratio=0.3, seed=9,
                   resume=True)
    resumed = job.run(spark, realtime_pipeline(trigger="realtime:5 seconds", timeout_s=7.0, starting_offsets="group"))
    assert resumed.records_skipped == 0 and resumed.records_out == last.records_committed
    assert_exactly_once(bootstrap, settings, expect_dead=3)
    assert sorted(int(k) for k in read_all(bootstrap, settings.dead_letter)) == [90_000, 90_001, 90_002]


def test_realtime_refuses_what_it_cannot_run_exactly_once(spark, realtime_pipeline):
    from streaming.realtime import precondition_problem

    assert precondition_problem(realtime_pipeline(), 2, 1, speculation=False) == (
        f"{realtime_pipeline().input_topic} has 2 partitions but the job has 1 task slots: real-time mode runs one"
        " task per partition, all at once; give it at least 2 (local[2], or executors x cores)")
    with pytest.raises(SinkPreconditionError, match=r"minPartitions: real-time mode needs one task per Kafka partition"):
        job.run(spark, realtime_pipeline(source_options=("minPartitions=4",)))
