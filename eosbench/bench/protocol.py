"""`eosbench bench protocol`: the transaction protocol side by side, TV1 against TV2, on one input.

Kafka 4.x finalizes `transaction.version=2` (KIP-890): a Java 4.x producer stops sending
AddPartitionsToTxn and the partition leader adds the partition for it. librdkafka 2.16 and
kafka-python still speak TV1. Per transaction size, one input partition is filled once by
eosbench's seeded producer (some transactions aborted, so the log holds markers) and every
engine copies all of it, transactionally, to an output topic of its own:

  - librdkafka: the plain consume-transform-produce loop (`producers.streaming_bench`), TV1;
  - kafka-python, and kafka-python with pre-registration (KIP-609): the same loop on
    `streaming.sink.preregister`'s client, TV1;
  - java-tv2 and java-tv1: Kafka's own `TransactionalMessageCopier` from the cached kafka-tools
    jar, with the cluster's `transaction.version` feature at 2 and at 1 (FeatureCommand), put back
    to where it was afterwards, failure or not. The copier takes no client settings but
    --broker-list, so on a secured cluster (--command-config with security settings) the Java
    engines are skipped with a printed line, and the Python engines and FeatureCommand (which
    takes the file) run as on any other.

The first transaction of every engine is warm-up (connections, coordinator, group): rates run
from its end to the end of the last one. The Python loops time each transaction from begin to
commit returned, and begin to the first send. The copier prints a JSON progress line before
every poll; its transactions are the steps in `totalProcessed` and their latency the time
between two lines (poll included, millisecond clock). Its `remaining` counts markers and never
reaches 0 here, so it is stopped once `totalProcessed` equals the input's committed records. The
brokers' request counters (JMX exporter) are read around each engine's run, so the requests per
transaction are those the protocol made.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import threading
import urllib.request
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path

from conf.client_config import Connection, connection
from conf.local_servers import JMX_EXPORTER_PORT_OFFSET
from eosbench.bench.inputs import fill_input
from eosbench.console.errors import BadInput, CheckFailed, EnvironmentProblem
from eosbench.local.jars import kafka_tools_command, transactional_copier_command
from eosbench.local.kafka_admin import cluster_metadata, create_topic

# numpy, the plots (matplotlib), the progress bar (rich) and the producers are imported where they are
# used: every `eosbench` command line reads ENGINES from here to build its parser (bench/commands.py).

# librdkafka's loop; kafka-python's, without and with pre-registration; Kafka's copier at each transaction.version.
PYTHON_ENGINES = ("librdkafka", "kafka-python", "kafka-python+prereg")
JAVA_LEVELS = {"java-tv2": 2, "java-tv1": 1}
ENGINES = (*PYTHON_ENGINES, *JAVA_LEVELS)  # the table's order too
PYTHON_CLIENTS_TV = 1  # librdkafka 2.16 and kafka-python add partitions themselves at any feature level
TXN_REQUESTS = ("AddPartitionsToTxn", "AddOffsetsToTxn", "TxnOffsetCommit", "EndTxn")
# AddPartitionsToTxn v4 and later are broker to coordinator only (KIP-890's verification and TV2's
# implicit add); a client sends v3 or lower. The exporter keeps the version, so the two are told apart.
BROKER_ONLY_ADD_PARTITIONS_VERSION = 4
FILL_ABORT_RATIO = 0.2
COPIER_TIMEOUT_S = 300.0
EXPORTER_TIMEOUT_S = 60.0
_COUNTER_LINE = re.compile(r'^kafka_network_requestmetrics_requests_total\{(?P<labels>[^}]*)\}\s+(?P<value>\S+)$')
_LABEL = re.compile(r'(\w+)="([^"]*)"')


@dataclass
class Arm:
    """One engine at one transaction size: what it copied, how fast, and what the brokers saw."""

    engine: str
    size: int
    transaction_version: int  # the protocol the engine spoke
    records: int  # measured: after the warm-up transaction
    transactions: int
    seconds: float
    latencies_ms: list[float]
    first_send_ms: list[float] | None  # begin to the first send; None where the engine's output has no such time
    all_transactions: int  # warm-up included, which the request counts cover too
    requests: dict[str, int] = field(default_factory=dict)

    def figures(self) -> dict:
        """The row of the table: rates, latency percentiles and requests per transaction."""
        import numpy as np

        latencies = np.asarray(self.latencies_ms)
        row = {"engine": self.engine, "size": self.size, "transaction_version": self.transaction_version,
               "records": self.records, "transactions": self.transactions, "seconds": self.seconds,
               "records_per_sec": self.records / self.seconds if self.seconds else 0.0,
               "transactions_per_sec": self.transactions / self.seconds if self.seconds else 0.0,
               "p50_ms": float(np.percentile(latencies, 50)) if latencies.size else None,
               "p99_ms": float(np.percentile(latencies, 99)) if latencies.size else None,
               "first_send_p50_ms": float(np.percentile(self.first_send_ms, 50)) if self.first_send_ms else None,
               "first_send_p99_ms": float(np.percentile(self.first_send_ms, 99)) if self.first_send_ms else None}
        row.update({f"{name}_per_txn": count / self.all_transactions
                    for name, count in self.requests.items()})
        return row


# ----------------------------------------------------------------------------- the brokers


def exporter_urls(bootstrap: str | Connection) -> list[str]:
    """Every broker's JMX-exporter endpoint, at the local cluster's client port + 200."""
    return [f"http://{broker.host}:{broker.port + JMX_EXPORTER_PORT_OFFSET}/metrics"
            for broker in cluster_metadata(bootstrap).brokers.values()]


def request_counts(urls: list[str], requests: tuple[str, ...] = TXN_REQUESTS) -> Counter:
    """The brokers' counters of `requests`, summed; AddPartitionsToTxn split into client and broker."""
    counts: Counter = Counter()
    for url in urls:
        try:
            # A loaded machine's first scrape of a new broker took over 10 s (the exporter walks every MBean).
            with urllib.request.urlopen(url, timeout=EXPORTER_TIMEOUT_S) as response:
                text = response.read().decode()
        except OSError as exc:
            raise EnvironmentProblem(f"cannot read the broker's JMX exporter at {url}: {exc}") from exc
        for line in text.splitlines():
            match = _COUNTER_LINE.match(line)
            if not match:
                continue
            labels = dict(_LABEL.findall(match["labels"]))
            request = labels.get("request")
            if request not in requests:
                continue
            if request == "AddPartitionsToTxn":
                version = int(labels.get("version") or 0)
                request += "_broker" if version >= BROKER_ONLY_ADD_PARTITIONS_VERSION else "_client"
            counts[request] += int(float(match["value"]))
    return counts


def _request_names() -> list[str]:
    return ["AddPartitionsToTxn_client", "AddPartitionsToTxn_broker", *TXN_REQUESTS[1:]]


def transaction_version(bootstrap: str | Connection) -> int:
    """The cluster's finalized `transaction.version`, from Kafka's FeatureCommand."""
    output = _feature_command(bootstrap, "describe")
    match = re.search(r"Feature:\s*transaction\.version\s.*?FinalizedVersionLevel:\s*(\d+)", output)
    if not match:
        raise EnvironmentProblem("FeatureCommand describe shows no finalized transaction.version on this cluster")
    return int(match.group(1))


def set_transaction_version(bootstrap: str | Connection, level: int, current: int) -> None:
    """Upgrade or downgrade the cluster's `transaction.version` from `current` to `level`.

    FeatureCommand exits non-zero unless the controller applied the change; each JVM it takes
    costs seconds on a loaded machine, so the level is not described again after it.
    """
    if current != level:
        _feature_command(bootstrap, "upgrade" if level > current else "downgrade",
                         "--feature", f"transaction.version={level}")


@contextmanager
def transaction_version_at(bootstrap: str | Connection, level: int, original: int) -> Iterator[None]:
    """Run the body with the feature at `level`, and put back `original`, whatever happens."""
    if level == original:
        yield
        return
    try:
        set_transaction_version(bootstrap, level, original)
        yield
    finally:  # from the level it really has: the switch itself may be what failed
        set_transaction_version(bootstrap, original, transaction_version(bootstrap))


def _feature_command(bootstrap: str | Connection, *args: str) -> str:
    cluster = connection(bootstrap)
    completed = subprocess.run([*kafka_tools_command("FeatureCommand", heap_mb=128), "--bootstrap-server",
                                cluster.bootstrap, *cluster.tool_arguments(), *args],
                               capture_output=True, text=True, timeout=120)
    if completed.returncode != 0:
        raise CheckFailed(f"FeatureCommand {' '.join(args)} failed: {(completed.stderr or completed.stdout).strip()[-300:]}")
    return completed.stdout


# ----------------------------------------------------------------------------- the engines


def _python_arm(bootstrap: str | Connection, engine: str, input_topic: str, output: str, size: int, committed: int,
                group: str, _cluster_level: int) -> Arm:
    """The consume-transform-produce loop on librdkafka or kafka-python, one transaction per `size` records."""
    from producers.streaming_bench import StreamingBench

    factory = None
    if engine.startswith("kafka-python"):
        # built as factory(config, txn id, group id)
        from streaming.sink.preregister import PreRegisteringProducer as factory
    bench = StreamingBench(bootstrap, input_topic, output, "tx", group_id=group, records_per_transaction=size,
                           producer_factory=factory, pre_register=engine == "kafka-python+prereg")
    try:
        bench.warm(1)
        remaining = committed - min(size, committed)
        latencies, records, seconds = bench.measure(math.ceil(remaining / size))
    finally:
        bench.close()
    return Arm(engine, size, PYTHON_CLIENTS_TV, records, len(latencies), seconds, [1e3 * s for s in latencies],
               [1e3 * s for s in bench.first_send_after_begin_s[1:]], 1 + len(latencies))


def copier_progress(lines: list[str]) -> list[tuple[float, int]]:
    """(seconds, totalProcessed) of the copier's ProcessLoop lines, in order."""
    points = []
    for line in lines:
        try:
            status = json.loads(line)
        except ValueError:
            continue
        if isinstance(status, dict) and status.get("stage") == "ProcessLoop":
            stamp = datetime.strptime(status["time"], "%Y/%m/%d %H:%M:%S:%f").timestamp()
            points.append((stamp, int(status["totalProcessed"])))
    return points


def copier_arm(engine: str, size: int, level: int, points: list[tuple[float, int]]) -> Arm:
    """An Arm from the copier's progress: a transaction is a step up of totalProcessed."""
    steps = [(before, after) for before, after in zip(points, points[1:]) if after[1] > before[1]]
    if not steps:
        raise CheckFailed(f"{engine}: the copier committed nothing")
    warm, measured = steps[0], steps[1:]
    start, end = warm[1], (measured[-1][1] if measured else warm[1])
    return Arm(engine, size, level, end[1] - start[1], len(measured), end[0] - start[0],
               [1e3 * (after[0] - before[0]) for before, after in measured], None, len(steps))


def _java_arm(bootstrap: str | Connection, engine: str, input_topic: str, output: str, size: int, committed: int,
              group: str, level: int) -> Arm:
    """Kafka's TransactionalMessageCopier on partition 0, stopped once it has copied every committed record."""
    command = transactional_copier_command(connection(bootstrap).bootstrap, input_topic, 0, output, group, f"{group}.copier", size)
    copier = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    watchdog = threading.Timer(COPIER_TIMEOUT_S, copier.kill)
    watchdog.start()
    lines: list[str] = []
    try:
        for line in copier.stdout:
            lines.append(line)
            points = copier_progress([line])
            if points and points[0][1] >= committed:
                break
    finally:
        watchdog.cancel()
        copier.terminate()  # its shutdown hook closes the clients; no transaction is open between polls
        try:
            _, errors = copier.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            copier.kill()
            _, errors = copier.communicate()
    points = copier_progress(lines)
    if not points or points[-1][1] != committed:
        raise CheckFailed(f"{engine} at {size}: copied {points[-1][1] if points else 0} of {committed} records"
                          f" ({errors.strip()[-300:] or 'no error output'})")
    return copier_arm(engine, size, level, points)


# ----------------------------------------------------------------------------- the bench


def _arm(bootstrap: str | Connection, engine: str, size: int, source: dict, run_id: str, replication: int, urls: list[str],
         level: int) -> Arm:
    """One engine at one size on its own output topic and group, with the brokers' request counts around it."""
    output = f"{source['topic']}-{engine.replace('+', '-')}"
    create_topic(bootstrap, output, 1, replication)
    group = f"eosbench-protocol-{run_id}-{engine.replace('+', '-')}-n{size}"
    copy = _java_arm if engine in JAVA_LEVELS else _python_arm
    before = request_counts(urls)
    arm = copy(bootstrap, engine, source["topic"], output, size, source["committed"], group, level)
    after = request_counts(urls)
    arm.requests = {name: after[name] - before[name] for name in _request_names()}
    return arm


def _fill(bootstrap: str | Connection, topic: str, records: int, size: int, replication: int) -> int:
    """One input partition, written in transactions of `size` records, a seeded fifth aborted; return the committed."""
    return fill_input(bootstrap, topic, records, 1, replication, records_per_transaction=size,
                      transaction_abort_ratio=FILL_ABORT_RATIO, seed=18)


def engines_on(cluster: Connection, engines: list[str]) -> tuple[list[str], str | None]:
    """The engines that can run on this cluster, and the line that says why the others are skipped (None: none is).

    Kafka's TransactionalMessageCopier (kafka-tools 4.3.1) builds its clients from --broker-list
    alone: it has no option for a properties file, so on a secured cluster the Java engines cannot
    connect, and only the Python ones run.
    """
    java = [engine for engine in engines if engine in JAVA_LEVELS]
    if not cluster.security or not java:
        return engines, None
    return ([engine for engine in engines if engine not in JAVA_LEVELS],
            f"skipping {', '.join(java)}: Kafka's TransactionalMessageCopier takes no client security settings"
            " (only --broker-list), so it cannot reach a secured cluster")


def run(bootstrap: str | Connection, sizes: list[int], transactions: int, engines: list[str], results_dir: Path,
        output_json: Path | None = None) -> dict:
    """Fill one input per size, run every engine that can reach the cluster on it, print the table; return the report."""
    from eosbench.console.progress import progress_callback

    engines, skipped = engines_on(connection(bootstrap), engines)
    if not engines:
        raise BadInput("bench protocol on a secured cluster runs only the Python engines"
                       f" ({', '.join(PYTHON_ENGINES)}), and --engines named none of them")
    if skipped:
        print(skipped, flush=True)
    run_id = uuid.uuid4().hex[:8]
    brokers = len(cluster_metadata(bootstrap).brokers)
    replication = min(3, brokers)
    urls = exporter_urls(bootstrap)
    request_counts(urls)  # fail before the long part if the exporter cannot be read
    original_level = transaction_version(bootstrap)
    arms: list[Arm] = []
    inputs = {}
    for size in sizes:
        topic = f"eosbench-protocol-{run_id}-n{size}"
        committed = _fill(bootstrap, topic, transactions * size, size, replication)
        inputs[size] = {"topic": topic, "committed": committed}
        print(f"filled {topic}: {committed:,} committed records in transactions of {size}", flush=True)
    with progress_callback("protocol bench arms") as progress:
        total = len(engines) * len(sizes)
        for engine in engines:
            # One switch of the feature per Java engine, for all its sizes.
            level = JAVA_LEVELS.get(engine, original_level)
            with transaction_version_at(bootstrap, level, original_level):
                for size in sizes:
                    arm = _arm(bootstrap, engine, size, inputs[size], run_id, replication, urls, level)
                    arms.append(arm)
                    if progress:
                        progress(len(arms), total)
                    print(_format_row(arm.figures()), flush=True)
    report = {"run_id": run_id, "bootstrap": str(bootstrap), "brokers": brokers, "sizes": sizes, "skipped": skipped,
              "transactions_per_size": transactions, "fill_abort_ratio": FILL_ABORT_RATIO,
              "original_transaction_version": original_level,  # the cluster's, which the Python engines ran at
              "transaction_version_after": transaction_version(bootstrap), "inputs": inputs,
              "arms": [arm.figures() for arm in arms], "raw": [asdict(arm) for arm in arms]}
    results_dir.mkdir(parents=True, exist_ok=True)
    report["plot"] = str(_plot(report, results_dir / f"protocol-{run_id}.png"))
    report["json"] = str(output_json or results_dir / f"protocol-{run_id}.json")
    Path(report["json"]).write_text(json.dumps(report, indent=2))
    print(table(report))
    print(f"plot: {report['plot']}\njson: {report['json']}")
    return report


def _plot(report: dict, path: Path) -> Path:
    from eosbench.console.plots import lines_png

    series = {row["engine"]: {} for row in report["arms"]}
    spread = {row["engine"]: {} for row in report["arms"]}
    for row in report["arms"]:
        if row["p50_ms"] is not None:
            series[row["engine"]][row["size"]] = row["p50_ms"]
            spread[row["engine"]][row["size"]] = (row["p50_ms"], row["p99_ms"])
    return lines_png(series, path, f"Per-transaction latency against transaction size, {report['brokers']} broker(s):"
                     " p50, whiskers to p99", "records per transaction", "ms per transaction",
                     log_x=True, log_y=True, spread=spread)


HEADER = ("engine", "TV", "size", "txns", "records/s", "txns/s", "p50 ms", "p99 ms", "first send p50 ms",
          "AddPartitions client/txn", "AddPartitions broker/txn", "AddOffsets/txn", "TxnOffsetCommit/txn", "EndTxn/txn")


def _cells(row: dict) -> list[str]:
    def number(value, digits: int) -> str:
        return "n/a" if value is None else f"{value:,.{digits}f}"
    return [row["engine"], str(row["transaction_version"]), f"{row['size']:,}", f"{row['transactions']:,}",
            number(row["records_per_sec"], 0), number(row["transactions_per_sec"], 1), number(row["p50_ms"], 2),
            number(row["p99_ms"], 2), number(row["first_send_p50_ms"], 3),
            *(number(row.get(f"{name}_per_txn"), 2) for name in _request_names())]


def _format_row(row: dict) -> str:
    return "  ".join(f"{header} {cell}" for header, cell in zip(HEADER, _cells(row)) if header in
                     ("engine", "TV", "size", "records/s", "txns/s", "p50 ms", "p99 ms"))


def table(report: dict) -> str:
    """The arms as a Markdown table (the form docs/benchmarks.md keeps)."""
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    for row in sorted(report["arms"], key=lambda r: (r["size"], ENGINES.index(r["engine"]))):
        lines.append("| " + " | ".join(_cells(row)) + " |")
    return "\n".join(lines)
