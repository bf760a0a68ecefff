"""The pieces the resilience tests drive: a restartable Prometheus, `policyd run` as a real
subprocess (its log read line by line with arrival times), its /metrics parsed, and deadlines.

Everything listens on 127.0.0.1. A component that fails to start is a test failure with its
log, never a skip.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from tests.integration.servers import LOOPBACK, free_port, prometheus_argv, wait_http

ROOT = Path(__file__).resolve().parents[2]
PYTHON = str(ROOT / ".venv" / "bin" / "python") if (ROOT / ".venv" / "bin" / "python").exists() \
    else sys.executable

CONSTANT_EVALUATION = "policyd_training_loss * 0 + 1"
"""The tests' evaluation query: the trainers' real loss series (labels and all, scraped by a
real Prometheus) turned into a constant, so FlowCon's decision is deterministic: no gain ->
every job goes NL -> WL -> CL, all jobs on a node in CL -> every limit 1 (free competition).
A container whose CPU shares the test sets to 512 (limit 0.5) is therefore put back to 1024 by
exactly one SetCpu on the next tick that can see it: "policyd acted" and "policyd did not act"
both become observable in `docker inspect`."""


def wait_for(predicate: Callable[[], bool], *, timeout_seconds: float, what: str,
             every: float = 0.2) -> float:
    """Poll `predicate` until true; the seconds it took. AssertionError at the deadline."""
    started = time.monotonic()
    deadline = started + timeout_seconds
    while True:
        if predicate():
            return time.monotonic() - started
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout_seconds:g} s waiting for {what}")
        time.sleep(every)


def http_get(url: str, timeout: float = 3.0) -> tuple[int, str]:
    """(status, body); status 0 when nothing answered."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return int(response.status), response.read().decode(errors="replace")
    except urllib.error.HTTPError as err:
        return int(err.code), err.read().decode(errors="replace")
    except OSError as err:
        return 0, f"{type(err).__name__}: {err}"


# --- Prometheus that can be stopped and started again on the same port and data dir ---------

@dataclass
class RestartablePrometheus:
    """A real Prometheus on a fixed 127.0.0.1 port scraping `targets` every `scrape_seconds`;
    `stop()` and `start()` keep the port, the config and the TSDB directory."""

    directory: Path
    targets: Sequence[str]
    scrape_seconds: float = 0.5
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    @property
    def log(self) -> Path:
        return self.directory / "prometheus.log"

    def start(self, timeout_seconds: float = 30) -> None:
        argv = prometheus_argv(self.directory, self.targets, port=self.port,
                               scrape_seconds=self.scrape_seconds)
        with self.log.open("ab") as out:  # appended: the log of every run in one file
            self.process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                            start_new_session=True)
        wait_http(f"{self.url}/-/ready", timeout_seconds=timeout_seconds, process=self.process,
                  log=self.log)

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def query(self, promql: str) -> list[dict[str, object]]:
        """An instant query's result list (empty when Prometheus does not answer)."""
        import json  # noqa: PLC0415
        from urllib.parse import quote  # noqa: PLC0415

        status, body = http_get(f"{self.url}/api/v1/query?query={quote(promql)}")
        if status != 200:
            return []
        result: list[dict[str, object]] = json.loads(body)["data"]["result"]
        return result


# --- policyd's /metrics --------------------------------------------------------------------

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def parse_metrics(text: str) -> Samples:
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name.endswith("_created"):
                continue
            samples[(s.name, frozenset(s.labels.items()))] = float(s.value)
    return samples


def total(samples: Samples, name: str, **labels: str) -> float:
    """The sum of `name`'s samples whose labels include `labels` (0 when there are none)."""
    want = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and want <= ls)


def label_values(samples: Samples, name: str, label: str) -> set[str]:
    return {dict(ls).get(label, "") for (n, ls) in samples if n == name}


# --- policyd as a subprocess ---------------------------------------------------------------

@dataclass
class LogLine:
    at: float  # time.monotonic() when the line arrived
    text: str


class Policyd:
    """`policyd run --config FILE` as a subprocess; its stderr (the log) is read on a thread,
    each line stamped with its arrival time; `/healthz` can be watched on another thread."""

    def __init__(self, config: Path, port: int) -> None:
        self.config = config
        self.port = port
        self.lines: list[LogLine] = []
        self._lock = threading.Lock()
        self.process = subprocess.Popen(
            [PYTHON, "-m", "policyd", "run", "--config", str(config)], cwd=ROOT,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
        self._reader = threading.Thread(target=self._read, name="policyd-log", daemon=True)
        self._reader.start()
        self.health: list[tuple[float, int, str]] = []
        self._watching = threading.Event()
        self._watcher: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def _read(self) -> None:
        assert self.process.stdout is not None
        for raw in self.process.stdout:
            line = LogLine(time.monotonic(), raw.decode(errors="replace").rstrip("\n"))
            with self._lock:
                self.lines.append(line)

    def log_since(self, at: float = -1.0) -> list[LogLine]:
        with self._lock:
            return [line for line in self.lines if line.at >= at]

    def log_text(self, last: int = 120) -> str:
        with self._lock:
            return "\n".join(line.text for line in self.lines[-last:])

    def alive(self) -> bool:
        return self.process.poll() is None

    def metrics(self) -> Samples:
        status, body = http_get(f"{self.url}/metrics")
        if status != 200:
            raise AssertionError(f"/metrics answered {status}: {body}\n{self.log_text()}")
        return parse_metrics(body)

    def get(self, path: str) -> tuple[int, str]:
        return http_get(f"{self.url}{path}")

    def wait_serving(self, timeout_seconds: float = 60) -> None:
        def up() -> bool:
            if not self.alive():
                raise AssertionError(f"policyd exited with {self.process.returncode}:\n"
                                     f"{self.log_text()}")
            return self.get("/healthz")[0] == 200
        wait_for(up, timeout_seconds=timeout_seconds, what="policyd's /healthz")

    def watch_health(self, every: float = 0.25) -> None:
        """Record (time, status, body) of /healthz every `every` s until `stop()`."""
        def loop() -> None:
            while not self._watching.wait(every):
                status, body = self.get("/healthz")
                self.health.append((time.monotonic(), status, body.strip()))
        self._watcher = threading.Thread(target=loop, name="healthz-watch", daemon=True)
        self._watcher.start()

    def unhealthy(self) -> list[tuple[float, int, str]]:
        return [h for h in self.health if h[1] != 200]

    def stop(self, timeout_seconds: float = 30) -> int:
        """SIGTERM and wait (SIGKILL after the timeout); the exit code."""
        self._watching.set()
        if self._watcher is not None:
            self._watcher.join(timeout=5)
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout_seconds)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
                return -9
        self._reader.join(timeout=5)
        if self.process.stdout is not None:
            self.process.stdout.close()
        return int(self.process.returncode)


def policy_yaml(name: str, *, interval: float, max_interval: float | None = None,
                alpha: float = 0.05, mode: str = "shares", window: int = 5) -> str:
    return (
        "apiVersion: policyd.io/v1alpha1\n"
        "kind: FlowCon\n"
        f"metadata: {{name: {name}}}\n"
        "spec:\n"
        f"  alpha: {alpha}\n"
        f"  interval_seconds: {interval:g}\n"
        f"  max_interval_seconds: {max_interval if max_interval is not None else interval:g}\n"
        "  beta: 2\n"
        f"  mode: {mode}\n"
        f"  window_intervals: {window}\n"
        f"  evaluation: {{query: '{CONSTANT_EVALUATION}'}}\n"
        "  selector: {labels: {app: train}}\n")


def settings_yaml(*, prometheus_url: str, hosts: Mapping[str, str], port: int,
                  policies: Sequence[str]) -> str:
    lines = ["backend: docker", "log_level: info",
             f"policies: [{', '.join(policies)}]",
             "prometheus:", f"  url: {prometheus_url}", "  profile: docker-stats",
             "  timeout_seconds: 3", "  scrape_interval_seconds: 0.5",
             "docker:", "  hosts:"]
    lines += [f"    {node}: {url}" for node, url in hosts.items()]
    lines += ["http:", "  addr: 127.0.0.1", f"  port: {port}"]
    return "\n".join(lines) + "\n"


def write_atomically(path: Path, text: str) -> None:
    """Replace `path` in one step with a modification time that surely differs."""
    before = path.stat().st_mtime_ns if path.exists() else 0
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    stat = tmp.stat()
    if stat.st_mtime_ns <= before:
        os.utime(tmp, ns=(stat.st_atime_ns, before + 1_000_000))
    os.replace(tmp, path)
