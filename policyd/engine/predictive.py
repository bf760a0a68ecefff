"""Predictive: each worker's CPU goes where it shortens predicted completion most.

Theory of operation. FlowCon and SpeCon act on where a job's loss *is*; this kind acts on where
each job is *going* (`policyd.engine.forecasting`: remaining steps from the job's declared total
or its fitted curve, seconds per step from an Amdahl model of its own speed). Per worker, every
interval:

1. Forecast every selected job. Its key is the time it would still need with the most cores it
   can use on this worker (`Forecast.remaining_seconds_at`): the remaining *work*, in the job's
   own speed, so jobs of different models compare fairly.
2. Order the jobs by key, shortest first, as the oracle of `policyd simulate` orders them by
   their true remaining work. A job that has just started and has no forecast yet ranks after
   the forecast jobs (its whole run is still ahead of it) until its forecast, which comes
   within two intervals; a job that cannot be forecast for another reason goes last. (Ranking
   the new job first, as FlowCon serves its NL jobs, was measured worse: benchmarks/README.md,
   predictive.py.) Hysteresis: a job already served (its limit above the floor) keeps its
   place unless another job's key is shorter by more than `hysteresis` (a fraction), so two
   jobs of nearly equal remaining time do not trade places every interval.
3. Give cores in that order as the oracle does, because a job's first core is worth more than
   its second (Amdahl): one core each (or less, when a job cannot use a whole one), then the
   cores left over, again in order, up to what each job can use (its speed model's cap).
4. Turn the cores into limits. `mode: shares` (soft, work-conserving weights): a job's weight is
   its cores over the largest grant on the worker, so the served jobs run at full weight and
   share the CPU as granted; `mode: quota` (hard caps): cores over the worker's capacity.
   Every job keeps at least the floor 1 / (beta * n) (n jobs on the worker), so none starves:
   a forecast that is wrong costs a job time, never its progress. With quotas the floor is a
   cap of that part of the worker; with shares it is a weight of 1 / (beta * n) beside the
   served jobs' (the largest 1), so while they are busy a job at the floor gets less than
   that part (docs/design.md, "Predictive": setting the floor's cores aside first was
   measured and costs the average JCT). A limit that would move by
   no more than `min_change` stays.
5. When no job on the worker has a forecast (none reports its steps, say), every limit goes
   back to 1: free competition, and the note says why.

Reasons name the forecasts behind every action (the rank, the remaining time at the job's best
and at its current allocation, and what the remaining steps come from). Pure: no I/O, no clock.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import Field, model_validator

from policyd.engine.forecast_output import Forecast
from policyd.engine.forecasting import forecast_containers, settings_of
from policyd.engine.guards import MigrationBudget, action_blocked
from policyd.engine.kind import ActionClass, CpuMode, Intervals, Kind, Scope
from policyd.engine.spec import CommonSpec, MoveGain, PolicyDocument, check_relative_alpha, of_kind
from policyd.model import Assessment, Container, Decision, JobForecast, Migrate, SetCpu, Snapshot

NEW_KEY = 1e300
"""A job that has just started, before its first forecast, ranks after every forecast one
(its whole run is still ahead of it) and before those that cannot be forecast."""

SERVED, FLOOR, NEW, FREE = "SERVED", "FLOOR", "NEW", "FREE"
"""Categories: granted cores above the floor; waiting at the floor; just started, no forecast
yet (ranked after the forecast jobs); no job on the worker has a forecast (free competition)."""


class PredictiveSpec(MoveGain, CommonSpec):
    """Predictive's arguments."""

    interval_seconds: float = Field(
        default=20.0, ge=1, le=86400, description="Evaluation interval, seconds.")
    alpha: float = Field(
        default=0.05, gt=0,
        description=(
            "For jobs that do not report their total steps: the forecast counts a job done when "
            "its fitted loss curve would improve by less than this per interval per core "
            "(FlowCon's growth efficiency; relative normalization: a fraction)."),
    )
    beta: float = Field(
        default=2.0, ge=1, le=100,
        description=(
            "Floor: every job keeps a limit of at least 1 / (beta * n) (n jobs on the worker): "
            "with quota that part of the worker; with shares a weight of it beside the served "
            "jobs' weight 1, less of the worker while they are busy."),
    )
    mode: Literal["shares", "quota"] = Field(
        default="shares", description="shares: soft, work-conserving limits; quota: hard caps.")
    hysteresis: float = Field(
        default=0.1, ge=0, lt=1,
        description=(
            "A job already served keeps its place unless another's predicted remaining time is "
            "shorter by more than this fraction."),
    )
    min_change: float = Field(
        default=0.05, ge=0, lt=1,
        description="A limit that would move by no more than this fraction of the node stays.",
    )
    max_slowdown: float = Field(
        default=0.2, ge=0, le=100,
        description=(
            "Fairness: a job whose predicted completion time, served in turn, would exceed "
            "what an equal share of its worker would give it by more than this fraction is "
            "served at once (its age counts in both)."),
    )
    migrate: bool = Field(
        default=False,
        description=(
            "Also move a job that waits at the floor to a worker with cores to spare, when its "
            "forecast says it finishes sooner there by more than the move costs (the policy "
            "then runs cluster-wide, in the manager)."),
    )

    @model_validator(mode="after")
    def _check(self) -> PredictiveSpec:
        check_relative_alpha(self.alpha, self.evaluation, "0.05 = 5%")
        return self


class PredictivePolicy(PolicyDocument):
    kind: Literal["Predictive"]
    spec: PredictiveSpec


def _predictive(policy: PolicyDocument) -> PredictivePolicy:
    return of_kind(policy, PredictivePolicy, "Predictive")


@dataclass(frozen=True, kw_only=True)
class _Job:
    container: Container
    forecast: Forecast | None
    reported: JobForecast | None  # the forecast as the decision reports it
    note: str  # why there is no forecast ("" when there is one)
    key: float  # predicted seconds left at its best on this worker (-inf: new, inf: unknown)
    best_cores: float  # what it can use on this worker


def critical(jobs: Sequence[_Job], capacity: float) -> int | None:
    """The job that bounds the worker's makespan, if one does: the one whose remaining work on
    one core is at least the worker's whole remaining work spread over its cores (nothing can
    finish before it then, so every interval it waits is added to the makespan)."""
    work = [j.forecast.remaining_seconds_at(1.0) if j.forecast is not None else math.nan
            for j in jobs]
    known = [(w, i) for i, w in enumerate(work) if math.isfinite(w)]
    if len(known) < 2:
        return None
    longest, index = max(known)
    return index if longest >= sum(w for w, _ in known) / capacity else None


def _grant(jobs: Sequence[_Job], capacity: float, first: Sequence[int] = ()) -> list[float]:
    """Cores per job (in `jobs`' order): first cores in order (the `first` jobs before all:
    the makespan's and the ones waiting too long), then extras in order."""
    cores = [0.0] * len(jobs)
    left = capacity
    order = [*first, *(i for i in range(len(jobs)) if i not in first)]
    rounds = ([min(j.best_cores, 1.0) for j in jobs], [j.best_cores for j in jobs])
    for limit, sequence in zip(rounds, (order, range(len(jobs))), strict=True):
        for i in sequence:
            if left <= 1e-12:
                break
            extra = min(limit[i] - cores[i], left)
            if extra > 0:
                cores[i] += extra
                left -= extra
    return cores


def _order(jobs: list[_Job], *, hysteresis: float, floor: float) -> list[_Job]:
    """Shortest key first; a served job's (limit above `floor`) counts `hysteresis` shorter
    (module docstring)."""
    def key(j: _Job) -> tuple[float, str]:
        served = j.container.cpu_allocation > floor + 1e-9
        k = j.key * (1.0 - hysteresis) if served and math.isfinite(j.key) else j.key
        return (k, j.container.id)
    return sorted(jobs, key=key)


def _jobs(policy: PredictivePolicy, snapshot: Snapshot,
          chosen: Sequence[Container]) -> list[_Job]:
    spec = policy.spec
    capacity = {n.name: n.cpu_capacity for n in snapshot.nodes}
    settings = settings_of(policy, snapshot, alpha=spec.alpha,
                           interval_seconds=spec.interval_seconds)
    found = forecast_containers(settings, snapshot, chosen)
    reported = found.jobs()
    young_seconds = 2 * snapshot.interval_seconds(policy.name, spec.interval_seconds)
    jobs = []
    for c in chosen:
        f = found.by_id.get(c.id)
        cap = capacity[c.node]
        if f is not None:
            # Any job can use a core: a cap below one comes from intervals spent at the floor
            # (the others' shares), not from the job's threads.
            best = min(max(f.cap_cores, 1.0), cap)
            jobs.append(_Job(container=c, forecast=f, reported=reported[c.id], note="",
                             best_cores=best,
                             key=f.remaining_seconds_at(best)))
            continue
        young = snapshot.time - c.started_at <= young_seconds
        jobs.append(_Job(container=c, forecast=None, reported=None,
                         note=found.notes.get(c.id, ""),
                         best_cores=cap, key=NEW_KEY if young else math.inf))
    return jobs


def _time(seconds: float) -> str:
    return f"{seconds:.0f} s" if math.isfinite(seconds) else "unknown"


@dataclass(frozen=True, kw_only=True)
class _Plan:
    """One job's outcome on its worker: its limit, category and why; `waits` when it did not
    get a whole first core (a candidate for a move)."""

    job: _Job
    fraction: float
    category: str
    reason: str
    granted: float
    ahead_seconds: float  # work on one core of the jobs served before it, itself included

    @property
    def waits(self) -> bool:
        return self.job.forecast is not None and self.granted < min(self.job.best_cores,
                                                                     1.0) - 1e-9


def _slowdowns(ordered: Sequence[_Job], *, now: float, capacity: float) -> list[float]:
    """Per job, how late it would finish even if served from now on (its age plus its work at
    one core), over how long its whole run takes at an equal share of the worker (its steps
    done and left at min(capacity / n, 1) cores); NaN without a forecast. Above
    1 + `max_slowdown`, waiting any longer makes it slower than an equal share would."""
    equal = min(capacity / len(ordered), 1.0)
    out = []
    for j in ordered:
        f = j.forecast
        if f is None:
            out.append(math.nan)
            continue
        age = max(now - j.container.started_at, 0.0)
        fair = (f.steps_done + f.remaining_steps) * f.seconds_per_step_at(min(equal,
                                                                              j.best_cores))
        served_now = age + f.remaining_seconds_at(min(1.0, j.best_cores))
        out.append(served_now / fair if fair > 0 else math.nan)
    return out


def _node_plans(jobs: list[_Job], capacity: float, spec: PredictiveSpec, *,
                now: float) -> list[_Plan]:
    n = len(jobs)
    floor = 1.0 / (spec.beta * n)
    if not any(j.forecast is not None for j in jobs):
        return [_Plan(job=j, fraction=1.0, category=FREE, granted=math.nan,
                      ahead_seconds=math.nan,
                      reason="no job on the worker has a forecast: free competition")
                for j in jobs]
    ordered = _order(jobs, hysteresis=spec.hysteresis, floor=floor)
    bound = critical(ordered, capacity)
    first = [bound] if bound is not None else []
    # Jobs waiting too long go first, as many as leaves one core to the order itself.
    late = sorted((-s, i) for i, s in enumerate(_slowdowns(ordered, now=now,
                                                           capacity=capacity))
                  if s > 1.0 + spec.max_slowdown and i != bound)
    first += [i for _, i in late][:max(int(capacity) - 1 - len(first), 0)]
    cores = _grant(ordered, capacity, first)
    top = max(cores)
    plans, ahead = [], 0.0
    for rank, (j, granted) in enumerate(zip(ordered, cores, strict=True), start=1):
        if j.forecast is not None:
            ahead += j.forecast.remaining_seconds_at(1.0)
        share = granted / top if spec.mode == "shares" else granted / capacity
        fraction = min(max(share, floor), 1.0)
        category = (NEW if j.forecast is None and j.key == NEW_KEY else
                    SERVED if share > floor + 1e-9 else FLOOR)
        plans.append(_Plan(job=j, fraction=fraction, category=category, granted=granted,
                           ahead_seconds=ahead / capacity,
                           reason=_reason(j, rank, n, granted, fraction, floor=floor,
                                          spec=spec)))
    return plans


def _moves(policy: PredictivePolicy, plans: dict[str, list[_Plan]],
           capacity: dict[str, float], now: float) -> dict[str, tuple[Migrate, str]]:
    """Jobs waiting at the floor moved to workers with whole cores to spare, when the forecast
    says they finish sooner there by more than the move costs (module docstring)."""
    spec = policy.spec
    spare = {node: cap - sum(p.granted for p in plans.get(node, ()) if math.isfinite(p.granted))
             for node, cap in capacity.items()}
    waiting = [p for node_plans in plans.values() for p in node_plans if p.waits]
    budget = MigrationBudget.of(spec)
    moves: dict[str, tuple[Migrate, str]] = {}
    for target in sorted(spare, key=lambda node: (-spare[node], node)):
        while spare[target] >= 1.0 - 1e-9 and waiting:
            best: tuple[float, _Plan, float, float] | None = None
            for p in waiting:
                c, f = p.job.container, p.job.forecast
                if c.node == target or f is None:
                    continue
                if action_blocked(c, spec, now, disrupts=True) or budget.refusal(c.node, target):
                    continue
                there = min(spare[target], p.job.best_cores)
                moved = f.remaining_seconds_at(there)
                gain = p.ahead_seconds - moved
                if gain > spec.migration_cost_seconds * (1.0 + spec.migration_margin) and (
                        best is None or gain > best[0]):
                    best = (gain, p, there, moved)
            if best is None:
                break
            gain, p, there, moved = best
            c = p.job.container
            reason = (f"waits on {c.node}: predicted to finish in {p.ahead_seconds:.0f} s "
                      f"there (its work and the work served before it, over the worker's "
                      f"cores); on {target}, {spare[target]:.2g} cores to spare: "
                      f"{moved:.0f} s on {there:.2g} cores; gain {gain:.0f} s > move cost "
                      f"{spec.migration_cost_seconds:g} s x (1 + {spec.migration_margin:g})")
            moves[c.id] = (Migrate(policy=policy.name, container=c.id, from_node=c.node,
                                   to_node=target, reason=reason,
                                   grace_seconds=spec.migration_grace_seconds), reason)
            budget.spend(c.node, target)
            spare[target] -= there
            waiting.remove(p)
    return moves


def plan(policy: PolicyDocument, snapshot: Snapshot) -> Decision:
    """Predictive's decision for `snapshot`: a CPU limit per job from its forecast, and (with
    `migrate`) moves of waiting jobs to workers with cores to spare."""
    policy = _predictive(policy)
    spec, now = policy.spec, snapshot.time
    chosen = sorted((c for c in snapshot.containers if spec.selector.selects(c)),
                    key=lambda c: (c.node, c.id))
    by_node: defaultdict[str, list[_Job]] = defaultdict(list)
    for job in _jobs(policy, snapshot, chosen):
        by_node[job.container.node].append(job)
    capacity = {n.name: n.cpu_capacity for n in snapshot.nodes}
    plans = {node: _node_plans(jobs, capacity[node], spec, now=now)
             for node, jobs in by_node.items()}
    moves = _moves(policy, plans, capacity, now) if spec.migrate else {}
    actions: list[SetCpu | Migrate] = []
    assessments: list[Assessment] = []
    notes: list[str] = []
    for node in sorted(plans):
        known = sum(p.job.forecast is not None for p in plans[node])
        notes.append(f"{node}: {len(plans[node])} jobs, {known} with a forecast" + (
            "; free competition" if not known else
            f"; order {', '.join(p.job.container.id for p in plans[node])}"))
        for p in plans[node]:
            c = p.job.container
            target, note = p.fraction, p.reason
            if c.id in moves:
                move, why = moves[c.id]
                actions.append(move)
                target, note = c.cpu_allocation, f"moves to {move.to_node}: {why}"
            elif abs(p.fraction - c.cpu_allocation) <= spec.min_change:
                target = c.cpu_allocation
                if abs(p.fraction - c.cpu_allocation) > 1e-9:
                    note = (f"{p.reason}; within min_change {spec.min_change:g} of "
                            f"{c.cpu_allocation:.3g}: unchanged")
            elif (blocked := action_blocked(c, spec, now, disrupts=False)) is not None:
                note = f"no action ({blocked}): {p.reason}"
                target = c.cpu_allocation
            else:
                actions.append(SetCpu(policy=policy.name, container=c.id, node=c.node,
                                      fraction=p.fraction, mode=spec.mode, reason=p.reason))
            j = p.job
            assessments.append(Assessment(
                container=c.id, node=c.node, category=p.category,
                gain=j.key if math.isfinite(j.key) and j.key != NEW_KEY else None,
                cpu_fraction_now=c.cpu_allocation, cpu_fraction_next=target, note=note,
                forecast=j.reported,
                forecast_note="" if j.forecast is not None else (j.note or "not forecast")))
    return Decision(policy=policy.name, kind="Predictive", time=now, actions=tuple(actions),
                    assessments=tuple(assessments),
                    next_interval=spec.interval_seconds, dry_run=spec.dry_run,
                    notes=tuple(notes))


def _reason(j: _Job, rank: int, n: int, granted: float, fraction: float, *, floor: float,
            spec: PredictiveSpec) -> str:
    if j.forecast is None:
        why = ("new, no forecast yet: served after the forecast jobs" if j.key == NEW_KEY else
               f"no forecast ({j.note or 'unknown'}): served last")
        return f"#{rank} of {n}: {why}; {granted:.2f} cores -> {fraction:.3g}"
    f = j.forecast
    at_now = f.remaining_seconds
    return (f"#{rank} of {n} by predicted remaining time: {_time(j.key)} at its best "
            f"({j.best_cores:.2g} cores), {_time(at_now)} at its current allocation "
            f"({f.remaining_steps:.0f} steps left, {f.basis}); granted {granted:.2f} cores "
            f"-> {fraction:.3g}" + (f" (floor 1/({spec.beta:g}*{n})={floor:.3g})"
                                     if fraction <= floor + 1e-9 else ""))


def _intervals(policy: PolicyDocument) -> Intervals:
    return Intervals.fixed(_predictive(policy).spec.interval_seconds)


def _summary(policy: PolicyDocument) -> str:
    spec = _predictive(policy).spec
    return (f"interval {spec.interval_seconds:g} s, beta {spec.beta:g}, {spec.mode}, "
            f"hysteresis {spec.hysteresis:g}")


def _cpu_mode(policy: PolicyDocument) -> CpuMode:
    return _predictive(policy).spec.mode


def _scope(policy: PolicyDocument) -> Scope:
    return "cluster" if _predictive(policy).spec.migrate else "node"


def _acts_on(policy: PolicyDocument) -> frozenset[ActionClass]:
    return frozenset({"cpu", "placement"} if _predictive(policy).spec.migrate else {"cpu"})


KIND = Kind(
    name="Predictive", document=PredictivePolicy, plan=plan,
    scope="node",  # each worker's CPU, from its own jobs' forecasts ...
    policy_scope=_scope,  # ... and the whole cluster when it may move jobs (`migrate`)
    intervals=_intervals,
    wakes_on=frozenset({"started", "stopped"}),  # a new job is ranked at once
    inputs=frozenset({"evaluation", "cpu", "steps"}),
    acts_on=frozenset({"cpu"}), policy_acts_on=_acts_on,
    cpu_mode=_cpu_mode, summary=_summary, gain_label="REMAINING s (best)",
    convergence_alpha=lambda p: _predictive(p).spec.alpha,
    floor=lambda p, n: 1.0 / (_predictive(p).spec.beta * max(n, 1)),
)
"""Predictive's registration entry (`policyd.engine.registry`)."""
