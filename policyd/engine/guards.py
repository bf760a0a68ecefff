"""Safety limits shared by every policy kind: opt-out, minimum job age, cooldown, and the
migration budget per cycle and per node.

The algorithms decide what *should* happen; these guards decide whether policyd may act on a
particular workload now. A blocked action is not emitted; the container's assessment says why.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from policyd.engine.spec import CommonSpec
from policyd.model import Container


def action_blocked(container: Container, spec: CommonSpec, now: float) -> str | None:
    """Why policyd must not act on `container` now, or None when it may."""
    if spec.selector.opted_out(container):
        return f"opted out ({spec.selector.opt_out_key}=true)"
    age_seconds = now - container.started_at
    # 0 means no minimum: a job started within the snapshot's second (its time is whole
    # seconds) or on an engine whose clock is slightly ahead has a negative age
    if spec.safety.min_job_age_seconds > 0 and age_seconds < spec.safety.min_job_age_seconds:
        return (
            f"younger than min_job_age_seconds ({age_seconds:.0f} s < "
            f"{spec.safety.min_job_age_seconds:.0f} s)"
        )
    last = container.markers.last_action_at
    if last is not None and now - last < spec.safety.cooldown_seconds:
        return (
            f"in cooldown ({now - last:.0f} s since policyd's last action < "
            f"{spec.safety.cooldown_seconds:.0f} s)"
        )
    return None


@dataclass
class MigrationBudget:
    """Counts the migrations of one cycle against `max_migrations_per_cycle` and `..._per_node`.

    A migration counts against both the node it leaves and the node it enters.
    """

    per_cycle: int
    per_node: int
    spent: int = 0
    by_node: Counter[str] = field(default_factory=Counter)

    @classmethod
    def of(cls, spec: CommonSpec) -> MigrationBudget:
        return cls(per_cycle=spec.safety.max_migrations_per_cycle,
                   per_node=spec.safety.max_migrations_per_node)

    def refusal(self, from_node: str, to_node: str) -> str | None:
        """Why one more migration from -> to is over budget, or None."""
        if self.spent >= self.per_cycle:
            return f"max_migrations_per_cycle ({self.per_cycle}) reached"
        for node in (from_node, to_node):
            if self.by_node[node] >= self.per_node:
                return f"max_migrations_per_node ({self.per_node}) reached on {node}"
        return None

    def spend(self, from_node: str, to_node: str) -> None:
        self.spent += 1
        self.by_node[from_node] += 1
        self.by_node[to_node] += 1
