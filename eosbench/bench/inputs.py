"""A bench's pre-filled input: a new topic written by `eosbench produce`'s engine in this process."""

from __future__ import annotations

import io

from conf.client_config import Connection, connection
from conf.produce_settings import ProduceSettings
from eosbench.local.kafka_admin import create_topic


def fill_input(bootstrap: str | Connection, topic: str, records: int, partitions: int, replication: int = 1,
               **produce) -> int:
    """Create `topic` and write `records` of 100 B into it, acks=all; return how many were committed.

    `produce`: the rest of ProduceSettings (transactions by size or duration, abort ratio, seed).
    """
    # Imported here: the bench commands read this room's constants at every start of the command line.
    from producers.perf import ProducerPerformance

    create_topic(bootstrap, topic, partitions, replication)
    settings = ProduceSettings(topic=topic, bootstrap_server=str(bootstrap), num_records=records, record_size=100,
                               throughput=-1, producer_props=("acks=all",),
                               command_config=connection(bootstrap).client_config.path, **produce)
    return ProducerPerformance(settings, out=io.StringIO()).run().records_committed
