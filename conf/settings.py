"""Typed settings for eosbench, read from the files beside this module.

This is the ground floor: it imports nothing of eosbench's own. Every command builds one
settings object from its flags, and everything that touches a file under conf/ goes through here
or, for the local servers' shapes and templates, through conf/local_servers.py.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

CONF_DIR = Path(__file__).resolve().parent
DEFAULT_BOOTSTRAP = "127.0.0.1:9092"


class SettingsError(ValueError):
    """A configuration value or file that cannot be used as given."""


def eosbench_home() -> Path:
    """Return the folder holding the jar cache and the local cluster's state."""
    return Path(os.environ.get("EOSBENCH_HOME", Path.home() / ".cache" / "eosbench")).expanduser()


# --------------------------------------------------------------------------- metrics endpoints

# A command's /metrics endpoint outlives its run by this many of Prometheus's scrape intervals,
# so that the final values are scraped at least once whatever the phase of the scrape.
METRICS_LINGER_SCRAPES = 2


def prometheus_scrape_interval_s(path: Path | None = None) -> float:
    """The global scrape interval of conf/prometheus/prometheus.yml, in seconds."""
    config = yaml.safe_load((path or CONF_DIR / "prometheus" / "prometheus.yml").read_text())
    return duration_seconds(str(config.get("global", {}).get("scrape_interval", "1m")))


def duration_seconds(text: str) -> float:
    """Seconds from a Prometheus duration such as '5s', '1m' or '500ms'."""
    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}
    for unit in sorted(units, key=len, reverse=True):
        if text.endswith(unit) and text[: -len(unit)].replace(".", "", 1).isdigit():
            return float(text[: -len(unit)]) * units[unit]
    raise SettingsError(f"not a duration: {text!r}")


def metrics_linger_seconds(metrics_port: int | None, linger_s: float | None) -> float:
    """How long a command keeps serving /metrics after its run: as given, else two scrape intervals."""
    if metrics_port is None:
        return 0.0
    return linger_s if linger_s is not None else METRICS_LINGER_SCRAPES * prometheus_scrape_interval_s()


def linger_for_final_scrape(seconds: float, url: str) -> None:
    """Keep this process (and its /metrics thread at `url`) alive so Prometheus scrapes the final values; Ctrl-C ends it."""
    if seconds <= 0:
        return
    print(f"serving the final metrics on {url} for {seconds:g} s (--metrics-linger)",
          file=sys.stderr, flush=True)
    try:
        time.sleep(seconds)
    except KeyboardInterrupt:
        pass


def yaml_error_line(exc: yaml.YAMLError) -> str:
    """A YAML error as one line that keeps its place: 'line 4, column 7: expected ... (while parsing ... at line 3, column 12)'."""
    def at(mark) -> str:
        return f"line {mark.line + 1}, column {mark.column + 1}"

    problem_mark, context_mark = getattr(exc, "problem_mark", None), getattr(exc, "context_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).strip().splitlines()[0]
    line = f"{at(problem_mark)}: {problem}" if problem_mark else problem
    context = getattr(exc, "context", None)
    if context:
        line += f" ({context}" + (f" at {at(context_mark)}" if context_mark else "") + ")"
    return line


def validation_error_line(exc: ValidationError) -> str:
    """The first error of a settings object's validation, as one line naming its flag."""
    error = exc.errors()[0]
    message = str(error["msg"]).removeprefix("Value error, ")
    if not error["loc"]:
        return message  # a cross-field rule, whose message names its flags
    field = "--" + "-".join(str(part) for part in error["loc"]).replace("_", "-")
    return f"{field}: {message}"


# --------------------------------------------------------------------------- files the user names

STDOUT = Path("-")  # `--output-json -`: the summary goes to stdout (and the human-readable lines to stderr)


def output_file_problem(path: Path) -> str | None:
    """Why a file cannot be written at `path` (checked before a run, so a long run never ends unwritten), or None."""
    if path == STDOUT:
        return None
    if path.is_dir():
        return "is a folder"
    if not path.parent.is_dir():
        return f"its folder {path.parent} does not exist"
    writable = os.access(path, os.W_OK) if path.exists() else os.access(path.parent, os.W_OK | os.X_OK)
    return None if writable else "is not writable"


def output_dir_problem(path: Path) -> str | None:
    """Why a folder cannot be created or written at `path`, or None."""
    existing = path
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        return f"{existing} is not a folder"
    return None if os.access(existing, os.W_OK | os.X_OK) else f"{existing} is not writable"


def write_output(path: Path, text: str) -> None:
    """Write a machine-readable summary to `path`, or to stdout for '-'."""
    if path == STDOUT:
        print(text, flush=True)
    else:
        path.write_text(text + "\n")


# --------------------------------------------------------------------------- client config


def parse_kv_pairs(pairs: list[str] | None) -> dict[str, str]:
    """Turn `k=v` strings (as given to --producer-props) into a dict; later pairs win."""
    config: dict[str, str] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise SettingsError(f"expected key=value, got {pair!r}")
        config[key.strip()] = value.strip()
    return config


def load_properties(path: str | Path) -> dict[str, str]:
    """Read a Java `.properties` file (comments, `=`/`:` separators, `\\` continuations)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SettingsError(f"cannot read properties file {path}: {exc.strerror}") from exc
    config: dict[str, str] = {}
    logical = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not logical and (not line or line[0] in "#!"):
            continue
        if line.endswith("\\"):
            logical += line[:-1]
            continue
        logical += line
        separators = [i for i in (logical.find("="), logical.find(":")) if i >= 0]
        if not separators:
            raise SettingsError(f"{path}: no '=' in line {logical!r}")
        cut = min(separators)
        config[logical[:cut].strip()] = logical[cut + 1 :].strip()
        logical = ""
    return config


# --------------------------------------------------------------------------- jar bundles


class JarBundle(BaseModel):
    """A set of Maven artifacts resolved together into one cache folder."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    about: str
    artifacts: tuple[str, ...]
    managed: tuple[str, ...] = ()
    # group:artifact pairs cut from every artifact's dependencies (hadoop-aws's 600 MB AWS SDK bundle).
    excluded: tuple[str, ...] = ()
    transitive: bool = True
    skip_jars_bundled_with_pyspark: bool = False
    # eosbench's own Java classes, compiled once into a jar that joins the bundle's.
    java_sources: tuple[str, ...] = ()
    # META-INF/services/<interface> files of that jar: interface -> implementing classes.
    services: dict[str, tuple[str, ...]] = {}
    # Resolved by the first command that uses it (or `eosbench setup --all`), not by a plain
    # `eosbench setup`, which resolves only what the demo runs on.
    on_first_use: bool = False

    @field_validator("artifacts", "managed")
    @classmethod
    def _gav(cls, coordinates: tuple[str, ...]) -> tuple[str, ...]:
        for gav in coordinates:
            if len(gav.split(":")) != 3:
                raise ValueError(f"expected group:artifact:version, got {gav!r}")
        return coordinates

    @field_validator("excluded")
    @classmethod
    def _ga(cls, coordinates: tuple[str, ...]) -> tuple[str, ...]:
        for ga in coordinates:
            if len(ga.split(":")) != 2:
                raise ValueError(f"expected group:artifact, got {ga!r}")
        return coordinates


def load_jar_bundles(path: Path = CONF_DIR / "jars.yaml") -> dict[str, JarBundle]:
    """Read the Maven bundles that eosbench resolves into its jar cache."""
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    return {name: JarBundle(name=name, **entry) for name, entry in raw["bundles"].items()}


def maven_settings_file() -> Path:
    """Return the Maven settings used for every resolution (mirrors everything to Central)."""
    return CONF_DIR / "maven" / "settings.xml"


# --------------------------------------------------------------------------- the JVMs' console


def console_log4j_config() -> Path:
    """Return the quiet console log4j2 configuration of the Spark driver and Java tools."""
    return CONF_DIR / "log4j2-console.properties"
