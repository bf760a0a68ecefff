"""The first real edge, end to end: real training processes expose their loss through
exporters/, a real Prometheus scrapes them, and `policyd plan --prometheus` builds the snapshot
and decides; the saved snapshot replays to the same decision offline.

No cAdvisor can run here, so the jobs' CPU comes from their own `process_cpu_seconds_total`
(the `process` source profile). Everything listens on 127.0.0.1 only.
"""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from policyd.cli import main
from tests.integration.servers import LOOPBACK, free_port, prometheus

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "exporters" / "examples" / "train_mnist_like.py"
SCRAPE_SECONDS = 0.5

# Absolute normalization: the digits MLP drives its loss towards 0, so its *relative* change per
# interval stays large for ever while the absolute change vanishes once it has converged.
POLICY = """\
apiVersion: policyd.io/v1alpha1
kind: FlowCon
metadata: {name: live}
spec:
  alpha: 0.02
  interval_seconds: 2
  window_intervals: 10
  beta: 2
  evaluation: {query: policyd_training_loss, normalization: absolute}
"""


@contextlib.contextmanager
def training_job(name: str, port: int, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A real PyTorch training process exporting its loss on 127.0.0.1:port."""
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, str(EXAMPLE), "--addr", LOOPBACK, "--port", str(port),
             "--steps", "10000000", "--job-name", name, "--threads", "1",
             "--print-every", "1000"],
            stdout=out, stderr=subprocess.STDOUT,
        )
    try:
        yield process
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def query(url: str, promql: str) -> list[Any]:
    address = f"{url}/api/v1/query?{urllib.parse.urlencode({'query': promql})}"
    with urllib.request.urlopen(address, timeout=5) as response:
        return list(json.load(response)["data"]["result"])


def wait_for(predicate: Callable[[], bool], *, timeout_seconds: float, what: str) -> None:
    deadline = time.monotonic() + timeout_seconds
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout_seconds} s waiting for {what}")


def seconds_of_loss(url: str, job: str) -> float:
    """How long Prometheus has held job's loss series (within the last 5 minutes)."""
    result = query(url, f'policyd_training_loss{{job_name="{job}"}}[5m]')
    if not result:
        return 0.0
    times = [float(t) for t, _ in result[0]["values"]]
    return times[-1] - times[0]


def plan(*argv: str) -> dict[str, Any]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["plan", *argv, "--output", "json"], out=out, err=err)
    assert code == 0, err.getvalue()
    return dict(json.loads(out.getvalue()))


def test_live_plan_shows_the_categories_and_replays_offline(tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    ports = {"converged": free_port(), "new": free_port()}
    targets = [f"{LOOPBACK}:{p}" for p in ports.values()]
    with (training_job("converged", ports["converged"], tmp_path / "converged.log"),
          prometheus(tmp_path, targets, scrape_seconds=SCRAPE_SECONDS) as prom):
        # The first job trains alone until its loss has been flat for a while...
        wait_for(lambda: seconds_of_loss(prom.url, "converged") >= 25, timeout_seconds=90,
                 what="25 s of the first job's loss in Prometheus")
        with training_job("new", ports["new"], tmp_path / "new.log"):
            # ... then a new job starts and has reported for two intervals.
            wait_for(lambda: seconds_of_loss(prom.url, "new") >= 4.5, timeout_seconds=60,
                     what="the new job's loss in Prometheus")
            saved = tmp_path / "snapshot.json"
            live = plan("--policy", str(policy), "--prometheus", prom.url,
                        "--source-profile", "process", "--capacity-cores", "2",
                        "--scrape-interval-seconds", str(SCRAPE_SECONDS),
                        "--save-snapshot", str(saved))

    snapshot = json.loads(saved.read_text())
    ids = {c["name"]: c["id"] for c in snapshot["containers"]}
    assert set(ids) == {"converged", "new"}
    by_name = {c["name"]: c for c in snapshot["containers"]}
    assert len(by_name["converged"]["evaluation"]) >= 10  # the whole window of history
    assert all(c["cpu_usage"] for c in snapshot["containers"])

    converged, new = live["containers"][ids["converged"]], live["containers"][ids["new"]]
    assert converged["category"] == "CL", converged
    assert new["category"] in {"NL", "WL"}, new
    # Algorithm 1: the completing job goes down to the floor 1/(beta * n) = 1/(2 * 2).
    throttle = [a for a in live["actions"] if a["container"] == ids["converged"]]
    assert [(a["kind"], a["fraction"]) for a in throttle] == [("set_cpu", 0.25)]
    assert all(a["container"] != ids["new"] for a in live["actions"])

    replayed = plan("--policy", str(policy), "--snapshot", str(saved))
    assert replayed == live


def test_prometheus_down_is_one_clear_error_and_no_decision(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    out, err = io.StringIO(), io.StringIO()
    url = f"http://{LOOPBACK}:{free_port()}"
    code = main(["plan", "--policy", str(policy), "--prometheus", url, "--source-profile",
                 "process", "--prometheus-timeout-seconds", "2"], out=out, err=err)
    assert code == 1
    assert out.getvalue() == ""
    assert err.getvalue() == (
        "policyd plan: no decision: the snapshot could not be read from Prometheus\n")
    (record,) = [r for r in caplog.records if r.levelname == "ERROR"]
    assert url in record.getMessage()
    assert "(connection)" in record.getMessage()
