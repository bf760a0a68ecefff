"""A node agent's report of its worker, for a cluster-wide kind's manager (`Snapshot.node_reports`).

Why. A cluster-wide kind needs, for its decisions, a few figures per worker and a few jobs,
not every sample of every container. With `node_reports`, each node agent works out its own
node's part and publishes what the manager reads; the manager reads the reports of every worker
(`policyd.sources.node_reports`) and decides from them alone: its cost follows the number of
workers, not of containers. Every report has the worker's figures (its cores, the CPU in use,
the jobs the policy selects there); the rest is the kind's:

* SpeCon (the thesis's own split: its workers run the container monitor, Algorithm 3, and send
  the manager their reallocation requests): the category counts, how many categorised jobs are
  not reallocated yet, the jobs asking to be reallocated (with their last gain), and the jobs
  Algorithm 5 may move first (their converged duration).
* Predictive with `migrate` (the agent sets its node's CPU limits itself): the cores its plan
  leaves unused (`spare_cores`), and the jobs waiting at the floor that a move could serve
  sooner (`waiting`: the work ahead of each and its speed model, enough for the manager to
  price a move to any worker).
* Deadline (the agent sizes its node's jobs itself): the cores its jobs' deadlines leave free
  (`spare_cores`: where a move or a held job may go), the most cores one job is granted there
  (`top_cores`: the scale of a weight in shares mode), and the jobs their worker cannot give
  the cores to meet their deadline (`at_risk`: the cores each needs elsewhere, the move
  counted, and the most it can use).
* FlowCon2 (the agent sets its node's limits itself): the node's stated speed, and its jobs as
  FlowCon2's model of the next interval sees them (`residents`: each job's next limit, the
  cores it can use, whether it counts converged, its forecast's steps and speed model, its
  current limit and start), enough for the manager to drain any worker with a job moved in or
  out, or a held job admitted (`policyd.engine.drain`); the jobs the agent lets move are
  flagged (`movable`), each with its side of a move as the agent drains its worker
  (`finish_seconds`, `freed_seconds`), so that the manager drains only the workers a move
  touches.

Beside a kind's own figures, any report may list the jobs its agent would stop (`stops`): a
policy with `on_target` / `on_converged: stop` whose agent decides its node (a node kind such as
FlowCon or QoE, or a kind's node part), since only the manager may stop a job. The agent
applies the rest of its decision and the manager stops them.

Only jobs policyd may act on are listed (the agent applies the guards: opt-out, minimum age,
cooldown, back-off), and at most as many per worker as a cycle may move off one worker; FlowCon2
lists every job of the worker (its model needs them all) and flags those it may move. Plain
values: no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from policyd.model.forecast import seconds_per_step
from policyd.model.qoe import DeliveryEvent

METRIC_PREFIX = "policyd_node_report_"
"""Where agents publish reports and the manager reads them: `policyd_node_report_<figure>`."""
NODE_FIGURES = {"time_seconds": "time", "cpu_capacity_cores": "cpu_capacity_cores",
                "cpu_used_cores": "cpu_used_cores", "selected_jobs": "selected",
                "unreallocated_jobs": "unreallocated"}
"""The series of one value a node (figure -> `NodeReport` field); beside them `jobs` (by
category), `request_gain`, `candidate_converged_seconds` and `waiting_<figure>` (by
container)."""
SPARE_FIGURE = "spare_cores"
"""A node's series that only some kinds report (Predictive): `NodeReport.spare_cores`."""
WAITING_FIGURES = ("ahead_seconds", "best_cores", "remaining_steps", "serial_seconds",
                   "parallel_seconds", "cap_cores")
"""A waiting job's series, `waiting_<figure>` by container: the `WaitingJob` fields."""
AT_RISK_FIGURES = ("deadline_seconds", "need_elsewhere_cores", "cap_cores", "reserved_cores",
                   "granted_cores", "need_here_cores")
"""An at-risk job's series, `at_risk_<figure>` by container: the `AtRiskJob` fields."""
STOP_FIGURE = "stop_request"
"""A job the agent would stop, `stop_request` by container and event: `StopRequest.figure`."""
TOP_FIGURE = "top_cores"
"""A node's series that only Deadline reports: `NodeReport.top_cores`."""
SPEED_FIGURE = "stated_speed"
"""A node's series that FlowCon2 and Predictive report, when its speed is stated:
`NodeReport.stated_speed`."""
RESIDENT_FIGURES = ("limit_fraction", "usable_cores", "converged", "movable", "forecast",
                    "steps_done", "remaining_steps", "serial_seconds", "parallel_seconds",
                    "cap_cores", "allocation_fraction", "started_at_seconds")
"""A resident job's series, `resident_<figure>` by container: the `ResidentJob` fields (the
flags `converged`, `movable`, `forecast` as 1 or 0)."""
RESIDENT_SIDE_FIGURES = ("finish_seconds", "freed_seconds")
"""A movable resident job's series beside those, when its agent reports them: its side of a
move (`ResidentJob.finish_seconds`, `freed_seconds`). Absent, the manager works them out."""
_RESIDENT_FLAGS = ("converged", "movable", "forecast")
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
class WaitingJob:
    """A job Predictive leaves waiting on its worker (less than a whole first core), which a
    move could serve sooner: how long it is predicted to take where it is (`ahead_seconds`: its
    work and the work served before it, over the worker's cores), the cores it can use on its
    worker, and its forecast's remaining steps and speed model, from which its remaining time
    on any other worker's cores follows (`remaining_seconds_at`)."""

    container: str
    ahead_seconds: float
    best_cores: float
    remaining_steps: float
    serial_seconds: float
    parallel_seconds: float
    cap_cores: float

    def __post_init__(self) -> None:
        for name in WAITING_FIGURES:
            if not getattr(self, name) >= 0:  # NaN too
                raise ValueError(f"waiting job {self.container}: {name} must be a number, "
                                 "not negative")

    def remaining_seconds_at(self, cores: float) -> float:
        """Its remaining seconds on `cores` from now on (`policyd.model.forecast.
        seconds_per_step`, as its forecast prices them)."""
        return self.remaining_steps * seconds_per_step(
            cores, cap_cores=self.cap_cores, serial_seconds=self.serial_seconds,
            parallel_seconds=self.parallel_seconds)


@dataclass(frozen=True, kw_only=True)
class AtRiskJob:
    """A job Deadline's split leaves short of the cores its deadline needs on its worker, which
    a move could save: its deadline (epoch seconds, the order jobs are served in), the cores it
    needs on another worker to finish there with the margin once the move's cost is paid, the
    most cores it can use anywhere (its speed model's cap, its max-cpu), the cores its worker
    keeps for it (freed if it leaves), and, for the reason, the cores its worker gives it and
    the cores it needs there to meet its deadline at all."""

    container: str
    deadline_seconds: float
    need_elsewhere_cores: float
    cap_cores: float
    reserved_cores: float
    granted_cores: float
    need_here_cores: float

    def __post_init__(self) -> None:
        for name in AT_RISK_FIGURES:
            value = getattr(self, name)
            if not (math.isfinite(value) and (name == "deadline_seconds" or value >= 0)):
                raise ValueError(f"at-risk job {self.container}: {name} must be a finite "
                                 "number, not negative")


@dataclass(frozen=True, kw_only=True)
class ResidentJob:
    """A job on a FlowCon2 worker as the policy's model of the next interval sees it: its next
    limit (`limit_fraction`: a weight in shares mode, a cap of the worker's cores in quota
    mode), the most cores it can use there (`usable_cores`), whether the model counts it
    converged (it competes freely once only such jobs are left), whether its agent lets it move
    this cycle (`movable`), and when it has a forecast (`forecast`), its steps done and left
    and its speed model as measured on its worker; for the plan of a worker it would move to
    (`order: remaining`), its current limit and when it started (epoch seconds). Without a
    forecast its forecast figures are 0 and unused.

    A movable job's side of a move, both or neither (None: not reported, as by an agent from
    before they were): when it ends where it is as its worker drains (`finish_seconds`), and
    the seconds the jobs left there save without it (`freed_seconds`, below 0 when they lose),
    from the worker's model made of these very figures, at the node's stated speed (1 when
    not stated) (`policyd.engine.flowcon2_reports.with_sides`)."""

    container: str
    limit_fraction: float
    usable_cores: float
    converged: bool
    movable: bool
    forecast: bool
    steps_done: float
    remaining_steps: float
    serial_seconds: float
    parallel_seconds: float
    cap_cores: float
    allocation_fraction: float
    started_at_seconds: float
    finish_seconds: float | None = None
    freed_seconds: float | None = None

    def __post_init__(self) -> None:
        if (self.finish_seconds is None) != (self.freed_seconds is None):
            raise ValueError(f"resident job {self.container}: finish_seconds and freed_seconds "
                             "come together")
        if self.finish_seconds is not None and not (
                math.isfinite(self.finish_seconds) and self.finish_seconds >= 0
                and self.freed_seconds is not None and math.isfinite(self.freed_seconds)):
            raise ValueError(f"resident job {self.container}: finish_seconds must be a finite "
                             "number, not negative, and freed_seconds a finite number")
        for name in RESIDENT_FIGURES:
            value = getattr(self, name)
            if name in _RESIDENT_FLAGS:
                if value not in (0, 1):  # True, False, or their 1.0 / 0.0 as published
                    raise ValueError(f"resident job {self.container}: {name} must be 1 or 0")
                object.__setattr__(self, name, bool(value))
            elif not (math.isfinite(value) and (name == "started_at_seconds" or value >= 0)):
                raise ValueError(f"resident job {self.container}: {name} must be a finite "
                                 "number, not negative")
        if not (self.limit_fraction > 0 and self.usable_cores > 0):
            raise ValueError(f"resident job {self.container}: limit_fraction and usable_cores "
                             "must be > 0")


@dataclass(frozen=True, kw_only=True)
class StopRequest:
    """A job the agent's decision stops (its policy's `on_target` / `on_converged: stop`),
    for the manager to stop: what happened (`event`) and its figure, for the reason: the
    latest loss for "target", the loss's remaining improvement as a fraction of today's loss
    for "converged"."""

    container: str
    event: DeliveryEvent
    figure: float

    def __post_init__(self) -> None:
        if self.event not in ("target", "converged"):
            raise ValueError(f"stop request {self.container}: event must be target or "
                             f"converged, not {self.event!r}")
        if not math.isfinite(self.figure):
            raise ValueError(f"stop request {self.container}: its figure must be a finite "
                             "number")


@dataclass(frozen=True, kw_only=True)
class NodeReport:
    """One worker of one policy, as its node agent saw it at `time` (module docstring)."""

    policy: str
    node: str
    time: float
    cpu_capacity_cores: float
    cpu_used_cores: float
    selected: int
    pc: int = 0
    wc: int = 0
    cc: int = 0
    unreallocated: int = 0
    requests: tuple[ReallocationRequest, ...] = ()
    candidates: tuple[RebalanceCandidate, ...] = ()
    spare_cores: float = 0.0
    waiting: tuple[WaitingJob, ...] = ()
    top_cores: float = 0.0
    at_risk: tuple[AtRiskJob, ...] = ()
    stated_speed: float = 0.0
    """FlowCon2 and Predictive: the node's stated speed (`Node.speed`), 0 when not stated."""
    residents: tuple[ResidentJob, ...] = ()
    stops: tuple[StopRequest, ...] = ()

    def __post_init__(self) -> None:
        if not self.policy or not self.node:
            raise ValueError("a node report names its policy and its node")
        for name in ("time", "cpu_capacity_cores", "cpu_used_cores", "spare_cores",
                     "top_cores", "stated_speed"):
            if not math.isfinite(getattr(self, name)):
                raise ValueError(f"node report {self.node}: {name} must be a finite number")
        if self.stated_speed < 0:
            raise ValueError(f"node report {self.node}: stated_speed must not be negative")
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


@dataclass(frozen=True, kw_only=True)
class JobList:
    """One of a report's lists of jobs, as every reader and writer of reports sees it: its
    `NodeReport` field, the name of its series (`policyd_node_report_<series>_<figure>`), a
    job's figures (each a field of the job) and those it may lack (`optional`), how a job is
    made from its figures and in what order a report lists them, what a warning calls one,
    and whether a job that cannot be made leaves its node's report out (`whole`) or only
    itself."""

    field: str
    series: str
    figures: tuple[str, ...]
    optional: tuple[str, ...] = ()
    make: Callable[..., WaitingJob | AtRiskJob | ResidentJob]
    order: Callable[[Any], tuple[Any, ...]]
    what: str
    whole: bool = False


JOB_LISTS = (
    # in the order the agent plans them: the work ahead of each, ties by id
    JobList(field="waiting", series="waiting", figures=WAITING_FIGURES, make=WaitingJob,
            order=lambda j: (j.ahead_seconds, j.container), what="waiting"),
    JobList(field="at_risk", series="at_risk", figures=AT_RISK_FIGURES, make=AtRiskJob,
            order=lambda j: (j.deadline_seconds, j.container), what="at-risk"),
    # the manager's model of a worker short of a job would be wrong: all or none; by id, the
    # order the agent drained its worker in (`ResidentJob.finish_seconds`)
    JobList(field="residents", series="resident", figures=RESIDENT_FIGURES,
            optional=RESIDENT_SIDE_FIGURES, make=ResidentJob,
            order=lambda j: (j.container,), what="resident", whole=True),
)
"""A report's lists of jobs (`JobList`): the agents' metrics publish them
(`policyd.daemon.node_report_metrics`), the manager's source reads them back
(`policyd.sources.node_reports`)."""
