"""The benchmark sweep's workload files (conf/workloads/*.yaml), typed and checked."""

from __future__ import annotations

from itertools import product
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator

from conf.settings import CONF_DIR, SettingsError, yaml_error_line

# The workloads that ship with the package, found beside this module wherever it is installed.
WORKLOADS_DIR = CONF_DIR / "workloads"
DEFAULT_WORKLOAD = "default"

Sink = Literal["plain-base", "plain-tx", "kafka-alo", "kafka-eos", "delta"]
SPARK_SINKS: tuple[str, ...] = ("kafka-alo", "kafka-eos", "delta")
# Each sink's side-by-side baseline: the overhead ratio of a cell is its throughput over this one's.
BASELINE_OF: dict[str, str] = {"plain-tx": "plain-base", "kafka-eos": "kafka-alo", "delta": "kafka-alo"}


class Grid(BaseModel):
    """The axes; every combination is one cell."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    brokers: tuple[Literal[1, 3], ...] = (1,)
    record_size: tuple[int, ...] = (100,)
    abort_ratio: tuple[float, ...] = (0.0,)
    records_per_transaction: tuple[int, ...] = (1, 100)
    sink: tuple[Sink, ...] = ("plain-base", "plain-tx", "kafka-alo", "kafka-eos")

    @field_validator("abort_ratio")
    @classmethod
    def _ratios(cls, ratios: tuple[float, ...]) -> tuple[float, ...]:
        if any(not 0.0 <= r < 1.0 for r in ratios):
            raise ValueError("abort ratios must lie in [0, 1)")
        return ratios

    @field_validator("record_size", "records_per_transaction")
    @classmethod
    def _positive(cls, values: tuple[int, ...]) -> tuple[int, ...]:
        if not values or any(v <= 0 for v in values):
            raise ValueError("needs one or more positive values")
        return values


class Workload(BaseModel):
    """One sweep: the grid, the input size and how hard each cell is driven."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    description: str = ""
    records: int = Field(100_000, gt=0, description="records per input topic (one per broker count, size and ratio)")
    partitions: int = Field(4, gt=0)
    repeats: int = Field(1, gt=0, description="rounds over the grid, the cell order rotated each round")
    fill_records_per_transaction: int = Field(1_000, gt=0, description="the input producer's transactions (at"
                                              " least ~100 per input, so the abort ratio is realised)")
    fill_transaction_duration_ms: int = Field(100, gt=0, description="the anchors' transactions")
    warmup_units: int = Field(50, ge=0, description="plain-client units run before measuring")
    plain_max_units: int = Field(2_000, gt=0, description="measured units per plain-client cell")
    spark_max_batches: int = Field(40, gt=0, description="Spark cells needing more micro-batches are skipped")
    producer_config: dict[str, str] = Field(default_factory=dict, description="librdkafka properties for the"
                                            " plain-client cells' producers (recorded with every row)")
    anchors: bool = Field(True, description="run Java ProducerPerformance beside eosbench produce")
    grid: Grid = Grid()

    @field_validator("producer_config", mode="before")
    @classmethod
    def _properties_as_strings(cls, config):
        # librdkafka takes every property as a string; YAML would make `retry.backoff.ms: 5` an int.
        if isinstance(config, dict):
            return {str(k): str(v).lower() if isinstance(v, bool) else str(v) if isinstance(v, (int, float, str)) else v
                    for k, v in config.items()}
        return config

    def cells(self) -> list[dict]:
        """Every combination of the grid, as plain dicts."""
        g = self.grid
        return [dict(brokers=b, record_size=s, abort_ratio=r, records_per_transaction=n, sink=k)
                for b, s, r, n, k in product(g.brokers, g.record_size, g.abort_ratio, g.records_per_transaction, g.sink)]


def packaged_workloads() -> list[str]:
    """The names of the workloads that ship with the package."""
    return sorted(path.stem for path in WORKLOADS_DIR.glob("*.yaml"))


def workload_path(name_or_path: str | Path) -> Path:
    """A workload file: a path as given, or a bare name ('smoke', 'smoke.yaml') of a packaged workload."""
    path = Path(name_or_path)
    if path.exists() or len(path.parts) > 1:
        return path
    packaged = WORKLOADS_DIR / (path.name if path.suffix else f"{path.name}.yaml")
    return packaged if packaged.exists() else path


def load_workload(path: Path) -> Workload:
    """Read and check a workload file (SettingsError with one line on any problem)."""
    try:
        data = yaml.safe_load(Path(path).read_text())
    except OSError as exc:
        raise SettingsError(f"cannot read workload {path}: {exc.strerror}"
                            f" (packaged workloads: {', '.join(packaged_workloads())})") from exc
    except yaml.YAMLError as exc:
        raise SettingsError(f"workload {path} is not valid YAML: {yaml_error_line(exc)}") from exc
    if not isinstance(data, dict):
        raise SettingsError(f"workload {path} must be a mapping")
    try:
        return Workload(**data)
    except ValueError as exc:
        error = exc.errors()[0] if hasattr(exc, "errors") else None
        where = ".".join(str(p) for p in error["loc"]) if error else ""
        message = str(error["msg"]).removeprefix("Value error, ") if error else str(exc)
        raise SettingsError(f"workload {path}: {where}: {message}") from exc
