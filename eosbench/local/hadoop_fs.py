"""Hadoop's FsShell, for the code that touches a checkpoint outside any Spark session.

The soak deletes its stream's checkpoint (the delete-checkpoint fault), and tests look into one,
wherever it lives: a local folder, HDFS or an object store. Python file calls reach only the
first, so this runs `org.apache.hadoop.fs.FsShell` (what `hadoop fs` runs) on the Hadoop client
that PySpark ships (hadoop-client-api and -runtime in pyspark/jars): the same client the driver
reads the checkpoint with, and nothing to install. Object stores need their connector jars
(hadoop-aws, hadoop-azure) on top, as Spark does.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path
from xml.sax.saxutils import escape

from conf.settings import CONF_DIR, console_log4j_config
from eosbench.console.errors import EnvironmentProblem
from eosbench.local.environment import java_executable
from eosbench.local.jars import pyspark_jars_dir
from eosbench.local.s3 import s3a_checkpoint_session

FS_SHELL_TIMEOUT_S = 120.0  # a refused NameNode fails in ~10 s; this bounds one that accepts and never answers


def fs_shell(*arguments: str, check: bool = True, s3a_config: Path | None = None) -> subprocess.CompletedProcess:
    """Run `hadoop fs <arguments>` on PySpark's Hadoop client; a non-zero exit raises EnvironmentProblem if `check`.

    An s3a:// argument brings the s3a jars and S3A's settings from `s3a_config` (as `--s3a-config`,
    by default the local `eosbench s3`'s file), handed over in a 0600 file, never on the command line.
    """
    return hadoop_main("org.apache.hadoop.fs.FsShell", *arguments, check=check, s3a_config=s3a_config,
                       label=f"hadoop fs {' '.join(arguments)}")


def hadoop_main(main_class: str, *arguments: str, check: bool = True, s3a_config: Path | None = None,
                jars: tuple[Path, ...] = (), label: str | None = None) -> subprocess.CompletedProcess:
    """Run a Hadoop tool's main class (FsShell's, or a test entry of eosbench's own) on PySpark's Hadoop client.

    It takes Hadoop's generic options (`-conf`); `jars` go on its classpath too. An s3a:// argument
    brings S3A as `fs_shell` says.
    """
    label = label or f"{main_class} {' '.join(arguments)}"
    classpath = [os.environ["HADOOP_CONF_DIR"]] if os.environ.get("HADOOP_CONF_DIR") else []
    classpath += [str(CONF_DIR / "hadoop-client"), f"{pyspark_jars_dir()}/*", *(str(jar) for jar in jars)]
    s3a_uri = next((argument for argument in arguments if argument.startswith("s3a://")), None)
    with tempfile.TemporaryDirectory(prefix="eosbench-fs-") as private:  # 0700, and gone after the call
        generic: list[str] = []
        if s3a_uri:
            s3a_jars, spark_conf = s3a_checkpoint_session(s3a_uri, s3a_config)
            classpath += [str(jar) for jar in s3a_jars]
            settings = Path(private) / "s3a.xml"
            settings.write_text(_hadoop_xml({key.removeprefix("spark.hadoop."): value for key, value in spark_conf.items()
                                             if key.startswith("spark.hadoop.")}))
            generic = ["-conf", str(settings)]
        command = [java_executable(), "-Xmx128m", f"-Dlog4j2.configurationFile={console_log4j_config()}",
                   "-cp", os.pathsep.join(classpath), main_class, *generic, *arguments]
        try:
            completed = subprocess.run(command, capture_output=True, text=True, timeout=FS_SHELL_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise EnvironmentProblem(f"{label}: no answer in {FS_SHELL_TIMEOUT_S:g} s") from None
    if check and completed.returncode != 0:
        lines = (completed.stderr.strip() or completed.stdout.strip() or "no output").splitlines()
        raise EnvironmentProblem(f"{label} failed (exit {completed.returncode}): {lines[0]}")
    return completed


def _hadoop_xml(values: dict[str, str]) -> str:
    """A Hadoop configuration file (what GenericOptionsParser's -conf reads) holding `values`."""
    properties = "".join(f"<property><name>{escape(key)}</name><value>{escape(value)}</value></property>\n"
                         for key, value in values.items())
    return f"<?xml version=\"1.0\"?>\n<configuration>\n{properties}</configuration>\n"
