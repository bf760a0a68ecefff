"""How long a trainer being moved or stopped may take to checkpoint and exit: one rule for every
backend.

A `Migrate` action carries its policy's `migration_grace_seconds`, a `Stop` its policy's grace
period. None (the policy does not say) means the backend's configured default
(`docker.grace_seconds`, the Kubernetes actuator's `grace_seconds`); any number the policy gives
is kept, 0 included: 0 asks for an immediate stop (SIGKILL on Docker, a zero-second deletion
grace period on Kubernetes).
"""

from __future__ import annotations

from policyd.model import Migrate, Stop


def grace_seconds(action: Migrate | Stop, default_seconds: float) -> float:
    """The SIGTERM-to-SIGKILL grace period of `action`: its own, else `default_seconds`."""
    return action.grace_seconds if action.grace_seconds is not None else default_seconds
