"""The pure decision engine: `decide(policy, snapshot) -> Decision`.

No network, no clock, no globals, no randomness: time is `snapshot.time`, history is in the
snapshot's series, and facts that cannot be recomputed (migrated, rebalanced, converged-at) are
the snapshot's markers. Categories are recomputed on every call by replaying the thesis's
algorithms over the window, so the same snapshot always gives the same decision and a restarted
daemon reaches the decisions it would have reached.

`decide` asks the registry for the policy's kind, runs the kind's plan, then the steps every
kind shares: delivery (`policyd.engine.delivery`: jobs that reached their target loss or
converged are notified, deprioritized or stopped, as the policy's `on_target` and
`on_converged` say), ownership (`policyd.engine.ownership`: with `peers`, the other policies running
beside it, actions on containers another policy owns are left to that policy), and the forecast
of where each job is going (`policyd.engine.forecasting`: every assessment carries one, or a
note why there is none).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from policyd.engine.delivery import deliver
from policyd.engine.forecasting import settings_of, with_forecasts
from policyd.engine.ownership import yield_to_owners
from policyd.engine.registry import KINDS
from policyd.engine.spec import PolicyDocument
from policyd.model import Decision, Snapshot


def decide(policy: PolicyDocument, snapshot: Snapshot, *,
           peers: Sequence[PolicyDocument] = (), forecasts: bool = True) -> Decision:
    """What `policy` wants done given `snapshot` (see the kind's module for the algorithm);
    `peers` are every policy running beside it (it may be among them). `forecasts=False` leaves
    out the forecasts a kind did not make itself (a caller that reads only the actions: the
    simulator's measured runs)."""
    kind = KINDS.of(policy)
    decision = replace(kind.plan(policy, snapshot),
                       opt_out_key=policy.spec.selector.opt_out_key)
    decision = deliver(decision, policy, snapshot, forecasts=forecasts)
    decision = yield_to_owners(decision, policy, peers, snapshot.containers, snapshot.pending)
    if not forecasts:
        return decision
    settings = settings_of(policy, snapshot, alpha=kind.convergence_alpha(policy),
                           interval_seconds=kind.intervals(policy).base_seconds)
    return with_forecasts(decision, settings, snapshot)


__all__ = ["KINDS", "PolicyDocument", "decide"]
