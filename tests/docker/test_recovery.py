"""DockerActuator's recovery on fake engines: the shared table's rows as the actuator plays
them, a policyd killed after every step of a move, an engine that goes away mid-move, and a
create whose answer was lost (the table itself: tests/actuators/test_move_recovery.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import requests

from policyd.actuators.docker import ActuationError, DockerActuator
from policyd.actuators.docker.state import ActuatorState
from policyd.actuators.docker.steps import CRASH_POINTS
from tests.docker.builders import Clock, actuator, decision, migrate, set_cpu, settings
from tests.docker.fakes import FakeEngine, api_error, as_clients

NEW_LABELS = {"policyd.io/managed": "true", "policyd.io/migrated-from": "a"}

# id, old (status, exit code), new, intent stage, old after, new after ("-": gone / never there)
CASES = [
    ("both-running-no-intent", ("running", 0), "running", None, "-", "running"),
    ("both-running", ("running", 0), "running", "moving", "-", "running"),
    ("old-exited-new-running", ("exited", 0), "running", None, "-", "running"),
    ("new-died-roll-back", ("exited", 0), "exited", None, "running", "-"),
    ("f1-checkpointed-never-finished", ("exited", 0), "created", "moving", "-", "running"),
    ("f1-no-intent-checkpointed", ("exited", 0), "created", None, "-", "running"),
    ("f1-still-checkpointing", ("running", 0), "created", "moving", "-", "running"),
    ("killed-during-checkpoint", ("exited", 137), "created", "moving", "running", "-"),
    ("stale-replacement", ("running", 0), "exited", None, "running", "-"),
    ("checkpointed-no-replacement", ("exited", 0), "-", "moving", "running", "-"),
    ("nothing-happened-yet", ("running", 0), "-", "moving", "running", "-"),
    ("finished-job-without-intent", ("exited", 0), "-", None, "exited", "-"),
    ("old-gone-start-new", ("-", 0), "exited", "starting", "-", "running"),
    ("old-gone-no-intent-leaves-it", ("-", 0), "exited", None, "-", "exited"),
    ("done", ("-", 0), "running", "starting", "-", "running"),
    ("rolling-back-removes-the-replacement", ("running", 0), "created", "rolling_back",
     "running", "-"),
    ("lost", ("-", 0), "-", "moving", "-", "-"),
]


def world(old: tuple[str, int], new: str, stage: str | None, tmp_path: Path
          ) -> tuple[FakeEngine, FakeEngine, Path]:
    a, b = FakeEngine(), FakeEngine()
    status, code = old
    if status != "-":
        c = a.containers.add("job", status=status)
        c.attrs["State"]["ExitCode"] = code
    if new != "-":
        b.containers.add("job", status=new, labels=dict(NEW_LABELS))
    path = tmp_path / "state.json"
    state = ActuatorState.load(path)
    if stage is not None:
        state.begin_migration("job", from_node="a", to_node="b", at=1.0)
        state.set_stage("job", stage)
    return a, b, path


def status(engine: FakeEngine) -> str:
    c = engine.containers.by_name.get("job")
    return "-" if c is None else c.status


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_recover(case: tuple[Any, ...], tmp_path: Path) -> None:
    _, old, new, stage, old_after, new_after = case
    a, b, path = world(old, new, stage, tmp_path)
    act = actuator(a, b, state_path=path)
    act.recover()
    assert (status(a), status(b)) == (old_after, new_after)
    assert act.state.migrations == {}
    assert ActuatorState.load(path).migrations == {}


def test_recovery_runs_before_the_first_action(tmp_path: Path) -> None:
    a, b, path = world(("exited", 0), "running", None, tmp_path)
    a.containers.add("other")
    actuator(a, b, state_path=path).apply(set_cpu(container="other"), decision())
    assert status(a) == "-" and status(b) == "running"


def test_a_same_named_container_not_created_by_policyd_is_not_a_pair(tmp_path: Path) -> None:
    a, b, path = world(("exited", 0), "-", "moving", tmp_path)
    b.containers.add("job", status="running")  # no migrated-from label
    act = actuator(a, b, state_path=path)
    act.recover()
    assert status(a) == "running" and status(b) == "running"  # rolled back; b's left alone


def test_migrating_again_settles_the_half_done_one_first(tmp_path: Path) -> None:
    a, b, path = world(("running", 0), "exited", "moving", tmp_path)
    act = actuator(a, b, state_path=path)
    act._recovered = True  # as if start-up recovery had failed to reach the engines
    act.apply(migrate(), decision())
    assert status(a) == "-" and status(b) == "running"


def test_failures_are_collected_and_retried_later(tmp_path: Path) -> None:
    a, b, path = world(("exited", 0), "running", None, tmp_path)
    a.fail["remove"] = [api_error(409, "removal in progress")]
    act = actuator(a, b, state_path=path)
    with pytest.raises(ActuationError, match=r"^recovery: 1 problems, half-done migrations may "
                                             r"remain: node a: remove job failed: HTTP 409"):
        act.recover()
    assert status(a) == "exited"
    assert [d.steps for d in act.recover()] == [("remove_old",)]
    assert status(a) == "-"


def test_an_engine_that_does_not_answer_does_not_stop_the_others(tmp_path: Path) -> None:
    a, b, path = world(("exited", 0), "running", None, tmp_path)
    c = FakeEngine()
    c.fail["list"] = [api_error(503)] * 4
    act = DockerActuator(settings(path), clients=as_clients(a=a, b=b, c=c), sleep=lambda s: None)
    with pytest.raises(ActuationError, match=r"node c: list containers failed after 4 attempts"):
        act.recover()
    assert status(a) == "-" and status(b) == "running"


# --- policyd killed after each step of a move -------------------------------------------------


class Crashed(BaseException):
    """Stands for the SIGKILL of the chaos test's hook: nothing after it runs."""


def crash_at(point: str) -> Any:
    def crash(reached: str) -> None:
        if reached == point:
            raise Crashed(point)
    return crash


@pytest.mark.parametrize("exit_code", [0, 137], ids=["checkpointed", "killed-in-checkpoint"])
@pytest.mark.parametrize("point", CRASH_POINTS)
def test_a_restarted_policyd_leaves_exactly_one_trainer(point: str, exit_code: int,
                                                        tmp_path: Path) -> None:
    a, b = FakeEngine(), FakeEngine()
    old = a.containers.add("job", labels={"policyd.io/managed": "true", "app": "train"})
    old.exit_on_stop = exit_code
    old.exit_on_kill = True  # a trainer: its SIGTERM starts the checkpoint, then it exits
    path = tmp_path / "state.json"
    clock = Clock()
    dying = DockerActuator(settings(path), clients=as_clients(a=a, b=b), clock=clock,
                           sleep=clock.sleep, crash=crash_at(point))
    if point == "exit" or exit_code == 0 or point in ("intent", "create", "sigterm"):
        with pytest.raises(Crashed):
            dying.apply(migrate(), decision())
    else:  # a 137 never reaches the start: the move rolls back before it
        with pytest.raises(ActuationError, match="code 137"):
            dying.apply(migrate(), decision())
    if point == "sigterm":
        old.attrs["State"].update(Status="exited", Running=False, ExitCode=exit_code)
    restarted = DockerActuator(settings(path), clients=as_clients(a=a, b=b), clock=clock,
                               sleep=clock.sleep)
    restarted.recover()
    running = [e for e in (a, b) if status(e) == "running"]
    assert len(running) == 1, (point, status(a), status(b))
    moved = exit_code == 0 and point != "intent"
    assert running[0] is (b if moved else a), (point, status(a), status(b))
    if not moved:  # a rolled-back move counts once, so the engine backs off
        assert restarted.recorded_markers()[old.id].move_failures == 1
    assert restarted.state.migrations == {}
    assert ActuatorState.load(path).migrations == {}


# --- an engine that goes away mid-move, a lost answer ------------------------------------------


def connection_lost() -> requests.exceptions.ConnectionError:
    return requests.exceptions.ConnectionError("connection refused")


def engine_goes_away_when_the_old_one_exits(old: Any, target: FakeEngine,
                                            *ops: str) -> None:
    real_stop = old.stop

    def stop(timeout: int = 10) -> None:
        real_stop(timeout)
        for op in ops:
            target.fail[op] = [connection_lost()] * 8

    old.stop = stop


def test_target_gone_before_the_start_rolls_back_and_cleans_up_when_it_answers(
        tmp_path: Path) -> None:
    a, b = FakeEngine(), FakeEngine()
    engine_goes_away_when_the_old_one_exits(a.containers.add("job"), b, "reload", "get")
    path = tmp_path / "state.json"
    act = actuator(a, b, state_path=path)
    with pytest.raises(ActuationError, match=r"rolled back: it runs on node a again"):
        act.apply(migrate(), decision())
    assert status(a) == "running" and status(b) == "created"
    assert act.state.stage("job") == "rolling_back"
    b.fail.clear()  # the engine answers again: the next cycle removes the replacement
    assert [d.steps for d in act.settle_pending()] == [("remove_new",)]
    assert status(a) == "running" and status(b) == "-" and act.state.migrations == {}


def test_target_gone_after_the_start_waits_for_it(tmp_path: Path) -> None:
    a, b = FakeEngine(), FakeEngine()
    engine_goes_away_when_the_old_one_exits(a.containers.add("job"), b, "start", "get")
    act = actuator(a, b, state_path=tmp_path / "state.json")
    with pytest.raises(ActuationError, match=r"pending: the replacement may run on the target"):
        act.apply(migrate(), decision())
    assert act.state.stage("job") == "starting" and status(a) == "exited"
    with pytest.raises(ActuationError, match=r"earlier move of job \(a -> b\) is still pending"):
        b.fail["get"] = [connection_lost()] * 4
        act.apply(migrate(), decision())
    b.fail.clear()
    act.settle_pending()  # back: the checkpointed job starts there
    assert status(a) == "-" and status(b) == "running" and act.state.migrations == {}


def test_settle_pending_asks_no_engine_when_nothing_is_pending() -> None:
    a, b = FakeEngine(), FakeEngine()
    a.containers.add("job")
    act = actuator(a, b)
    assert act.settle_pending() == []
    assert a.calls == {} and b.calls == {}


def test_a_create_whose_answer_was_lost_adopts_what_it_made(tmp_path: Path) -> None:
    a, b = FakeEngine(), FakeEngine()
    a.containers.add("job")
    b.lose_create_answers = 1
    act = actuator(a, b, state_path=tmp_path / "state.json")
    act.apply(migrate(), decision())
    assert b.calls["create"] == 2 and b.log == ["create job", "start job"]
    assert status(a) == "-" and status(b) == "running" and act.state.migrations == {}


def test_a_409_for_a_container_of_another_move_is_not_adopted(tmp_path: Path) -> None:
    a, b = FakeEngine(), FakeEngine()
    a.containers.add("job")
    act = actuator(a, b, state_path=tmp_path / "state.json")

    real_create = b.containers.create

    def racing_create(**spec: Any) -> Any:  # someone else's container appears in between
        b.containers.add("job", labels={**NEW_LABELS, "policyd.io/move-id": "other"},
                         status="created")
        return real_create(**spec)

    b.containers.create = racing_create  # type: ignore[method-assign]
    with pytest.raises(ActuationError, match="already has a container named job that this "
                                             "move did not create"):
        act.apply(migrate(), decision())
    assert status(a) == "running"


# --- failed moves back off (the engine reads the markers) ---------------------------------------


def test_a_failed_move_is_counted_on_the_job_and_shown_to_the_source(tmp_path: Path) -> None:
    a, b = FakeEngine(), FakeEngine()
    job = a.containers.add("job")
    job.exit_on_stop = 137
    clock = Clock()
    act = actuator(a, b, state_path=tmp_path / "state.json", clock=clock)
    for _ in range(2):
        with pytest.raises(ActuationError):
            act.apply(migrate(), decision())
    markers = act.recorded_markers()[job.id]
    # each attempt waited the whole grace for an exit on SIGTERM that did not come
    assert markers.move_failures == 2 and markers.move_failed_at == clock.now == 1120.0
    reloaded = actuator(a, b, state_path=tmp_path / "state.json")
    assert reloaded.recorded_markers()[job.id].move_failures == 2
