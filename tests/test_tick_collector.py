"""The cyclic garbage collector is paused while the engine decides, on every path that decides
(`policyd.tick.tick`, a node agent's report), and only then: not while the actuator acts, and
turned back on after the decision, whether it returned or raised."""

from __future__ import annotations

import gc
from collections.abc import Callable
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from policyd.daemon import scheduler as scheduler_module
from policyd.daemon.metrics import DaemonMetrics
from policyd.daemon.roles import NodeScopedSource
from policyd.daemon.scheduler import Daemon
from policyd.model import Action, Decision
from policyd.tick import FixedSource
from policyd.tick import tick as tick_once
from tests.daemon.fakes import FakeSource, flowcon, one_to_limit
from tests.daemon.test_node_reports_stops import policy, stopping_node, with_stops


def recording(seen: list[bool], wrapped: Callable[..., Any]) -> Callable[..., Any]:
    """`wrapped`, noting whether the collector was on each time it is called."""
    def call(*args: Any, **kwargs: Any) -> Any:
        seen.append(gc.isenabled())
        return wrapped(*args, **kwargs)
    return call


class NotingActuator:
    """Notes whether the collector was on at each action."""

    def __init__(self) -> None:
        self.seen: list[bool] = []

    def apply(self, action: Action, decision: Decision) -> None:
        self.seen.append(gc.isenabled())


def test_tick_decides_with_the_collector_paused_and_acts_with_it_on(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import policyd.tick as tick_module  # noqa: PLC0415 - the module whose decide is wrapped

    deciding: list[bool] = []
    monkeypatch.setattr(tick_module, "decide", recording(deciding, tick_module.decide))
    actuator = NotingActuator()
    assert gc.isenabled()
    outcome = tick_once(FakeSource(one_to_limit), flowcon(), actuator, interval_seconds=20)
    assert outcome.decision.actions, "the fake's jobs need an action for this test to mean much"
    assert deciding == [False]
    assert actuator.seen == [True] * len(outcome.decision.actions)
    assert gc.isenabled()


def test_a_decision_that_raises_turns_the_collector_back_on(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import policyd.tick as tick_module  # noqa: PLC0415

    def broken(*_: Any, **__: Any) -> Decision:
        raise RuntimeError("a bug in a kind")

    monkeypatch.setattr(tick_module, "decide", broken)
    with pytest.raises(RuntimeError, match="a bug in a kind"):
        tick_once(FakeSource(one_to_limit), flowcon(), NotingActuator(), interval_seconds=20)
    assert gc.isenabled()


def test_a_node_agent_makes_its_report_with_the_collector_paused(
        monkeypatch: pytest.MonkeyPatch) -> None:
    deciding: list[bool] = []
    monkeypatch.setattr(scheduler_module, "report",
                        recording(deciding, scheduler_module.report))
    snap, p = with_stops(), policy()
    actuator = NotingActuator()
    agent = Daemon([p], source=NodeScopedSource(FixedSource(snap), stopping_node(snap)),
                   actuator=actuator, metrics=DaemonMetrics(CollectorRegistry()), scope="node",
                   node_reports=True)
    (ticked,) = agent.run_once()
    agent.shutdown()
    assert ticked.result == "ok"
    assert deciding == [False]
    assert all(actuator.seen)  # what its node applies, if anything, outside the pause
    assert gc.isenabled()
