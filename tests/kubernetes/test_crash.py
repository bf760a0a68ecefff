"""No pod lost to a crash: policyd dies before each API call of a move in turn, a new policyd
starts (and settles the recorded move), and the training job ends with exactly one trainer
running, from its checkpoint, on the target or back home, never two at once.

The move runs on the fake cluster (`world`); policyd "dies" by a `Crash` (a BaseException,
which nothing in policyd catches) raised by its API caller before the k-th call, for every k
up to the number of calls the move makes when nothing goes wrong. Four moves: a bare pod and
a Job, each to a target with room (the move finishes) and to one without (it is rolled back).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import pytest

from policyd.actuators.errors import ActuationError
from tests.kubernetes import world
from tests.kubernetes.builders import FakeClock
from tests.kubernetes.fake_apiserver import FakeApiServer
from tests.kubernetes.world import NS, decision, migrate, served

HOME, TARGET = "hollow-1", "w2"
SETTINGS = {"poll_seconds": 2.0, "confirm_seconds": 2.0, "start_timeout_seconds": 20.0}


class Crash(BaseException):
    """policyd dies here."""


def dying_before(call: Callable[..., Any], k: int, made: list[str]) -> Callable[..., Any]:
    """`call` (Caller.call), dying before its k-th use; every call's description in `made`."""
    def call_or_die(what: str, *args: Any, **kwargs: Any) -> Any:
        if len(made) == k:
            raise Crash(what)
        made.append(what)
        return call(what, *args, **kwargs)
    return call_or_die


def bare(server: FakeApiServer, clock: FakeClock, room: str) -> tuple[str, str]:
    world.hollow_1(server.cluster)
    world.node_w2(server.cluster, room)
    world.bare_pod(server.cluster)
    server.cluster.advance(30, clock)
    return "bare-c", "bare-c"


def job(server: FakeApiServer, clock: FakeClock, room: str) -> tuple[str, str]:
    world.hollow_1(server.cluster)
    world.node_w2(server.cluster, room)
    world.job(server.cluster, "job-a")
    server.cluster.advance(30, clock)
    (pod,) = server.cluster.items("pods", NS)
    return pod["metadata"]["name"], "job/job-a"


MOVES = {"bare-pod": bare, "job": job}
ROOM = {"target-has-room": "7910m", "target-full": "50m"}


def run_move(kind: str, room: str, k: int | None) -> tuple[FakeApiServer, list[str], str]:
    """The move with a crash before call k (None: no crash), then a restart; the server, the
    calls made before the crash, and the trainer's key."""
    with served() as (server, clock):
        pod, key = MOVES[kind](server, clock, ROOM[room])
        act = world.actuator_on(server, clock, **SETTINGS)
        made: list[str] = []
        act.caller.call = dying_before(act.caller.call, -1 if k is None else k,  # type: ignore[method-assign]
                                       made)
        with contextlib.suppress(Crash, ActuationError):
            act.apply(migrate(pod, grace_seconds=30), decision(policy="specon"))
        restarted = world.actuator_on(server, clock, **SETTINGS)
        restarted.recover()  # what the daemon does at start (backend.kubernetes_parts)
        server.cluster.advance(30, clock)
        return server, made, key


@pytest.mark.parametrize("room", list(ROOM))
@pytest.mark.parametrize("kind", list(MOVES))
def test_a_crash_before_any_call_of_a_move_loses_no_trainer(kind: str, room: str) -> None:
    _, calls, _ = run_move(kind, room, None)
    assert len(calls) > 8, calls
    where = {TARGET} if room == "target-has-room" else {HOME}
    for k in range(len(calls) + 1):
        server, _, key = run_move(kind, room, k)
        at = f"crash before call {k} ({calls[k] if k < len(calls) else 'none'})"
        trainers = server.cluster.pods.trainers
        running = trainers.running(key)
        assert len(running) == 1, at
        assert trainers.overlaps(key) == [], at
        checkpoints = trainers.checkpoints.get(key) or [0.0]
        assert running[0].resumed_from == checkpoints[-1], at
        assert running[0].node in where | {HOME}, at
        if k == len(calls):
            assert running[0].node in where, at
        assert server.cluster.items("configmaps", "policyd") == [], at
        live = [p for p in server.cluster.items("pods", NS)
                if p["status"]["phase"] in ("Pending", "Running")]
        assert len(live) == 1, at
