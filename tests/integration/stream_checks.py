"""Checks shared by the streaming job's integration tests: the verifier's verdict and the checkpoint's logs."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

from conf.stream_settings import StreamSettings
from eosbench.local.hadoop_fs import fs_shell
from streaming.verify import verify


def local_checkpoint(settings: StreamSettings) -> Path:
    """The folder of a checkpoint on the local disk, for the tests that edit Spark's logs by hand."""
    return Path(urlsplit(settings.checkpoint_uri).path)


def logged_batches(settings: StreamSettings, s3a_config: Path | None = None) -> dict[str, set[int]]:
    """The batch ids in the checkpoint's offset and commit logs, listed through Hadoop wherever it lives."""
    listed = fs_shell("-ls", "-C", f"{settings.checkpoint_uri}/offsets", f"{settings.checkpoint_uri}/commits",
                      s3a_config=s3a_config).stdout
    logs: dict[str, set[int]] = {"offsets": set(), "commits": set()}
    for path in listed.split():
        folder, name = path.rsplit("/", 2)[-2:]
        if name.isdigit():
            logs[folder].add(int(name))
    return logs


def assert_exactly_once(bootstrap: str, settings: StreamSettings, expect_dead: int = 0):
    """The verifier finds nothing, and every committed input id arrived exactly once."""
    report = verify(bootstrap, settings.input_topic, settings.output_topic, settings.app_id, settings.dead_letter)
    assert report.violations == []
    assert report.torn == report.reordered == 0 and report.transactions_checked > 0, "judged whole, and in order"
    assert report.output_committed + report.dead_lettered == report.input_committed
    assert report.dead_lettered == expect_dead
    assert report.input_aborted > 0, "the input must hold aborted transactions for this to mean anything"
    return report


def consumers_created(spark) -> int:
    """Consumers the grouped source created in the session's JVM (local mode: the driver's is the executor's)."""
    return spark._jvm.eosbench.spark.GroupedKafkaProvider.consumersCreated()
