"""A secured run is exactly once and never shows its password: every artifact of produce → stream → verify, and of
a `bench streaming` run beside them, is searched for it.

The run logs in as the admin of the secured broker, whose password is random per cluster. Searched:
each command's stdout and stderr, --output-json files, the stream's /metrics endpoint, Spark's UI
(environment page and the SQL plans, through its REST API and HTML) and event log, the Delta
results table `bench streaming` appends to, and the broker's logs.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.request

from collections import Counter

import pyarrow.parquet as pq

from conf.client_config import ClientConfig
from conf.settings import load_properties
from streaming.verify.verifier import read_index

EOSBENCH = [sys.executable, "-m", "eosbench.cli"]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=60) as response:  # Spark's UI answers slowly on a loaded machine
        return response.read().decode(errors="replace")


def _eosbench(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    completed = subprocess.run([*EOSBENCH, *args], capture_output=True, text=True, timeout=timeout)
    assert completed.returncode == 0, completed.stdout[-2000:] + completed.stderr[-2000:]
    return completed


def test_no_artifact_of_a_secured_run_holds_the_password(secured_cluster, admin_properties, secured_topic, tmp_path,
                                                         request):
    jaas = load_properties(admin_properties)["sasl.jaas.config"]
    password = jaas.split('password="', 1)[1].split('"', 1)[0]
    assert len(password) >= 16
    source, sink = secured_topic(partitions=2, prefix="sec-in"), secured_topic(partitions=2, prefix="sec-out")
    config = ["--command-config", str(admin_properties)]
    shown: dict[str, str] = {}
    # The bench reads and writes topics of its own: it runs beside the pipeline rather than after it,
    # so that its Spark (for the results table) starts while the stream's does.
    results = tmp_path / "results"
    with open(tmp_path / "bench.out", "w") as bench_out, open(tmp_path / "bench.err", "w") as bench_err:
        bench = subprocess.Popen([*EOSBENCH, "bench", "streaming", "--mode", "tx", "--warmup", "5", "--iterations",
                                  "20", "--results-dir", str(results), *config], stdout=bench_out, stderr=bench_err)
    request.addfinalizer(bench.kill)  # a no-op once it has been waited for

    produced = _eosbench("produce", "--topic", source, "--num-records", "2000", "--record-size", "50",
                         "--throughput", "-1", "--records-per-transaction", "200", "--transaction-abort-ratio", "0.3",
                         "--transactional-id", f"sec-fill-{source}", "--output-json", str(tmp_path / "produce.json"),
                         *config)
    shown.update({"produce stdout": produced.stdout, "produce stderr": produced.stderr,
                  "produce --output-json": (tmp_path / "produce.json").read_text()})

    metrics_port, ui_port = _free_port(), _free_port()
    events = tmp_path / "events"
    events.mkdir()
    stream = subprocess.Popen(
        [*EOSBENCH, "stream", "--input-topic", source, "--output-topic", sink, "--app-id", f"sec-{sink}",
         "--checkpoint", str(tmp_path / "checkpoint"), "--output-json", str(tmp_path / "stream.json"),
         "--metrics-port", str(metrics_port), "--metrics-linger", "30",
         "--conf", "spark.ui.enabled=true", "--conf", f"spark.ui.port={ui_port}",
         "--conf", "spark.eventLog.enabled=true", "--conf", f"spark.eventLog.dir={events}", *config],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 240
        while not (tmp_path / "stream.json").exists():  # written once the query ended; the linger follows
            assert stream.poll() is None and time.monotonic() < deadline, stream.communicate()[1][-2000:]
            time.sleep(0.5)
        shown[f"stream /metrics :{metrics_port}"] = _get(f"http://127.0.0.1:{metrics_port}/metrics")
        ui = f"http://127.0.0.1:{ui_port}"
        app_id = next(events.iterdir()).name.removeprefix("eventlog_v2_")  # the event log is named by the app
        for page in ("environment", "sql?details=true&planDescription=true"):
            shown[f"Spark REST {page}"] = _get(f"{ui}/api/v1/applications/{app_id}/{page}")
        for page in ("environment/", "SQL/", "SQL/execution/?id=0", "jobs/", "stages/"):
            shown[f"Spark UI {page}"] = _get(f"{ui}/{page}")
        assert "kafka" in shown["Spark REST sql?details=true&planDescription=true"].lower()  # the plans are there
    finally:
        stream.terminate()
        out, err = stream.communicate(timeout=60)
    shown.update({"stream stdout": out, "stream stderr": err,
                  "stream --output-json": (tmp_path / "stream.json").read_text()})
    for log in (path for path in events.rglob("*") if path.is_file()):  # Spark 4 rolls its event log in a folder
        shown[f"event log {log.name}"] = log.read_text(errors="replace")

    verified = _eosbench("verify", "--input-topic", source, "--output-topic", sink, "--app-id", f"sec-{sink}", *config)
    shown.update({"verify stdout": verified.stdout, "verify stderr": verified.stderr})
    # The same run is the pipeline over --command-config alone (bootstrap.servers comes from the file
    # too): every committed input record delivered exactly once, as multisets of ids.
    report = json.loads(verified.stdout)
    assert report["violations"] == [] and report["input_aborted"] > 0
    connection = ClientConfig.load(admin_properties).connection(None)
    committed = Counter(read_index(connection, source, "read_committed", with_src=False).seq.tolist())
    assert Counter(read_index(connection, sink, "read_committed", with_src=True).seq.tolist()) == committed
    assert json.loads((tmp_path / "stream.json").read_text())["records_out"] == sum(committed.values())

    bench.wait(timeout=300)
    shown.update({"bench stdout": (tmp_path / "bench.out").read_text(),
                  "bench stderr": (tmp_path / "bench.err").read_text()})
    assert bench.returncode == 0, shown["bench stdout"][-2000:] + shown["bench stderr"][-2000:]
    table = results / "bench_runs"
    for part in table.rglob("*.parquet"):
        shown[f"results table {part.name}"] = json.dumps(pq.read_table(part).to_pylist(), default=str)
    for log_file in (secured_cluster.settings.state_dir).rglob("*.log"):
        shown[f"broker log {log_file.name}"] = log_file.read_text(errors="replace")

    assert any(name.startswith("results table") for name in shown) and any(n.startswith("event log") for n in shown)
    leaks = [name for name, text in shown.items() if password in text]
    assert leaks == []
