"""The checkpoint's location (--checkpoint URI) and the parsers of Spark's offset, source and commit logs.

`streaming/source/checkpoint.py`'s CheckpointLog reads the files through Hadoop on the session's JVM (the
integration tests run it, on a local folder and on HDFS); these check what it does with the text.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from conf.settings import SettingsError
from conf.stream_settings import StreamSettings, checkpoint_uri
from streaming.source.checkpoint import (batch_ids_in_listing, end_offsets_in_log, offsets_in_source_log,
                                       pending_batch_of)

# `offsets/<batchId>` as Spark 4 writes it: version, metadata, one line per source.
OFFSET_LOG = ('v1\n{"batchWatermarkMs":0,"batchTimestampMs":1764064000000,"conf":{"spark.sql.shuffle.partitions":"200"}}\n'
              '{"in-a":{"2":4000,"1":3977,"0":4031}}')
# `sources/0/0` as Spark's Kafka source writes it: a NUL byte (SPARK-19517), the version, the offsets.
SOURCE_LOG = '\x00v1\n{"in-a":{"2":0,"1":0,"0":12}}'


def test_the_offset_log_gives_each_partitions_end():
    assert end_offsets_in_log(OFFSET_LOG, "in-a") == {0: 4031, 1: 3977, 2: 4000}


def test_the_offset_log_skips_sources_without_offsets_and_misses_other_topics():
    two_sources = OFFSET_LOG.replace('\n{"in-a"', '\n-\n{"in-a"')
    assert end_offsets_in_log(two_sources, "in-a") == {0: 4031, 1: 3977, 2: 4000}
    assert end_offsets_in_log(OFFSET_LOG, "in-b") is None


def test_the_source_log_gives_the_querys_initial_offsets():
    assert offsets_in_source_log(SOURCE_LOG) == {"in-a": {"2": 0, "1": 0, "0": 12}}
    assert offsets_in_source_log("") == {}


@pytest.mark.parametrize("listing,batch_ids", [
    ("{}", set()),
    ("{file:/ck/offsets/0,file:/ck/offsets/12,file:/ck/offsets/.12.crc,file:/ck/offsets/.13.9f1c.tmp}", {0, 12}),
    ("{hdfs://127.0.0.1:9000/a/7,b/offsets/3,hdfs://127.0.0.1:9000/a/7,b/offsets/4}", {3, 4}),  # a comma in the root
])
def test_a_folders_listing_gives_its_batch_ids(listing, batch_ids):
    assert batch_ids_in_listing(listing) == batch_ids


@pytest.mark.parametrize("offsets,commits,pending", [
    (set(), set(), None),  # a query that never planned a batch
    ({0, 1, 2}, {0, 1, 2}, None),  # every batch finished
    ({0, 1, 2}, {0, 1}, 2),  # the driver died after planning batch 2
    ({7, 8}, {5, 6, 7}, 8),  # old entries purged from both logs
])
def test_the_pending_batch_is_the_last_planned_one_without_a_commit(offsets, commits, pending):
    assert pending_batch_of(offsets, commits) == pending


@pytest.mark.parametrize("location,uri", [
    ("file:///data/ck", "file:///data/ck"),
    ("hdfs:///eosbench/ck", "hdfs:///eosbench/ck"),  # the default file system of the Hadoop configuration
    ("hdfs://127.0.0.1:9870/eosbench/ck", "hdfs://127.0.0.1:9870/eosbench/ck"),
    ("s3a://bucket/eosbench/ck", "s3a://bucket/eosbench/ck"),
    ("abfs://box@account.dfs.core.windows.net/ck", "abfs://box@account.dfs.core.windows.net/ck"),
    ("abfss://box@account.dfs.core.windows.net/ck", "abfss://box@account.dfs.core.windows.net/ck"),
    ("HDFS://nn/ck", "hdfs://nn/ck"),  # Hadoop finds file systems by the scheme in lower case
    ("/data/a b/ck", "file:///data/a b/ck"),  # Hadoop's Path takes the string as it is: no %20
])
def test_a_checkpoint_location_becomes_an_absolute_hadoop_uri(location, uri):
    assert checkpoint_uri(location) == uri


def test_a_relative_path_is_a_local_folder_under_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert checkpoint_uri("ck/app") == f"file://{tmp_path.resolve()}/ck/app"
    settings = StreamSettings(input_topic="i", output_topic="o", app_id="app")
    assert settings.checkpoint_uri == f"file://{tmp_path.resolve()}/checkpoints/app"
    assert StreamSettings(input_topic="i", output_topic="o", checkpoint=Path("ck")).checkpoint_uri == \
        f"file://{tmp_path.resolve()}/ck"


@pytest.mark.parametrize("location,error", [
    ("gs://bucket/ck", "--checkpoint gs://bucket/ck: unsupported scheme 'gs' (use a local path or a file://, hdfs://,"
                       " s3a://, abfs://, abfss:// URI)"),
    ("file:/data/ck", "--checkpoint file:/data/ck: not a URI of the form file://[authority]/folder"),
    ("hdfs://nn/ck?replication=1", "--checkpoint hdfs://nn/ck?replication=1: not a URI of the form"
                                   " hdfs://[authority]/folder"),
    ("hdfs://nn:port/ck", "--checkpoint hdfs://nn:port/ck: the port of 'nn:port' is not a number"),
    ("hdfs://nn:8020", "--checkpoint hdfs://nn:8020: names no folder (the checkpoint needs a folder of its own)"),
    ("file://data/ck", "--checkpoint file://data/ck: a file URI has no host; write file:///data/ck for that absolute"
                       " path, or a bare path for a relative one"),
    ("s3a:///ck", "--checkpoint s3a:///ck: names no bucket"),
    ("abfs:///ck", "--checkpoint abfs:///ck: names no container"),
])
def test_a_checkpoint_uri_no_checkpoint_may_use_is_refused_in_one_line(location, error):
    with pytest.raises(SettingsError) as refused:
        checkpoint_uri(location)
    assert str(refused.value) == error
    with pytest.raises(ValidationError, match="--checkpoint"):
        StreamSettings(input_topic="i", output_topic="o", checkpoint=location)
