"""Small builders of API-shaped JSON, and autospec'd APIs that record every call."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any
from unittest.mock import DEFAULT, create_autospec

from kubernetes.client import (  # type: ignore[import-untyped]
    BatchV1Api,
    CoordinationV1Api,
    CoreV1Api,
    EventsV1Api,
    PolicyV1Api,
)
from kubernetes.client.exceptions import ApiException  # type: ignore[import-untyped]

from policyd.actuators.kubernetes import KubernetesActuator, KubernetesSettings
from policyd.model import Decision, SetCpu

CALLED: list[tuple[str, dict[str, Any]]] = []
"""Every (method, kwargs) any recording API made in this test session (the RBAC test)."""


def raw(obj: Any) -> SimpleNamespace:
    """What a client method returns with `_preload_content=False`."""
    return SimpleNamespace(data=json.dumps(obj).encode())


def api_error(status: int, message: str = "", reason: str = "") -> ApiException:
    exc = ApiException(status=status, reason=reason or {404: "Not Found", 409: "Conflict",
                                                       429: "Too Many Requests"}.get(status, ""))
    exc.body = json.dumps({"kind": "Status", "status": "Failure", "message": message,
                           "code": status})
    return exc


def recording(cls: type) -> Any:
    """`create_autospec(cls, instance=True)` whose calls are appended to CALLED."""
    mock = create_autospec(cls, instance=True)
    for name in dir(cls):
        if name.startswith("_") or not callable(getattr(cls, name)):
            continue
        method = getattr(mock, name)

        def hook(*args: Any, _name: str = name, **kwargs: Any) -> Any:
            CALLED.append((_name, kwargs))
            return DEFAULT
        method.side_effect = hook
    return mock


def apis() -> tuple[Any, Any, Any]:
    core, batch, events = (recording(CoreV1Api), recording(BatchV1Api),
                           recording(EventsV1Api))
    events.create_namespaced_event.side_effect = _chain(
        events.create_namespaced_event.side_effect, lambda *a, **k: raw({}))
    return core, batch, events


def lease_api() -> Any:
    return recording(CoordinationV1Api)


def _chain(first: Any, then: Callable[..., Any]) -> Callable[..., Any]:
    def both(*args: Any, **kwargs: Any) -> Any:
        first(*args, **kwargs)
        return then(*args, **kwargs)
    return both


def answer(method: Any, fn: Callable[..., Any]) -> None:
    """Make an autospec'd method record the call, then answer with `fn(*args, **kwargs)`."""
    method.side_effect = _chain(method.side_effect, fn)


def pod(name: str = "train-1", *, node: str = "w1", request: str | None = "1",
        limit: str | None = "4", qos: str = "Burstable", owner: dict[str, Any] | None = None,
        phase: str = "Running", status_request: str | None = None,
        status_limit: str | None = None, conditions: list[dict[str, Any]] | None = None,
        rv: str = "100") -> dict[str, Any]:
    res: dict[str, Any] = {}
    if request:
        res["requests"] = {"cpu": request, "memory": "1Gi"}
    if limit:
        res["limits"] = {"cpu": limit, "memory": "1Gi"}
    sres: dict[str, Any] = copy.deepcopy(res)
    if status_request:
        sres.setdefault("requests", {})["cpu"] = status_request
    if status_limit:
        sres.setdefault("limits", {})["cpu"] = status_limit
    meta: dict[str, Any] = {"name": name, "namespace": "ml", "uid": f"uid-{name}-{node}",
                            "resourceVersion": rv, "labels": {"policyd.io/managed": "true",
                                                              "app": "train"},
                            "annotations": {}}
    if owner:
        meta["ownerReferences"] = [owner]
    return {
        "apiVersion": "v1", "kind": "Pod", "metadata": meta,
        "spec": {"nodeName": node, "containers": [{
            "name": "trainer", "image": "train:1", "resources": res,
            "volumeMounts": [{"name": "ckpt", "mountPath": "/ckpt"},
                             {"name": "kube-api-access-abcde",
                              "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}]}],
            "volumes": [{"name": "ckpt", "persistentVolumeClaim": {"claimName": "ckpt"}},
                        {"name": "kube-api-access-abcde", "projected": {"sources": []}}]},
        "status": {"phase": phase, "qosClass": qos, "conditions": conditions or [],
                   "startTime": "2026-11-01T10:00:00Z",
                   "containerStatuses": [{
                       "name": "trainer", "resources": sres,
                       "state": {"running": {"startedAt": "2026-11-01T10:00:05Z"}}
                       if phase == "Running" else {"waiting": {"reason": "ContainerCreating"}}}]},
    }


def node(name: str = "w1", cpu: str = "8") -> dict[str, Any]:
    return {"metadata": {"name": name}, "status": {"allocatable": {"cpu": cpu},
                                                   "capacity": {"cpu": cpu}}}


class FakeClock:
    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self.now = start
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def actuator(core: Any, batch: Any, events: Any, clock: FakeClock, **settings: Any
             ) -> KubernetesActuator:
    """An actuator on autospec'd APIs; no move is pending (moves have tests of their own, on
    the fake cluster: test_moves.py)."""
    base: dict[str, Any] = {"poll_seconds": 1.0, "confirm_seconds": 2.0, "retries": 2,
                            "backoff_seconds": 0.5, "qps": 1000.0, "burst": 1000}
    base.update(settings)
    answer(core.list_namespaced_config_map, lambda *a, **k: raw({"items": []}))
    return KubernetesActuator(KubernetesSettings(**base), core=core, batch=batch,
                              events_api=events, policy_api=recording(PolicyV1Api),
                              clock=clock, sleep=clock.sleep)


def decision(*actions: Any, policy: str = "flowcon-default") -> Decision:
    return Decision(policy=policy, kind="FlowCon", time=0.0, actions=tuple(actions),
                    assessments=(), next_interval=40.0)


def set_cpu(fraction: float, mode: str = "shares", container: str = "ml/train-1/trainer"
            ) -> SetCpu:
    return SetCpu(policy="flowcon-default", container=container, node="w1", fraction=fraction,
                  mode=mode,  # type: ignore[arg-type]
                  reason="G=0.01 < alpha 0.05: completing, limit 0.25")
