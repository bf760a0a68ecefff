"""Small builders for decisions and outcomes in the alert tests."""

from __future__ import annotations

from policyd.model import Action, Decision
from policyd.model.decision import Migrate, SetCpu
from policyd.tick import Outcome

T0 = 1_700_000_000.0  # 2023-11-14T22:13:20Z


def migrate(container: str = "c3", from_node: str = "w4", to_node: str = "w2",
            policy: str = "specon-a") -> Migrate:
    return Migrate(policy=policy, container=container, from_node=from_node, to_node=to_node,
                   reason="converged (g=0.010 < alpha=0.050); w2 has the lowest score 3.5",
                   scores={"w2": 3.5, "w4": 11.0})


def set_cpu(container: str = "c1", node: str = "w1", policy: str = "specon-a") -> SetCpu:
    return SetCpu(policy=policy, container=container, node=node, fraction=0.25, mode="shares",
                  reason="CL: G=0.01 of 0.04")


def outcome(*actions: Action, failed: tuple[tuple[Action, str], ...] = (),
            policy: str = "specon-a", dry_run: bool = False,
            next_interval: float = 40.0) -> Outcome:
    decision = Decision(policy=policy, kind="SpeCon", time=T0, actions=actions, assessments=(),
                        next_interval=next_interval, dry_run=dry_run)
    return Outcome(decision=decision, failed=failed)
