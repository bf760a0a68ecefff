"""cadvisor-rest end to end: a real PyTorch job exports its loss, a real Prometheus scrapes it,
and `policyd plan --source-profile cadvisor-rest` joins that loss with the CPU a cAdvisor
stand-in reports for the job.

No cAdvisor can run here, so the stand-in (on 127.0.0.1) answers `POST /api/v1.3/docker/` in
cAdvisor's shape: the real ContainerInfo of payloads/cadvisor/otel_PreInfoContainer.json with
the Docker name set to the job's and its stats replaced by samples of the job's real CPU
counter (utime + stime of /proc/<pid>/stat, read every 0.5 s, as cAdvisor reads the cgroup's
cumulative counter). The CPU the snapshot holds is checked against Prometheus's own reading of
the same process (`process_cpu_seconds_total`, written by the exporter from the same counter).
"""

from __future__ import annotations

import copy
import io
import json
import os
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from policyd.cli import main
from policyd.sources.cadvisor_info import rfc3339
from tests.integration.servers import LOOPBACK, free_port, prometheus
from tests.integration.test_prometheus_live import training_job, wait_for
from tests.sources.cadvisor_server import Stub, load, serving

pytestmark = pytest.mark.slow

NAME = "digits-1"
WINDOW_SECONDS = 20.0
POLICY = """\
apiVersion: policyd.io/v1alpha1
kind: FlowCon
metadata: {name: live}
spec:
  interval_seconds: 2
  window_intervals: 10
  evaluation: {query: policyd_training_loss, normalization: absolute}
"""


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process, in seconds (fields 14 and 15 of /proc/<pid>/stat)."""
    text = Path(f"/proc/{pid}/stat").read_text()
    fields = text[text.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextmanager
def standin(pid: int) -> Iterator[tuple[str, Stub]]:
    """A cAdvisor stand-in sampling `pid`'s CPU counter every 0.5 s (see the module doc)."""
    (template,) = copy.deepcopy(load("otel_PreInfoContainer.json")).values()
    template["aliases"][0] = NAME
    stub = Stub(machine={"num_cores": os.cpu_count(), "memory_capacity": 1})
    stats: list[dict[str, Any]] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            total_ns = round(cpu_seconds(pid) * 1e9)
            stats.append({"timestamp": rfc3339(time.time()),
                          "cpu": {"usage": {"total": total_ns}}})
            stub.docker = [{**template, "stats": list(stats)}]
            stop.wait(0.5)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        with serving(stub) as url:
            yield url, stub
    finally:
        stop.set()
        thread.join()


def instant(url: str, promql: str, at: float) -> float:
    query = urllib.parse.urlencode({"query": promql, "time": f"{at:.3f}"})
    with urllib.request.urlopen(f"{url}/api/v1/query?{query}", timeout=5) as response:
        (sample,) = json.load(response)["data"]["result"]
    return float(sample["value"][1])


def test_plan_joins_prometheus_loss_with_cadvisor_cpu(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    port = free_port()
    monkeypatch.setenv("POLICYD_CONTAINER", NAME)  # the exporter's `container` label
    job = training_job(NAME, port, tmp_path / "job.log")
    with (job as process, standin(process.pid) as (cadvisor, stub),
          prometheus(tmp_path, [f"{LOOPBACK}:{port}"], scrape_seconds=0.5) as prom):
        def seconds_of_loss() -> float:
            query = urllib.parse.urlencode({"query": "policyd_training_loss[1m]"})
            with urllib.request.urlopen(f"{prom.url}/api/v1/query?{query}",
                                        timeout=5) as response:
                result = json.load(response)["data"]["result"]
            times = [float(t) for t, _ in result[0]["values"]] if result else [0.0]
            return times[-1] - times[0]

        wait_for(lambda: seconds_of_loss() >= WINDOW_SECONDS + 4, timeout_seconds=90,
                 what="a window of the job's loss in Prometheus")
        saved = tmp_path / "seen.json"
        out, err = io.StringIO(), io.StringIO()
        code = main(["plan", "--policy", str(policy), "--prometheus", prom.url,
                     "--source-profile", "cadvisor-rest", "--cadvisor", f"w1={cadvisor}",
                     "--output", "json", "--save-snapshot", str(saved)], out=out, err=err)
        assert code == 0, err.getvalue()
        snapshot = json.loads(saved.read_text())
        truth = instant(prom.url, f"rate(process_cpu_seconds_total[{WINDOW_SECONDS:g}s])",
                        snapshot["time"])

    (container,) = snapshot["containers"]
    assert (container["id"], container["node"]) == (NAME, "w1")
    assert container["labels"]["container"] == NAME
    assert len(container["evaluation"]) >= 10
    cores = [v for _, v in container["cpu_usage"]]
    assert len(cores) >= 9, container["cpu_usage"]  # one per 2 s interval of the window
    measured = sum(cores[-10:]) / len(cores[-10:])
    print(f"window mean: cadvisor-rest {measured:.3f} cores, Prometheus {truth:.3f} cores")
    # The same process counter, read by cAdvisor's stand-in and by the exporter: they agree.
    assert measured == pytest.approx(truth, abs=0.1), (cores, truth)
    assert truth > 0.2  # the job was training, not idle
    assert snapshot["nodes"] == [{"name": "w1", "cpu_capacity": float(os.cpu_count() or 1),
                                  "cpu_usage": pytest.approx(cores[-1])}]
    methods = [(m, p) for m, p, _ in stub.requests]
    assert methods == [("GET", "/api/v1.3/machine"), ("POST", "/api/v1.3/docker/")]
    json.loads(out.getvalue())  # the decision is printed
