"""The peer engines' command lines: Kafka Streams and Flink doing the streaming job's processing.

A user choosing an engine for exactly-once on Kafka would weigh Spark against these two, so the
benches and the soak run them beside the Spark job on the same input, judged by the same verifier.
Their Java is in peers/jvm/, compiled on first use into the `kafka-streams` and `flink` bundles'
jars (conf/jars.yaml), which `eosbench setup` does not fetch: only a run that uses a peer pays
for its jars. Each peer is set up as its own documentation recommends for exactly-once and for
throughput, with as many threads (parallelism) as the machine has cores and its commit
(checkpoint) interval equal to the Spark job's trigger; `chosen_settings` is what a bench prints.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from conf.client_config import Connection, connection
from conf.settings import console_log4j_config
from eosbench.local.environment import check_java
from eosbench.local.jars import resolve_bundle

PEER_ENGINES = ("kafka-streams", "flink")
GUARANTEES = ("exactly-once", "at-least-once")
_MAIN_CLASS = {"kafka-streams": "eosbench.peers.KafkaStreamsPeer", "flink": "eosbench.peers.FlinkPeer"}


@dataclass(frozen=True)
class PeerSettings:
    """One peer pipeline: engine, guarantee, topics and group, and the knobs each engine's docs name."""

    engine: str
    guarantee: str
    input_topic: str
    output_topic: str
    app_id: str
    state_dir: Path  # Kafka Streams' state.dir, Flink's checkpoints (a relaunch resumes from the newest)
    process: str = "passthrough"
    threads: int = os.cpu_count() or 2
    commit_interval_ms: int = 1000
    heap_mb: int = 512

    def __post_init__(self):
        if self.engine not in PEER_ENGINES:
            raise ValueError(f"engine must be one of {', '.join(PEER_ENGINES)}, not {self.engine!r}")
        if self.guarantee not in GUARANTEES:
            raise ValueError(f"guarantee must be one of {', '.join(GUARANTEES)}, not {self.guarantee!r}")

    @property
    def dead_letter_topic(self) -> str:
        """Where poison records go: the Spark job's `<output>.dlq`."""
        return f"{self.output_topic}.dlq"

    def chosen_settings(self) -> dict[str, str]:
        """The engine's own settings this pipeline sets, in the engine's names."""
        exactly_once = self.guarantee == "exactly-once"
        if self.engine == "kafka-streams":
            return {"processing.guarantee": "exactly_once_v2" if exactly_once else "at_least_once",
                    "num.stream.threads": str(self.threads), "commit.interval.ms": str(self.commit_interval_ms),
                    # Static membership: a relaunch takes its old members' places at once, without the
                    # rebalance that waits out the dead members' session.timeout.ms (45 s).
                    "group.instance.id": f"{self.app_id}-instance",
                    # exactly_once_v2 reads read_committed by itself; at_least_once reads aborted records
                    # too unless told, which is no guarantee of this pipeline's (every other arm reads committed).
                    "consumer.isolation.level": "read_committed",
                    "state.dir": str(self.state_dir)}
        return {"flink.parallelism.default": str(self.threads),
                "flink.execution.checkpointing.interval": f"{self.commit_interval_ms} ms",
                "flink.execution.checkpointing.mode": "EXACTLY_ONCE" if exactly_once else "AT_LEAST_ONCE",
                # Chained operators hand records on without a copy, as Flink's tuning guide advises.
                "flink.pipeline.object-reuse": "true",
                "delivery.guarantee": "EXACTLY_ONCE" if exactly_once else "AT_LEAST_ONCE",
                # Above the checkpoint interval and a relaunch, under the broker's 15-minute maximum.
                "transaction.timeout.ms": "60000"}


def peer_command(settings: PeerSettings, target: str | Connection) -> list[str]:
    """The java command line that runs one peer pipeline until it is killed."""
    bundle = resolve_bundle(settings.engine)
    cluster = connection(target)
    secured = cluster.client_config.path
    arguments = {"input.topic": settings.input_topic, "output.topic": settings.output_topic,
                 "dead.letter.topic": settings.dead_letter_topic, "process": settings.process,
                 "application.id": settings.app_id, "bootstrap.servers": cluster.bootstrap,
                 **({"command.config": str(secured)} if secured is not None else {}),
                 **({"checkpoint.dir": str(settings.state_dir)} if settings.engine == "flink" else {}),
                 **settings.chosen_settings()}
    return [check_java(), f"-Xmx{settings.heap_mb}m", f"-Dlog4j2.configurationFile={console_log4j_config()}",
            "-cp", os.pathsep.join(str(jar) for jar in bundle), _MAIN_CLASS[settings.engine],
            *(f"{name}={value}" for name, value in arguments.items())]
