"""Java detection, port probes and the jar cache's naming rules."""

import socket

import pytest

from conf.settings import load_jar_bundles
from eosbench.local import environment
from eosbench.local.environment import check_ports_free, parse_java_major, port_accepts_connections, port_is_free
from eosbench.console.errors import EnvironmentProblem
from eosbench.local.jars import artifact_name, bundle_digest, render_pom


@pytest.mark.parametrize(
    "output,major",
    [
        ('openjdk version "17.0.15" 2025-04-15', 17),
        ('java version "1.8.0_392"', 8),
        ('openjdk version "21" 2023-09-19', 21),
        ('openjdk version "11.0.2-ea" 2019-01-15', 11),
    ],
)
def test_java_major_version_is_read_from_version_banner(output, major):
    assert parse_java_major(output) == major


def test_unreadable_java_banner_is_an_environment_problem():
    with pytest.raises(EnvironmentProblem):
        parse_java_major("command not found")


def test_a_listening_port_is_neither_free_nor_silent():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        assert not port_is_free(port)
        assert port_accepts_connections(port)
        with pytest.raises(EnvironmentProblem, match=f"port {port} "):
            check_ports_free([port], "the broker")


@pytest.mark.parametrize(
    "jar,name",
    [
        ("kafka-clients-3.9.2.jar", "kafka-clients"),
        ("scala-library-2.13.18.jar", "scala-library"),
        ("spark-sql-kafka-0-10_2.13-4.2.0.jar", "spark-sql-kafka-0-10_2.13"),
        ("delta-spark_4.2_2.13-4.4.0.jar", "delta-spark_4.2_2.13"),
        ("javassist-3.30.2-GA.jar", "javassist"),
        ("zstd-jni-1.5.7-7.jar", "zstd-jni"),
    ],
)
def test_artifact_name_drops_only_the_version(jar, name):
    assert artifact_name(jar) == name


def test_pom_carries_managed_versions_and_digest_follows_content():
    spark = load_jar_bundles()["spark"]
    pom = render_pom(spark)
    assert "<dependencyManagement><dependencies><dependency><groupId>org.apache.spark</groupId>" in pom
    assert "<artifactId>spark-token-provider-kafka-0-10_2.13</artifactId><version>4.0.0</version>" in pom
    changed = spark.model_copy(update={"artifacts": spark.artifacts[:1]})
    assert bundle_digest(changed) != bundle_digest(spark)


def test_a_bundles_digest_does_not_change_with_when_it_is_resolved():
    hdfs = load_jar_bundles()["hdfs"]
    assert bundle_digest(hdfs) == bundle_digest(hdfs.model_copy(update={"on_first_use": not hdfs.on_first_use}))


def test_a_java_that_never_answers_is_one_line_not_a_traceback(tmp_path, monkeypatch):
    hung = tmp_path / "java"
    hung.write_text("#!/bin/sh\nsleep 30\n")
    hung.chmod(0o755)
    monkeypatch.setattr(environment, "java_executable", lambda: str(hung))
    monkeypatch.setattr(environment, "JAVA_VERSION_TIMEOUT_S", 0.2)
    with pytest.raises(EnvironmentProblem, match=rf"^{hung} -version did not answer within 0.2 s$"):
        environment.check_java()
