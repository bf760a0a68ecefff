"""The pure decision engine: `decide(policy, snapshot) -> Decision`.

No network, no clock, no globals, no randomness: time is `snapshot.time`, history is in the
snapshot's series, and facts that cannot be recomputed (migrated, rebalanced, converged-at) are
the snapshot's markers. Categories are recomputed on every call by replaying the thesis's
algorithms over the window, so the same snapshot always gives the same decision and a restarted
daemon reaches the decisions it would have reached.
"""

from __future__ import annotations

from policyd.engine.registry import KINDS
from policyd.engine.spec import PolicyDocument
from policyd.model import Decision, Snapshot


def decide(policy: PolicyDocument, snapshot: Snapshot) -> Decision:
    """What `policy` wants done given `snapshot` (see the kind's module for the algorithm)."""
    return KINDS[policy.kind].plan(policy, snapshot)


__all__ = ["KINDS", "PolicyDocument", "decide"]
