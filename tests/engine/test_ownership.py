"""Policies that meet on one container: the owner of each class of action, what the others'
decisions say, dry-run policies outside it, and the overlaps `policyd validate` warns about."""

from __future__ import annotations

import pytest

from policyd.engine import decide
from policyd.engine.ownership import overlaps, owner, selectors_can_meet
from policyd.engine.spec import Selector
from tests.engine import specon_builders
from tests.engine.flowcon_builders import flowcon, job, losses, snapshot


def limited() -> tuple:  # type: ignore[type-arg]
    """a goes WL -> CL (a SetCpu to 0.25) next to b, which keeps learning."""
    return (job("a", losses(0.2, 0.01, 0.01), labels={"app": "train", "team": "x"}),
            job("b", losses(0.3, 0.3, 0.3), labels={"app": "train", "team": "y"}))


@pytest.mark.parametrize(("mine", "theirs", "owner_name"), [
    pytest.param({}, {"priority": 1}, "z", id="higher-priority-owns"),
    pytest.param({"priority": 2}, {"priority": 1}, "fc", id="own-priority-higher"),
    pytest.param({}, {}, "fc", id="tie-first-name-owns"),
    pytest.param({}, {"dry_run": True, "priority": 9}, "fc", id="dry-run-never-owns"),
])
def test_the_owner_of_a_containers_cpu(mine: dict, theirs: dict,  # type: ignore[type-arg]
                                       owner_name: str) -> None:
    fc, other = flowcon(**mine), flowcon(name="z", **theirs)
    a = limited()[0]
    found = owner(a, "cpu", [fc, other])
    assert found is not None and found.name == owner_name


def test_a_kind_that_does_not_emit_the_class_owns_none_of_it() -> None:
    a = limited()[0]
    found = owner(a, "cpu", [specon_builders.policy(priority=100), flowcon()])
    assert found is not None and found.name == "fc"
    assert owner(a, "placement", [flowcon()]) is None


def test_the_yielding_decision_drops_only_the_owned_containers_actions() -> None:
    snap = snapshot(*limited())
    team_x = flowcon(name="x-team", priority=1, selector={"labels": {"team": "x"}})
    mine = flowcon()
    alone = decide(mine, snap)
    assert [a.container for a in alone.actions] == ["a"]
    shared = decide(mine, snap, peers=[mine, team_x])
    assert shared.actions == ()
    notes = {a.container: a.note for a in shared.assessments}
    assert notes["a"].startswith("cpu owned by policy x-team (priority 1 vs 0): no action here")
    assert not notes["b"].startswith("cpu owned")  # b is not team x's: still ours
    assert shared.notes[-1] == ("1 container(s) owned by other policies for cpu; 1 action(s) "
                                "left to them")
    owners = decide(team_x, snap, peers=[mine, team_x])  # x-team sees only a: alone, CL -> 1
    assert not any(a.note.startswith("cpu owned") for a in owners.assessments)
    assert owners.actions == decide(team_x, snap).actions  # the owner decides as if alone


def test_a_dry_run_policy_yields_to_no_one() -> None:
    snap = snapshot(*limited())
    trial = flowcon(name="trial", dry_run=True)
    live = flowcon(name="live", priority=5)
    decision = decide(trial, snap, peers=[trial, live])
    assert [a.container for a in decision.actions] == ["a"] and decision.dry_run


@pytest.mark.parametrize(("a", "b", "meet"), [
    pytest.param({}, {}, True, id="both-everything"),
    pytest.param({"namespaces": ["x"]}, {}, True, id="one-namespace-in-all"),
    pytest.param({"namespaces": ["x"]}, {"namespaces": ["y"]}, False, id="disjoint-namespaces"),
    pytest.param({"namespaces": ["x", "y"]}, {"namespaces": ["y"]}, True, id="shared-ns"),
    pytest.param({"labels": {"team": "a"}}, {"labels": {"team": "b"}}, False, id="label-clash"),
    pytest.param({"labels": {"team": "a"}}, {"labels": {"app": "t"}}, True, id="labels-agree"),
])
def test_selectors_that_can_meet(a: dict, b: dict, meet: bool) -> None:  # type: ignore[type-arg]
    assert selectors_can_meet(Selector(**a), Selector(**b)) is meet
    assert selectors_can_meet(Selector(**b), Selector(**a)) is meet


def test_overlaps_are_pairs_of_live_policies_sharing_an_action_class() -> None:
    fc, boss = flowcon(), flowcon(name="boss", priority=3)
    sc = specon_builders.policy()
    trial = flowcon(name="trial", dry_run=True)
    found = overlaps([fc, sc, boss, trial])
    assert [(o.first.name, o.second.name, o.actions, o.owner.name) for o in found] == [
        ("fc", "boss", ("cpu",), "boss")]
