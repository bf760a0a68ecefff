"""When a policy runs next: the one rule, used by the daemon's scheduler and the simulator's clock.

Theory of operation. Each policy has a `Schedule`: the interval its next tick runs at (it goes
into the snapshot as `Snapshot.intervals[name]`, so the kind decides back-off from it) and the
time of that tick. Three things move it:

* `ran(decision, now)`: a tick finished; the next runs `decision.next_interval` later (FlowCon
  doubles it while every job is converged, Algorithm 1 line 17; SpeCon keeps its interval).
* `woken(now)`: a container event the kind wakes on (`Kind.wakes_on`: FlowCon's Algorithm 2):
  the interval goes back to the base one (Algorithm 2, line 8) and the tick runs now.
* `replaced(policy)`: the policy file changed (hot reload); a new base interval resets the
  current one, any other change keeps the schedule.

A tick that failed (no snapshot) leaves the schedule as it was: the same interval, retried at
the next beat. Values are frozen; every method returns the next `Schedule`. Times are
arguments (seconds on whatever clock the caller runs: wall or virtual): nothing here reads a
clock, so the daemon and the simulator step through the very same rule.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from policyd.engine.kind import Intervals
from policyd.engine.registry import KINDS
from policyd.engine.spec import PolicyDocument
from policyd.model import Decision
from policyd.model.events import EventKind


def intervals_of(policy: PolicyDocument) -> Intervals:
    """The policy's base interval and the longest it may back off to (its kind says)."""
    return KINDS.of(policy).intervals(policy)


def base_interval_seconds(policy: PolicyDocument) -> float:
    """The policy's configured interval (FlowCon's itval_0, SpeCon's t_m - t_m-1)."""
    return intervals_of(policy).base_seconds


def wakes_on(policy: PolicyDocument, event: EventKind) -> bool:
    """Whether a container `event` resets the policy's interval and runs it at once."""
    return event in KINDS.of(policy).wakes_on


@dataclass(frozen=True, kw_only=True)
class Schedule:
    """One policy's current interval (seconds) and when its next tick is due."""

    policy: PolicyDocument
    interval_seconds: float
    next_run_at: float

    @classmethod
    def first(cls, policy: PolicyDocument, *, at: float) -> Schedule:
        """A new policy: its base interval, first tick at `at`."""
        return cls(policy=policy, interval_seconds=base_interval_seconds(policy),
                   next_run_at=at)

    @property
    def name(self) -> str:
        return self.policy.name

    def due(self, now: float) -> bool:
        return now >= self.next_run_at

    def ran(self, decision: Decision, now: float) -> Schedule:
        """A tick at `now` decided `decision`: the next one after its `next_interval`."""
        interval = decision.next_interval
        return replace(self, interval_seconds=interval, next_run_at=now + interval)

    def woken(self, now: float) -> Schedule:
        """A container event the kind wakes on: base interval, run now (Algorithm 2, line 8)."""
        return replace(self, interval_seconds=base_interval_seconds(self.policy),
                       next_run_at=now)

    def replaced(self, policy: PolicyDocument) -> Schedule:
        """The policy was reloaded: a changed base interval resets the current one."""
        old, new = base_interval_seconds(self.policy), base_interval_seconds(policy)
        if new == old:
            return replace(self, policy=policy)
        return replace(self, policy=policy, interval_seconds=new,
                       next_run_at=self.next_run_at - self.interval_seconds + new)
