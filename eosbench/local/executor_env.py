"""The Python environment shipped to Spark's executors: `eosbench package` builds it once per content.

PySpark's guide ("Python Package Management") ships an environment with conda-pack, venv-pack or
PEX. This kind of machine has no conda; a PEX carries no interpreter either and is shipped as a
file that then runs as one; venv-pack packs a plain venv, which is what the project already is.
So the archive is a venv packed by venv-pack: the job's runtime dependencies, copied file for
file from the running interpreter's environment (the pinned versions, no network needed), and
eosbench itself installed as a regular distribution, not editable, so that executors import
`streaming` from the archive and never from a source tree. One archive, one digest: the code is inside the
environment rather than in a `--py-files` zip, so a driver in cluster mode and the executors get
the same code from the same `--archives` entry, and a change to either reaches both.

venv-pack keeps `bin/python` a link to the interpreter the venv was made from: every node needs
that Python (3.11) at the same path, as the archive's `environment/bin/python` names it.

PySpark itself stays out: Spark puts its own `pyspark.zip` and py4j on the PYTHONPATH of every
Python worker (and of a spark-submit driver), from the distribution that runs them.
"""

from __future__ import annotations

import base64
import compileall
import contextlib
import hashlib
import importlib.metadata
import os
import shutil
import sys
import tempfile
import time
import venv
from dataclasses import dataclass
from pathlib import Path

from conf.settings import eosbench_home
from eosbench.console.errors import EnvironmentProblem
from eosbench.local.jars import cache_lock

# What the job imports on its driver and executors: the sink, its Kafka clients, the Arrow
# transforms (PySpark's mapInArrow also insists on pandas), the settings and the driver's
# metrics. pyproject's other dependencies are the face's (rich, matplotlib) or provided by
# Spark (pyspark) or unused by the job's Python (delta-spark: the Delta sink needs its jar only).
JOB_REQUIREMENTS = ("confluent-kafka", "pydantic", "pyyaml", "numpy", "pyarrow", "pandas", "prometheus-client",
                    "kafka-python", "cryptography")
PROVIDED_BY_SPARK = frozenset({"pyspark", "py4j"})
PROJECT_PACKAGES = ("conf", "producers", "streaming", "eosbench")
ARCHIVE_NAME = "eosbench-environment.tar.gz"
# The name spark-submit's `--archives …#environment` unpacks it under, in each executor's folder.
ARCHIVE_ALIAS = "environment"
EXECUTOR_PYTHON = f"./{ARCHIVE_ALIAS}/bin/python"
_COMPLETE_MARKER = ".complete"
# Older builds stay for jobs that may still be submitting them (another checkout, a running soak).
KEPT_BUILDS = 3
# gzip level 1: the archive is built on every change of the code, and level 1 packs several
# times faster than venv-pack's default 4 for a few percent more bytes.
_COMPRESS_LEVEL = 1
# Files that only a compiler, a type checker or a packager reads, left out of the archive:
# C and C++ headers and sources, Cython's sources and declarations, type stubs, and numpy's
# build tools (distutils, f2py, its PyInstaller hook; numpy imports them only when asked by name).
# Executors import and build nothing. Each file costs every fresh YARN NodeManager cache a
# chmod process of its own when it localizes the archive (Hadoop without its native library
# forks one per file and folder): 18-35 s for the ~5,850 entries these rules cut by a fifth.
# Data files stay, timezone data above all: the executors of a user's cluster have only what
# was shipped.
_BUILD_ONLY_SUFFIXES = (".h", ".hpp", ".c", ".cc", ".cpp", ".pyx", ".pxd", ".pxi", ".pyi")
_BUILD_ONLY_FOLDERS = (("pyarrow", "include"), ("pyarrow", "src"), ("numpy", "_core", "include"),
                       ("numpy", "distutils"), ("numpy", "f2py"), ("numpy", "_pyinstaller"))


@dataclass(frozen=True)
class ExecutorEnvironment:
    """A built archive and its unpacked copy (the driver's Python on the submitting machine)."""

    archive: Path
    unpacked: Path
    built_s: float | None  # None when it came from the cache

    @property
    def driver_python(self) -> Path:
        """The unpacked copy's interpreter, for a driver in client mode."""
        return self.unpacked / "bin" / "python"

    @property
    def job_file(self) -> Path:
        """The job's entry file inside the unpacked copy, so that the driver too runs the packed code."""
        return self.site_packages / "streaming" / "job.py"

    @property
    def site_packages(self) -> Path:
        """The unpacked copy's site-packages folder."""
        return self.unpacked / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"

    @property
    def archives_entry(self) -> str:
        """What `--archives` and `spark.archives` take."""
        return f"{self.archive}#{ARCHIVE_ALIAS}"


def ships_environment(master: str | None) -> bool:
    """Whether a master's executors need the archive: on a cluster they share no Python with the driver."""
    return bool(master) and (master.startswith("spark://") or master == "yarn")


def executor_conf(environment: ExecutorEnvironment) -> dict[str, str]:
    """The Spark settings that ship the archive and run the executors' Python from it."""
    return {"spark.archives": environment.archives_entry, "spark.pyspark.python": EXECUTOR_PYTHON}


def spark_submit_command(environment: ExecutorEnvironment, master: str, jars: list[Path], job_arguments: list[str],
                         conf: dict[str, str] | None = None) -> list[str]:
    """The spark-submit command that runs the job on `master` with the packed environment, `jars` and `conf`."""
    from eosbench.local.spark_cluster import spark_home

    # YARN's settings (yarn_client_conf) ship the archive by spark.yarn.dist.archives, and --archives
    # would add it a second time (spark.archives), which the YARN client refuses.
    archives = [] if "spark.yarn.dist.archives" in (conf or {}) else ["--archives", environment.archives_entry]
    return [str(spark_home() / "bin" / "spark-submit"), "--master", master, *archives,
            "--conf", f"spark.pyspark.python={EXECUTOR_PYTHON}",
            "--conf", f"spark.pyspark.driver.python={environment.driver_python}",
            *[part for key, value in (conf or {}).items() for part in ("--conf", f"{key}={value}")],
            "--jars", ",".join(str(jar) for jar in jars),
            str(environment.job_file), *job_arguments]


def environment_cache_dir() -> Path:
    """The folder under which each archive lives, one sub-folder per digest."""
    return eosbench_home() / "executor-env"


def requirement_closure(names=JOB_REQUIREMENTS) -> list[importlib.metadata.Distribution]:
    """The installed distributions `names` need, transitively, without what Spark provides."""
    from packaging.requirements import Requirement

    found: dict[str, importlib.metadata.Distribution] = {}
    pending = list(names)
    while pending:
        name = _normalized(pending.pop())
        if name in found or name in PROVIDED_BY_SPARK:
            continue
        try:
            distribution = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            raise EnvironmentProblem(f"{name} is not installed in {sys.prefix}; run `make setup`") from None
        found[name] = distribution
        for text in distribution.requires or ():
            requirement = Requirement(text)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                pending.append(requirement.name)
    return sorted(found.values(), key=lambda d: _normalized(d.metadata["Name"]))


def _normalized(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def project_root() -> Path:
    """The source tree eosbench is installed from (an editable install points here)."""
    import streaming

    root = Path(streaming.__file__).resolve().parent.parent
    if not (root / "pyproject.toml").exists():
        raise EnvironmentProblem(f"eosbench's source tree (pyproject.toml beside streaming/) is not at {root};"
                                 " `eosbench package` builds from a checkout")
    return root


def _project_files(root: Path) -> list[Path]:
    """What decides the installed code: pyproject.toml and every file of the four packages."""
    files = [root / "pyproject.toml"]
    for package in PROJECT_PACKAGES:
        files += sorted(p for p in (root / package).rglob("*")
                        if p.is_file() and "__pycache__" not in p.parts and not p.name.endswith(".pyc"))
    return files


def environment_digest(distributions: list[importlib.metadata.Distribution], root: Path) -> str:
    """A digest of everything that decides the archive: interpreter, packed versions, the code, venv-pack."""
    digest = hashlib.sha256()
    digest.update(f"python {sys.version_info[:3]} venv-pack {importlib.metadata.version('venv-pack')}\n".encode())
    for distribution in distributions:
        digest.update(f"{distribution.metadata['Name']}=={distribution.version}\n".encode())
    for path in _project_files(root):
        digest.update(f"{path.relative_to(root)}\n".encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def executor_environment() -> ExecutorEnvironment:
    """The archive for the current code and pinned dependencies: from the cache, else built (once)."""
    distributions = requirement_closure()
    root = project_root()
    target = environment_cache_dir() / environment_digest(distributions, root)
    cached = ExecutorEnvironment(target / ARCHIVE_NAME, target / ARCHIVE_ALIAS, None)
    if (target / _COMPLETE_MARKER).exists():
        return cached
    with cache_lock(environment_cache_dir()):
        if (target / _COMPLETE_MARKER).exists():
            return cached
        started = time.monotonic()
        print(f"eosbench: packing the executors' Python environment into {cached.archive} (once per code change)",
              file=sys.stderr)
        _build_into(target, distributions, root)
        _drop_older_builds(keep=KEPT_BUILDS)
        return ExecutorEnvironment(cached.archive, cached.unpacked, time.monotonic() - started)


def _drop_older_builds(keep: int) -> None:
    """Remove all but the `keep` newest builds: each change of code makes one of about 120 MB."""
    builds = sorted((folder for folder in environment_cache_dir().iterdir() if (folder / _COMPLETE_MARKER).exists()),
                    key=lambda folder: (folder / _COMPLETE_MARKER).stat().st_mtime, reverse=True)
    for folder in builds[keep:]:
        shutil.rmtree(folder, ignore_errors=True)


def _build_into(target: Path, distributions: list[importlib.metadata.Distribution], root: Path) -> None:
    import venv_pack

    shutil.rmtree(target, ignore_errors=True)
    with tempfile.TemporaryDirectory(prefix="build-", dir=environment_cache_dir()) as work:
        staging = Path(work) / "venv"
        # The venv's python links to the interpreter this one was made from, as venv-pack expects.
        venv.EnvBuilder(with_pip=False, symlinks=True).create(staging)
        site_packages = staging / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
        for distribution in distributions:
            _copy_distribution(distribution, site_packages)
        _install_project(root, site_packages)
        for package in PROJECT_PACKAGES:  # as pip would: executors then import without compiling
            compileall.compile_dir(site_packages / package, quiet=1)
        packed = Path(work) / ARCHIVE_NAME
        # venv-pack draws its bar on stdout; stdout is kept for the spark-submit line.
        with contextlib.redirect_stdout(sys.stderr):
            venv_pack.Env(str(staging)).pack(str(packed), verbose=sys.stderr.isatty(),
                                             compress_level=_COMPRESS_LEVEL)
        # The staging venv holds the very files packed; it stays as the client-mode driver's copy.
        staged = Path(work) / "done"
        staged.mkdir()
        packed.chmod(0o644)  # venv-pack writes it through mkstemp, readable by its owner alone
        packed.rename(staged / ARCHIVE_NAME)
        staging.rename(staged / ARCHIVE_ALIAS)
        (staged / _COMPLETE_MARKER).write_text("\n".join(f"{d.metadata['Name']}=={d.version}" for d in distributions))
        staged.rename(target)


def _copy_distribution(distribution: importlib.metadata.Distribution, site_packages: Path) -> None:
    """Copy one installed distribution's files (as its RECORD lists them) into site-packages."""
    installed_in = Path(distribution.locate_file(""))
    for record in distribution.files or ():
        if record.parts[0] == "..":  # console scripts in bin/: the executors run none
            continue
        if "tests" in record.parts:  # numpy's, pandas' and pyarrow's own test suites: a sixth of the bytes
            continue
        if _build_only(record.parts):
            continue
        source = installed_in / record
        if not source.is_file():
            continue
        destination = site_packages / record
        destination.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(source, destination)  # the cache is usually on the venv's disk: no bytes copied
        except OSError:
            shutil.copy2(source, destination)


def _build_only(parts: tuple[str, ...]) -> bool:
    """Whether a file of an installed distribution is one that no executor reads (_BUILD_ONLY_SUFFIXES, _FOLDERS)."""
    return parts[-1].endswith(_BUILD_ONLY_SUFFIXES) or any(parts[:len(folder)] == folder
                                                           for folder in _BUILD_ONLY_FOLDERS)


def _install_project(root: Path, site_packages: Path) -> None:
    """Install eosbench's packages into site-packages as a regular (not editable) distribution.

    What installing its pure-Python wheel would do, done offline and without a build backend:
    the package files, and a dist-info with the installed distribution's METADATA and a RECORD.
    """
    records = []
    for path in _project_files(root):
        relative = path.relative_to(root)
        if relative.parts[0] not in PROJECT_PACKAGES:
            continue
        (site_packages / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, site_packages / relative)
        content = path.read_bytes()
        hashed = base64.urlsafe_b64encode(hashlib.sha256(content).digest()).rstrip(b"=").decode()
        records.append(f"{relative},sha256={hashed},{len(content)}")
    installed = importlib.metadata.distribution("eosbench")
    dist_info = site_packages / f"eosbench-{installed.version}.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text(installed.read_text("METADATA") or "")
    (dist_info / "INSTALLER").write_text("eosbench package\n")
    records += [f"{dist_info.name}/METADATA,,", f"{dist_info.name}/INSTALLER,,", f"{dist_info.name}/RECORD,,"]
    (dist_info / "RECORD").write_text("\n".join(records) + "\n")
