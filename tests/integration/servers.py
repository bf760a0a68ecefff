"""Real servers for integration tests, started on 127.0.0.1 in a temporary directory.

A server that fails to start is a test failure with its log attached, never a skip: in CI the
components are installed by scripts/install-test-deps.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

LOOPBACK = "127.0.0.1"
S = TypeVar("S", bound="Server")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        return int(sock.getsockname()[1])


def wait_http(url: str, *, timeout_seconds: float, process: subprocess.Popen[bytes] | None = None,
              log: Path | None = None) -> None:
    """Poll `url` until it answers 200; fail with the process's log if it dies or times out."""
    deadline = time.monotonic() + timeout_seconds
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"{url}: the server exited with {process.returncode}:\n"
                               f"{log.read_text() if log else ''}")
        with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=1) as response:
            if response.status == 200:
                return
        time.sleep(0.1)
    raise RuntimeError(f"{url} did not answer within {timeout_seconds} s:\n"
                       f"{log.read_text() if log else ''}")


@dataclass
class Server:
    """A server process started by a test, its base URL and its log file."""

    url: str
    process: subprocess.Popen[bytes]
    log: Path

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@dataclass
class Prometheus(Server):
    pass


def launch(argv: Sequence[str], log: Path) -> subprocess.Popen[bytes]:
    """Start `argv` with its output in `log`."""
    with log.open("wb") as out:
        return subprocess.Popen(list(argv), stdout=out, stderr=subprocess.STDOUT)


@contextlib.contextmanager
def running(server: S, *, ready_path: str = "/-/ready") -> Iterator[S]:
    """Wait until `server` answers `ready_path`, yield it, stop it afterwards."""
    try:
        wait_http(f"{server.url}{ready_path}", timeout_seconds=30, process=server.process,
                  log=server.log)
        yield server
    finally:
        server.stop()


def prometheus_argv(directory: Path, targets: Sequence[str], *, port: int,
                    scrape_seconds: float = 1.0,
                    extra_labels: dict[str, str] | None = None) -> list[str]:
    """Write `directory/prometheus.yml` (one job scraping `targets` every `scrape_seconds`)
    and return the command line of a Prometheus on 127.0.0.1:`port` keeping its TSDB in
    `directory/data` (so a restart with the same arguments keeps port, config and data)."""
    binary = shutil.which("prometheus")
    if binary is None:
        raise RuntimeError("prometheus is not installed: run scripts/install-test-deps as root")
    labels = "".join(f"\n          {k}: '{v}'" for k, v in (extra_labels or {}).items())
    config = directory / "prometheus.yml"
    interval = f"{round(scrape_seconds * 1000)}ms"  # Prometheus durations take no decimals
    config.write_text(
        "global:\n"
        f"  scrape_interval: {interval}\n"
        f"  evaluation_interval: {interval}\n"
        "scrape_configs:\n"
        "  - job_name: training\n"
        "    static_configs:\n"
        f"      - targets: [{', '.join(repr(t) for t in targets)}]\n"
        + (f"        labels:{labels}\n" if labels else "")
    )
    return [binary, f"--config.file={config}", f"--storage.tsdb.path={directory / 'data'}",
            f"--web.listen-address={LOOPBACK}:{port}", "--web.enable-lifecycle",
            "--storage.tsdb.retention.time=1h"]


@contextlib.contextmanager
def prometheus(directory: Path, targets: Sequence[str], *, scrape_seconds: float = 1.0,
               extra_labels: dict[str, str] | None = None) -> Iterator[Prometheus]:
    """A real Prometheus scraping `targets` (host:port on 127.0.0.1) every `scrape_seconds`."""
    port = free_port()
    log = directory / "prometheus.log"
    process = launch(prometheus_argv(directory, targets, port=port,
                                     scrape_seconds=scrape_seconds,
                                     extra_labels=extra_labels), log)
    with running(Prometheus(url=f"http://{LOOPBACK}:{port}", process=process, log=log)) as server:
        yield server
