"""The real Prometheus server (Debian's package), run next to the local broker.

It reads conf/prometheus/prometheus.yml with its rule files resolved to absolute paths, keeps
its data under `<state_dir>/data`, and outlives the command that started it, as the brokers do.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

import yaml

from conf.settings import CONF_DIR, eosbench_home
from eosbench.local.processes import process_alive
from eosbench.local.environment import check_ports_free
from eosbench.console.errors import EnvironmentProblem

DEFAULT_PORT = 9090


class LocalPrometheus:
    """Start, query and stop one Prometheus server on loopback."""

    def __init__(self, state_dir: Path | None = None, port: int = DEFAULT_PORT,
                 targets: dict[str, int] | None = None, interval: str | None = None):
        self.state_dir = state_dir or eosbench_home() / "prometheus"
        self.port = port
        self.targets = targets  # job name -> port; None keeps prometheus.yml's own
        self.interval = interval

    @property
    def url(self) -> str:
        """The server's base URL."""
        return f"http://127.0.0.1:{self.port}"

    def _config(self) -> dict:
        config = yaml.safe_load((CONF_DIR / "prometheus" / "prometheus.yml").read_text())
        config["rule_files"] = [str(CONF_DIR / "prometheus" / name) for name in config["rule_files"]]
        if self.interval:
            config["global"] = {"scrape_interval": self.interval, "evaluation_interval": self.interval}
        if self.targets is not None:
            config["scrape_configs"] = [{"job_name": job, "static_configs": [{"targets": [f"127.0.0.1:{port}"]}]}
                                        for job, port in self.targets.items()]
        return config

    def running(self) -> bool:
        """Tell whether this server's process is alive."""
        return self._pid() is not None

    def _pid(self) -> int | None:
        try:
            pid = int((self.state_dir / "prometheus.pid").read_text())
        except (OSError, ValueError):
            return None
        return pid if process_alive(pid) else None

    def start(self) -> str:
        """Start the server (if it is not running) and wait until it has tried every target once."""
        if self._pid() is None:
            binary = shutil.which("prometheus")
            if binary is None:
                raise EnvironmentProblem("prometheus not found; install Debian's package (make setup does)")
            check_ports_free([self.port], "Prometheus")
            self.state_dir.mkdir(parents=True, exist_ok=True)
            config_file = self.state_dir / "prometheus.yml"
            config_file.write_text(yaml.safe_dump(self._config()))
            with open(self.state_dir / "prometheus.log", "ab") as log:
                process = subprocess.Popen(
                    [binary, f"--config.file={config_file}", f"--storage.tsdb.path={self.state_dir / 'data'}",
                     f"--web.listen-address=127.0.0.1:{self.port}"],
                    stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
            (self.state_dir / "prometheus.pid").write_text(str(process.pid))
        self._wait_until_scraping()
        return self.url

    def _wait_until_scraping(self, timeout_s: float = 60.0) -> None:
        # Ready is not scraping: discovery hands the targets over up to 5 s later, and a short
        # run could end before its first scrape.
        deadline = time.monotonic() + timeout_s
        expected = len(self._config()["scrape_configs"])
        while True:
            try:
                if len(self.query("up")) >= expected:
                    return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise EnvironmentProblem(f"Prometheus at {self.url} did not start scraping within {timeout_s:g} s;"
                                         f" see {self.state_dir / 'prometheus.log'}")
            time.sleep(0.2)

    def query(self, expr: str) -> list[dict]:
        """Run an instant query through the HTTP API; return the result vector."""
        url = f"{self.url}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        answer = json.loads(urllib.request.urlopen(url, timeout=10).read())
        if answer.get("status") != "success":
            raise RuntimeError(f"query {expr!r} failed: {answer}")
        return answer["data"]["result"]

    def stop(self) -> bool:
        """Stop the server; return whether one was running."""
        pid = self._pid()
        if pid is None:
            return False
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 20
        while self._pid() is not None and time.monotonic() < deadline:
            time.sleep(0.1)
        (self.state_dir / "prometheus.pid").unlink(missing_ok=True)
        return True
