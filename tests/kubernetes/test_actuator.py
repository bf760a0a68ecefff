"""KubernetesActuator against autospec'd CoreV1Api / BatchV1Api / EventsV1Api."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import pytest

from policyd.actuators.kubernetes import ActuationError
from policyd.model import MarkMigrated, Migrate
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
    core, batch, events = apis()
    clock = FakeClock()
    bodies = resize_world(core, [pod(request="3"), pod(status_request="1", status_limit="1")])
    actuator(core, batch, events, clock).apply(set_cpu(0.125, "quota"), decision())
    assert bodies[0]["spec"]["containers"][0]["resources"] == {
        "limits": {"cpu": "1000m"}, "requests": {"cpu": "1000m"}}


@pytest.mark.parametrize("reason", ["Deferred", "Infeasible"])
def test_resize_pending_is_an_error_with_the_reason(reason: str) -> None:
    core, batch, events = apis()
    pending = pod(conditions=[{"type": "PodResizePending", "status": "True", "reason": reason,
                               "message": "Node didn't have enough capacity: cpu"}])
    resize_world(core, [pod(), pending])
    with pytest.raises(ActuationError, match=rf"{reason}: Node didn't have enough"):
        actuator(core, batch, events, FakeClock()).apply(set_cpu(0.25), decision())
    assert events.create_namespaced_event.call_args.args[1]["type"] == "Warning"


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


# -- migration ----------------------------------------------------------------------------

MOVE = Migrate(policy="specon", container="ml/train-1/trainer", from_node="w1", to_node="w2",
               reason="converged; w2 has the lowest score 3.5", converged_at=1_699_999_000.0)


def bare_world(core: Any, eviction: Any = None) -> dict[str, Any]:
    """A pod on w1 that disappears once evicted and runs on w2 once created."""
    state: dict[str, Any] = {"pod": pod(), "created": None}

    def read(name: str, ns: str, **k: Any) -> Any:
        if state["pod"] is None:
            raise api_error(404)
        return raw(state["pod"])

    def evict(name: str, ns: str, body: dict[str, Any], **k: Any) -> Any:
        state["eviction"] = body
        if eviction is not None:
            raise eviction
        state["pod"] = None
        return raw({"kind": "Status", "status": "Success", "code": 201})

    def create(ns: str, body: dict[str, Any], **k: Any) -> Any:
        state["created"] = copy.deepcopy(body)
        state["pod"] = pod(node="w2")
        return raw(body)
    answer(core.read_namespaced_pod, read)
    answer(core.create_namespaced_pod_eviction, evict)
    answer(core.create_namespaced_pod, create)
    return state


def test_bare_pod_is_evicted_then_recreated_on_the_target() -> None:
    core, batch, events = apis()
    state = bare_world(core)
    act = actuator(core, batch, events, FakeClock())
    act.apply(dataclasses.replace(MOVE, grace_seconds=45.0), decision(policy="specon"))
    assert state["eviction"]["deleteOptions"] == {"gracePeriodSeconds": 45,
                                                  "preconditions": {"uid": "uid-train-1-w1"}}
    new = state["created"]
    assert "nodeName" not in new["spec"]
    assert new["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] == [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["w2"]}]}]
    assert [v["name"] for v in new["spec"]["volumes"]] == ["ckpt"]
    assert {"uid", "resourceVersion"}.isdisjoint(new["metadata"])
    marks = new["metadata"]["annotations"]
    assert (marks["policyd.io/migrated"], marks["policyd.io/migrated-from"],
            marks["policyd.io/converged_at"]) == ("true", "w1", "1699999000")
    assert events.create_namespaced_event.call_args.args[1]["reason"] == "PolicydMigrate"


@pytest.mark.parametrize(("grace", "sent"), [(45.0, 45), (0.0, 0), (None, 60)],
                         ids=["policy-45", "policy-0-is-kept", "none-is-the-default"])
def test_grace_period_is_the_actions_else_the_configured_default(grace: float | None,
                                                                  sent: int) -> None:
    """The one grace rule (`policyd.actuators.grace`; Docker: tests/docker/test_migration.py):
    a policy's 0 asks for an immediate stop and is sent as 0, not replaced by the default."""
    core, batch, events = apis()
    state = bare_world(core)
    act = actuator(core, batch, events, FakeClock(), grace_seconds=60.0)
    act.apply(dataclasses.replace(MOVE, grace_seconds=grace), decision(policy="specon"))
    assert state["eviction"]["deleteOptions"]["gracePeriodSeconds"] == sent


def test_eviction_refused_by_a_pdb() -> None:
    core, batch, events = apis()
    state = bare_world(core, eviction=api_error(429, "Cannot evict pod as it would violate "
                                                     "the pod's disruption budget."))
    with pytest.raises(ActuationError, match="PDB forbids now, retried next cycle"):
        actuator(core, batch, events, FakeClock()).apply(MOVE, decision(policy="specon"))
    assert state["created"] is None
    assert core.create_namespaced_pod_eviction.call_count == 1


def test_eviction_500_means_several_pdbs() -> None:
    core, batch, events = apis()
    bare_world(core, eviction=api_error(500, "This pod has more than one "
                                             "PodDisruptionBudget"))
    with pytest.raises(ActuationError, match="more than one PodDisruptionBudget"):
        actuator(core, batch, events, FakeClock()).apply(MOVE, decision(policy="specon"))
    assert core.create_namespaced_pod_eviction.call_count == 1  # not retried


def test_bare_pod_delete_mode_and_rollback_when_the_replacement_fails() -> None:
    core, batch, events = apis()
    state: dict[str, Any] = {"pod": pod(), "created": []}

    def read(*a: Any, **k: Any) -> Any:
        if state["pod"] is None:
            raise api_error(404)
        return raw(state["pod"])

    def delete(*a: Any, **k: Any) -> Any:
        state["pod"] = None
        return raw({})

    def create(ns: str, body: dict[str, Any], **k: Any) -> Any:
        state["created"].append(body)
        unschedulable = pod(node="w2", phase="Pending", conditions=[
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
             "message": "0/3 nodes are available"}])
        state["pod"] = unschedulable if len(state["created"]) == 1 else pod()
        return raw(body)
    answer(core.read_namespaced_pod, read)
    answer(core.delete_namespaced_pod, delete)
    answer(core.create_namespaced_pod, create)
    with pytest.raises(ActuationError, match=r"unschedulable.*rolled back"):
        actuator(core, batch, events, FakeClock(), use_eviction=False).apply(
            MOVE, decision(policy="specon"))
    back = state["created"][1]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert back[0]["matchFields"][0]["values"] == ["w1"]


def job(replacement: str | None = "Failed", suspend: bool = False) -> dict[str, Any]:
    spec: dict[str, Any] = {"suspend": suspend, "parallelism": 1,
                            "selector": {"matchLabels": {
                                "batch.kubernetes.io/controller-uid": "job-uid"}},
                            "template": {"metadata": {"labels": {"app": "train"}},
                                         "spec": {"containers": [{"name": "trainer"}]}}}
    if replacement:
        spec["podReplacementPolicy"] = replacement
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "train", "namespace": "ml", "uid": "job-uid"}, "spec": spec}


JOB_OWNER = {"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "job-uid",
             "controller": True}


def job_world(core: Any, batch: Any, *, pin_error: Any = None) -> list[dict[str, Any]]:
    patches: list[dict[str, Any]] = []
    lists = [[pod(owner=JOB_OWNER)], [], [pod("train-x2", node="w2", owner=JOB_OWNER)]]
    answer(core.read_namespaced_pod, lambda *a, **k: raw(pod(owner=JOB_OWNER)))
    answer(batch.read_namespaced_job, lambda *a, **k: raw(job()))
    answer(core.list_namespaced_pod, lambda *a, **k: raw(
        {"kind": "PodList", "items": lists.pop(0) if len(lists) > 1 else lists[0]}))

    def patch(name: str, ns: str, body: dict[str, Any], **k: Any) -> Any:
        patches.append(body)
        if pin_error is not None and "template" in body.get("spec", {}):
            raise pin_error
        return raw(job())
    answer(batch.patch_namespaced_job, patch)
    return patches


def test_job_owned_pod_is_suspended_repinned_and_resumed() -> None:
    core, batch, events = apis()
    patches = job_world(core, batch)
    actuator(core, batch, events, FakeClock()).apply(MOVE, decision(policy="specon"))
    assert [p["spec"].get("suspend") for p in patches] == [True, None, False]
    assert patches[0]["metadata"]["annotations"] == {"policyd.io/migrating-to": "w2"}
    template = patches[1]["spec"]["template"]
    assert template["metadata"]["annotations"]["policyd.io/migrated"] == "true"
    assert template["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0][
        "matchFields"][0]["values"] == ["w2"]
    assert patches[2]["metadata"]["labels"] == {"policyd.io/migrating": None}
    core.delete_namespaced_pod.assert_not_called()
    core.create_namespaced_pod.assert_not_called()
    regarding = events.create_namespaced_event.call_args.args[1]["regarding"]
    assert (regarding["kind"], regarding["name"]) == ("Job", "train")


def test_job_repin_refused_before_1_36_resumes_unchanged() -> None:
    core, batch, events = apis()
    patches = job_world(core, batch, pin_error=api_error(
        422, "spec.template: Invalid value: field is immutable"))
    with pytest.raises(ActuationError, match=r"needs Kubernetes 1\.36"):
        actuator(core, batch, events, FakeClock()).apply(MOVE, decision(policy="specon"))
    assert patches[-1]["spec"] == {"suspend": False}


def test_job_without_replacement_policy_failed_is_refused() -> None:
    core, batch, events = apis()
    job_world(core, batch)
    batch.read_namespaced_job.side_effect = lambda *a, **k: raw(job(replacement=None))
    with pytest.raises(ActuationError, match="podReplacementPolicy: Failed"):
        actuator(core, batch, events, FakeClock()).apply(MOVE, decision(policy="specon"))
    batch.patch_namespaced_job.assert_not_called()


@pytest.mark.parametrize("namespaces", [(), ("ml",)], ids=["cluster", "namespaced"])
def test_recovery_resumes_a_job_left_suspended(namespaces: tuple[str, ...]) -> None:
    core, batch, events = apis()
    stuck = job(suspend=True)
    stuck["metadata"]["annotations"] = {"policyd.io/migrating-to": "w2"}
    listing = raw({"kind": "JobList", "items": [stuck]})
    answer(batch.list_job_for_all_namespaces, lambda *a, **k: listing)
    answer(batch.list_namespaced_job, lambda *a, **k: listing)
    answer(batch.patch_namespaced_job, lambda *a, **k: raw(stuck))
    act = actuator(core, batch, events, FakeClock(), namespaces=namespaces)
    done = act.recover()
    assert [d.steps for d in done] == [("pin", "resume")]
    assert batch.patch_namespaced_job.call_args.args[2]["spec"] == {"suspend": False}
