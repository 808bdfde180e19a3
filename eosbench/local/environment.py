"""Checks of the machine eosbench runs on: Java, Maven and free loopback ports."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
from pathlib import Path

from eosbench.console.errors import EnvironmentProblem

MIN_JAVA_MAJOR = 17
_JAVA_VERSION = re.compile(r'version "(?P<version>[^"]+)"')


def java_executable() -> str:
    """Return the java launcher: $JAVA_HOME/bin/java if set, else `java` on PATH."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").is_file():
        return str(Path(java_home) / "bin" / "java")
    found = shutil.which("java")
    if not found:
        raise EnvironmentProblem(
            f"java not found (no JAVA_HOME, nothing on PATH); install Java {MIN_JAVA_MAJOR}+,"
            " e.g. apt-get install openjdk-17-jre-headless"
        )
    return found


def parse_java_major(version_output: str) -> int:
    """Read the major version from `java -version` output ("1.8.0_392" is 8, "17.0.15" is 17)."""
    match = _JAVA_VERSION.search(version_output)
    if not match:
        raise EnvironmentProblem(f"cannot read the Java version from: {version_output.strip()[:120]!r}")
    parts = match.group("version").split(".")
    major = int(re.match(r"\d+", parts[0]).group()) if re.match(r"\d+", parts[0]) else 0
    if major == 1 and len(parts) > 1:
        major = int(re.match(r"\d+", parts[1]).group())
    return major


# A JVM that starts in a second on a quiet machine took tens of seconds at a load of 50.
JAVA_VERSION_TIMEOUT_S = 120


def check_java() -> str:
    """Return the java launcher after checking that it is Java 17 or newer."""
    java = java_executable()
    try:
        completed = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=JAVA_VERSION_TIMEOUT_S)
    except OSError as exc:
        raise EnvironmentProblem(f"cannot run {java}: {exc.strerror}") from exc
    except subprocess.TimeoutExpired as exc:
        raise EnvironmentProblem(f"{java} -version did not answer within {JAVA_VERSION_TIMEOUT_S} s") from exc
    major = parse_java_major(completed.stderr + completed.stdout)
    if major < MIN_JAVA_MAJOR:
        raise EnvironmentProblem(
            f"{java} is Java {major}; eosbench needs Java {MIN_JAVA_MAJOR}+ (set JAVA_HOME or PATH)"
        )
    return java


def check_maven() -> str:
    """Return the `mvn` launcher, or say how to install it."""
    found = shutil.which("mvn")
    if not found:
        raise EnvironmentProblem("mvn not found on PATH; install Maven 3.8+, e.g. apt-get install maven")
    return found


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    """Tell whether a TCP port on loopback can be bound right now (never use on a starting server's port)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        # As the JVM does for its server sockets, so that TIME-WAIT leftovers of a cluster
        # that just stopped do not count as "in use".
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


def port_accepts_connections(port: int, host: str = "127.0.0.1") -> bool:
    """Tell whether something listens on a loopback port, without ever binding it."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.settimeout(0.5)
        return probe.connect_ex((host, port)) == 0


def check_ports_free(ports: list[int], what: str) -> None:
    """Fail with one line naming the first port in use."""
    for port in ports:
        if not port_is_free(port):
            raise EnvironmentProblem(
                f"port {port} on 127.0.0.1 is already in use, so {what} cannot start;"
                " stop whatever holds it or choose another --port"
            )
