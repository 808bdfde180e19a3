"""The results history: one row per benchmark cell, appended to a Delta table under `results/`.

Every row carries the run id, the git revision, the machine's facts, the cell's full
configuration and every figure, so that `eosbench report` (and anyone with Spark) can compare
runs across days and revisions. Delta gives the history its atomic appends and time travel.
"""

from __future__ import annotations

import os
import platform
import subprocess
from datetime import datetime, timezone
from pathlib import Path

RESULTS_DIR = Path("results")
TABLE = "bench_runs"
QUANTILES = tuple(range(0, 101))  # latency_quantiles_ms holds p0..p100, enough to draw a CDF

COLUMNS: tuple[tuple[str, str], ...] = (
    ("run_id", "string"), ("cell", "string"), ("recorded_at", "string"), ("bench", "string"),
    ("workload", "string"), ("git_revision", "string"), ("machine_json", "string"),
    ("brokers", "int"), ("record_size", "int"), ("abort_ratio", "double"), ("records_per_transaction", "int"),
    ("sink", "string"), ("records", "long"), ("seconds", "double"), ("throughput_rps", "double"),
    ("goodput_rps", "double"), ("latency_p50_ms", "double"), ("latency_p90_ms", "double"),
    ("latency_p99_ms", "double"), ("latency_p999_ms", "double"), ("latency_max_ms", "double"),
    ("latency_kind", "string"), ("latency_quantiles_ms", "array<double>"), ("baseline", "string"),
    ("overhead_ratio", "double"), ("abort_overhead", "double"), ("config_json", "string"),
    ("figures_json", "string"),
)


def quantiles_ms(latencies_s) -> list[float]:
    """p0..p100 of latencies given in seconds, in ms: the latency_quantiles_ms column ([] for none)."""
    import numpy as np

    if len(latencies_s) == 0:
        return []
    return [float(v) for v in np.percentile(np.asarray(latencies_s) * 1e3, QUANTILES)]


def table_path(results_dir: Path) -> Path:
    """Where the Delta table lives inside a results folder."""
    return results_dir / TABLE


def git_revision() -> str:
    """The checkout's commit (with '+dirty' for uncommitted changes), or 'unknown' outside git."""
    here = Path(__file__).resolve().parents[2]  # the checkout, above eosbench/bench/
    try:
        revision = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=here, capture_output=True,
                                  text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=here,
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return (revision + ("+dirty" if dirty else "")) if revision else "unknown"


def machine_facts() -> dict:
    """What the figures depend on: cores, memory, interpreter, Java, Spark, Kafka client."""
    import confluent_kafka
    import pyspark

    from conf.settings import load_jar_bundles

    try:
        memory_gib = round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError):
        memory_gib = None
    kafka = next((gav.split(":")[-1] for gav in load_jar_bundles()["kafka"].artifacts if ":kafka_" in gav), "?")
    return {"cpus": os.cpu_count(), "memory_gib": memory_gib, "python": platform.python_version(),
            "platform": platform.platform(), "pyspark": pyspark.__version__,
            "confluent_kafka": confluent_kafka.version()[0], "librdkafka": confluent_kafka.libversion()[0],
            "kafka": kafka, "hostname": platform.node()}


def new_row(**values) -> dict:
    """A row with every column present (None where not given) and the timestamp filled in."""
    row = {name: None for name, _ in COLUMNS}
    row["recorded_at"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    unknown = set(values) - set(row)
    if unknown:
        raise KeyError(f"not a results column: {sorted(unknown)}")
    row.update(values)
    return row


def append_rows(spark, rows: list[dict], results_dir: Path = RESULTS_DIR) -> Path:
    """Append rows to the Delta table (created on first use); return its path."""
    from pyspark.sql.types import _parse_datatype_string

    schema = _parse_datatype_string(", ".join(f"{name} {kind}" for name, kind in COLUMNS))
    path = table_path(results_dir).resolve()
    frame = spark.createDataFrame([tuple(row[name] for name, _ in COLUMNS) for row in rows], schema)
    frame.write.format("delta").mode("append").save(str(path))
    return path


def read_rows(spark, results_dir: Path = RESULTS_DIR) -> list[dict]:
    """Every row of the table, oldest first."""
    path = table_path(results_dir).resolve()
    if not (path / "_delta_log").exists():
        return []
    return [row.asDict() for row in spark.read.format("delta").load(str(path)).orderBy("recorded_at", "cell").collect()]
