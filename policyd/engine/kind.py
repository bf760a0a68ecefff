"""What a policy kind is: everything the rest of policyd may know about one.

A kind (FlowCon, SpeCon, ...) is one module of the engine holding its document model and its
pure planner, and one `Kind` entry in `policyd.engine.registry`. The entry declares all that
differs between kinds, so that the daemon, the simulator, the sources and the CLI ask the entry
and never import a kind's module or test its type (an import-linter contract keeps them out):

* `scope`: "node" kinds decide each worker on its own (a node agent, `policyd run --node`, runs
  them for its node only); "cluster" kinds need the whole cluster (the elected manager). A kind
  whose policies differ (one that may also move jobs between workers) says so per policy
  (`policy_scope`, `scope_of`); likewise `policy_acts_on`. A policy that may stop or move
  jobs (`MANAGER_ONLY`) runs cluster-wide whatever its kind's scope.
* `intervals(policy)`: the base interval and the longest one the kind may back off to. The
  interval a tick actually ran at travels in the snapshot (`Snapshot.intervals`), so a kind
  decides its own next interval (`Decision.next_interval`); `policyd.engine.schedule` is the
  one rule that turns that into "when does this policy run next".
* `wakes_on`: the container events (a container started, stopped; a job submitted held) that
  reset the kind's interval to the base one and run it at once (FlowCon's Algorithm 2; the
  admitting kinds look at a held job as it arrives).
* `inputs`: what a source must put in the snapshot for it ("evaluation": the loss series;
  "cpu": the cores used per container, and so per node; "steps": the steps done and the run's
  total; "metrics": the QoE metrics `metric_queries(policy)` names, one PromQL per name, so
  a fixed number of queries a cycle). A source asks only for what the policies it serves need,
  plus what the forecast beside every decision reads (`FORECAST_INPUTS`).
* `acts_on`: the classes of action the kind emits ("cpu": `SetCpu`; "placement": `Migrate`,
  `MarkMigrated`; "stop": `Stop`; "admission": `Admit`, starting a held job,
  `policyd.model.pending`). When several policies select one container (or held job), each
  class of action on it belongs to one policy (`policyd.engine.ownership`). A world that holds
  jobs (the simulator) lets a policy admit them only when one that acts on "admission" runs.
  Every kind's policies may also stop or deprioritize jobs that reached their target or
  converged (`on_target`, `on_converged`, `policyd.engine.delivery`): `acts_on_of` adds those
  classes.
* `floor(policy, n)`: the CPU fraction a job drops to when deprioritized, with n jobs on its
  node (the kind's own floor: FlowCon's 1 / (beta * n)).
* `cpu_mode(policy)`: which knob holds the CPU limit the kind sets (shares or quota), so a
  source reads the current allocation from the right one; None for kinds that set no CPU.
* `summary(policy)`: one line of the policy's main settings, for reports; `gain_label`: what the
  assessments' `gain` figure is, for tables.
* `convergence_alpha(policy)`: what "converged" means for the forecast beside every decision
  (`policyd.engine.forecasting`), for jobs that do not know their total steps: improving by
  less than this per base interval per core.
* `node_reports(policy, snapshot)`: a cluster-wide kind that can decide from its node agents'
  reports says what an agent reports of its node (`policyd.model.node_report`); with
  `node_reports: true` in the daemon's settings, agents publish them and the manager decides
  from them alone (docs/design.md, "The manager from node reports"); `node_part(policy)`: what
  the agent also decides and applies on its node (Predictive's CPU limits). A policy that is
  cluster-wide only because it may stop jobs (`stops_only`: a FlowCon policy with
  `on_converged: stop`) splits the same way whatever its kind: its agents decide it and report
  the jobs to stop, which the manager stops (`agent_part`, `policyd.engine.reported_stops`).

This module holds plain declarations: no I/O, no policy logic.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal, assert_never

from policyd.engine.spec import PolicyDocument
from policyd.model import (
    Action,
    Admit,
    Decision,
    MarkMigrated,
    Migrate,
    NodeReport,
    SetCpu,
    Snapshot,
    Stop,
)
from policyd.model.events import EventKind

Scope = Literal["node", "cluster"]
Input = Literal["evaluation", "cpu", "steps", "metrics"]
ActionClass = Literal["cpu", "placement", "stop", "admission"]
CpuMode = Literal["shares", "quota"]

ACTION_CLASSES: tuple[ActionClass, ...] = ("cpu", "placement", "stop", "admission")
MANAGER_ONLY: frozenset[ActionClass] = frozenset({"placement", "stop", "admission"})
"""Action classes only the cluster-wide manager takes (`Kind.scope_of`): moving, stopping
and admitting jobs place or end them across workers."""
INPUTS: tuple[Input, ...] = ("evaluation", "cpu", "steps", "metrics")
FORECAST_INPUTS: frozenset[Input] = frozenset({"steps"})
"""What the forecast beside every decision reads (`policyd.engine.forecasting`): asked of the
sources whatever the kinds."""


def action_class(action: Action) -> ActionClass:
    """The class an action belongs to, for ownership: CPU limits, where a job runs, or
    whether and where a held job starts."""
    match action:
        case SetCpu():
            return "cpu"
        case Migrate() | MarkMigrated():
            return "placement"
        case Stop():
            return "stop"
        case Admit():
            return "admission"
        case _:
            assert_never(action)


@dataclass(frozen=True, kw_only=True)
class Intervals:
    """A policy's base evaluation interval and the longest it may back off to, seconds."""

    base_seconds: float
    longest_seconds: float

    @classmethod
    def fixed(cls, seconds: float) -> Intervals:
        """An interval that never backs off."""
        return cls(base_seconds=seconds, longest_seconds=seconds)

    def __post_init__(self) -> None:
        if not 0 < self.base_seconds <= self.longest_seconds:
            raise ValueError(
                f"intervals must satisfy 0 < base ({self.base_seconds}) <= longest "
                f"({self.longest_seconds})")


def _no_cpu_mode(_: PolicyDocument) -> CpuMode | None:
    return None


DEFAULT_CONVERGENCE_ALPHA = 0.05
"""Forecasts' reading of convergence for kinds that have no alpha of their own (FlowCon's
default: improving by under 5 % per interval per core)."""


def _default_convergence(_: PolicyDocument) -> float:
    return DEFAULT_CONVERGENCE_ALPHA


def _default_floor(_: PolicyDocument, jobs: int) -> float:
    """1 / (2 n): FlowCon's floor at its default beta."""
    return 1.0 / (2.0 * max(jobs, 1))


def _no_metrics(_: PolicyDocument) -> Mapping[str, str]:
    return {}


def delivery_classes(policy: PolicyDocument) -> frozenset[ActionClass]:
    """The action classes a policy's `on_target` / `on_converged` responses emit: "stop" for
    stop, "cpu" for deprioritize (`policyd.engine.delivery`)."""
    responses = {policy.spec.on_target, policy.spec.on_converged}
    found: set[ActionClass] = set()
    if "stop" in responses:
        found.add("stop")
    if "deprioritize" in responses:
        found.add("cpu")
    return frozenset(found)


@dataclass(frozen=True, kw_only=True)
class Kind:
    """The registration entry of one policy kind (see the module docstring)."""

    name: str
    document: type[PolicyDocument]
    plan: Callable[[PolicyDocument, Snapshot], Decision]
    scope: Scope
    intervals: Callable[[PolicyDocument], Intervals]
    summary: Callable[[PolicyDocument], str]
    wakes_on: frozenset[EventKind] = frozenset()
    inputs: frozenset[Input] = frozenset({"evaluation"})
    acts_on: frozenset[ActionClass] = frozenset()
    cpu_mode: Callable[[PolicyDocument], CpuMode | None] = field(default=_no_cpu_mode)
    gain_label: str = "gain"
    convergence_alpha: Callable[[PolicyDocument], float] = field(default=_default_convergence)
    policy_scope: Callable[[PolicyDocument], Scope] | None = None
    """When a policy's settings change its scope (a kind that may also move jobs between
    workers runs cluster-wide then): its scope; None: `scope` always."""
    policy_acts_on: Callable[[PolicyDocument], frozenset[ActionClass]] | None = None
    """Likewise for the action classes a policy emits; None: `acts_on` always."""
    floor: Callable[[PolicyDocument, int], float] = field(default=_default_floor)
    metric_queries: Callable[[PolicyDocument], Mapping[str, str]] = field(default=_no_metrics)
    """The QoE metrics the policy reads, name -> PromQL selecting one series per container
    (with the "metrics" input)."""
    node_reports: Callable[[PolicyDocument, Snapshot], tuple[NodeReport, ...]] | None = None
    """A cluster-wide kind that can decide from its node agents' reports (`Snapshot.
    node_reports`, `policyd.model.node_report`): what an agent reports of its node's snapshot
    (one per node); its `plan` decides from a snapshot of reports. None: it needs every
    container's series."""
    node_part: Callable[[PolicyDocument], PolicyDocument] | None = None
    """With `node_reports`: what a node agent also decides and applies on its own node beside
    its report (a policy of scope node, under the same name: Predictive's CPU limits without
    its moves). None: the agent only reports (SpeCon sets no CPU)."""

    def scope_of(self, policy: PolicyDocument) -> Scope:
        """Where `policy` runs: each worker on its own, or the whole cluster. A policy that
        may stop or move jobs runs cluster-wide whatever its kind: a node agent may only set
        CPU (it holds no right to delete pods or change Jobs: deploy/kubernetes/rbac.yaml)."""
        declared = self._declared_scope(policy)
        if declared == "node" and self.acts_on_of(policy) & MANAGER_ONLY:
            return "cluster"
        return declared

    def _declared_scope(self, policy: PolicyDocument) -> Scope:
        return self.policy_scope(policy) if self.policy_scope is not None else self.scope

    def stops_only(self, policy: PolicyDocument) -> bool:
        """Whether `policy` runs cluster-wide only because it may stop jobs (`on_target` /
        `on_converged: stop` on a policy of scope node): its node agents can decide the rest,
        and the manager only stops what they report (`policyd.engine.reported_stops`)."""
        return (self._declared_scope(policy) == "node"
                and not self._own_classes(policy) & MANAGER_ONLY
                and "stop" in delivery_classes(policy))

    def reports_of(self, policy: PolicyDocument) -> bool:
        """Whether `policy` can be decided from its node agents' reports: a cluster-wide
        policy of a kind that has them (`node_reports`), or one that is cluster-wide only
        because it may stop jobs (`stops_only`). A policy whose agents would decide nothing
        (a kind without `node_part`) cannot stop jobs from reports: it reads every container."""
        if self.stops_only(policy):
            return True
        return (self.node_reports is not None and self.scope_of(policy) == "cluster"
                and ("stop" not in delivery_classes(policy) or self.node_part is not None))

    def agent_part(self, policy: PolicyDocument) -> PolicyDocument | None:
        """What a node agent decides and applies of a policy it reports (`reports_of`), its
        stops reported to the manager instead of made: the whole policy when it is
        cluster-wide only because it may stop jobs, else the kind's `node_part` (None: the
        agent only reports)."""
        if self.stops_only(policy):
            return policy
        return self.node_part(policy) if self.node_part is not None else None

    def acts_on_of(self, policy: PolicyDocument) -> frozenset[ActionClass]:
        """The action classes `policy` may emit (for ownership): its kind's, and those of its
        responses to delivered jobs (`delivery_classes`)."""
        return self._own_classes(policy) | delivery_classes(policy)

    def _own_classes(self, policy: PolicyDocument) -> frozenset[ActionClass]:
        """The action classes of the kind's own plan for `policy` (without its responses to
        delivered jobs)."""
        return (self.policy_acts_on(policy) if self.policy_acts_on is not None
                else self.acts_on)

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("a kind needs a name")
        for what, given, known in (("inputs", self.inputs, INPUTS),
                                   ("action classes", self.acts_on, ACTION_CLASSES)):
            unknown = sorted(set(given) - set(known))
            if unknown:
                raise ValueError(f"kind {self.name}: unknown {what} {unknown}; "
                                 f"known: {', '.join(known)}")
