"""KubernetesActuator against autospec'd CoreV1Api / BatchV1Api / EventsV1Api: the resize's
retries, conflicts, back-off and polling, call by call. Migrations, and the resize against the
real server's behaviour, are tested on the fake cluster (test_moves.py, test_real_defects.py)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from policyd.actuators.kubernetes import ActuationError
from policyd.model import MarkMigrated
from tests.kubernetes.builders import (
    FakeClock,
    actuator,
    answer,
    api_error,
    apis,
    decision,
    node,
    pod,
    raw,
    set_cpu,
)


def resize_world(core: Any, reads: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """read_namespaced_pod answers the first read, then `reads` in turn (last one repeats);
    read_node answers 8 cores; the resize bodies are returned."""
    bodies: list[dict[str, Any]] = []
    queue = list(reads)
    answer(core.read_namespaced_pod,
           lambda *a, **k: raw(queue.pop(0) if len(queue) > 1 else queue[0]))
    answer(core.read_node, lambda *a, **k: raw(node()))

    def resize(name: str, ns: str, body: dict[str, Any], **k: Any) -> Any:
        bodies.append(body)
        return raw({})
    answer(core.patch_namespaced_pod_resize, resize)
    answer(core.patch_namespaced_pod, lambda *a, **k: raw({}))
    return bodies


def test_resize_shares_sets_the_request_and_confirms() -> None:
    core, batch, events = apis()
    clock = FakeClock()
    bodies = resize_world(core, [pod(), pod(status_request="2")])
    act = actuator(core, batch, events, clock)
    act.apply(set_cpu(0.25), decision())
    assert bodies == [{"metadata": {"resourceVersion": "100"}, "spec": {"containers": [
        {"name": "trainer", "resources": {"requests": {"cpu": "2000m"}}}]}}]
    marks = core.patch_namespaced_pod.call_args.args[2]["metadata"]["annotations"]
    assert marks == {"policyd.io/last_action_at": "1700000000"}
    event = events.create_namespaced_event.call_args.args[1]
    assert (event["reason"], event["type"], event["regarding"]["name"]) == (
        "PolicydSetCpu", "Normal", "train-1")
    assert "completing, limit 0.25" in event["note"] and "flowcon-default" in event["note"]


def test_resize_quota_sets_the_limit_and_a_request_above_it() -> None:
    """The request comes down with the limit, 1m below it: memory request = limit here, so a
    CPU request equal to the limit would make the pod Guaranteed (refused by the API)."""
    core, batch, events = apis()
    clock = FakeClock()
    bodies = resize_world(core, [pod(request="3"),
                                 pod(status_request="999m", status_limit="1")])
    actuator(core, batch, events, clock).apply(set_cpu(0.125, "quota"), decision())
    assert bodies[0]["spec"]["containers"][0]["resources"] == {
        "limits": {"cpu": "1000m"}, "requests": {"cpu": "999m"}}


def test_an_infeasible_resize_is_an_error_with_the_reason() -> None:
    core, batch, events = apis()
    pending = pod(conditions=[{"type": "PodResizePending", "status": "True",
                               "reason": "Infeasible",
                               "message": "Node didn't have enough capacity: cpu"}])
    resize_world(core, [pod(), pending])
    with pytest.raises(ActuationError, match=r"Infeasible: Node didn't have enough"):
        actuator(core, batch, events, FakeClock()).apply(set_cpu(0.25), decision())
    assert events.create_namespaced_event.call_args.args[1]["type"] == "Warning"


def test_a_deferred_resize_is_asked_not_failed() -> None:
    """Deferred: the node lacks room now; the kubelet keeps the resize and applies it once
    there is room. Not a failure: the Event says so."""
    core, batch, events = apis()
    pending = pod(conditions=[{"type": "PodResizePending", "status": "True",
                               "reason": "Deferred",
                               "message": "Node didn't have enough resource: cpu"}])
    resize_world(core, [pod(), pending])
    actuator(core, batch, events, FakeClock()).apply(set_cpu(0.25), decision())
    event = events.create_namespaced_event.call_args.args[1]
    assert event["type"] == "Normal"
    assert "deferred by the kubelet (Deferred: Node didn't have enough" in event["note"]


def test_resize_in_progress_is_polled_until_done() -> None:
    core, batch, events = apis()
    clock = FakeClock()
    busy = pod(conditions=[{"type": "PodResizeInProgress", "status": "True"}])
    resize_world(core, [pod(), busy, busy, pod(status_request="2")])
    actuator(core, batch, events, clock).apply(set_cpu(0.25), decision())
    assert clock.sleeps == [1.0, 1.0]


def test_resize_not_confirmed_in_time() -> None:
    core, batch, events = apis()
    busy = pod(conditions=[{"type": "PodResizeInProgress", "status": "True"}])
    resize_world(core, [pod(), busy])
    with pytest.raises(ActuationError, match="not confirmed within 3 s"):
        actuator(core, batch, events, FakeClock(), resize_timeout_seconds=3).apply(
            set_cpu(0.25), decision())


def test_conflict_rereads_and_retries_once() -> None:
    core, batch, events = apis()
    bodies = resize_world(core, [pod(rv="100"), pod(rv="101"), pod(status_request="2")])
    calls: list[int] = []

    def resize(name: str, ns: str, body: dict[str, Any], **k: Any) -> Any:
        calls.append(1)
        if len(calls) == 1:
            raise api_error(409, "the object has been modified")
        bodies.append(body)
        return raw({})
    core.patch_namespaced_pod_resize.side_effect = resize
    actuator(core, batch, events, FakeClock()).apply(set_cpu(0.25), decision())
    assert bodies[0]["metadata"]["resourceVersion"] == "101"


def test_conflict_twice_fails() -> None:
    core, batch, events = apis()
    resize_world(core, [pod()])
    core.patch_namespaced_pod_resize.side_effect = api_error(409)
    with pytest.raises(ActuationError, match="conflict twice"):
        actuator(core, batch, events, FakeClock()).apply(set_cpu(0.25), decision())
    assert core.patch_namespaced_pod_resize.call_count == 2


def test_server_errors_are_retried_with_back_off() -> None:
    core, batch, events = apis()
    clock = FakeClock()
    resize_world(core, [pod(), pod(status_request="2")])
    outcomes: list[Any] = [api_error(500, "etcd timeout"), api_error(503), raw({})]

    def resize(*a: Any, **k: Any) -> Any:
        out = outcomes.pop(0)
        if isinstance(out, Exception):
            raise out
        return out
    core.patch_namespaced_pod_resize.side_effect = resize
    actuator(core, batch, events, clock).apply(set_cpu(0.25), decision())
    assert clock.sleeps[:2] == [0.5, 1.0]


def test_server_errors_give_up_after_the_retries() -> None:
    core, batch, events = apis()
    resize_world(core, [pod()])
    core.patch_namespaced_pod_resize.side_effect = api_error(500, "etcd timeout")
    with pytest.raises(ActuationError, match=r"failed after 3 attempts: HTTP 500.*etcd timeout"):
        actuator(core, batch, events, FakeClock()).apply(set_cpu(0.25), decision())


def test_a_missing_pod_is_not_retried() -> None:
    core, batch, events = apis()
    core.read_namespaced_pod.side_effect = api_error(404)
    with pytest.raises(ActuationError, match="pod ml/train-1 is gone"):
        actuator(core, batch, events, FakeClock()).apply(set_cpu(0.25), decision())
    assert core.read_namespaced_pod.call_count == 1


def test_qos_class_cannot_change() -> None:
    core, batch, events = apis()
    resize_world(core, [pod(request="4", qos="Guaranteed")])
    with pytest.raises(ActuationError, match=r"Guaranteed.*use mode quota"):
        actuator(core, batch, events, FakeClock()).apply(set_cpu(0.25), decision())
    core.patch_namespaced_pod_resize.assert_not_called()


@pytest.mark.parametrize(("annotations", "key", "refused"), [
    ({"example.com/no-policyd": "true"}, "example.com/no-policyd", "example.com/no-policyd"),
    ({"policyd.io/opt-out": "True"}, "example.com/no-policyd", "policyd.io/opt-out"),
    ({"example.com/no-policyd": "true"}, "policyd.io/opt-out", None),
])
def test_the_deciding_policys_opt_out_key_is_checked_on_the_pod(
        annotations: dict[str, str], key: str, refused: str | None) -> None:
    """The pod is checked against its policy's own `selector.opt_out_key` (the decision
    carries it) as well as the default, whatever the source read; a key no policy names
    stops nothing."""
    core, batch, events = apis()
    opted = pod()
    opted["metadata"]["annotations"] = annotations
    bodies = resize_world(core, [opted, {**opted, **pod(status_request="2")}])
    act = actuator(core, batch, events, FakeClock())
    chosen = replace(decision(), opt_out_key=key)
    if refused is None:
        act.apply(set_cpu(0.25), chosen)
        assert len(bodies) == 1
        return
    with pytest.raises(ActuationError, match=rf"pod ml/train-1 is opted out \({refused}=true\)"):
        act.apply(set_cpu(0.25), chosen)
    assert bodies == []
    assert act.opt_out.keys == ("policyd.io/opt-out",)  # the decision's key only while applied


def test_mark_migrated_writes_annotations() -> None:
    core, batch, events = apis()
    resize_world(core, [pod()])
    act = actuator(core, batch, events, FakeClock())
    act.apply(MarkMigrated(policy="specon", container="ml/train-1/trainer", node="w1",
                           converged_at=1_699_999_000.0, reason="stays: w1 has the lowest "
                           "score"), decision(policy="specon"))
    marks = core.patch_namespaced_pod.call_args.args[2]["metadata"]["annotations"]
    assert marks["policyd.io/migrated"] == "true"
    assert marks["policyd.io/converged_at"] == "1699999000"
