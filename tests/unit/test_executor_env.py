"""`eosbench package`'s parts that need no Spark: what goes into the archive and the line it prints."""

from __future__ import annotations

import tomllib
from pathlib import Path

from packaging.requirements import Requirement

from eosbench.console.errors import EXIT_BAD_INPUT
from eosbench.local.executor_env import (JOB_REQUIREMENTS, ExecutorEnvironment, _build_only, executor_conf,
                                         requirement_closure, ships_environment, spark_submit_command)
from eosbench.local.spark_cluster import spark_home
from tests.unit.test_cli_errors import assert_one_line_error, run_eosbench

REPO = Path(__file__).resolve().parents[2]
ENVIRONMENT = ExecutorEnvironment(Path("/cache/executor-env/d1/eosbench-environment.tar.gz"),
                                  Path("/cache/executor-env/d1/environment"), None)


def test_the_archive_holds_every_dependency_but_sparks_the_faces_and_the_packers_own():
    pinned = {Requirement(line).name for line in
              tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]}
    assert set(JOB_REQUIREMENTS) <= pinned
    assert pinned - set(JOB_REQUIREMENTS) == {"pyspark", "delta-spark", "rich", "matplotlib", "venv-pack"}


def test_the_closure_follows_requirements_and_leaves_out_what_spark_provides():
    names = {distribution.metadata["Name"].lower().replace("_", "-") for distribution in requirement_closure()}
    assert names == {"annotated-types", "cffi", "confluent-kafka", "cryptography", "kafka-python", "numpy", "pandas",
                     "prometheus-client", "pyarrow", "pycparser", "pydantic", "pydantic-core", "python-dateutil",
                     "pytz", "pyyaml", "typing-extensions", "typing-inspection", "tzdata"}


def test_the_archive_leaves_out_only_what_a_compiler_a_type_checker_or_a_packager_reads():
    left_out, kept = [], []
    for distribution in requirement_closure():
        for record in distribution.files or ():
            if "tests" not in record.parts:  # left out anyway
                (left_out if _build_only(record.parts) else kept).append("/".join(record.parts))
    assert {"pyarrow/include/arrow/api.h", "numpy/_core/include/numpy/ndarrayobject.h", "pyarrow/lib.pyx",
            "pyarrow/lib.pxd", "numpy/__init__.pyi", "numpy/f2py/__init__.py"} <= set(left_out)
    # No module, extension or data file of the job's path: numpy's build tools are its only Python.
    build_tools = ("numpy/distutils/", "numpy/f2py/", "numpy/_pyinstaller/")
    assert [path for path in left_out if path.endswith((".py", ".pyc", ".so")) and not path.startswith(build_tools)] == []
    assert [path for path in left_out if ".so" in path or "zoneinfo" in path or ".dist-info/" in path] == []
    assert {"pyarrow/lib.cpython-311-x86_64-linux-gnu.so", "pytz/zoneinfo/Europe/Paris", "tzdata/zoneinfo/UTC",
            "numpy/_core/_multiarray_umath.cpython-311-x86_64-linux-gnu.so"} <= set(kept)
    assert len(left_out) > (len(left_out) + len(kept)) / 5, "a fifth of the files fewer for a NodeManager to localize"


def test_only_a_cluster_master_ships_the_environment():
    assert [ships_environment(master) for master in ("spark://127.0.0.1:7077", "yarn", "local[2,4]", None)] == [
        True, True, False, False]


def test_the_spark_submit_line_ships_the_archive_and_runs_the_packed_job():
    command = spark_submit_command(ENVIRONMENT, "spark://127.0.0.1:7077", [Path("/jars/a.jar"), Path("/jars/b.jar")],
                                   ["--input-topic", "in", "--output-topic", "out"], {"spark.executor.memory": "512m"})
    assert command == [
        str(spark_home() / "bin" / "spark-submit"), "--master", "spark://127.0.0.1:7077",
        "--archives", "/cache/executor-env/d1/eosbench-environment.tar.gz#environment",
        "--conf", "spark.pyspark.python=./environment/bin/python",
        "--conf", "spark.pyspark.driver.python=/cache/executor-env/d1/environment/bin/python",
        "--conf", "spark.executor.memory=512m",
        "--jars", "/jars/a.jar,/jars/b.jar",
        "/cache/executor-env/d1/environment/lib/python3.11/site-packages/streaming/job.py",
        "--input-topic", "in", "--output-topic", "out"]


def test_eosbench_stream_ships_the_same_archive_through_spark_settings():
    assert executor_conf(ENVIRONMENT) == {"spark.archives": "/cache/executor-env/d1/eosbench-environment.tar.gz#environment",
                                          "spark.pyspark.python": "./environment/bin/python"}


def test_package_refuses_bad_job_arguments_before_packing():
    completed = run_eosbench("package", "--", "--input-topic", "in")
    assert_one_line_error(completed, EXIT_BAD_INPUT, "eosbench package: streaming/job.py: error:",
                          "the following arguments are required: --output-topic")


def test_a_new_build_keeps_the_three_newest_and_leaves_builds_in_progress(tmp_path, monkeypatch):
    import os

    from eosbench.local import executor_env

    monkeypatch.setenv("EOSBENCH_HOME", str(tmp_path))
    cache = executor_env.environment_cache_dir()
    for age, name in enumerate(["d4", "d3", "d2", "d1"]):  # d4 newest
        (cache / name).mkdir(parents=True)
        marker = cache / name / ".complete"
        marker.write_text("")
        os.utime(marker, (1_000_000 - age, 1_000_000 - age))
    (cache / "build-in-progress").mkdir()
    executor_env._drop_older_builds(keep=executor_env.KEPT_BUILDS)
    assert sorted(folder.name for folder in cache.iterdir()) == ["build-in-progress", "d2", "d3", "d4"]
