"""Safety limits shared by every policy kind: opt-out, minimum job age, a job back from a
restart, the back-off after failed moves, cooldown, and the migration budget per cycle and per
node.

The algorithms decide what *should* happen; these guards decide whether policyd may act on a
particular workload now. A blocked action is not emitted; the container's assessment says why.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from policyd.engine.spec import CommonSpec
from policyd.model import Container


def action_blocked(container: Container, spec: CommonSpec, now: float, *,
                   disrupts: bool) -> str | None:
    """Why policyd must not act on `container` now, or None when it may.

    `disrupts`: the action stops the job's process (a move, a stop). A job back from a restart
    whose exporter was not scraped since, and a job backing off after failed moves, are held
    back from those only: a CPU change costs a loading or once-failed job nothing."""
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
    if disrupts:
        not_back = not_back_yet(container, now)
        if not_back is not None:
            return not_back
        backing_off = move_backoff(container, spec, now)
        if backing_off is not None:
            return backing_off
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

    @property
    def exhausted(self) -> bool:
        """No migration is left this cycle."""
        return self.spent >= self.per_cycle

    def node_full(self, node: str) -> bool:
        """No migration may leave or enter `node` any more this cycle."""
        return self.by_node[node] >= self.per_node

    def spend(self, from_node: str, to_node: str) -> None:
        self.spent += 1
        self.by_node[from_node] += 1
        self.by_node[to_node] += 1


MAX_BACKOFF_DOUBLINGS = 6
"""The back-off after failed moves doubles at most this many times (64 x the base)."""


def not_back_yet(container: Container, now: float) -> str | None:
    """Why a job (re)started after its newest evaluation sample may not be acted on yet.

    A job that was restarted (a rolled-back move, a recovery) has shown that it runs again only
    when its exporter has been scraped since: before that it may still be loading its
    checkpoint, and a SIGTERM then costs it the progress since its last one. A job never seen
    (no sample at all, a new job) is not held back here: `min_job_age_seconds` is the policy's
    grace for that.
    """
    times = container.evaluation.times_seconds
    if times.size == 0 or times[-1] >= container.started_at:
        return None
    return (f"(re)started {now - container.started_at:.0f} s ago and its exporter not scraped "
            "since: not ready for a SIGTERM yet")


def move_backoff(container: Container, spec: CommonSpec, now: float) -> str | None:
    """Why a job whose last moves failed is still left alone: `move_backoff_seconds`, doubled
    for every further failure in a row (up to `MAX_BACKOFF_DOUBLINGS`)."""
    failures, failed_at = container.markers.move_failures, container.markers.move_failed_at
    base = spec.safety.move_backoff_seconds
    if failures <= 0 or failed_at is None or base <= 0:
        return None
    wait_seconds = base * 2 ** min(failures - 1, MAX_BACKOFF_DOUBLINGS)
    if now - failed_at >= wait_seconds:
        return None
    return (f"backing off after {failures} failed move(s) ({now - failed_at:.0f} s of "
            f"{wait_seconds:.0f} s)")
