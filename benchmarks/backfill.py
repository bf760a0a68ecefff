"""A real Prometheus holding N training containers' series, for the scale benchmarks.

`backfill(cluster, data_dir)` writes the series of `tests/integration/cluster_series.py` as
OpenMetrics text in chunks of containers and turns each chunk into TSDB blocks with `promtool
tsdb create-blocks-from openmetrics` (the text is deleted after each chunk: 1,000 containers
are ~0.5 GB of text); `serving(data_dir)` starts Debian's Prometheus on 127.0.0.1 over those
blocks, waits until it answers and has merged the overlapping blocks of the chunks, and stops
it afterwards. The data run into the future (`Cluster.end_seconds`) so that live cycles, which
read up to the wall clock's now, find fresh samples for as long as the benchmark runs.

Heavy: run it under `flock /tmp/policyd-slow.lock`, never in CI.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import repository  # noqa: F401  (the repository on sys.path, after PYTHONPATH's trees)

from tests.integration.cluster_series import Cluster, openmetrics
from tests.integration.servers import LOOPBACK, free_port, launch, wait_http


def disk_free_bytes(path: Path) -> int:
    return shutil.disk_usage(path).free


def backfill(cluster: Cluster, data_dir: Path, *, chunk: int = 2000,
             log: Path | None = None) -> float:
    """Write `cluster`'s series into TSDB blocks under `data_dir`; returns seconds taken."""
    promtool = shutil.which("promtool")
    if promtool is None:
        raise SystemExit("promtool is missing (Debian package prometheus)")
    data_dir.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    text = data_dir.parent / f"{data_dir.name}.om"
    for first in range(0, cluster.containers, chunk):
        chosen = range(first, min(first + chunk, cluster.containers))
        with text.open("w") as out:
            openmetrics(cluster, out, chosen)
        done = subprocess.run([promtool, "tsdb", "create-blocks-from", "openmetrics",
                               str(text), str(data_dir)], capture_output=True, text=True,
                              check=False)
        text.unlink()
        if log is not None:
            with log.open("a") as out:
                out.write(done.stdout[-2000:] + done.stderr[-2000:])
        if done.returncode != 0:
            raise SystemExit(f"promtool failed on containers {chosen}: {done.stderr[-2000:]}")
        print(f"  backfilled containers {chosen.start}..{chosen.stop - 1} "
              f"({time.perf_counter() - started:.0f} s)", flush=True)
    return time.perf_counter() - started


def instant(url: str, query: str) -> list[Any]:
    body = urllib.parse.urlencode({"query": query}).encode()
    with urllib.request.urlopen(f"{url}/api/v1/query", data=body, timeout=120) as answer:
        return list(json.load(answer)["data"]["result"])


def _blocks(url: str) -> float:
    found = instant(url, "prometheus_tsdb_blocks_loaded")
    return float(found[0]["value"][1]) if found else -1.0


@contextlib.contextmanager
def serving(data_dir: Path, *, settle_seconds: float = 600) -> Iterator[str]:
    """Prometheus over `data_dir` on 127.0.0.1 (its URL), once it has merged the chunks'
    overlapping blocks (one block left, or no change for 30 s)."""
    binary = shutil.which("prometheus")
    if binary is None:
        raise SystemExit("prometheus is missing (Debian package prometheus)")
    port = free_port()
    config = data_dir.parent / f"{data_dir.name}.yml"
    config.write_text("global:\n  scrape_interval: 15s\n"
                      "scrape_configs:\n  - job_name: prometheus\n    static_configs:\n"
                      f"      - targets: ['{LOOPBACK}:{port}']\n")
    log = data_dir.parent / f"{data_dir.name}.log"
    process = launch([binary, f"--config.file={config}", f"--storage.tsdb.path={data_dir}",
                      f"--web.listen-address={LOOPBACK}:{port}",
                      "--storage.tsdb.retention.time=3650d"], log)
    url = f"http://{LOOPBACK}:{port}"
    try:
        wait_http(f"{url}/-/ready", timeout_seconds=300, process=process, log=log)
        deadline, last, since = time.monotonic() + settle_seconds, -2.0, time.monotonic()
        while time.monotonic() < deadline:
            blocks = _blocks(url)
            if blocks != last:
                last, since = blocks, time.monotonic()
            if blocks == 1 or time.monotonic() - since > 30:
                break
            time.sleep(2)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
