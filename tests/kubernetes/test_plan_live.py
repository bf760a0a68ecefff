"""`policyd plan --prometheus URL --source-profile kubernetes --kubernetes-host URL`: without
kube-state-metrics, pods and node capacity come from the API (the fake server, replaying the
recorded lists), loss and CPU from Prometheus: the containers are decided, not left out."""

from __future__ import annotations

import io
import json
from contextlib import ExitStack
from pathlib import Path

import pytest

from policyd.cli import main
from tests.kubernetes import world
from tests.kubernetes.world import rs_done_loss as loss
from tests.kubernetes.world import served
from tests.sources.builders import envelope
from tests.sources.cadvisor_server import Stub, serving

POLICY = """\
apiVersion: policyd.io/v1alpha1
kind: FlowCon
metadata: {name: flowcon}
spec: {interval_seconds: 20, window_intervals: 5}
"""


def plan(*args: str, policy: Path) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["plan", "--policy", str(policy), *args], out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def test_plan_reads_capacity_from_the_api_without_kube_state_metrics(tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    saved = tmp_path / "seen.json"
    with served() as (server, _), serving(Stub(prometheus=loss)) as prometheus:
        world.node_w2(server.cluster)
        world.resize_pod(server.cluster, "rs-done")
        code, _, err = plan("--prometheus", prometheus, "--source-profile", "kubernetes",
                            "--kubernetes-host", server.url, "--output", "json",
                            "--save-snapshot", str(saved), policy=policy)
    assert code == 0, err
    assert "no known CPU capacity" not in err
    snapshot = json.loads(saved.read_text())
    assert [(n["name"], n["cpu_capacity"]) for n in snapshot["nodes"]] == [("w2", 7.91)]
    (container,) = snapshot["containers"]
    assert container["id"] == f"{world.NS}/rs-done/trainer"
    assert abs(container["cpu_allocation"] - 1.978 / 7.91) < 1e-9  # applied request / node


def test_without_the_api_the_missing_capacity_says_where_to_get_it(tmp_path: Path) -> None:
    """The kube-state-metrics path, as before: the container is left out, and the output
    names the options that read the capacity from the API."""
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    no_facts = envelope([], "vector")  # no kube-state-metrics, no kubelet cAdvisor series
    with serving(Stub(prometheus=loss, instant=no_facts)) as prometheus:
        code, _, err = plan("--prometheus", prometheus, "--source-profile", "kubernetes",
                            policy=policy)
    assert code == 0
    assert "hint: without kube-state-metrics, give --kubeconfig FILE or --kubernetes-host" in err


def test_an_unreachable_api_is_one_clear_error(tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    with serving(Stub(prometheus=loss)) as prometheus:
        code, _, err = plan("--prometheus", prometheus, "--source-profile", "kubernetes",
                            "--kubernetes-host", "http://127.0.0.1:9", policy=policy)
    assert code == 1
    assert "Traceback" not in err
    assert "no decision: the snapshot could not be read from Prometheus and the Kubernetes " \
           "API" in err


@pytest.mark.parametrize("api", [
    pytest.param(False, id="prometheus-source"),
    pytest.param(True, id="pod-source")])
@pytest.mark.parametrize(("bound", "at_once"), [
    pytest.param([], 2, id="default-two-at-once"),
    pytest.param(["--max-concurrent-queries", "1"], 1, id="one-after-the-other"),
    pytest.param(["--max-concurrent-queries", "4"], 4, id="four-at-once")])
def test_max_concurrent_queries_reaches_the_source(tmp_path: Path, api: bool, bound: list[str],
                                                   at_once: int) -> None:
    """The daemon's `prometheus.max_concurrent_queries` as an option: a fake Prometheus that
    holds each query a while sees that many out at once, from the Prometheus source (facts
    from Prometheus) and from the pod source (facts from the API) alike."""
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    prometheus = Stub(prometheus=loss, query_delay_seconds=0.3)
    with ExitStack() as stack:
        url = stack.enter_context(serving(prometheus))
        where: list[str] = []
        if api:
            server, _ = stack.enter_context(served())
            world.node_w2(server.cluster)
            world.resize_pod(server.cluster, "rs-done")
            where = ["--kubernetes-host", server.url]
        code, _, err = plan("--prometheus", url, "--source-profile", "kubernetes", *where,
                            *bound, policy=policy)
    assert code == 0, err
    assert prometheus.most_in_flight == at_once
