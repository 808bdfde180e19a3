"""Resolve the Maven bundles named in conf/jars.yaml into eosbench's jar cache.

Maven does the resolution (it is on every machine of this kind and honours the project's mirror
settings); the result is a plain folder of jars per bundle, keyed by a digest of the bundle's
entry, so that later runs work offline and a version bump re-resolves by itself.

`resolve_bundle` is the one way to a bundle's jars: it resolves a bundle the first time anything
asks for it, saying so on stderr. `eosbench setup` asks only for the demo's bundles ahead of time
(`setup_bundle_names`); `--all` asks for every one.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from contextlib import contextmanager
from pathlib import Path
from xml.sax.saxutils import escape

from conf.settings import JarBundle, console_log4j_config, eosbench_home, load_jar_bundles, maven_settings_file
from eosbench.local.environment import check_java, check_maven
from eosbench.console.errors import EnvironmentProblem

DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"
_COMPLETE_MARKER = ".complete"
# The version starts at the first "-<digit>" after which no "_" follows: Scala suffixes such as
# "_2.13" belong to the artifact name ("spark-sql-kafka-0-10_2.13-4.2.0.jar").
_VERSIONED_JAR = re.compile(r"^(?P<artifact>.+?)-\d[^_]*\.jar$")


def jar_cache_dir() -> Path:
    """Return the folder under which every bundle is cached."""
    return eosbench_home() / "jars"


def bundle_digest(bundle: JarBundle) -> str:
    """Return a short digest of everything that decides a bundle's contents."""
    # The bundle's own Java sources are compiled apart (compiled_jar), keyed by their contents. An
    # empty `excluded` is left out, so that bundles without one keep the cache folders they have.
    left_out = {"java_sources", "services"} | (set() if bundle.excluded else {"excluded"})
    # When a bundle is resolved does not change its jars, so on_first_use is digested as false, the
    # value every bundle but the peers' had when it joined the digest: their cache folders stay
    # theirs, and flipping it never re-resolves (the peers' two resolve once more, into new folders).
    return hashlib.sha256(bundle.model_copy(update={"on_first_use": False}).model_dump_json(exclude=left_out)
                          .encode()).hexdigest()[:12]


def bundle_dir(bundle: JarBundle) -> Path:
    """Return the cache folder of one bundle."""
    return jar_cache_dir() / f"{bundle.name}-{bundle_digest(bundle)}"


def _dependency_xml(gav: str, excluded: tuple[str, ...] = ()) -> str:
    group, artifact, version = (escape(part) for part in gav.split(":"))
    exclusions = "".join(f"<exclusion><groupId>{escape(ga.split(':')[0])}</groupId>"
                         f"<artifactId>{escape(ga.split(':')[1])}</artifactId></exclusion>" for ga in excluded)
    return (
        f"<dependency><groupId>{group}</groupId><artifactId>{artifact}</artifactId>"
        f"<version>{version}</version>{f'<exclusions>{exclusions}</exclusions>' if exclusions else ''}</dependency>"
    )


def render_pom(bundle: JarBundle) -> str:
    """Return a throwaway POM whose runtime closure is the bundle."""
    managed = "".join(_dependency_xml(gav) for gav in bundle.managed)
    dependencies = "".join(_dependency_xml(gav, bundle.excluded) for gav in bundle.artifacts)
    return (
        '<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
        f"<groupId>eosbench.cache</groupId><artifactId>{escape(bundle.name)}</artifactId>"
        "<version>0</version><packaging>pom</packaging>"
        f"<dependencyManagement><dependencies>{managed}</dependencies></dependencyManagement>"
        f"<dependencies>{dependencies}</dependencies></project>"
    )


def artifact_name(jar_file_name: str) -> str:
    """Return a jar's artifact name without its version ("kafka-clients-3.9.2.jar" -> "kafka-clients")."""
    match = _VERSIONED_JAR.match(jar_file_name)
    return match.group("artifact") if match else jar_file_name.removesuffix(".jar")


def pyspark_jars_dir() -> Path:
    """Return the folder of the jars that the installed PySpark ships (Spark's, Hadoop's client, ...)."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        raise EnvironmentProblem("pyspark is not installed in this interpreter; run `make setup`")
    return Path(next(iter(spec.submodule_search_locations))) / "jars"


def pyspark_bundled_artifacts() -> set[str]:
    """Return the artifact names of the jars that the installed PySpark ships."""
    return {artifact_name(jar.name) for jar in pyspark_jars_dir().glob("*.jar")}


def _maven_command(pom: Path, output_dir: Path, transitive: bool) -> list[str]:
    command = [
        check_maven(),
        "-B",
        "-q",
        "-s",
        str(maven_settings_file()),
        "-f",
        str(pom),
        f"{DEPENDENCY_PLUGIN}:copy-dependencies",
        f"-DoutputDirectory={output_dir}",
        "-DincludeScope=runtime",
        f"-DexcludeTransitive={'false' if transitive else 'true'}",
    ]
    if os.environ.get("EOSBENCH_MAVEN_REPO"):
        command.append(f"-Dmaven.repo.local={os.environ['EOSBENCH_MAVEN_REPO']}")
    if maven_offline():
        command.append("-o")
    return command


def maven_offline() -> bool:
    """Tell whether EOSBENCH_MAVEN_OFFLINE keeps Maven to its local repository."""
    return os.environ.get("EOSBENCH_MAVEN_OFFLINE", "") not in ("", "0")


def _first_maven_error(output: str) -> str:
    for line in output.splitlines():
        if "[ERROR]" in line:
            message = re.sub(r"\x1b\[[0-9;]*m", "", line).replace("[ERROR]", "").strip()
            if message:
                return message[:300]
    return output.strip().splitlines()[-1][:300] if output.strip() else "no output"


@contextmanager
def cache_lock(folder: Path):
    """Hold an exclusive lock on a cache folder, so that concurrent commands fill it once."""
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def resolve_bundle(name: str) -> list[Path]:
    """Return the jars of a bundle, resolving them with Maven on first use."""
    bundles = load_jar_bundles()
    if name not in bundles:
        raise EnvironmentProblem(f"no jar bundle named {name!r} in conf/jars.yaml")
    bundle = bundles[name]
    target = bundle_dir(bundle)
    if not (target / _COMPLETE_MARKER).exists():
        with cache_lock(jar_cache_dir()):
            if not (target / _COMPLETE_MARKER).exists():
                _resolve_into(bundle, target)
    jars = sorted(target.glob("*.jar"))
    return [*jars, compiled_jar(bundle, jars)] if bundle.java_sources else jars


def java_source(relative: str) -> Path:
    """Return an installed package's Java source ("streaming/jvm/X.java")."""
    package, _, rest = relative.partition("/")
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise EnvironmentProblem(f"cannot find the package {package!r} that holds {relative}")
    return Path(next(iter(spec.submodule_search_locations))) / rest


def compiled_jar(bundle: JarBundle, classpath: list[Path]) -> Path:
    """Return the jar of a bundle's own Java sources, compiled against PySpark's and the bundle's jars once per source digest."""
    sources = [java_source(relative) for relative in bundle.java_sources]
    services = service_files(bundle)
    digest = hashlib.sha256(b"".join(source.read_bytes() for source in sources)
                            + "".join(f"{name}={text}" for name, text in services.items()).encode()).hexdigest()[:12]
    target = jar_cache_dir() / f"{bundle.name}-classes-{digest}" / f"eosbench-{bundle.name}.jar"
    if not target.exists():
        with cache_lock(jar_cache_dir()):
            if not target.exists():
                _compile_into(sources, [pyspark_jars_dir() / "*", *classpath], target, services)
    return target


def service_files(bundle: JarBundle) -> dict[str, str]:
    """The jar's META-INF/services files (path -> text), one implementing class a line, as java.util.ServiceLoader reads them."""
    return {f"META-INF/services/{interface}": "".join(f"{name}\n" for name in classes)
            for interface, classes in sorted(bundle.services.items())}


def _compile_into(sources: list[Path], classpath: list[Path], target: Path, services: dict[str, str]) -> None:
    javac = Path(check_java()).with_name("javac")
    if not javac.exists():
        raise EnvironmentProblem(f"no javac next to {javac.parent / 'java'}: eosbench compiles a class of its own"
                                 " and needs a JDK, not only a JRE")
    with tempfile.TemporaryDirectory(prefix="eosbench-javac-", dir=jar_cache_dir()) as work:
        classes = Path(work) / "classes"
        completed = subprocess.run(
            [str(javac), "--release", "17", "-nowarn", "-cp", os.pathsep.join(str(entry) for entry in classpath),
             "-d", str(classes), *(str(source) for source in sources)],
            capture_output=True, text=True)
        if completed.returncode != 0:
            first = (completed.stderr or completed.stdout).strip().splitlines()
            raise EnvironmentProblem(f"could not compile {', '.join(s.name for s in sources)}: "
                                     f"{first[0] if first else 'javac failed'}")
        staging = Path(work) / target.name
        with zipfile.ZipFile(staging, "w", zipfile.ZIP_DEFLATED) as jar:
            for compiled in sorted(classes.rglob("*.class")):
                jar.write(compiled, compiled.relative_to(classes).as_posix())
            for name, text in services.items():
                jar.writestr(name, text)
        target.parent.mkdir(parents=True, exist_ok=True)
        staging.rename(target)


def _resolve_into(bundle: JarBundle, target: Path) -> None:
    # One line, ended by the time it took: a first use of a lazy bundle can stall a command for minutes,
    # and the user should see why, and that it happens once.
    source = "the local Maven repository (offline)" if maven_offline() else "Maven Central"
    print(f"eosbench: fetching the {bundle.name} bundle from {source} (once)… ", end="", file=sys.stderr, flush=True)
    started = time.monotonic()
    try:
        _run_maven_into(bundle, target)
    except BaseException:
        print(f"failed after {time.monotonic() - started:.1f} s", file=sys.stderr)
        raise
    print(f"done in {time.monotonic() - started:.1f} s", file=sys.stderr)


def _run_maven_into(bundle: JarBundle, target: Path) -> None:
    with tempfile.TemporaryDirectory(prefix=f"eosbench-{bundle.name}-", dir=jar_cache_dir()) as work:
        work_dir = Path(work)
        pom = work_dir / "pom.xml"
        pom.write_text(render_pom(bundle), encoding="utf-8")
        staging = work_dir / "jars"
        try:
            completed = subprocess.run(_maven_command(pom, staging, bundle.transitive),
                                       capture_output=True, text=True, cwd=work_dir)
        except OSError as exc:
            raise EnvironmentProblem(f"could not resolve the {bundle.name} jars: cannot run Maven: {exc.strerror}") from exc
        if completed.returncode != 0 or not any(staging.glob("*.jar")):
            raise EnvironmentProblem(
                f"could not resolve the {bundle.name} jars with Maven: "
                f"{_first_maven_error(completed.stdout + completed.stderr)}"
            )
        if bundle.skip_jars_bundled_with_pyspark:
            provided = pyspark_bundled_artifacts()
            for jar in staging.glob("*.jar"):
                if artifact_name(jar.name) in provided:
                    jar.unlink()
        (staging / _COMPLETE_MARKER).write_text(bundle.model_dump_json(), encoding="utf-8")
        shutil.rmtree(target, ignore_errors=True)
        staging.rename(target)


def setup_bundle_names(everything: bool = False) -> list[str]:
    """The bundles `eosbench setup` resolves: the demo's (none marked on_first_use), or with `everything` all of them."""
    return [name for name, bundle in load_jar_bundles().items() if everything or not bundle.on_first_use]


def resolve_for_setup(everything: bool = False) -> dict[str, list[Path]]:
    """Resolve what `eosbench setup` resolves (`setup_bundle_names`), each through `resolve_bundle`."""
    return {name: resolve_bundle(name) for name in setup_bundle_names(everything)}


def kafka_tools_command(tool: str, heap_mb: int = 512) -> list[str]:
    """The command line that runs one of Kafka's tools (`org.apache.kafka.tools.<tool>`) from the cached jars."""
    classpath = str(resolve_bundle("kafka")[0].parent / "*")
    return [check_java(), f"-Xmx{heap_mb}m", f"-Dlog4j2.configurationFile={console_log4j_config()}",
            "-cp", classpath, f"org.apache.kafka.tools.{tool}"]


def transactional_copier_command(bootstrap: str, input_topic: str, partition: int, output_topic: str, group: str,
                                 transactional_id: str, transaction_size: int, heap_mb: int = 256) -> list[str]:
    """Kafka's TransactionalMessageCopier on one input partition: copies it to the output, offsets committed in-transaction."""
    return [*kafka_tools_command("TransactionalMessageCopier", heap_mb=heap_mb), "--input-topic", input_topic,
            "--input-partition", str(partition), "--output-topic", output_topic, "--broker-list", bootstrap,
            "--consumer-group", group, "--transaction-size", str(transaction_size),
            "--transactional-id", transactional_id]
