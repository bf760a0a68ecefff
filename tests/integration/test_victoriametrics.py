"""The Prometheus source against VictoriaMetrics and Prometheus holding the same series: the
same snapshot and the same decisions.

The series of `cluster_series` (40 training containers on 4 nodes, the kubelet's and
kube-state-metrics' label sets, 20 min at 15 s) go into a real Prometheus by `promtool tsdb
create-blocks-from openmetrics` and into a real single-node VictoriaMetrics (Debian's
`victoria-metrics`) by `POST /api/v1/import/prometheus`, both on 127.0.0.1. VictoriaMetrics
runs with `-search.latencyOffset=0s`: by default it hides the last 30 s before the wall clock,
which a cycle reading up to now would see as missing samples (docs/sources.md, "Backends").

Beside them, `SERVED` of the jobs also serve requests: a latency histogram
(`serving_request_duration_seconds_bucket`, the buckets' counters growing at fixed shares of
the requests, a different share per job), which the shipped QoE policy's `p95_latency_ms`
(policies/qoe.yaml) reads through each server's own `histogram_quantile`.
"""

from __future__ import annotations

import contextlib
import json
import math
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import cast

import pytest
from prometheus_api_client.prometheus_connect import PrometheusConnect

from policyd.engine import decide
from policyd.model import Snapshot
from policyd.policy import load_policies, load_policies_text
from policyd.sources import build_queries, kubernetes
from policyd.sources.matrix import Matrix, read_matrix
from policyd.sources.prometheus import PrometheusSource
from policyd.sources.prometheus_connect import PrometheusClient, connect_prometheus, query_range
from tests.integration.cluster_series import Cluster, exposition, jobs, openmetrics
from tests.integration.servers import LOOPBACK, Server, free_port, launch, prometheus, running

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SERVED = range(0, 40, 4)
"""The jobs that also serve requests (`histogram`)."""
REQUESTS_PER_SECOND = 10.0


def latency_shares(job: int) -> dict[str, float]:
    """The share of job `job`'s requests at or below each bucket's bound (seconds): the
    0.25 s bucket's differs from job to job, so each job has its own 95th percentile."""
    return {"0.05": 0.5, "0.1": 0.8, "0.25": 0.96 + 0.002 * job / 4, "0.5": 0.99, "+Inf": 1.0}


def p95_ms(job: int) -> float:
    """What `histogram_quantile(0.95, ...)` makes of the job's buckets: 0.95 falls in the
    (0.1, 0.25] bucket, interpolated linearly inside it."""
    shares = latency_shares(job)
    return 1000 * (0.1 + (0.25 - 0.1) * (0.95 - shares["0.1"]) / (shares["0.25"] - shares["0.1"]))


def histogram(cluster: Cluster, stamp: dict[float, str]) -> str:
    """The serving jobs' bucket counters, one line a sample (`stamp`: a time's text)."""
    by_index = {j.index: j for j in jobs(cluster)}
    lines = []
    for i in SERVED:
        job = by_index[i]
        for le, share in latency_shares(i).items():
            head = (f'serving_request_duration_seconds_bucket{{container="train",'
                    f'le="{le}",namespace="{job.namespace}",pod="{job.pod}"}}')
            for t in cluster.times().tolist():
                if t >= job.started_at:
                    count = REQUESTS_PER_SECOND * share * (t - job.started_at)
                    lines.append(f"{head} {count!r} {stamp[t]}\n")
    return "".join(lines)

POLICY = """\
apiVersion: policyd.io/v1alpha1
kind: FlowCon
metadata: {name: fc}
spec:
  interval_seconds: 20
  window_intervals: 20
  mode: {mode}
"""


@contextlib.contextmanager
def victoria_metrics(directory: Path) -> Iterator[Server]:
    binary = shutil.which("victoria-metrics")
    if binary is None:
        raise RuntimeError("victoria-metrics is not installed (Debian package victoria-metrics)")
    port = free_port()
    log = directory / "victoria-metrics.log"
    process = launch([binary, f"-httpListenAddr={LOOPBACK}:{port}",
                      f"-storageDataPath={directory / 'vm'}", "-retentionPeriod=100y",
                      "-search.latencyOffset=0s"], log)
    with running(Server(url=f"http://{LOOPBACK}:{port}", process=process, log=log),
                 ready_path="/health") as server:
        yield server


def post(url: str, body: bytes = b"") -> None:
    with urllib.request.urlopen(urllib.request.Request(url, data=body, method="POST"),
                                timeout=120) as answer:
        assert answer.status in (200, 204)


def wait_searchable(url: str, cluster: Cluster, *, samples: int,
                    timeout_seconds: float = 30.0) -> None:
    """Wait until every imported sample can be queried. An import and a forced flush do not make
    the newest samples searchable at once: once in CI a query right after them read one series'
    sample of 30 s before the end where the end's own sample was imported."""
    span = round(cluster.end_seconds - cluster.start_seconds) + 60
    query = urllib.parse.urlencode({"query": f'sum(count_over_time({{__name__!=""}}[{span}s]))',
                                    "time": cluster.end_seconds})
    deadline, seen = time.monotonic() + timeout_seconds, None
    while time.monotonic() < deadline:
        with urllib.request.urlopen(f"{url}/api/v1/query?{query}", timeout=30) as answer:
            result = json.load(answer)["data"]["result"]
        seen = int(float(result[0]["value"][1])) if result else 0
        if seen == samples:
            return
        time.sleep(0.2)
    raise AssertionError(f"VictoriaMetrics shows {seen} of the {samples} imported samples "
                         f"after {timeout_seconds:.0f} s")


@pytest.fixture(scope="module")
def cluster() -> Cluster:
    end = math.floor(time.time() / 15) * 15.0
    return Cluster(containers=40, per_node=10, start_seconds=end - 1200, end_seconds=end)


@pytest.fixture(scope="module")
def backends(tmp_path_factory: pytest.TempPathFactory, cluster: Cluster
             ) -> Iterator[dict[str, str]]:
    home = tmp_path_factory.mktemp("backends")
    text = home / "series.om"
    with text.open("w") as out:
        openmetrics(cluster, out)
    seconds = {t: f"{t:.3f}".rstrip("0").rstrip(".") for t in cluster.times().tolist()}
    body_om = text.read_text().removesuffix("# EOF\n")
    text.write_text(body_om + histogram(cluster, seconds) + "# EOF\n")
    subprocess.run(["promtool", "tsdb", "create-blocks-from", "openmetrics", str(text),
                    str(home / "data")], check=True, capture_output=True)
    with prometheus(home, []) as prom, victoria_metrics(home) as vm:
        exposed = home / "series.prom"
        with exposed.open("w") as out:
            exposition(cluster, out)
            out.write(histogram(cluster, {t: str(round(t * 1000))
                                          for t in cluster.times().tolist()}))
        body = exposed.read_bytes()
        post(f"{vm.url}/api/v1/import/prometheus", body)
        post(f"{vm.url}/internal/force_flush")
        wait_searchable(vm.url, cluster, samples=body.count(b"\n"))
        yield {"prometheus": prom.url, "victoria-metrics": vm.url}


def snapshot(url: str, cluster: Cluster, mode: str, node: str | None = None
             ) -> tuple[Snapshot, tuple[str, ...]]:
    policies = load_policies_text(POLICY.replace("{mode}", mode))
    source = PrometheusSource(url, kubernetes(), timeout_seconds=30, retries=0,
                              clock=lambda: cluster.end_seconds, node=node)
    parsed = source.observe(policies)
    return parsed.snapshot, parsed.warnings


@pytest.mark.parametrize("mode", ["shares", "quota"])
def test_victoria_metrics_gives_the_snapshot_and_decisions_prometheus_gives(
        backends: dict[str, str], cluster: Cluster, mode: str) -> None:
    (policy,) = load_policies_text(POLICY.replace("{mode}", mode))
    prom, prom_warnings = snapshot(backends["prometheus"], cluster, mode)
    vm, vm_warnings = snapshot(backends["victoria-metrics"], cluster, mode)
    assert len(prom.containers) == cluster.containers  # every job started before the end
    assert [c.id for c in vm.containers] == [c.id for c in prom.containers]
    assert prom_warnings == vm_warnings
    for p, v in zip(prom.containers, vm.containers, strict=True):
        assert (v.node, v.started_at, v.markers) == (p.node, p.started_at, p.markers)
        assert v.cpu_allocation == pytest.approx(p.cpu_allocation)
        assert v.evaluation.values.tolist() == pytest.approx(p.evaluation.values.tolist())
        assert v.evaluation.times_seconds.tolist() == p.evaluation.times_seconds.tolist()
        # MetricsQL's rate does not extrapolate to the window's edges as Prometheus's does:
        # with samples every 15 s in a 30 s window (two or three samples) they differ by up to a
        # few tens of per cent when the usage is noisy.
        assert v.cpu_usage.values.tolist() == pytest.approx(p.cpu_usage.values.tolist(),
                                                            rel=0.25, nan_ok=True)
    assert [(n.name, n.cpu_capacity) for n in vm.nodes] == [
        (n.name, n.cpu_capacity) for n in prom.nodes]
    ours, theirs = decide(policy, prom), decide(policy, vm)
    assert ours.actions == theirs.actions
    assert ours.categories == theirs.categories


@pytest.mark.parametrize("server", ["prometheus", "victoria-metrics"])
def test_a_node_agent_sees_its_node_as_the_whole_cluster_shows_it(
        backends: dict[str, str], cluster: Cluster, server: str) -> None:
    # Node w0 holds job 5, the one with the `migrated` marker: the agent's annotations query
    # keeps the pods with a container on its node (`and on (namespace, pod)`) and still
    # finds it.
    whole, _ = snapshot(backends[server], cluster, "shares")
    agent, _ = snapshot(backends[server], cluster, "shares", node="w0")
    mine = [c for c in whole.containers if c.node == "w0"]
    assert len(mine) == 10 and any(c.markers.migrated for c in mine)
    assert [(c.id, c.markers, c.started_at, c.cpu_allocation) for c in agent.containers] == [
        (c.id, c.markers, c.started_at, c.cpu_allocation) for c in mine]
    assert [n.name for n in agent.nodes] == ["w0"]
    queries = build_queries(load_policies_text(POLICY.replace("{mode}", "shares")),
                            kubernetes(), now_seconds=cluster.end_seconds, node="w0")
    client = PrometheusConnect(url=backends[server], disable_ssl=True)
    answer = client.custom_query(dict(queries.facts)["annotations"],
                                 params={"time": cluster.end_seconds})
    assert sorted(a["metric"]["pod"] for a in answer) == sorted(
        c.id.split("/")[1] for c in mine)  # its 10 pods' annotations, not the cluster's 40


@pytest.mark.parametrize("backend", ["prometheus", "victoria-metrics"])
def test_each_server_s_range_answers_are_read_from_their_bytes_as_decoded(
        backends: dict[str, str], cluster: Cluster, backend: str) -> None:
    """Both servers write their answers compactly: the source's client reads each range answer
    straight from the bytes (`matrix_body`), the same series as the client's own decoding."""
    url = backends[backend]
    (policy,) = load_policies_text(POLICY.replace("{mode}", "shares"))
    queries = build_queries([policy], kubernetes(), now_seconds=cluster.end_seconds)
    ours = connect_prometheus(url, timeout_seconds=30, retries=0)
    theirs = cast(PrometheusClient, PrometheusConnect(url=url, disable_ssl=True))
    for query in (queries.evaluation, queries.cpu):
        assert query is not None
        got, raw = (query_range(client, url, query, start_seconds=queries.start_seconds,
                                end_seconds=queries.now_seconds,
                                step_seconds=queries.step_seconds) for client in (ours, theirs))
        assert isinstance(got, Matrix), f"{backend}: {query!r} was decoded, not read from bytes"
        expected = read_matrix(raw)
        assert len(got) > 0 and got.labels == expected.labels
        assert got.offsets.tolist() == expected.offsets.tolist()
        assert got.times.tobytes() == expected.times.tobytes()
        assert got.values.tobytes() == expected.values.tobytes()


@pytest.mark.parametrize("backend", ["prometheus", "victoria-metrics"])
def test_the_shipped_qoe_policy_s_custom_metric_lands_on_each_serving_job(
        backends: dict[str, str], cluster: Cluster, backend: str) -> None:
    """policies/qoe.yaml's `p95_latency_ms` (a histogram_quantile over the jobs' latency
    buckets), asked of a real server: every serving job gets its own 95th percentile, no other
    job gets one, and nothing is left unplaced."""
    (policy,) = load_policies(ROOT / "policies" / "qoe.yaml")
    source = PrometheusSource(backends[backend], kubernetes(), timeout_seconds=30, retries=0,
                              clock=lambda: cluster.end_seconds)
    parsed = source.observe([policy])
    assert not [w for w in parsed.warnings if "p95_latency_ms" in w], parsed.warnings
    served = {f"{j.namespace}/{j.pod}/train": j.index for j in jobs(cluster)
              if j.index in SERVED}
    measured = {c.id: c.metrics["p95_latency_ms"] for c in parsed.snapshot.containers
                if "p95_latency_ms" in c.metrics}
    assert sorted(measured) == sorted(served)
    for cid, series in measured.items():
        assert len(series) > 0, cid
        assert series.values.tolist() == pytest.approx([p95_ms(served[cid])] * len(series),
                                                        rel=1e-6), cid
