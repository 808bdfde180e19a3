"""spark-submit as a user runs it: docs/streaming.md's line from a fresh shell, and --conf winning over defaults."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

from streaming.verify.verifier import verify
from tests.integration.produce_helpers import committed_ids, produce

REPO = Path(__file__).resolve().parents[2]


def documented_spark_submit_block() -> str:
    """The bash block under 'Running the job' in docs/streaming.md, as written there."""
    page = (REPO / "docs" / "streaming.md").read_text()
    section = page[page.index("## Running the job"):]
    return re.search(r"```bash\n(.*?)```", section, re.DOTALL).group(1).strip()


def fresh_shell_environment() -> dict[str, str]:
    """What a new login would have: no virtualenv on PATH, no PySpark variables."""
    venv = str(REPO / ".venv")
    keep = ("HOME", "USER", "LANG", "TMPDIR", "JAVA_HOME", "EOSBENCH_HOME")
    env = {name: os.environ[name] for name in keep if name in os.environ}
    env["PATH"] = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if not p.startswith(venv))
    return env


def workdir_like_the_repository(tmp_path: Path) -> Path:
    """A folder that looks like the repository's root (the line's relative paths resolve), whose
    `checkpoints/` is the test's own."""
    for name in (".venv", "streaming", "conf"):
        (tmp_path / name).symlink_to(REPO / name)
    return tmp_path


def test_the_documented_spark_submit_line_runs_as_written_from_a_fresh_shell(bootstrap, tmp_path):
    line = documented_spark_submit_block()
    assert "--input-topic in --output-topic out --app-id orders-eos" in line
    from eosbench.local.kafka_admin import create_topic

    for topic, partitions in (("in", 2), ("out", 2), ("out.dlq", 1)):
        create_topic(bootstrap, topic, partitions, 1)
    produced = produce(bootstrap, "in", 3_000, records_per_transaction=100, abort_ratio=0.3, seed=14)
    # The page's words run unchanged; only the test broker's address is appended (the line's
    # default is a user's broker on 9092).
    completed = subprocess.run(["bash", "-c", f"{line} --bootstrap-server {bootstrap}"],
                               cwd=workdir_like_the_repository(tmp_path), env=fresh_shell_environment(),
                               capture_output=True, text=True, timeout=600)
    assert completed.returncode == 0, completed.stderr[-3000:]
    summary = json.loads(completed.stdout[completed.stdout.index("{\n"):])
    assert summary["records_out"] == produced.records_committed
    report = verify(bootstrap, "in", "out", "orders-eos", "out.dlq")
    assert report.ok, report.violations
    assert report.output_committed == report.input_committed == sum(committed_ids(produced.transactions).values())


PROBE = '''
import json, sys
sys.path.insert(0, sys.argv[1])
from streaming.session import build_spark_session
conf = build_spark_session("probe").sparkContext.getConf()
print(json.dumps({key: conf.get(key, None) for key in sys.argv[2:]}))
'''


def test_spark_submit_conf_wins_over_the_session_defaults(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text(PROBE)
    keys = ["spark.master", "spark.ui.enabled", "spark.sql.shuffle.partitions", "spark.speculation",
            "spark.sql.extensions"]
    command = [str(REPO / ".venv/bin/spark-submit"), "--master", "local[1]", "--conf", "spark.ui.enabled=true",
               "--conf", "spark.ui.port=0", "--conf", "spark.sql.shuffle.partitions=7", str(probe), str(REPO), *keys]
    completed = subprocess.run(command, env={**fresh_shell_environment(), "PYSPARK_PYTHON": str(REPO / ".venv/bin/python")},
                               capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr[-3000:]
    seen = json.loads(completed.stdout.strip().splitlines()[-1])
    assert seen == {"spark.master": "local[1]", "spark.ui.enabled": "true", "spark.sql.shuffle.partitions": "7",
                    "spark.speculation": "false", "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension"}
