"""Jobs that reached their target loss: the shared on_target step under each response, with
the kind's floor for deprioritize, the guards, and stale samples that say nothing."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from policyd.engine import decide
from policyd.engine.registry import KINDS
from policyd.engine.spec import API_VERSION
from policyd.model import Container, Markers, Node, Series, SetCpu, Snapshot, Stop
from policyd.model import labels as keys
from tests.engine.flowcon_builders import flowcon

NOW = 1_700_001_000.0


def qoe(**spec: Any) -> Any:
    return KINDS["QoE"].document.model_validate({
        "apiVersion": API_VERSION, "kind": "QoE", "metadata": {"name": "q"},
        "spec": {"interval_seconds": 15, **spec}})


def trainer(cid: str, *, last_loss: float, target: float | None, age: float = 0.0,
            markers: Markers | None = None) -> Container:
    """A job whose loss falls to `last_loss`, its last sample `age` seconds old."""
    t = NOW - age - 5.0 * np.arange(11, -1, -1)
    loss = np.linspace(1.0, last_loss, 12)
    return Container(
        id=cid, name=cid, node="w1", started_at=float(t[0]) - 60,
        evaluation=Series.of(t, loss), cpu_usage=Series.of(t[1:], [2.0] * 11),
        cpu_allocation=0.5, labels={"app": "train",
                                    **({keys.TARGET_LOSS: f"{target:g}"} if target else {})},
        markers=markers or Markers(), steps=Series.of(t, 100.0 * np.arange(12)))


def snapshot(*containers: Container) -> Snapshot:
    return Snapshot(time=NOW, nodes=(Node(name="w1", cpu_capacity=4.0),), containers=containers)


def test_notify_says_so_and_acts_on_nothing() -> None:
    d = decide(qoe(), snapshot(trainer("done", last_loss=0.09, target=0.1),
                               trainer("busy", last_loss=0.5, target=0.1)))
    a = {x.container: x for x in d.assessments}
    assert a["done"].delivery is not None and a["done"].delivery.event == "target"
    assert a["done"].delivery.response == "notify" and "notified" in a["done"].note
    assert a["busy"].delivery is None
    assert not any(isinstance(x, Stop) for x in d.actions)
    assert any(n.startswith("delivered: 1 target -> notify") for n in d.notes)


def test_stop_emits_a_stop_with_the_grace_and_drops_other_actions_on_the_job() -> None:
    d = decide(qoe(on_target="stop", stop_grace_seconds=90),
               snapshot(trainer("done", last_loss=0.09, target=0.1),
                        trainer("busy", last_loss=0.5, target=None)))
    stops = [x for x in d.actions if isinstance(x, Stop)]
    assert [(s.container, s.event, s.grace_seconds) for s in stops] == [("done", "target", 90)]
    assert "reached its target loss: 0.09 <= 0.1" in stops[0].reason
    assert not [x for x in d.actions if x.container == "done" and not isinstance(x, Stop)]


def test_deprioritize_sets_the_kinds_floor() -> None:
    d = decide(qoe(on_target="deprioritize", beta=4),
               snapshot(trainer("done", last_loss=0.09, target=0.1),
                        trainer("busy", last_loss=0.5, target=None)))
    cpu = {x.container: x.fraction for x in d.actions if isinstance(x, SetCpu)}
    assert cpu["done"] == pytest.approx(1 / (4 * 2))


@pytest.mark.parametrize(("case", "job"), [
    pytest.param("stale", trainer("done", last_loss=0.09, target=0.1, age=60.0), id="stale"),
    pytest.param("above", trainer("done", last_loss=0.2, target=0.1), id="not-there-yet"),
    pytest.param("cooldown", trainer("done", last_loss=0.09, target=0.1,
                                     markers=Markers(last_action_at=NOW - 5)), id="cooldown"),
])
def test_no_stop(case: str, job: Container) -> None:
    d = decide(qoe(on_target="stop", safety={"cooldown_seconds": 60}), snapshot(job))
    assert not any(isinstance(x, Stop) for x in d.actions)
    if case == "cooldown":
        assert "no action" in d.assessments[0].note


@pytest.mark.parametrize(("on_converged", "scope"), [("notify", "node"),
                                                      ("deprioritize", "node"),
                                                      ("stop", "cluster")])
def test_a_policy_that_may_stop_jobs_runs_cluster_wide(on_converged: str, scope: str) -> None:
    """A node agent may only set CPU (no right to delete pods or change Jobs): a QoE or
    FlowCon policy that stops converged jobs runs in the manager."""
    for policy in (qoe(on_converged=on_converged), flowcon(on_converged=on_converged)):
        assert KINDS.of(policy).scope_of(policy) == scope, policy.kind
        assert ("stop" in KINDS.of(policy).acts_on_of(policy)) == (scope == "cluster")


def plateau(cid: str, *, first_step: float, loss: Any) -> Container:
    """A job whose twelve samples of loss are `loss` (flat: the forecast gives it nothing more
    to gain up to its 2,000 steps), its steps counted from `first_step`, 6 a sample."""
    t = NOW - 5.0 * np.arange(11, -1, -1)
    return Container(
        id=cid, name=cid, node="w1", started_at=float(t[0]) - 5.0,
        evaluation=Series.of(t, loss), cpu_usage=Series.of(t[1:], [1.0] * 11),
        cpu_allocation=0.5, labels={"app": "train"},
        steps=Series.of(t, first_step + 6.0 * np.arange(12)), total_steps=2000.0)


@pytest.mark.parametrize(("first_step", "loss", "stopped"), [
    pytest.param(0.0, np.full(12, 2.25), False, id="initial-plateau"),
    pytest.param(4.0, 2.24 + 0.01 * np.exp(-np.arange(12.0)), False,
                 id="fell-under-the-threshold"),
    pytest.param(600.0, np.full(12, 2.25), True, id="seen-mid-run"),
    pytest.param(0.0, 1.0 + 1.25 * (1.0 + 2.0 * np.arange(12)) ** -4.0, True,
                 id="fell-then-flat"),
])
def test_a_job_still_on_its_initial_plateau_is_not_converged(
        first_step: float, loss: Any, stopped: bool) -> None:
    """Every curve reads flat on a job that has not started to learn: its convergence is not
    judged while its history reaches back to its first steps and its loss has fallen by less
    than converged_below since. A job seen mid-run, or one that fell and flattened, is."""
    job = plateau("p", first_step=first_step, loss=loss)
    d = decide(flowcon(on_converged="stop"), snapshot(job))
    assert d.assessments[0].forecast is not None
    assert any(isinstance(x, Stop) for x in d.actions) is stopped

