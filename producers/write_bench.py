"""Write benches after kafka-tx-performance: BaseWritesBench and TxWritesBench, in a closed loop.

Each iteration sends one record to each of two topics and waits for both acknowledgements;
in tx mode the iteration is wrapped in begin / commit. Iterations run in isolation, one after
another, so the figures are the protocol's floor per iteration, not a load test (the seed's
"coordinated omission?" note explains why that is the right question here).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np
from confluent_kafka import Producer

from conf.client_config import Connection, connection
from conf.client_log import CLIENT_LOG
from conf.failures import kafka_failure, kafka_reason

Mode = Literal["base", "tx"]


@dataclass
class WriteBenchResult:
    """Per-iteration latencies (seconds) of one mode's measured iterations."""

    mode: Mode
    latencies_s: np.ndarray

    def percentiles_ms(self) -> dict[str, float]:
        """p50/p90/p99/p99.9, mean and max in milliseconds."""
        return latency_percentiles_ms(self.latencies_s)


def latency_percentiles_ms(latencies_s: np.ndarray) -> dict[str, float]:
    """p50/p90/p99/p99.9, mean and max of per-iteration latencies, in milliseconds."""
    ms = latencies_s * 1e3 if latencies_s.size else np.zeros(1)
    return {
        "p50": float(np.percentile(ms, 50)), "p90": float(np.percentile(ms, 90)),
        "p99": float(np.percentile(ms, 99)), "p99.9": float(np.percentile(ms, 99.9)),
        "mean": float(ms.mean()), "max": float(ms.max()), "iterations": int(latencies_s.size),
    }


class WriteBench:
    """One producer per mode, driving iterations against two topics."""

    def __init__(self, bootstrap: str | Connection, topics: tuple[str, str], mode: Mode, transactional_id: str,
                 extra_config: dict[str, str] | None = None):
        config = connection(bootstrap).librdkafka(**{"acks": "all", "linger.ms": "0", **(extra_config or {})})
        if mode == "tx":
            config["transactional.id"] = transactional_id
        self.producer = Producer(config, logger=CLIENT_LOG)
        self.mode = mode
        self.topics = topics
        self.failures = 0
        self.first_error = None  # the first failed record's KafkaError, which says whose fault it was
        if mode == "tx":
            self.producer.init_transactions(60)

    def _on_delivery(self, error, _message) -> None:
        if error is not None:
            self.failures += 1
            self.first_error = self.first_error or error

    def iteration(self, seq: int) -> float:
        """Run one iteration and return its latency in seconds."""
        key = str(seq).encode()
        started = time.perf_counter_ns()
        if self.mode == "tx":
            self.producer.begin_transaction()
        for topic in self.topics:
            self.producer.produce(topic, b"x", key, on_delivery=self._on_delivery)
        if self.mode == "tx":
            self.producer.commit_transaction(60)  # flushes, then EndTxn
        else:
            self.producer.flush(60)
        elapsed = (time.perf_counter_ns() - started) / 1e9
        if self.failures:
            raise kafka_failure(self.first_error, f"{self.failures} record(s) failed in {self.mode} mode:"
                                                  f" {kafka_reason(self.first_error)}")
        return elapsed


def run_write_benches(bootstrap: str | Connection, topics: tuple[str, str], modes: list[Mode], warmup: int, iterations: int,
                      block: int = 100, run_id: str = "writes",
                      progress: Callable[[int, int], None] | None = None) -> dict[Mode, WriteBenchResult]:
    """Run every mode, interleaved in blocks so that drift of the machine hits each alike."""
    benches = {mode: WriteBench(bootstrap, topics, mode, f"eosbench.bench.writes.{run_id}") for mode in modes}
    for bench in benches.values():
        for i in range(warmup):
            bench.iteration(i)
    latencies = {mode: np.empty(iterations, dtype=np.float64) for mode in modes}
    done = 0
    while done < iterations:
        size = min(block, iterations - done)
        for mode, bench in benches.items():
            for i in range(done, done + size):
                latencies[mode][i] = bench.iteration(warmup + i)
        done += size
        if progress:
            progress(done * len(modes), iterations * len(modes))
    return {mode: WriteBenchResult(mode, latencies[mode]) for mode in modes}
