"""The sink's group offsets gone, a grown input, a slice longer than a transaction may last: on the real broker.

Each case run as a user meets it: a run finishes, the driver
"died" before Spark's commit log, the group's offsets are deleted (what expiry leaves), and the
user restarts with the same command, then with the checkpoint lost, then the way back. Every
step ends in the verifier's exact multisets.
"""

from __future__ import annotations

import shutil

import pytest
from confluent_kafka.admin import AdminClient, NewPartitions

from conf.stream_settings import StreamSettings
from eosbench.local.kafka_admin import create_topic
from streaming import job
from streaming.sink.driver import SinkPreconditionError
from streaming.verify.verifier import stable_and_end_offsets, verify
from tests.integration.produce_helpers import commit_keys, produce


def delete_group(bootstrap: str, group: str) -> None:
    """Delete the sink's group whole, as offsets.retention.minutes would empty it."""
    admin = AdminClient({"bootstrap.servers": bootstrap})  # held: a collected client never completes its futures
    for future in admin.delete_consumer_groups([group]).values():
        future.result(timeout=30)


def assert_exact(bootstrap: str, settings: StreamSettings, app_id: str | None = None) -> None:
    """Every committed input record delivered once (and, with app_id, the group at the input's ends)."""
    report = verify(bootstrap, settings.input_topic, settings.output_topic, app_id, settings.dead_letter)
    assert report.violations == [] and report.output_committed + report.dead_lettered == report.input_committed
    assert report.input_aborted > 0


def test_lost_offsets_are_refused_in_every_start_and_output_is_the_exact_way_back(bootstrap, spark, new_topic,
                                                                                  tmp_path, capsys):
    source, sink = new_topic(partitions=3, prefix="in"), new_topic(partitions=3, prefix="out")
    create_topic(bootstrap, f"{sink}.dlq", 1, 1)
    produce(bootstrap, source, 5_000, records_per_transaction=250, abort_ratio=0.3, seed=25)
    checkpoint = tmp_path / "checkpoint"
    settings = StreamSettings(input_topic=source, output_topic=sink, bootstrap_server=bootstrap,
                              app_id=f"app-{sink}", checkpoint=checkpoint)
    assert job.run(spark, settings).batches == 1

    # The driver died between the sink's commit of batch 0 and Spark's commit log, and the group's
    # offsets expired while it was down: before, batch 0 ran again unchecked and wrote everything twice.
    for name in ("0", ".0.crc"):
        (checkpoint / "commits" / name).unlink(missing_ok=True)
    delete_group(bootstrap, settings.app_id)
    with pytest.raises(SinkPreconditionError, match=rf"batch 0 is run again after a restart, but group"
                                                    rf" '{settings.app_id}' has no offset for {source} partition\(s\)"
                                                    r" 0, 1, 2 .* start with --starting-offsets output$") as refused:
        job.run(spark, settings)
    assert "\n" not in str(refused.value)
    assert_exact(bootstrap, settings)

    # The checkpoint lost as well, and the same command: before, the default start wrote every record again.
    shutil.rmtree(checkpoint)
    flags = ["--input-topic", source, "--output-topic", sink, "--bootstrap-server", bootstrap,
             "--app-id", settings.app_id, "--checkpoint", str(checkpoint)]
    for start in ([], ["--starting-offsets", "group"]):  # spark-submit's entry point, in this process's session
        capsys.readouterr()
        with pytest.raises(SystemExit) as exited:
            job.main([*flags, *start])
        assert exited.value.code == 2
        assert capsys.readouterr().err.strip().splitlines()[-1].startswith(
            f"streaming/job.py: error: --starting-offsets {start[-1] if start else 'earliest'}: group"
            f" '{settings.app_id}' has no committed offset for {source} partition(s) 0, 1, 2 although they hold"
            " records")
    assert_exact(bootstrap, settings)

    # The way back the refusals name: each partition resumes after its last delivered record.
    resumed = job.run(spark, settings.model_copy(update={"starting_offsets": "output"}))
    assert resumed.records_out == resumed.records_dead_lettered == 0
    assert_exact(bootstrap, settings, app_id=settings.app_id)


def test_a_partition_added_after_the_last_commit_does_not_refuse_a_lost_checkpoint(bootstrap, spark, new_topic,
                                                                                   tmp_path):
    source, sink = new_topic(partitions=2, prefix="in"), new_topic(partitions=3, prefix="out")
    create_topic(bootstrap, f"{sink}.dlq", 1, 1)
    produce(bootstrap, source, 1_000, records_per_transaction=100, abort_ratio=0.3, seed=26)
    settings = StreamSettings(input_topic=source, output_topic=sink, bootstrap_server=bootstrap,
                              app_id=f"app-{sink}", checkpoint=tmp_path / "checkpoint", starting_offsets="group")
    job.run(spark, settings)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_partitions([NewPartitions(source, 3)]).values():
        future.result(timeout=30)
    commit_keys(bootstrap, source, range(10_000, 10_040), partition=2)
    shutil.rmtree(tmp_path / "checkpoint")  # lost before any batch read the new partition
    resumed = job.run(spark, settings)
    assert resumed.records_out == 40, "the new partition is read from its start, nothing else again"
    assert_exact(bootstrap, settings, app_id=settings.app_id)


def test_a_slice_that_outlasts_the_transaction_timeout_commits_in_several(bootstrap, spark, new_topic, tmp_path):
    source, sink = new_topic(partitions=1, prefix="in"), new_topic(partitions=1, prefix="out")
    create_topic(bootstrap, f"{sink}.dlq", 1, 1)
    produce(bootstrap, source, 60_000, records_per_transaction=2_000, abort_ratio=0.25, seed=27)
    # One record per request, one request at a time: producing the slice (about 38,000 records)
    # takes 4 to 8 s on a quiet machine, well past the 1 s (librdkafka's least) that the coordinator
    # and librdkafka's message timeout allow a transaction. With 2 s and half these records, a
    # quiet fresh clone produced the slice within the timeout and rightly committed it in one.
    settings = StreamSettings(input_topic=source, output_topic=sink, bootstrap_server=bootstrap,
                              app_id=f"app-{sink}", checkpoint=tmp_path / "checkpoint",
                              producer_props=("transaction.timeout.ms=1000", "batch.num.messages=1",
                                              "max.in.flight.requests.per.connection=1"))
    summary = job.run(spark, settings)
    assert summary.batches == 1 and summary.outcomes["committed"] > 1, "one slice, several transactions"
    assert_exact(bootstrap, settings, app_id=settings.app_id)
    ends = {p: end for p, (_, end) in stable_and_end_offsets(bootstrap, source).items()}
    assert sum(ends.values()) > 60_000
