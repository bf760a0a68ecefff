"""Every row of the recovery table (`policyd.actuators.kubernetes.recovery`), on the fake
cluster: the state the row is for is made, the recorded move is settled by a new actuator
(as after a restart), and the workload ends with exactly one trainer running where the row
says (or untouched), no two at once, and no record left."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from policyd.actuators.kubernetes import JOB_RULES, POD_RULES
from policyd.actuators.kubernetes.migration import bare_move, job_move
from policyd.actuators.kubernetes.moves import Move, Phase
from policyd.actuators.kubernetes.pods import pin_affinity
from policyd.actuators.kubernetes.recovery import seen_job, seen_pod
from policyd.model import labels
from tests.kubernetes import world
from tests.kubernetes.builders import FakeClock
from tests.kubernetes.fake_apiserver import FakeApiServer
from tests.kubernetes.world import NS, migrate, served

HOME, TARGET = "hollow-1", "w2"

# --- bare pods ----------------------------------------------------------------------------------

POD_STATES: dict[str, Callable[[FakeApiServer, FakeClock, Move], None]] = {}


def state(name: str) -> Callable[[Callable[..., None]], Callable[..., None]]:
    def add(make: Callable[..., None]) -> Callable[..., None]:
        POD_STATES[name] = make
        return make
    return add


@state("old-running")
def _running(server: FakeApiServer, clock: FakeClock, move: Move) -> None:
    pass


@state("old-stopping")
def _stopping(server: FakeApiServer, clock: FakeClock, move: Move) -> None:
    server.cluster.handle("DELETE", f"/api/v1/namespaces/{NS}/pods/bare-c", {},
                          {"gracePeriodSeconds": 30})


@state("gone")
def _gone(server: FakeApiServer, clock: FakeClock, move: Move) -> None:
    _stopping(server, clock, move)
    server.cluster.advance(5, clock)


def _created(manifest: dict[str, Any]) -> Callable[..., None]:
    def make(server: FakeApiServer, clock: FakeClock, move: Move) -> None:
        _gone(server, clock, move)
        server.cluster.handle("POST", f"/api/v1/namespaces/{NS}/pods", {},
                              copy.deepcopy(manifest))
    return make


@state("target")
def _target(server: FakeApiServer, clock: FakeClock, move: Move) -> None:
    _created(move.target)(server, clock, move)


@state("home")
def _home(server: FakeApiServer, clock: FakeClock, move: Move) -> None:
    _created(move.home)(server, clock, move)


@state("other")
def _other(server: FakeApiServer, clock: FakeClock, move: Move) -> None:
    stranger = copy.deepcopy(move.home)
    del stranger["metadata"]["annotations"][labels.MOVE]
    _created(stranger)(server, clock, move)


def pod_end(phase: Phase, seen: str) -> str | None:
    """Where the trainer runs at the end: a node, or None when the row leaves things be."""
    if seen in ("old-running", "other"):
        return None
    if phase == "moving" and seen != "home":
        return TARGET
    return HOME


@pytest.mark.parametrize(("phase", "seen"), list(POD_RULES), ids=str)
def test_every_bare_pod_row(phase: Phase, seen: str) -> None:
    with served() as (server, clock):
        world.hollow_1(server.cluster)
        world.node_w2(server.cluster)
        pod = world.bare_pod(server.cluster)
        server.cluster.advance(30, clock)
        move = bare_move(migrate("bare-c"), pod, 30.0, now=clock.now)
        if phase == "rolling-back":
            move = move.rolling_back("the target failed")
        POD_STATES[seen](server, clock, move)
        assert seen_pod(move, server.cluster.get("pods", NS, "bare-c")) == seen
        record(server, move)
        act = world.actuator_on(server, clock)
        (settled,) = act.recover()
        assert settled.steps[:len(POD_RULES[(phase, seen)])] == POD_RULES[(phase, seen)]
        server.cluster.advance(10, clock)
        now = server.cluster.get("pods", NS, "bare-c")
        assert now is not None and now["status"]["phase"] == "Running"
        expected = pod_end(phase, seen)
        if expected is None:
            assert now["spec"]["nodeName"] == HOME  # as it was
        else:
            assert now["spec"]["nodeName"] == expected
            check_one_trainer(server, "bare-c")
        assert server.cluster.items("configmaps", "policyd") == []


# --- Jobs ---------------------------------------------------------------------------------------

def job_end(phase: Phase, seen: Any) -> str | None:
    if seen == "gone":
        return None
    suspended, pinned = seen
    if phase == "moving":
        return TARGET if suspended or pinned == "target" else None
    return HOME


@pytest.mark.parametrize(("phase", "seen"), list(JOB_RULES), ids=str)
def test_every_job_row(phase: Phase, seen: Any) -> None:
    with served() as (server, clock):
        world.hollow_1(server.cluster)
        world.node_w2(server.cluster)
        job = world.job(server.cluster, "job-a")
        if seen != "gone" and seen[1] != "other":
            job["spec"]["template"]["spec"]["affinity"] = pin_affinity(
                None, TARGET if seen[1] == "target" else HOME)
            server.cluster.store.put("jobs", job)
        server.cluster.advance(30, clock)
        move = job_move(migrate("job-a"), job, 30.0, now=clock.now)
        if phase == "rolling-back":
            move = move.rolling_back("the target failed")
        if seen == "gone":
            server.cluster.store.delete("jobs", NS, "job-a")
        elif seen[0]:
            server.cluster.handle("PATCH", f"/apis/batch/v1/namespaces/{NS}/jobs/job-a", {},
                                  {"spec": {"suspend": True}})
            server.cluster.advance(3, clock)
        assert seen_job(move, server.cluster.get("jobs", NS, "job-a")) == seen
        record(server, move)
        (settled,) = world.actuator_on(server, clock).recover()
        assert settled.steps[:len(JOB_RULES[(phase, seen)])] == JOB_RULES[(phase, seen)]
        server.cluster.advance(10, clock)
        running = [p for p in server.cluster.items("pods", NS)
                   if p["status"]["phase"] == "Running"]
        expected = job_end(phase, seen)
        if seen == "gone":  # nothing of the move to settle: its pods are the garbage collector's
            assert settled.outcome == "untouched"
        else:
            (only,) = running
            where = expected or (TARGET if seen[1] == "target" else HOME)
            assert only["spec"]["nodeName"] == where
            check_one_trainer(server, "job/job-a")
        assert server.cluster.items("configmaps", "policyd") == []


def check_one_trainer(server: FakeApiServer, key: str) -> None:
    """One run going, none overlapping, and the last one resumed from the last checkpoint."""
    trainers = server.cluster.pods.trainers
    assert len(trainers.running(key)) == 1
    assert trainers.overlaps(key) == []
    if trainers.checkpoints.get(key):
        assert trainers.running(key)[0].resumed_from == trainers.checkpoints[key][-1]


def record(server: FakeApiServer, move: Move) -> None:
    """Write `move` as the actuator does, in policyd's namespace."""
    server.cluster.add("configmaps", replace(move, version="").to_config_map("policyd"))
