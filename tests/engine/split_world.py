"""A simulated cluster whose cluster-wide policy runs as with `node_reports`: the helpers the
tests of the kinds that decide from node reports share."""

from __future__ import annotations

from dataclasses import replace

from policyd.engine import decide, report
from policyd.engine.registry import KINDS
from policyd.engine.schedule import Schedule
from policyd.engine.spec import PolicyDocument
from policyd.model import Decision, NodeReport, Snapshot
from policyd.sim.world import World
from policyd.tick import Outcome, observe


def reported(p: PolicyDocument, snap: Snapshot) -> Snapshot:
    """The manager's snapshot: no containers, every node's report (the held jobs kept)."""
    make = KINDS.of(p).node_reports
    assert make is not None
    return replace(snap, containers=(), node_reports=make(p, snap))


class SplitWorld(World):
    """Each tick, the agents' tick (`policyd.engine.report`: their part decided and applied,
    their reports made) on the cluster's snapshot, then the manager's decision from those
    reports, applied; the manager's decisions kept with their times (`managed`), and every
    report (`reports`)."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.managed: list[tuple[float, Decision]] = []
        self.reports: list[NodeReport] = []

    def _tick(self, schedule: Schedule) -> Schedule:
        p = schedule.policy
        snap = observe(self, p, schedule.interval_seconds)
        local, reports = report(p, snap, peers=self.policies, forecasts=False)
        assert local is not None
        self.reports += reports
        manager = decide(p, replace(snap, containers=(), node_reports=reports),
                         peers=self.policies, forecasts=False)
        self.managed.append((self.now, manager))
        for decision in (local, manager):
            for action in decision.actions:
                self.apply(action, decision)
            self.outcomes.append((self.now, Outcome(decision=decision)))
        return schedule.ran(local, self.now)
