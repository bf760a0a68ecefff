"""Deadline: jobs declare when they must finish; policyd admits, places and sizes them to meet it.

Theory of operation (the QoS-oriented autoscaling framework of IJCNN 2019, DOI
10.1109/IJCNN.2019.8852319, whose abstract gives the goal and the figures; the design is
ours). A job declares `policyd.io/deadline` (and may bound its cores with `policyd.io/min-cpu`
and `max-cpu`: `policyd.engine.declarations`). Every interval, cluster-wide:

1. Judge every running job from its forecast (`policyd.engine.forecasting`: steps left and an
   Amdahl model of its speed, so the time left at any number of cores). With T seconds until
   its deadline and W its whole window (submission to deadline) it needs `need` cores to
   finish within T - margin W (`deadline_cores.cores_for`): a cushion of fixed seconds, so a
   job does not ride its need ever closer to the deadline as T shrinks. Where no number of
   cores makes that (inside the last margin W, or a speed model's serial part), it needs the
   cores to finish within (1 - margin) T: still a cushion, and a number, not every core. It
   is hopeless when even the most cores it can use on its node (what it was seen limited to,
   else its speed model's cap; its max-cpu; the node) do not finish it within T, missed when
   the deadline has passed, unknown while it has no forecast yet (it has just started). A job
   that used all of its cap is not judged by the growth step it may take this interval: it is
   at risk, and grows.
2. Split each worker's cores (`deadline_cores.split`): every job its floor (`floor_cores`, or
   its min-cpu); then the deadline jobs their needs, earliest deadline first, so an at-risk
   job takes its cores from the jobs without a deadline (down to their floor) and from the
   on-track jobs (down to their need); then what is left, max-min fairly, to every job up to
   what it can use. Hopeless and missed jobs keep the floor so that others make it
   (`hopeless: floor`; they share what nobody else can use), or compete like jobs without a
   deadline (`hopeless: share`). No job is given more than it can use: the allocation is the
   right size (`mode: quota` makes it a hard cap, so it is also what the job is charged).
   What is left after the needs goes first to jobs up to what they have shown they use, and
   only then to jobs that used all of their cap, in steps of GROWTH times the share of the
   job's step time that more cores shorten in its speed model (`_usable`): a core is not
   left idle, but one given on trust is taken back after one interval if unused, and a job
   that more cores would barely speed up is not given many on trust.
   A job's state is judged at the allocation it gets: on track when that finishes it with the
   margin to spare, at risk when its worker cannot give it its need. A job is called hopeless
   only when even the low end of its forecast cannot make it, and a hopeless one (at the
   floor) comes back only when it can make it with the margin: the floor would otherwise make
   a borderline call come true, and the two would alternate.
3. Move a job that its worker cannot give the cores to meet its deadline at all (margin
   aside) (`migrate`, the checkpoint protocol) to the worker with the most cores to spare
   when there it meets it with the margin, the move's cost counted. A job moves at most once
   (`markers.migrated`), and not in its first intervals on a worker: moves are costly, and a
   job moved back and forth would lose more than either worker costs it.
4. With `admit`, admit held jobs (`policyd.engine.admission`): earliest deadline first, then
   jobs without a deadline by submission; a job whose deadline has passed while it waited
   last. A job starts on the worker with the most free cores (capacity minus the cores its
   jobs need) when at least `admission_cores` (or its min-cpu) are free there, and starts
   with them: the worker's cores are split again with it counted (`_make_room`), so that the
   limits of a worker never add up to more than its cores (every job there would be
   throttled below its limit, cores allocated that nobody can use, until the next interval).

Without `admit` and `migrate` the policy needs no cluster-wide view: steps 1-2 on each worker
(`policy_scope` "node", node agents run it). With node reports the work splits the same way:
each node agent does steps 1-2 for its worker and reports what 3 and 4 need (`node_reports`:
spare cores, at-risk jobs), and the manager does 3 and 4 from the reports
(`policyd.engine.deadline_reports`); both paths run one move rule
(`policyd.engine.deadline_moves`) and one ranking of held jobs
(`policyd.engine.deadline_admission`).

A declaration that cannot be read is a note on that job, and no action on it: its allocation
stays as it is (and counts as taken), a held one is not admitted. Reasons name the deadline,
the forecast and the cores behind every action. Pure: no I/O, no clock (`snapshot.time`).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np
from pydantic import Field, model_validator

from policyd.engine.admission import Candidate, place
from policyd.engine.deadline_admission import candidates as candidates_of
from policyd.engine.deadline_cores import (
    EPSILON_CORES,
    Ask,
    cores_for,
    limit_fraction,
    parallel_share,
    span,
    split,
)
from policyd.engine.deadline_moves import at_risk_moves
from policyd.engine.deadline_reports import node_part, plan_from_reports
from policyd.engine.declarations import Declared, declared
from policyd.engine.forecast_output import Forecast
from policyd.engine.forecasting import forecast_containers, job_forecast, settings_of
from policyd.engine.guards import action_blocked
from policyd.engine.kind import ActionClass, CpuMode, Intervals, Kind, Scope
from policyd.engine.spec import CommonSpec, MoveCost, PolicyDocument, check_relative_alpha, of_kind
from policyd.model import (
    Admit,
    Assessment,
    AtRiskJob,
    Container,
    Decision,
    JobDeadline,
    Migrate,
    NodeReport,
    SetCpu,
    Snapshot,
)
from policyd.model.deadline import DeadlineState

CATEGORY: dict[DeadlineState, str] = {
    "on_track": "ON_TRACK", "at_risk": "AT_RISK", "hopeless": "HOPELESS", "missed": "MISSED",
    "unknown": "UNKNOWN", "none": "NO_DEADLINE", "invalid": "INVALID"}


class DeadlineSpec(MoveCost, CommonSpec):
    """Deadline's arguments."""

    interval_seconds: float = Field(
        default=20.0, ge=1, le=86400, description="Evaluation interval, seconds.")
    margin: float = Field(
        default=0.1, ge=0, lt=1,
        description=(
            "A job is on track when it is predicted to finish this fraction of its deadline "
            "window (submission to deadline) before its deadline (0.1: 6 min early for a job "
            "given an hour); its cores are sized for that."),
    )
    hopeless: Literal["floor", "share"] = Field(
        default="floor",
        description=(
            "A job that cannot meet its deadline even with every core its node could give it "
            "(or has missed it): floor keeps it going at floor_cores so that the others make "
            "theirs; share lets it compete like a job without a deadline."),
    )
    mode: Literal["quota", "shares"] = Field(
        default="quota",
        description=(
            "quota: each job's cores are a hard cap (Docker cpu quota, Kubernetes limits): "
            "what it is given is what it can use; shares: soft, work-conserving weights."),
    )
    floor_cores: float = Field(
        default=0.1, gt=0, le=1024,
        description=(
            "Cores every running job keeps at least (unless it declares policyd.io/min-cpu): "
            "jobs without a deadline give up the rest first to an at-risk one."),
    )
    admission_cores: float = Field(
        default=1.0, gt=0, le=1024,
        description=(
            "Cores that must be free on a node (capacity minus what its jobs need) for a held "
            "job to start there, unless the job declares policyd.io/min-cpu."),
    )
    min_change: float = Field(
        default=0.02, ge=0, lt=1,
        description="A limit that would move by no more than this fraction of the node stays.",
    )
    alpha: float = Field(
        default=0.05, gt=0,
        description=(
            "For jobs that do not report their total steps: the forecast counts a job done "
            "when its fitted loss curve would improve by less than this per interval per core "
            "(relative normalization: a fraction)."),
    )
    migrate: bool = Field(
        default=True,
        description=(
            "Move an at-risk job whose node cannot give it the cores it needs to the node "
            "with the most to spare, when it meets its deadline there, the move counted."),
    )
    admit: bool = Field(
        default=True,
        description=(
            "Start held jobs (a Docker container created but not started, a Kubernetes Job "
            "created suspended), earliest deadline first, on the node with the most free "
            "cores. Off: jobs start as the platform starts them (a queue such as Kueue), and "
            "the policy sizes (and moves) them once they run; with migrate off as well it "
            "runs on each node on its own (node agents)."),
    )

    @model_validator(mode="after")
    def _check(self) -> DeadlineSpec:
        check_relative_alpha(self.alpha, self.evaluation, "0.05 = 5%")
        return self


class DeadlinePolicy(PolicyDocument):
    kind: Literal["Deadline"]
    spec: DeadlineSpec


def _deadline(policy: PolicyDocument) -> DeadlinePolicy:
    return of_kind(policy, DeadlinePolicy, "Deadline")


@dataclass(frozen=True, kw_only=True)
class _Job:
    """One running job as judged before its worker's cores are split."""

    container: Container
    declared: Declared
    forecast: Forecast | None
    forecast_note: str
    state: DeadlineState
    ask: Ask
    need_margin: float  # cores to finish with the margin (inf: not possible)
    capacity: float
    need_bare: float = 0.0  # cores to finish by the deadline itself

    @property
    def deadline_at(self) -> float | None:
        return self.declared.deadline_at

    def reserved(self) -> float:
        """The cores its node must keep for it (what admission and moves count as taken): what
        it needs to meet its deadline at all (its margin is a cushion others may lean on),
        its floor when it has none to meet."""
        if self.state in ("unknown", "invalid"):
            return min(max(self.ask.need, self.ask.floor), self.ask.most)
        if self.state in ("on_track", "at_risk"):
            return min(max(self.need_bare, self.ask.floor), self.ask.most)
        return min(self.ask.floor, self.ask.most)


SETTLE_INTERVALS = 3
"""A job whose container started less than this many intervals ago (admitted, or moved) is
not moved: its numbers on its node have not settled yet."""
GROWTH = 0.5
"""A job that used all of its cap is given at most this much more (a fraction) per interval."""
USED_SHARE = 0.9
"""A job using less than this share of its cores (in its last interval) uses all it can."""


def _usable(c: Container, capacity: float, spec: DeadlineSpec, forecast: Forecast | None
            ) -> tuple[float, float | None, float | None, bool]:
    """The most cores the job can use (for its deadline), the most it is given beyond its
    need from what it has shown it uses (None: as many), the most it is given on trust from
    cores nobody else takes (None: the first), and whether the first is a step of growth
    rather than a limit it was seen at (then the job may still use more, later). A job seen
    using less than its cap through a whole interval (its allocation unchanged since before
    that interval began: `markers.last_action_at`) uses all it can: what it was seen using at
    most in the window (at least a core). One that used all of it may use more, but is given
    at most GROWTH more than it has or was seen using: a snapshot does not say what its cap
    was before, so a job that cannot use more shows it again at the cost of a small step, not
    of a whole node. Beyond its need, in quota mode, a job is first given what it has, and
    more only from cores nobody else takes (`deadline_cores.split`'s two rounds), and that in
    a step sized by what its speed model says the cores would buy: GROWTH times the share of
    its step time that more cores shorten (`deadline_cores.parallel_share`). A core that
    would barely speed the job up is not worth the idle allocation it costs when the job
    cannot use it (a job that will not use more shows it again every other interval)."""
    values = c.cpu_usage.values
    finite = np.isfinite(values)
    used, times = values[finite], c.cpu_usage.times_seconds[finite]
    held = c.cpu_allocation * capacity
    top = float(used.max()) if used.size else 0.0
    last_action = c.markers.last_action_at
    settled = used.size >= 2 and (last_action is None or last_action <= float(times[-2]))
    if settled and float(used[-1]) < USED_SHARE * held:
        learned = min(capacity, max(1.0, top))
        return learned, learned if spec.mode == "quota" else None, None, False
    if spec.mode != "quota":
        return capacity, None, None, False
    base = max(1.0, held, top)
    share = 1.0 if forecast is None else parallel_share(forecast, base)
    return (min(capacity, base * (1.0 + GROWTH)), held,
            min(capacity, base * (1.0 + GROWTH * share)), True)


def _optimism(f: Forecast) -> float:
    """How much faster than forecast the job may turn out (the forecast's low end over its
    point estimate, >= 1): a job is called hopeless only if even that cannot save it, for a
    hopeless job is kept at the floor, which makes it so."""
    if f.remaining_seconds <= 0 or f.low_seconds <= 0:
        return 1.0
    return max(f.remaining_seconds / f.low_seconds, 1.0)


def _cushion(d: Declared, spec: DeadlineSpec) -> float:
    """Seconds a job should finish before its deadline: margin x its deadline window."""
    if d.deadline_at is None or d.submitted_at is None:
        return 0.0
    return spec.margin * max(d.deadline_at - d.submitted_at, 0.0)


def _judge(c: Container, forecast: Forecast | None, note: str, *, capacity: float,
           now: float, spec: DeadlineSpec) -> _Job:
    d = declared(c.labels, c.annotations,
                 submitted_at=c.submitted_at if c.submitted_at is not None else c.started_at)
    if d.problems:
        held = c.cpu_allocation * capacity  # no action: what it has stays taken
        return _Job(container=c, declared=d, forecast=forecast, forecast_note=note,
                    state="invalid", ask=Ask(floor=held, need=held, most=held, order=-math.inf),
                    need_margin=math.nan, capacity=capacity)
    most, fill, probe, growing = _usable(c, capacity, spec, forecast)
    # What it could use on this node, for calling it hopeless: a growth step paces grants, it
    # does not bound the job; the forecast's speed model's cap does (its Amdahl fit).
    potential = min(capacity, max(most, forecast.cap_cores)) if growing and forecast else most
    if d.max_cores is not None:
        most, potential = min(most, d.max_cores), min(potential, d.max_cores)
    floor = min(max(spec.floor_cores, d.min_cores or 0.0), most)
    deadline = d.deadline_at
    state: DeadlineState
    need, need_margin, need_bare, rank = 0.0, math.nan, 0.0, "extra"
    if deadline is None:
        state = "none"
    elif now >= deadline:
        state = "missed"
    elif forecast is None:
        state, need = "unknown", min(max(d.min_cores or 0.0, spec.admission_cores), most)
    else:
        left = deadline - now
        need_margin = cores_for(forecast, left - _cushion(d, spec))
        need_bare = cores_for(forecast, left)
        # Where no number of cores makes the whole cushion (inside its last cushion: fewer
        # seconds left than it), the job aims at the margin's share of the time left: a
        # need, not a claim on every core, which gave the first of two such jobs the node
        # and the second the floor one interval before its deadline.
        aim = (need_margin if math.isfinite(need_margin) else
               cores_for(forecast, left * (1.0 - spec.margin)))
        # Hysteresis: a job already at the floor comes back only when it can meet its
        # deadline with that margin; any other is called hopeless only when even the low end
        # of its forecast cannot meet it at all.
        at_floor = c.cpu_allocation * capacity <= floor + 1e-6
        if (aim > potential + 1e-9 if at_floor else
                cores_for(forecast, left * _optimism(forecast)) > potential + 1e-9):
            state = "hopeless"
        else:
            state, need = "on_track", min(max(aim, floor), most)
    if state in ("hopeless", "missed") and spec.hopeless == "floor":
        rank = "last"
    order = deadline if deadline is not None and state in ("on_track", "unknown") else math.inf
    return _Job(container=c, declared=d, forecast=forecast, forecast_note=note, state=state,
                ask=Ask(floor=floor, need=need, most=most, order=order, rank=rank,
                        fill=None if fill is None else max(fill, floor),
                        probe=None if probe is None else min(max(probe, floor), most)),
                need_margin=need_margin, capacity=capacity, need_bare=need_bare)


def _after(job: _Job, granted: float, now: float) -> JobDeadline:
    """The job's deadline at the cores it is granted (the state it ends the cycle in)."""
    d, f = job.declared, job.forecast
    if job.state == "invalid":
        return JobDeadline(state="invalid", note="; ".join(d.problems))
    if d.deadline_at is None:
        return JobDeadline(state="none")
    eta = None if f is None else now + f.remaining_seconds_at(granted)
    eta = eta if eta is not None and math.isfinite(eta) else None
    slack = None if eta is None else d.deadline_at - eta
    state = job.state
    if state == "on_track" and granted + 1e-9 < job.need_margin:
        state = "at_risk"
    need = job.need_margin if math.isfinite(job.need_margin) else None
    return JobDeadline(state=state, deadline_at=d.deadline_at, eta_at=eta, slack_seconds=slack,
                       needed_cores=need)


def _reason(job: _Job, granted: float, fraction: float, seen: JobDeadline, now: float) -> str:
    """Why the job gets `granted` cores: its deadline, forecast and need."""
    d, f = job.declared, job.forecast
    head = f"{granted:.2f} cores -> {fraction:.3g}"
    if seen.state == "none":
        return f"no deadline: {head} (what is left after the deadline jobs' needs)"
    assert d.deadline_at is not None
    when = f"deadline in {span(d.deadline_at - now)}"
    if seen.state == "missed":
        return f"deadline missed {span(now - d.deadline_at)} ago: {head}"
    if f is None:
        return f"{when}, no forecast yet ({job.forecast_note or 'just started'}): {head}"
    best = f.remaining_seconds_at(job.ask.most)
    if seen.state == "hopeless":
        return (f"{when} but {span(best)} left even on {job.ask.most:.2f} cores: hopeless, "
                f"{head}")
    slack = "" if seen.slack_seconds is None else f", slack {span(seen.slack_seconds)}"
    need = (f"needs {job.need_margin:.2f} cores for the margin" if math.isfinite(job.need_margin)
            else "no number of cores makes the margin")
    return (f"{when}; {f.remaining_steps:.0f} steps left, {span(f.remaining_seconds_at(granted))}"
            f" on {granted:.2f} cores{slack}; {need}: {seen.state.replace('_', ' ')}, {head}")


@dataclass
class _Node:
    name: str
    capacity: float
    jobs: list[_Job]
    granted: list[float]


def _at_risk(policy: DeadlinePolicy, nodes: dict[str, _Node], now: float
             ) -> list[tuple[str, AtRiskJob]]:
    """The jobs their worker cannot give the cores to meet their deadline at all (margin
    aside) that a move could save (module docstring, 3): on track until now, forecast, not
    moved before, let move by the guards, settled on their worker, and needing a number of
    cores elsewhere that they can use. By worker and id."""
    spec = policy.spec
    out = []
    for name, node in nodes.items():
        for job, granted in zip(node.jobs, node.granted, strict=True):
            c, f, deadline = job.container, job.forecast, job.deadline_at
            if job.state != "on_track" or f is None or deadline is None \
                    or granted + 1e-9 >= job.need_bare or c.markers.migrated:
                continue
            if action_blocked(c, spec, now, disrupts=True) is not None or \
                    now - c.started_at < SETTLE_INTERVALS * spec.interval_seconds:
                continue
            need = cores_for(f, deadline - now - _cushion(job.declared, spec)
                             - spec.migration_cost_seconds)
            cap = f.cap_cores if job.declared.max_cores is None else \
                min(f.cap_cores, job.declared.max_cores)  # at least a core (`_at_least_a_core`)
            if not need <= cap + EPSILON_CORES:  # inf too: it meets it nowhere
                continue
            out.append((name, AtRiskJob(
                container=c.id, deadline_seconds=deadline, need_elsewhere_cores=need,
                cap_cores=cap, reserved_cores=job.reserved(), granted_cores=granted,
                need_here_cores=job.need_bare)))
    return out


def _at_least_a_core(forecast: Forecast | None) -> Forecast | None:
    """The forecast as Deadline reads it (its states, reasons and moves): a job seen using less
    than a core of what it was given may still use a whole one (`_usable`), so its speed
    model's cap is at least one core. Its time at the cores it is granted (its ETA and slack,
    the reasons) is then read off the model its need comes from (`cores_for`, which has no
    cap): with the cap it was seen at (a tenth of a core, on a core other jobs shared), a job's
    reason said it needed 0.12 cores, was late by 27 s on 0.5 of them, and was on track."""
    if forecast is None or forecast.cap_cores >= 1.0:
        return forecast
    return replace(forecast, cap_cores=1.0)


def _nodes(policy: DeadlinePolicy, snapshot: Snapshot) -> dict[str, _Node]:
    spec, now = policy.spec, snapshot.time
    capacity = {n.name: n.cpu_capacity for n in snapshot.nodes}
    chosen = sorted((c for c in snapshot.containers if spec.selector.selects(c)),
                    key=lambda c: (c.node, c.id))
    settings = settings_of(policy, snapshot, alpha=spec.alpha,
                           interval_seconds=spec.interval_seconds)
    found = forecast_containers(settings, snapshot, {c.id for c in chosen})
    by_node: defaultdict[str, list[_Job]] = defaultdict(list)
    for c in chosen:
        by_node[c.node].append(_judge(c, _at_least_a_core(found.by_id.get(c.id)),
                                      found.notes.get(c.id, ""), capacity=capacity[c.node],
                                      now=now, spec=spec))
    nodes = {}
    for name in sorted(capacity):
        jobs = by_node.get(name, [])
        nodes[name] = _Node(name=name, capacity=capacity[name], jobs=jobs,
                            granted=split([j.ask for j in jobs], capacity[name]))
    return nodes


def plan(policy: PolicyDocument, snapshot: Snapshot) -> Decision:
    """Deadline's decision for `snapshot`: cores per job from its deadline and forecast, moves
    of at-risk jobs, and admissions of held ones (module docstring)."""
    policy = _deadline(policy)
    if snapshot.node_reports:
        return plan_from_reports(policy, snapshot)
    spec, now = policy.spec, snapshot.time
    nodes = _nodes(policy, snapshot)
    spare = _spare(nodes)
    moves = at_risk_moves(policy.name, spec, _at_risk(policy, nodes, now), spare=spare,
                          capacity={n.name: n.capacity for n in nodes.values()},
                          now=now) if spec.migrate else {}
    candidates = candidates_of(snapshot.pending, spec, now) if spec.admit else []
    placed = place(candidates, spare, policy=policy.name)
    started = _make_room(nodes, placed.admits, candidates, spec)
    actions: list[SetCpu | Migrate | Admit] = []
    assessments: list[Assessment] = []
    notes: list[str] = []
    for node in nodes.values():
        if not node.jobs:
            continue
        top = max(node.granted)
        needed = sum(min(j.ask.need, j.ask.most) for j in node.jobs)
        notes.append(f"{node.name}: {len(node.jobs)} jobs, {needed:.2f} of "
                     f"{node.capacity:g} cores needed for deadlines; "
                     f"{max(spare[node.name], 0.0):.2f} free for admissions")
        for job, granted in zip(node.jobs, node.granted, strict=True):
            actions_for, assessment = _emit(policy, job, granted, top=top, moves=moves,
                                            now=now)
            actions += actions_for
            assessments.append(assessment)
    actions += _with_limits(placed.admits, started, nodes, spec)
    if snapshot.pending and spec.admit:
        notes.append(f"admission: {len(placed.admits)} admitted, {len(placed.queue)} waiting")
    return Decision(policy=policy.name, kind="Deadline", time=now, actions=tuple(actions),
                    assessments=tuple(assessments), next_interval=spec.interval_seconds,
                    dry_run=spec.dry_run, notes=tuple(notes), queue=placed.queue)


def _spare(nodes: dict[str, _Node]) -> dict[str, float]:
    """Each worker's cores to spare for moves and admissions: its capacity less what its jobs
    must keep (`_Job.reserved`)."""
    return {n.name: n.capacity - sum(j.reserved() for j in n.jobs) for n in nodes.values()}


def node_reports(policy: PolicyDocument, snapshot: Snapshot) -> tuple[NodeReport, ...]:
    """Every worker's report of `snapshot` under `policy` (`policyd.engine.deadline_reports`):
    its spare cores, the most cores one of its jobs is granted, and its at-risk jobs a move
    could save, earliest deadline first, at most as many as a cycle may move off a worker."""
    policy = _deadline(policy)
    spec, now = policy.spec, snapshot.time
    nodes = _nodes(policy, snapshot)
    spare = _spare(nodes)
    at_risk: defaultdict[str, list[AtRiskJob]] = defaultdict(list)
    for name, job in _at_risk(policy, nodes, now) if spec.migrate else ():
        at_risk[name].append(job)
    per_node = min(spec.safety.max_migrations_per_node, spec.safety.max_migrations_per_cycle)
    return tuple(NodeReport(
        policy=policy.name, node=n.name, time=now, cpu_capacity_cores=n.cpu_capacity,
        cpu_used_cores=n.cpu_usage, selected=len(nodes[n.name].jobs),
        spare_cores=spare[n.name], top_cores=max(nodes[n.name].granted, default=0.0),
        at_risk=tuple(sorted(at_risk[n.name], key=lambda j: (j.deadline_seconds, j.container))
                      [:per_node]))
        for n in snapshot.nodes)


def _emit(policy: DeadlinePolicy, job: _Job, granted: float, *, top: float,
          moves: dict[str, Migrate], now: float) -> tuple[list[SetCpu | Migrate], Assessment]:
    """One job's action (if any) and assessment."""
    spec, c = policy.spec, job.container
    seen = _after(job, granted, now)
    forecast = job_forecast(job.forecast) if job.forecast is not None else None
    base = Assessment(container=c.id, node=c.node, category=None,
                      cpu_fraction_now=c.cpu_allocation, forecast=forecast,
                      forecast_note="" if forecast else (job.forecast_note or "not forecast"),
                      deadline=seen)
    if seen.state == "invalid":
        return [], replace(base, note=f"no action: {seen.note}")
    category = CATEGORY[seen.state]
    gain = seen.needed_cores
    if c.id in moves:
        move = moves[c.id]
        return [move], replace(base, category=category, gain=gain,
                               note=f"moves to {move.to_node}: {move.reason}")
    fraction = limit_fraction(granted, top, job.capacity, spec.mode)
    reason = _reason(job, granted, fraction, seen, now)
    actions: list[SetCpu | Migrate] = []
    target, note = fraction, reason
    if abs(fraction - c.cpu_allocation) <= spec.min_change:
        target = c.cpu_allocation
        if abs(fraction - c.cpu_allocation) > 1e-9:
            note = f"{reason}; within min_change {spec.min_change:g}: unchanged"
    elif (blocked := action_blocked(c, spec, now, disrupts=False)) is not None:
        target, note = c.cpu_allocation, f"no action ({blocked}): {reason}"
    else:
        actions.append(SetCpu(policy=policy.name, container=c.id, node=c.node,
                              fraction=fraction, mode=spec.mode, reason=reason))
    if target != fraction and job.forecast is not None and seen.deadline_at is not None:
        kept = target * (job.capacity if spec.mode == "quota" else top)
        seen = _after(job, kept, now)
    return actions, replace(base, category=category, gain=gain, cpu_fraction_next=target,
                            note=note, deadline=seen)


def _make_room(nodes: dict[str, _Node], admits: Sequence[Admit],
               candidates: Sequence[Candidate], spec: DeadlineSpec) -> dict[str, float]:
    """Split again, in place, the cores of each node that admits jobs now, the admitted ones
    counted, and return the cores each admitted job starts with. A job starts with the cores
    it was admitted for; one admitted only because nothing else waits (`last`) with its floor,
    and more only from what nobody else can use. The running jobs' grants leave them room:
    otherwise the node's limits would add up to more than its cores until the next interval,
    every job there throttled below its limit, allocated cores that nobody can use."""
    by_id = {c.job.id: c for c in candidates}
    arriving: defaultdict[str, list[tuple[str, Ask]]] = defaultdict(list)
    for a in admits:
        c = by_id[a.container]
        floor = min(spec.floor_cores, c.cores) if c.last else c.cores
        arriving[a.node].append((a.container, Ask(
            floor=floor, need=0.0, most=c.cores, order=math.inf,
            rank="last" if c.last else "extra")))
    started: dict[str, float] = {}
    for name, new in arriving.items():
        node = nodes[name]
        cores = split([j.ask for j in node.jobs] + [ask for _, ask in new], node.capacity)
        node.granted = cores[:len(node.jobs)]
        started |= {cid: granted for (cid, _), granted in
                    zip(new, cores[len(node.jobs):], strict=True)}
    return started


def _with_limits(admits: Sequence[Admit], cores: dict[str, float], nodes: dict[str, _Node],
                 spec: DeadlineSpec) -> list[Admit]:
    """Admissions that start with the cores `_make_room` gave them (in quota mode: a cap of
    those cores; in shares mode: a weight beside the node's largest grant)."""
    out = []
    for a in admits:
        node, mine = nodes[a.node], cores[a.container]
        top = max(node.granted, default=0.0)
        fraction = limit_fraction(mine, top if top > 0 else mine, node.capacity, spec.mode)
        out.append(replace(a, fraction=fraction, mode=spec.mode))
    return out


def _intervals(policy: PolicyDocument) -> Intervals:
    return Intervals.fixed(_deadline(policy).spec.interval_seconds)


def _summary(policy: PolicyDocument) -> str:
    spec = _deadline(policy).spec
    return (f"margin {100 * spec.margin:g}%, interval {spec.interval_seconds:g} s, "
            f"hopeless {spec.hopeless}, {spec.mode}"
            + (", migrates" if spec.migrate else ""))


def _cpu_mode(policy: PolicyDocument) -> CpuMode:
    return _deadline(policy).spec.mode


def _acts_on(policy: PolicyDocument) -> frozenset[ActionClass]:
    spec = _deadline(policy).spec
    found: set[ActionClass] = {"cpu"}
    if spec.admit:
        found.add("admission")
    if spec.migrate:
        found.add("placement")
    return frozenset(found)


def _scope(policy: PolicyDocument) -> Scope:
    """Cluster-wide when it starts or moves jobs; each worker on its own otherwise."""
    spec = _deadline(policy).spec
    return "cluster" if spec.admit or spec.migrate else "node"


KIND = Kind(
    name="Deadline", document=DeadlinePolicy, plan=plan,
    scope="cluster",  # admission places jobs on any worker; moves cross workers ...
    policy_scope=_scope,  # ... and without either each worker is sized on its own
    intervals=_intervals,
    # A job that ends frees cores to admit into; a job submitted held is looked at at once.
    wakes_on=frozenset({"started", "stopped", "submitted"}),
    inputs=frozenset({"evaluation", "cpu", "steps"}),
    acts_on=frozenset({"cpu", "placement", "admission"}), policy_acts_on=_acts_on,
    cpu_mode=_cpu_mode, summary=_summary, gain_label="NEED cores",
    convergence_alpha=lambda p: _deadline(p).spec.alpha,
    node_reports=node_reports,  # with `node_reports`: the agents size, the manager places
    node_part=lambda p: node_part(_deadline(p)),
)
"""Deadline's registration entry (`policyd.engine.registry`)."""
