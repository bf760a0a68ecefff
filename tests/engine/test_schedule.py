"""The one schedule rule: next interval from the decision, resets on the events a kind wakes
on, hot reload of the base interval; pure values the daemon and the simulator both step."""

from __future__ import annotations

import pytest

from policyd.engine.schedule import Schedule, base_interval_seconds, intervals_of, wakes_on
from policyd.model import Decision
from tests.engine import specon_builders
from tests.engine.flowcon_builders import flowcon


def decided(next_interval: float, policy: str = "fc") -> Decision:
    return Decision(policy=policy, kind="FlowCon", time=0.0, actions=(), assessments=(),
                    next_interval=next_interval)


def test_each_kind_says_its_intervals() -> None:
    fc = flowcon(interval_seconds=20, max_interval_seconds=160)
    assert (intervals_of(fc).base_seconds, intervals_of(fc).longest_seconds) == (20, 160)
    sc = specon_builders.policy(interval_seconds=45)
    assert (intervals_of(sc).base_seconds, intervals_of(sc).longest_seconds) == (45, 45)
    assert base_interval_seconds(fc) == 20


def test_a_first_schedule_runs_at_the_base_interval_when_asked() -> None:
    s = Schedule.first(flowcon(), at=100.0)
    assert (s.interval_seconds, s.next_run_at, s.name) == (20.0, 100.0, "fc")
    assert not s.due(99.9) and s.due(100.0)


def test_the_next_tick_comes_after_the_decisions_interval() -> None:
    s = Schedule.first(flowcon(), at=0.0).ran(decided(40.0), now=20.0)
    assert (s.interval_seconds, s.next_run_at) == (40.0, 60.0)
    s = s.ran(decided(80.0), now=60.0)  # FlowCon backs off: the decision says so
    assert (s.interval_seconds, s.next_run_at) == (80.0, 140.0)


def test_a_wake_resets_to_the_base_interval_and_runs_now() -> None:
    s = Schedule.first(flowcon(), at=0.0).ran(decided(160.0), now=10.0)
    woken = s.woken(now=55.0)
    assert (woken.interval_seconds, woken.next_run_at) == (20.0, 55.0)
    assert woken.due(55.0)
    assert s.interval_seconds == 160.0  # values are frozen: the old one is unchanged


@pytest.mark.parametrize(("policy", "event", "wakes"), [
    pytest.param(flowcon(), "started", True, id="flowcon-alg2-start"),
    pytest.param(flowcon(), "stopped", True, id="flowcon-alg2-stop"),
    pytest.param(specon_builders.policy(), "started", False, id="specon-interval-only"),
])
def test_which_kinds_wake_on_container_events(policy: object, event: str, wakes: bool) -> None:
    assert wakes_on(policy, event) is wakes  # type: ignore[arg-type]


def test_a_reload_with_a_new_base_interval_resets_the_current_one() -> None:
    s = Schedule.first(flowcon(), at=0.0).ran(decided(80.0), now=20.0)  # next at 100
    same = s.replaced(flowcon(alpha=0.1))
    assert (same.interval_seconds, same.next_run_at, same.policy.spec.alpha) == (80.0, 100.0,
                                                                                 0.1)
    faster = s.replaced(flowcon(interval_seconds=10))
    assert (faster.interval_seconds, faster.next_run_at) == (10.0, 30.0)
