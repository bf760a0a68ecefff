"""The shared recovery table (policyd.actuators.move_recovery): every row played out on a model
of the two sides, and the rows the issue's failures (F1, F2) went through."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace
from typing import get_args

import pytest

from policyd.actuators.move_recovery import (
    TABLE,
    Intent,
    New,
    Old,
    Situation,
    Step,
    decide,
)

INTENTS: tuple[Intent, ...] = get_args(Intent)
OLDS: tuple[Old, ...] = get_args(Old)
NEWS: tuple[New, ...] = get_args(New)
ALL = list(itertools.product(INTENTS, OLDS, NEWS))


@dataclass(frozen=True)
class World:
    """The two sides as the table sees them, plus what "unknown" hides: whether the new one
    may be running (only after the move reached "starting")."""

    intent: Intent
    old: Old
    new: New

    @property
    def new_may_run(self) -> bool:
        return self.new == "running" or (self.new == "unknown" and self.intent == "starting")

    def situation(self) -> Situation:
        return Situation(intent=self.intent, old=self.old, new=self.new)


def play(world: World, step: Step, *, old_exit_ok: bool, start_works: bool) -> World:
    """One step on the model; asserts the step is possible from here."""
    match step:
        case "stop_old":
            assert world.old == "running", (world, step)
            return replace(world, old="exited_ok" if old_exit_ok else "failed")
        case "remove_old":
            assert world.old in ("running", "exited_ok", "failed"), (world, step)
            return replace(world, old="missing")
        case "start_old":
            assert world.old in ("exited_ok", "failed"), (world, step)
            return replace(world, old="running")
        case "remove_new":
            assert world.new in ("running", "created", "exited"), (world, step)
            return replace(world, new="missing")
        case "start_new":
            assert world.new in ("created", "exited"), (world, step)
            return replace(world, intent="starting" if world.intent != "none" else "none",
                           new="running" if start_works else "exited")
    raise AssertionError(step)


def settle(world: World, *, old_exit_ok: bool, start_works: bool) -> tuple[World, str]:
    """Decide and play until the verdict is final, as a backend does; never two at once."""
    for _ in range(4):
        verdict = decide(world.situation())
        if verdict.outcome == "roll_back" and verdict.steps and world.intent != "none":
            world = replace(world, intent="rolling_back")
        for step in verdict.steps:
            world = play(world, step, old_exit_ok=old_exit_ok, start_works=start_works)
            assert not (world.old == "running" and world.new_may_run), (world, step)
            if step == "start_new" and world.new == "exited":  # failed start: roll back
                if world.intent != "none":
                    world = replace(world, intent="rolling_back")
                break
        else:
            if verdict.outcome != "continue":
                return world, verdict.outcome
    raise AssertionError(f"not settled: {world}")


def running(world: World) -> int:
    return (world.old == "running") + world.new_may_run


@pytest.mark.parametrize(("intent", "old", "new"), ALL, ids=["-".join(k) for k in ALL])
@pytest.mark.parametrize("old_exit_ok", [True, False], ids=["exit0", "exit137"])
@pytest.mark.parametrize("start_works", [True, False], ids=["starts", "dies"])
def test_every_row_ends_with_one_trainer_or_says_why_not(
        intent: Intent, old: Old, new: New, old_exit_ok: bool, start_works: bool) -> None:
    start = World(intent, old, new)
    first = decide(start.situation())
    if start.old == "running" and start.new_may_run:  # two already (or maybe): one goes first
        assert first.steps[:1] in (("stop_old",), ("remove_new",)) or (
            first.outcome == "wait" and start.new == "unknown"), start
    end, outcome = settle(start, old_exit_ok=old_exit_ok, start_works=start_works)
    if outcome in ("finish", "roll_back"):
        # one trainer, or a rollback whose replacement's engine is still away (old runs)
        assert running(end) == 1 or (end.old == "running" and end.new == "unknown"), end
    elif outcome == "wait":
        assert "unknown" in (end.old, end.new), end
    elif outcome == "lost":
        assert end.old == "missing" and end.new in ("missing", "created", "exited"), end
    else:
        assert outcome == "nothing" and intent == "none", end
        assert "missing" in (old, new) or "unknown" in (old, new), end


@pytest.mark.parametrize(("intent", "old", "new"), sorted(TABLE),
                         ids=["-".join(k) for k in sorted(TABLE)])
def test_every_row_has_a_reason_and_only_possible_steps(intent: Intent, old: Old,
                                                        new: New) -> None:
    verdict = TABLE[(intent, old, new)]
    assert verdict.why
    assert verdict.keep_intent == (verdict.outcome == "roll_back" and new == "unknown"), verdict
    assert verdict.outcome != "continue" or verdict.steps == ("stop_old",)


def test_the_table_covers_every_move_that_can_be_pending() -> None:
    pending = {k for k in ALL if k[0] != "none" and k[1] != "unknown"}
    assert pending <= set(TABLE)
    both_there = {k for k in ALL if k[0] == "none" and {k[1], k[2]}.isdisjoint(
        {"missing", "unknown"})}
    assert both_there <= set(TABLE)
    assert set(TABLE) <= pending | both_there


@pytest.mark.parametrize("intent", ["none", "moving", "starting", "rolling_back"])
def test_an_old_one_that_exited_0_during_a_move_is_resumed_never_left_finished(
        intent: Intent) -> None:
    for new in ("created", "exited", "missing"):
        if (intent, "exited_ok", new) not in TABLE:
            continue
        verdict = decide(Situation(intent=intent, old="exited_ok", new=new, old_exit_code=0))
        assert {"start_new", "start_old"} & set(verdict.steps), (intent, new, verdict)


def test_f1_the_sigterm_was_sent_and_the_old_one_still_runs_the_stop_is_finished() -> None:
    verdict = decide(Situation(intent="moving", old="running", new="created"))
    assert (verdict.outcome, verdict.steps) == ("continue", ("stop_old",))
    then = decide(Situation(intent="moving", old="exited_ok", new="created", old_exit_code=0))
    assert (then.outcome, then.steps) == ("finish", ("start_new", "remove_old"))


def test_f2_target_gone_before_the_start_rolls_back_at_once_and_after_it_waits() -> None:
    before = decide(Situation(intent="moving", old="exited_ok", new="unknown"))
    assert (before.outcome, before.steps, before.keep_intent) == ("roll_back", ("start_old",),
                                                                  True)
    after = decide(Situation(intent="starting", old="exited_ok", new="unknown"))
    assert (after.outcome, after.steps) == ("wait", ())
    back = decide(Situation(intent="rolling_back", old="running", new="created"))
    assert (back.outcome, back.steps) == ("roll_back", ("remove_new",))


def test_an_unknown_old_side_always_waits() -> None:
    for intent, new in itertools.product(INTENTS, NEWS):
        assert decide(Situation(intent=intent, old="unknown", new=new)).outcome == "wait"


def test_the_reason_names_the_exit_code_and_a_missing_checkpoint() -> None:
    why = decide(Situation(intent="moving", old="failed", new="created", old_exit_code=137,
                           checkpoint=False)).why
    assert "old exit code 137" in why and "restarts from its first step" in why
    lost = decide(Situation(intent="moving", old="missing", new="missing", checkpoint=False))
    assert lost.outcome == "lost" and "no checkpoint remains" in lost.why
