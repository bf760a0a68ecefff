"""Stop on the fake cluster: a delivered job is checkpointed by SIGTERM and never runs again
(a bare pod: deleted with the grace period; a Job's pod: the Job marked delivered, and
suspended when its trainer exits 143 instead of 0)."""

from __future__ import annotations

from typing import Any

import pytest

from policyd.actuators.kubernetes import ActuationError
from policyd.model import Stop, labels
from tests.kubernetes import world
from tests.kubernetes.fake_apiserver import FakeApiServer
from tests.kubernetes.fake_cluster import response
from tests.kubernetes.test_moves import job_world
from tests.kubernetes.world import NS, decision, events, served

QOE = decision(policy="qoe")


def stop(pod: str, grace_seconds: float | None = 30) -> Stop:
    return Stop(policy="qoe", container=f"{NS}/{pod}/trainer", node="hollow-1",
                event="target", reason="loss 0.08 <= target 0.1: delivered",
                grace_seconds=grace_seconds)


def writes(server: FakeApiServer) -> list[dict[str, Any]]:
    return [r for r in server.requests if r["method"] != "GET"]


def test_a_bare_pod_is_annotated_then_deleted_with_its_grace_and_not_recreated() -> None:
    with served() as (server, clock):
        world.hollow_1(server.cluster)
        pod = world.bare_pod(server.cluster)
        server.cluster.advance(60, clock)
        world.actuator_on(server, clock).apply(stop("bare-c"), QOE)
        server.cluster.advance(30, clock)
        assert server.cluster.get("pods", NS, "bare-c") is None  # nothing recreates it
        trainers = server.cluster.pods.trainers
        assert [r.node for r in trainers.runs["bare-c"]] == ["hollow-1"]
        assert trainers.checkpoints["bare-c"][-1] > 0  # SIGTERM wrote its checkpoint
        (event,) = events(server)
        assert event["reason"] == "PolicydStop" and event["type"] == "Normal"
        assert "delivered" in event["note"]
    sent = writes(server)
    assert [r["method"] for r in sent] == ["PATCH", "DELETE", "POST"]
    marks = sent[0]["body"]["metadata"]["annotations"]
    assert marks[labels.STOP_REQUESTED] == "target"
    assert labels.DELIVERED in marks and "delivered" in marks[labels.DELIVERED_REASON]
    assert sent[1]["body"]["gracePeriodSeconds"] == 30
    assert sent[1]["body"]["preconditions"] == {"uid": pod["metadata"]["uid"]}


def test_the_grace_is_the_actions_else_the_configured_default() -> None:
    with served() as (server, clock):
        world.hollow_1(server.cluster)
        world.bare_pod(server.cluster)
        server.cluster.advance(60, clock)
        world.actuator_on(server, clock, grace_seconds=45).apply(stop("bare-c", None), QOE)
    (delete,) = [r for r in writes(server) if r["method"] == "DELETE"]
    assert delete["body"]["gracePeriodSeconds"] == 45


def test_a_jobs_pod_that_exits_143_leaves_its_job_suspended_and_says_why() -> None:
    """The fake Job trainer exits 143 after its checkpoint, as a migration asks: the Job would
    replace the pod, so it is suspended (delivered, never run again) and the action fails."""
    with served() as (server, clock):
        pod = job_world(server, clock)
        with pytest.raises(ActuationError, match=labels.STOP_REQUESTED):
            world.actuator_on(server, clock).apply(stop(pod["metadata"]["name"]), QOE)
        job = server.cluster.get("jobs", NS, "job-a")
        assert job is not None and job["spec"]["suspend"] is True
        assert labels.DELIVERED in job["metadata"]["annotations"]
        server.cluster.advance(30, clock)
        assert [p for p in server.cluster.items("pods", NS)
                if p["status"]["phase"] == "Running"] == []
        (event,) = events(server)
        assert event["type"] == "Warning" and event["reason"] == "PolicydStop"


def test_a_pod_that_is_not_running_is_not_touched() -> None:
    with served() as (server, clock):
        world.hollow_1(server.cluster)
        pod = response("pod_get_running_on_hollow_kubelet.json")
        pod["status"]["phase"] = "Succeeded"
        server.cluster.add("pods", pod)
        with pytest.raises(ActuationError, match="not running"):
            world.actuator_on(server, clock).apply(stop("bare-c"), QOE)
    assert [r["method"] for r in writes(server)] == ["POST"]  # the Warning Event only


def test_a_stop_asked_again_once_the_job_is_stopped_does_nothing_and_is_not_a_failure() -> None:
    """A manager deciding from node reports may see the agent's last report, listing the job,
    once more after it stopped it: the second Stop finds the job stopped, terminating or gone,
    and does nothing (no write, no Warning)."""
    with served() as (server, clock):
        world.hollow_1(server.cluster)
        world.bare_pod(server.cluster)
        server.cluster.advance(60, clock)
        actuator = world.actuator_on(server, clock)
        actuator.apply(stop("bare-c"), QOE)
        before = len(writes(server))
        actuator.apply(stop("bare-c"), QOE)  # at once: the pod still terminating, or gone
        server.cluster.advance(30, clock)
        assert server.cluster.get("pods", NS, "bare-c") is None
        actuator.apply(stop("bare-c"), QOE)  # gone
        assert len(writes(server)) == before
        (event,) = events(server)
        assert event["type"] == "Normal"


def test_a_delivered_pod_that_ended_is_not_stopped_again() -> None:
    with served() as (server, clock):
        world.hollow_1(server.cluster)
        pod = response("pod_get_running_on_hollow_kubelet.json")
        pod["status"]["phase"] = "Succeeded"
        pod["metadata"].setdefault("annotations", {})[labels.DELIVERED] = "1700000000"
        server.cluster.add("pods", pod)
        world.actuator_on(server, clock).apply(stop("bare-c"), QOE)
    assert writes(server) == []
