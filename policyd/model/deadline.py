"""A job's deadline as a decision reports it: the declared time, the state, the ETA and slack.

A plain frozen value, filled by a kind that reads deadlines (`policyd.engine.deadline`) on the
assessment of each job it manages, and read by everything that tells people about deadlines
without knowing the kind: `policyd plan` (DEADLINE and SLACK columns), the daemon's metrics
(jobs by state, slack) and the alerts (at risk, missed). States:

* `on_track`: predicted to finish before its deadline with the policy's margin to spare;
* `at_risk`: not with that margin at what it gets now (the policy gives it more cores);
* `hopeless`: not even with the most cores its node could give it;
* `missed`: the deadline has passed and the job still runs;
* `unknown`: a deadline, but no forecast yet (a job that has just started);
* `none`: no deadline declared;
* `invalid`: a declaration that cannot be read (`note` says which and why); no action.

Times are epoch seconds; slack is the deadline minus the ETA (negative: late). No I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

DeadlineState = Literal["on_track", "at_risk", "hopeless", "missed", "unknown", "none",
                        "invalid"]
DEADLINE_STATES: tuple[DeadlineState, ...] = ("on_track", "at_risk", "hopeless", "missed",
                                              "unknown", "none", "invalid")


def _finite(name: str, value: float | None) -> None:
    if value is not None and not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number or None, got {value}")


@dataclass(frozen=True, kw_only=True)
class JobDeadline:
    """One job's deadline at the decision's time (see the module docstring)."""

    state: DeadlineState
    deadline_at: float | None = None
    eta_at: float | None = None
    slack_seconds: float | None = None
    needed_cores: float | None = None
    note: str = ""

    def __post_init__(self) -> None:
        if self.state not in DEADLINE_STATES:
            raise ValueError(f"state must be one of {', '.join(DEADLINE_STATES)}, "
                             f"got {self.state!r}")
        for name in ("deadline_at", "eta_at", "slack_seconds", "needed_cores"):
            _finite(name, getattr(self, name))
        if self.state in ("none", "invalid") and self.deadline_at is not None:
            raise ValueError(f"a job in state {self.state} has no deadline_at")
        if self.state not in ("none", "invalid") and self.deadline_at is None:
            raise ValueError(f"a job in state {self.state} needs its deadline_at")
        if self.needed_cores is not None and self.needed_cores < 0:
            raise ValueError(f"needed_cores must be >= 0, got {self.needed_cores}")
        if self.state == "invalid" and not self.note:
            raise ValueError("an invalid declaration needs a note saying why")
