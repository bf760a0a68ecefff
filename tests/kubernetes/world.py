"""Small worlds on the fake API server, built from the recorded objects.

`served()` starts a `FakeApiServer` on a `FakeClock` (the cluster's controllers and kubelets
follow it; the actuator sleeps on it, so waits take no real time). `actuator_on(server, clock)`
is a `KubernetesActuator` built with nothing but its settings (the real client, pointed at the
server), as `policyd/daemon/backend.py` builds it. The seeders put recorded objects in:
`node_w2` (the recorded node), `hollow_1` (the same, renamed), `resize_pod(name)` (a pod of
`pod_list_namespaced.json`), `bare_pod()` (the recorded bare pod running on hollow-1),
`job(name)` (a recorded Job, as it was before policyd moved it: unpinned, on hollow-1).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from policyd.actuators.kubernetes import KubernetesActuator, KubernetesSettings
from policyd.model import Decision, Migrate, SetCpu
from tests.kubernetes.builders import FakeClock
from tests.kubernetes.fake_apiserver import FakeApiServer
from tests.kubernetes.fake_cluster import FakeCluster, response
from tests.sources.builders import envelope, series

Obj = dict[str, Any]
NS = "training"


@contextmanager
def served(clock: FakeClock | None = None) -> Iterator[tuple[FakeApiServer, FakeClock]]:
    clock = clock or FakeClock()
    with FakeApiServer(clock) as server:
        yield server, clock


def actuator_on(server: FakeApiServer, clock: FakeClock, **settings: Any) -> KubernetesActuator:
    base: dict[str, Any] = {"host": server.url, "retries": 0, "poll_seconds": 0.5,
                            "confirm_seconds": 2.0, "qps": 1000.0, "burst": 1000}
    base.update(settings)
    return KubernetesActuator(KubernetesSettings(**base), clock=clock, sleep=clock.sleep)


def node_w2(cluster: FakeCluster, cpu: str = "7910m") -> Obj:
    return cluster.node("w2", cpu)


def hollow_1(cluster: FakeCluster, cpu: str = "7910m") -> Obj:
    return cluster.node("hollow-1", cpu)


def listed_pod(name: str) -> Obj:
    """A pod of the recorded namespaced pod list."""
    items = response("pod_list_namespaced.json")["items"]
    (found,) = [p for p in items if p["metadata"]["name"] == name]
    found["metadata"].pop("managedFields", None)
    return copy.deepcopy(found)


def resize_pod(cluster: FakeCluster, name: str = "rs-done") -> Obj:
    return cluster.add("pods", listed_pod(name))


def rs_done_loss(params: dict[str, str]) -> dict[str, Any]:
    """A fake Prometheus's answer to a range query (`tests.sources.cadvisor_server.Stub`):
    rs-done's loss at the query's steps (no kube-state-metrics series anywhere)."""
    start, end, step = float(params["start"]), float(params["end"]), float(params["step"])
    times = [start + step * k for k in range(round((end - start) / step) + 1)]
    labels = {"namespace": NS, "pod": "rs-done", "container": "trainer", "node": "w2"}
    return envelope([series(labels, [3.0 / (1 + k) for k in range(len(times))], times)])


def bare_pod(cluster: FakeCluster) -> Obj:
    """The recorded bare pod `bare-c`, running on hollow-1 (1 CPU limit, checkpoint volume)."""
    pod = response("pod_get_running_on_hollow_kubelet.json")
    pod["metadata"].pop("managedFields", None)
    return cluster.add("pods", pod)


def job(cluster: FakeCluster, name: str = "job-a", *, grace_seconds: int | None = None,
        suspend: bool = False, labels: dict[str, str | None] | None = None,
        annotations: dict[str, str] | None = None, named: str | None = None) -> Obj:
    """A recorded Job as it was before policyd moved it (no pin, no markers); the fake Job
    controller starts its pod (on hollow-1, the only node with room or matching its
    nodeSelector). `suspend`: created held, waiting for admission (no pod). `labels` change
    the Job's own (None: removed); `annotations` are the Job's; `named`: a copy of it under
    that name (and its own uid)."""
    body = response(f"job_get_{name}.json")
    body["metadata"].pop("managedFields", None)
    if named is not None:
        body["metadata"].update(name=named, uid=f"{named}-uid")
    body["metadata"].pop("annotations", None)
    for key, value in (labels or {}).items():
        body["metadata"]["labels"].pop(key, None)
        if value is not None:
            body["metadata"]["labels"][key] = value
    if annotations:
        body["metadata"]["annotations"] = dict(annotations)
    body["spec"]["suspend"] = suspend
    body.pop("status", None)
    template = body["spec"]["template"]
    template["metadata"].pop("annotations", None)
    template["spec"].pop("affinity", None)
    if grace_seconds is not None:
        template["spec"]["terminationGracePeriodSeconds"] = grace_seconds
    return cluster.add("jobs", body)


def decision(*actions: Any, policy: str = "flowcon") -> Decision:
    return Decision(policy=policy, kind="FlowCon", time=0.0, actions=tuple(actions),
                    assessments=(), next_interval=40.0)


def set_cpu(name: str, fraction: float, mode: str = "shares") -> SetCpu:
    return SetCpu(policy="flowcon", container=f"{NS}/{name}/trainer", node="w2",
                  fraction=fraction, mode=mode,  # type: ignore[arg-type]
                  reason=f"G >= alpha: limit {fraction:g}")


def migrate(pod: str, from_node: str = "hollow-1", to_node: str = "w2",
            grace_seconds: float | None = None) -> Migrate:
    return Migrate(policy="specon", container=f"{NS}/{pod}/trainer", from_node=from_node,
                   to_node=to_node, reason=f"converged; {to_node} has the lowest score",
                   converged_at=1_761_991_234.5, grace_seconds=grace_seconds)


def events(server: FakeApiServer) -> list[Obj]:
    """The Events the cluster holds, oldest first."""
    return server.cluster.items("events")
