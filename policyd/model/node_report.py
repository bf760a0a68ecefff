"""A node agent's report of its worker, for a cluster-wide kind's manager (`Snapshot.node_reports`).

Why. A cluster-wide kind such as SpeCon needs, for its decisions, a few figures per worker and
a few jobs, not every sample of every container: the thesis's own SpeCon has its workers run
the container monitor (Algorithm 3) and send the manager their reallocation requests. With
`node_reports`, each node agent replays the monitor over its own node's containers and
publishes what the manager's Algorithms 4 and 5 read: the category counts, the CPU in use, how
many selected jobs the worker holds and how many of its categorised jobs are not reallocated
yet, the jobs asking to be reallocated (with their last gain), and the jobs Algorithm 5 may
move first (their converged duration). The manager reads the reports of every worker
(`policyd.sources.node_reports`) and decides from them alone: its cost follows the number of
workers, not of containers.

Only jobs policyd may act on are listed (the agent applies the guards: opt-out, minimum age,
cooldown, back-off), and at most as many rebalance candidates per worker as a cycle may move
off one worker. Plain values: no I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

METRIC_PREFIX = "policyd_node_report_"
"""Where agents publish reports and the manager reads them: `policyd_node_report_<figure>`."""
NODE_FIGURES = {"time_seconds": "time", "cpu_capacity_cores": "cpu_capacity_cores",
                "cpu_used_cores": "cpu_used_cores", "selected_jobs": "selected",
                "unreallocated_jobs": "unreallocated"}
"""The series of one value a node (figure -> `NodeReport` field); beside them `jobs` (by
category), `request_gain` and `candidate_converged_seconds` (by container)."""
CATEGORY_FIELDS = {"PC": "pc", "WC": "wc", "CC": "cc"}
"""`jobs`' category label -> `NodeReport` field."""


@dataclass(frozen=True, kw_only=True)
class ReallocationRequest:
    """A job that turned converged and kept falling (Algorithm 3, lines 13-16): its id and the
    gain g of its last step."""

    container: str
    gain: float


@dataclass(frozen=True, kw_only=True)
class RebalanceCandidate:
    """A reallocated job Algorithm 5 may move: its id and its converged duration d_c (seconds
    since it was marked converged)."""

    container: str
    converged_seconds: float


@dataclass(frozen=True, kw_only=True)
class NodeReport:
    """One worker of one policy, as its node agent saw it at `time` (module docstring)."""

    policy: str
    node: str
    time: float
    cpu_capacity_cores: float
    cpu_used_cores: float
    pc: int
    wc: int
    cc: int
    selected: int
    unreallocated: int
    requests: tuple[ReallocationRequest, ...] = ()
    candidates: tuple[RebalanceCandidate, ...] = ()

    def __post_init__(self) -> None:
        if not self.policy or not self.node:
            raise ValueError("a node report names its policy and its node")
        for name in ("time", "cpu_capacity_cores", "cpu_used_cores"):
            if not math.isfinite(getattr(self, name)):
                raise ValueError(f"node report {self.node}: {name} must be a finite number")
        counts = {"pc": self.pc, "wc": self.wc, "cc": self.cc, "selected": self.selected,
                  "unreallocated": self.unreallocated}
        for name, value in counts.items():
            if value < 0:
                raise ValueError(f"node report {self.node}: {name} must not be negative")
        if self.pc + self.wc + self.cc > self.selected:
            raise ValueError(f"node report {self.node}: more categorised jobs "
                             f"({self.pc + self.wc + self.cc}) than selected ({self.selected})")
        if self.unreallocated > self.pc + self.wc + self.cc:
            raise ValueError(f"node report {self.node}: more unreallocated jobs than "
                             "categorised ones")

    @property
    def categorised(self) -> int:
        return self.pc + self.wc + self.cc
