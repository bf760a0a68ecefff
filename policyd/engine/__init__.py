"""The pure decision engine: `decide(policy, snapshot) -> Decision`.

No network, no clock, no globals, no randomness: time is `snapshot.time`, history is in the
snapshot's series, and facts that cannot be recomputed (migrated, rebalanced, converged-at) are
the snapshot's markers. Categories are recomputed on every call by replaying the thesis's
algorithms over the window, so the same snapshot always gives the same decision and a restarted
daemon reaches the decisions it would have reached.

`decide` asks the registry for the policy's kind, runs the kind's plan, then the steps every
kind shares: the forecast of where each job is going (`policyd.engine.forecasting`: every
assessment carries one, or a note why there is none; made for all of them at once), delivery
(`policyd.engine.delivery`: jobs that reached their target loss or converged, as their
forecast says, are notified, deprioritized or stopped, as the policy's `on_target` and
`on_converged` say), and ownership (`policyd.engine.ownership`: with `peers`, the other policies
running beside it, actions on containers another policy owns are left to that policy).

With node reports (`Snapshot.node_reports`, the manager of a split policy) the kind decides
from them, and the jobs the agents report to stop are stopped (`policyd.engine.reported_stops`);
`report` is the agent's side: its node's part decided, its stops taken out and reported.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from policyd.engine.delivery import deliver
from policyd.engine.forecasting import settings_of, with_forecasts
from policyd.engine.ownership import yield_to_owners
from policyd.engine.registry import KINDS
from policyd.engine.reported_stops import (
    plain_reports,
    reported_stops,
    stops_decision,
    take_stops,
    with_stops,
)
from policyd.engine.spec import PolicyDocument
from policyd.model import Decision, NodeReport, Snapshot, StopRequest


def decide(policy: PolicyDocument, snapshot: Snapshot, *,
           peers: Sequence[PolicyDocument] = (), forecasts: bool = True) -> Decision:
    """What `policy` wants done given `snapshot` (see the kind's module for the algorithm);
    `peers` are every policy running beside it (it may be among them). `forecasts=False` leaves
    out the forecasts a kind did not make itself (a caller that reads only the actions: the
    simulator's measured runs)."""
    kind = KINDS.of(policy)
    if snapshot.node_reports and kind.stops_only(policy):
        return replace(stops_decision(policy, snapshot, kind=kind.name,
                                      interval_seconds=kind.intervals(policy).base_seconds),
                       opt_out_key=policy.spec.selector.opt_out_key)
    decision = replace(kind.plan(policy, snapshot),
                       opt_out_key=policy.spec.selector.opt_out_key)
    if snapshot.node_reports:
        # as the delivery step does for a job it stops: the policy's other actions on it go
        stops = reported_stops(policy, snapshot)
        stopped = {s.container for s in stops}
        decision = replace(decision, actions=(
            *(a for a in decision.actions if a.container not in stopped), *stops))
    if forecasts:
        # Every assessment's forecast at once, before delivery reads the categorised ones':
        # forecast in two batches (delivery's, then the rest), the snapshot's histories were
        # read and packed twice (every container's CPU series, each node's load).
        settings = settings_of(policy, snapshot, alpha=kind.convergence_alpha(policy),
                               interval_seconds=kind.intervals(policy).base_seconds)
        decision = with_forecasts(decision, settings, snapshot)
    decision = deliver(decision, policy, snapshot, forecasts=forecasts)
    return yield_to_owners(decision, policy, peers, snapshot.containers, snapshot.pending)


def report(policy: PolicyDocument, snapshot: Snapshot, *,
           peers: Sequence[PolicyDocument] = (), forecasts: bool = True
           ) -> tuple[Decision | None, tuple[NodeReport, ...]]:
    """A node agent's tick of a policy it reports to the manager (`Kind.reports_of`), from its
    node's `snapshot`: what it applies (its node's part, `Kind.agent_part`, without the stops
    only the manager makes; None when the kind gives the agent nothing to decide) and its
    node's report, the jobs to stop listed in it. `forecasts` as for `decide`."""
    kind = KINDS.of(policy)
    part = kind.agent_part(policy)
    decision: Decision | None = None
    stops: dict[str, tuple[StopRequest, ...]] = {}
    if part is not None:
        decision, stops = take_stops(decide(part, snapshot, peers=peers, forecasts=forecasts),
                                     snapshot)
    if kind.stops_only(policy) or kind.node_reports is None:
        reports = plain_reports(policy, snapshot)
    else:
        reports = kind.node_reports(policy, snapshot)
    return decision, with_stops(reports, stops)


__all__ = ["KINDS", "PolicyDocument", "decide", "report"]
