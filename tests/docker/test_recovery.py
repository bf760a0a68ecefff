"""DockerActuator.recover(): every rule of the table in policyd.actuators.docker.recovery."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from policyd.actuators.docker import RULES, ActuationError, DockerActuator
from policyd.actuators.docker.recovery import steps_for
from policyd.actuators.docker.state import ActuatorState
from tests.docker.builders import actuator, decision, migrate, set_cpu, settings
from tests.docker.fakes import FakeEngine, api_error, as_clients

NEW_LABELS = {"policyd.io/managed": "true", "policyd.io/migrated-from": "a"}

# id, old, new, intent, steps, old after, new after ("-" = removed / never there)
CASES = [
    ("both-running-no-intent", "running", "running", False, ("stop_old", "remove_old"), "-",
     "running"),
    ("both-running", "running", "running", True, ("stop_old", "remove_old"), "-", "running"),
    ("old-stopped-new-running", "exited", "running", False, ("remove_old",), "-", "running"),
    ("new-failed-roll-back", "exited", "exited", False, ("remove_new", "start_old"), "running",
     "-"),
    ("new-created-roll-back", "exited", "created", True, ("remove_new", "start_old"), "running",
     "-"),
    ("old-running-new-failed", "running", "exited", False, ("remove_new",), "running", "-"),
    ("new-missing-roll-back", "exited", "-", True, ("start_old",), "running", "-"),
    ("new-missing-no-intent-is-a-finished-job", "exited", "-", False, (), "exited", "-"),
    ("nothing-happened-yet", "running", "-", True, (), "running", "-"),
    ("old-gone-start-new", "-", "exited", True, ("start_new",), "-", "running"),
    ("old-gone-no-intent-leaves-it", "-", "exited", False, (), "-", "exited"),
    ("done", "-", "running", True, (), "-", "running"),
    ("lost", "-", "-", True, (), "-", "-"),
]


def world(old: str, new: str, intent: bool, tmp_path: Path) -> tuple[FakeEngine, FakeEngine,
                                                                       Path]:
    a, b = FakeEngine(), FakeEngine()
    if old != "-":
        a.containers.add("job", status=old)
    if new != "-":
        b.containers.add("job", status=new, labels=dict(NEW_LABELS))
    path = tmp_path / "state.json"
    state = ActuatorState.load(path)
    if intent:
        state.begin_migration("job", from_node="a", to_node="b", at=1.0)
    return a, b, path


def status(engine: FakeEngine) -> str:
    c = engine.containers.by_name.get("job")
    return "-" if c is None else c.status


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_rule(case: tuple[Any, ...], tmp_path: Path) -> None:
    _, old, new, intent, steps, old_after, new_after = case
    a, b, path = world(old, new, intent, tmp_path)
    act = actuator(a, b, state_path=path)
    done = act.recover()
    assert [d.steps for d in done] == ([steps] if intent or (old != "-" and new != "-") else [])
    assert (status(a), status(b)) == (old_after, new_after)
    assert act.state.migrations == {}
    assert ActuatorState.load(path).migrations == {}


def test_every_pair_of_sides_has_a_rule() -> None:
    sides = ("running", "stopped", "missing")
    assert set(RULES) == {(o, n) for o in sides for n in sides}
    assert steps_for("stopped", "missing", intent=False) == ()


def test_recovery_runs_before_the_first_action(tmp_path: Path) -> None:
    a, b, path = world("exited", "running", False, tmp_path)
    a.containers.add("other")
    actuator(a, b, state_path=path).apply(set_cpu(container="other"), decision())
    assert status(a) == "-" and status(b) == "running"


def test_a_same_named_container_not_created_by_policyd_is_not_a_pair(tmp_path: Path) -> None:
    a, b, path = world("exited", "-", True, tmp_path)
    b.containers.add("job", status="running")  # no migrated-from label
    act = actuator(a, b, state_path=path)
    act.recover()
    assert status(a) == "running" and status(b) == "running"  # rolled back; b's left alone


def test_migrating_again_settles_the_half_done_one_first(tmp_path: Path) -> None:
    a, b, path = world("running", "exited", True, tmp_path)
    act = actuator(a, b, state_path=path)
    act._recovered = True  # as if start-up recovery had failed to reach the engines
    act.apply(migrate(), decision())
    assert status(a) == "-" and status(b) == "running"


def test_failures_are_collected_and_retried_later(tmp_path: Path) -> None:
    a, b, path = world("exited", "running", False, tmp_path)
    a.fail["remove"] = [api_error(409, "removal in progress")]
    act = actuator(a, b, state_path=path)
    with pytest.raises(ActuationError, match=r"^recovery: 1 problems, half-done migrations may "
                                             r"remain: node a: remove old job failed: HTTP 409"):
        act.recover()
    assert status(a) == "exited"
    assert [d.steps for d in act.recover()] == [("remove_old",)]
    assert status(a) == "-"


def test_an_engine_that_does_not_answer_does_not_stop_the_others(tmp_path: Path) -> None:
    a, b, path = world("exited", "running", False, tmp_path)
    c = FakeEngine()
    c.fail["list"] = [api_error(503)] * 4
    act = DockerActuator(settings(path), clients=as_clients(a=a, b=b, c=c), sleep=lambda s: None)
    with pytest.raises(ActuationError, match=r"node c: list containers failed after 4 attempts"):
        act.recover()
    assert status(a) == "-" and status(b) == "running"
