"""QoE: CPU moved between the jobs of a worker so that as many as possible meet their targets.

Theory of operation (our design; DQoES, arXiv 2010.12728, publishes only its aim: clients state
a target QoE per job and the scheduler adjusts resources to approach every target). Every
interval, per worker:

1. Read each selected job's target (`policyd.engine.qoe_target`: `policyd.io/qoe-target`, e.g.
   `steps_per_second>=40`). A malformed one is a note and no action on that job; so is a
   target whose metric has no fresh samples (the job is left alone, its CPU counted as used).
2. Measure it over the last `measure_seconds`, and find the cores that meet what is asked of
   the job now. A throughput target (`steps_per_second>=R`) of a job that reports its total
   steps is a pace (`pace_rate`): its run as a whole must average R, so it is asked for the
   rate that ends its remaining steps by its start + total / R; above R when it is behind,
   below R when it is ahead (it may coast, and lend its cores meanwhile). The cores for that
   rate come from the forecast's speed model (`policyd.engine.speed`: Amdahl's law fitted to
   the job's own intervals), as fitted: the fit averages the noise of single intervals, and
   whatever bias it has shows up in the pace of the next intervals and is corrected there.
   Any other target is the rate itself, aimed `headroom` beyond it, with the speed model
   scaled so that it passes through what was just measured (a model fitted on one
   allocation knows the speed there, and only its prior says how it grows); a named metric
   is taken to scale with the cores the job gets (throughput-like `>=` in proportion,
   latency-like `<=` inversely). A need beyond the cores the job can use (its threads, its
   worker) is infeasible, unless only the headroom is beyond them: it is then those cores.
3. Share the worker (`policyd.engine.qoe_allocation`): every job keeps the floor
   capacity / (beta * n); the smallest needs are met first, as many as fit (the most targets
   one worker can meet), the rest stay short, and the decision's notes say how many targets
   the worker can meet and which are left short. The chosen jobs then get, room permitting,
   what they `want` beyond their needs (settling, below); with CPU shares what is left goes
   to the jobs without a target and a job left short keeps its floor; with quotas what is
   left goes to the jobs without a target, then to those left short, then to the satisfied,
   each job first keeping the cap it holds while that fits (`qoe_allocation`, 4), and the
   cores a job can use, for its need, are the largest it used in the window once it was held
   back or given more than it now has, at least one core (`_speed`).
   Settling, from each job's current limit: a paced job's limit rises only when it is behind
   its pace (to its need and `headroom` more) and falls only when it is on pace with more
   than three headrooms of cores to spare (to its need and `headroom` more) (`paced_keep`);
   any other short job takes the whole step, one meeting its target by up to three
   headrooms keeps its cores, and beyond it gives back half its surplus an interval
   (`settled`). Selection counts needs only, so a job keeping more than it needs never
   keeps another job out.
4. Turn cores into limits: cores / capacity in both modes (`shares`: weights that split the
   worker as planned while every job is busy, the kernel handing what nobody was given to
   every busy job in proportion; `quota`: hard caps). A limit that would move by no more than
   `min_change` of its current cores stays, so allocations settle.

Categories: SATISFIED (on track: its pace, or else its target), SHORT (by x %), INFEASIBLE,
NEW (a target, no measurement yet: it shares what is left until it has one) and FREE (no
target). Each assessment carries a `QoeStatus` (`policyd.model.qoe`): `plan` shows it, the
daemon exports it, and an alert fires when a job has been short for `alert_after_seconds`
(counted from the window's samples, so a restarted daemon says the same). Pure: no I/O, no
clock.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np
from pydantic import Field, field_validator, model_validator

from policyd.engine.guards import action_blocked
from policyd.engine.kind import CpuMode, Intervals, Kind
from policyd.engine.qoe_allocation import Claim, share
from policyd.engine.qoe_target import (
    STEPS_PER_SECOND,
    Measured,
    Target,
    declaration,
    measure,
    read_target,
)
from policyd.engine.snapshot_histories import histories
from policyd.engine.spec import CommonSpec, PolicyDocument, of_kind
from policyd.engine.speed import UNUSED_SHARE, SpeedModel, fit_speed
from policyd.model import Assessment, Container, Decision, QoeStatus, SetCpu, Snapshot
from policyd.model import labels as keys
from policyd.model.qoe import QoeState

SATISFIED, SHORT, INFEASIBLE, NEW, FREE = "SATISFIED", "SHORT", "INFEASIBLE", "NEW", "FREE"
_NAME = re.compile(r"^[a-z_][a-z0-9_]*$")


class QoESpec(CommonSpec):
    """QoE's arguments."""

    interval_seconds: float = Field(
        default=15.0, ge=1, le=86400, description="Evaluation interval, seconds.")
    measure_seconds: float | None = Field(
        default=None, gt=0, le=86400,
        description="Each job's metric is read over this many seconds (default: the interval).")
    metrics: dict[str, str] = Field(
        default_factory=dict,
        description=(
            "QoE metrics beside the built-in steps_per_second: name -> PromQL selecting one "
            "series per container (keeping the labels that name the container on the loss "
            "series). Each is one query a cycle, whatever the number of containers."),
    )
    headroom: float = Field(
        default=0.05, ge=0, le=1,
        description=(
            "Aim this fraction beyond each target (a job exactly at it flips in and out); a "
            "paced throughput target (the job reports its total steps) gets this fraction of "
            "cores beyond its need instead."))
    beta: float = Field(
        default=8.0, ge=1, le=100,
        description=(
            "Floor: every job keeps at least 1 / (beta * n) of its worker (n jobs). Each job "
            "left short reserves its floor, so a larger beta leaves more for the targets, "
            "until a job held at a sliver of a core reports too little to be sized."))
    mode: Literal["shares", "quota"] = Field(
        default="shares", description="shares: soft, work-conserving limits; quota: hard caps.")
    hysteresis: float = Field(
        default=0.1, ge=0, lt=1,
        description=(
            "A job meeting its target keeps its place unless another's need is smaller by more "
            "than this fraction."),
    )
    min_change: float = Field(
        default=0.05, ge=0, lt=1,
        description=(
            "A job's limit that would move by no more than this fraction of its cores stays."),
    )
    alert_after_seconds: float = Field(
        default=300.0, gt=0, le=86400,
        description=(
            "A job short of its target for this long (every sample of the window since) raises "
            "an alert. At most the history policyd reads: window_intervals x interval_seconds."),
    )

    @field_validator("metrics")
    @classmethod
    def _names(cls, metrics: dict[str, str]) -> dict[str, str]:
        problems = []
        for name, query in metrics.items():
            if name == STEPS_PER_SECOND:
                problems.append(f"{name} is built in (read from the steps counter); choose "
                                "another name")
            elif not _NAME.match(name):
                problems.append(f"{name!r} must be lowercase letters, digits and _ (a PromQL "
                                "label-like name), starting with a letter or _")
            if not query.strip():
                problems.append(f"{name}: the query is empty")
        if problems:
            raise ValueError("; ".join(problems))
        return metrics

    @model_validator(mode="after")
    def _check(self) -> QoESpec:
        history = self.window_intervals * self.interval_seconds
        if self.alert_after_seconds > history:
            raise ValueError(
                f"alert_after_seconds ({self.alert_after_seconds:g}) must be at most the history "
                f"policyd reads, window_intervals x interval_seconds = {history:g} s: a longer "
                "shortfall could never be seen")
        if self.window_seconds > history:
            raise ValueError(f"measure_seconds ({self.window_seconds:g}) must be at most the "
                             f"history policyd reads ({history:g} s)")
        return self

    @property
    def window_seconds(self) -> float:
        return self.measure_seconds if self.measure_seconds is not None else self.interval_seconds


class QoEPolicy(PolicyDocument):
    kind: Literal["QoE"]
    spec: QoESpec


def _qoe(policy: PolicyDocument) -> QoEPolicy:
    return of_kind(policy, QoEPolicy, "QoE")


@dataclass(frozen=True, kw_only=True)
class _Job:
    container: Container
    target: Target | None
    measured: Measured | None
    need: float | None  # cores meeting its target; inf: infeasible; None: no need
    cap: float
    note: str  # why it is left alone ("" when it is not)
    pace: float | None = None  # the rate a paced job is asked for now (`pace_rate`)
    held: float = math.nan  # the cores its current limit gives it
    want: float | None = None  # the cores it keeps when there is room (`settled`, `paced_keep`)
    usable: float = math.nan  # the most cores its need may count on (an infeasible need's bound)

    @property
    def on_track(self) -> bool:
        """Its metric meets what is asked of it now: its pace, or else its target."""
        m, t = self.measured, self.target
        if m is None or t is None:
            return False
        return m.value >= self.pace if self.pace is not None else t.met_by(m.value)


def _speed(snapshot: Snapshot, containers: Sequence[Container], *,
           soft: bool) -> tuple[dict[str, SpeedModel], dict[str, float]]:
    """Each container's fitted speed model (one row each), from the forecast's histories, and
    the most cores it is given room to grow to (`Claim.cap`; the model's cap unless below).

    With soft limits (`shares`), the most cores a job can use is read from the intervals its
    node had cores to spare: CPU shares are work-conserving, so a job then used all it could.
    It is the largest such use in the window (the model's own reading, from the last interval
    only, would forget it as soon as the job is given less); with none, the model's.

    With hard limits (`quota`) a job used, in those intervals, its limit or all it could,
    whichever was less: the largest such use is what it can use when it was held back in its
    last interval (the model's reading, a mean over the window, is lower), or in any of those
    intervals since policyd last changed its limit (`markers.last_action_at`: its limit then
    was today's), and the least it can use otherwise. Without the second, a job whose threads
    use less than its limit read as able to use the whole worker whenever its last interval
    was a busy one, and its target flipped in and out of reach. When that largest use is above
    the limit the job has now (it was given more, and the window still shows it), the model
    takes it as the most the job can use, so that whether its target is within reach is not
    read anew from every interval: a job left out for being infeasible, held to its floor,
    uses all of it and would otherwise read as able to use the whole worker, be chosen, be held
    back, and be left out again. It may still grow into what is left beyond that (its growth
    cap is the model's own reading). Only a use of at least one core counts so: under a cap
    below one core a job uses all of it whatever its threads, so a use below one core shows
    nothing of them; read as the most a job at the floor can use (one core, the least a need
    may count on), its target turned infeasible whenever its floor had shrunk within the window,
    and in reach again an interval or two later."""
    if not containers:
        return {}, {}
    h = histories(snapshot, containers)
    model = fit_speed(steps_made=np.diff(h.steps, axis=1),
                      seconds=np.diff(h.times_seconds, axis=1), cores=h.cores[:, 1:],
                      allocation_cores=h.allocation_cores, max_cores=h.max_cores,
                      busy=h.busy[:, 1:])
    cap = model.cap_cores
    with np.errstate(invalid="ignore"):
        spare = (h.busy[:, 1:] == 0) & np.isfinite(h.cores[:, 1:]) & (h.cores[:, 1:] > 0)
    used = np.max(np.where(spare, h.cores[:, 1:], -np.inf), axis=1, initial=-np.inf)
    largest = np.minimum(used, h.max_cores)
    if soft:
        cap = grow = np.where(np.isfinite(used), largest, cap)
    else:
        # Under its current limit (the intervals since policyd last changed it), a job that
        # used less than UNUSED_SHARE of it while its node had cores to spare has shown what
        # its threads can use, whichever interval the model's own test reads.
        changed = np.array([np.nan if c.markers.last_action_at is None
                            else c.markers.last_action_at for c in containers])
        under = spare & ~(h.times_seconds[:, :-1] < changed[:, None])
        at_limit = np.max(np.where(under, h.cores[:, 1:], -np.inf), axis=1, initial=-np.inf)
        shown = np.isfinite(at_limit) & (at_limit < UNUSED_SHARE * h.allocation_cores)
        held_back = np.isfinite(used) & ((cap < h.max_cores) | shown)
        grow = np.where(held_back, largest, cap)
        # Given more than it has now, and the window still shows it: that use is the most it
        # can use, if it is at least one core (below one, its cap bound it, not its threads).
        cap = np.where(held_back | (np.isfinite(used) & (used > h.allocation_cores)
                                    & (largest >= 1.0)), largest, cap)
    model = replace(model, cap_cores=cap)
    out = {}
    for i, c in enumerate(containers):
        rows = np.array([i])
        out[c.id] = SpeedModel(
            serial_seconds=model.serial_seconds[rows],
            parallel_seconds=model.parallel_seconds[rows],
            cap_cores=model.cap_cores[rows], spread=model.spread[rows],
            usable=model.usable[rows], mean_cores=model.mean_cores[rows],
            drift=model.drift[rows], window_seconds=model.window_seconds[rows])
    return out, {c.id: float(grow[i]) for i, c in enumerate(containers)}


def cores_for_rate(model: SpeedModel, rate: float, scale: float) -> float:
    """The fewest cores at which `scale` x the model's speed reaches `rate` steps per second
    (inf when none up to the model's cap): the inverse of s(c) = serial + parallel / c (c >= 1)
    or (serial + parallel) / c (c < 1)."""
    serial = float(model.serial_seconds[0])
    parallel = float(model.parallel_seconds[0])
    cap = float(model.cap_cores[0])
    seconds = scale / rate  # model seconds per step wanted
    if not (math.isfinite(serial) and math.isfinite(parallel)) or seconds <= 0:
        return math.inf
    total = serial + parallel
    if total <= 0:
        return math.inf
    if seconds >= total:  # a fraction of one core is enough (time slicing)
        cores = total / seconds
    elif seconds > serial and parallel > 0:
        cores = parallel / (seconds - serial)
    else:
        return math.inf
    return cores if cores <= cap + 1e-9 else math.inf


def pace_rate(target: Target, container: Container) -> float | None:
    """The steps per second a throughput target asks of a job from its latest sample on, when
    the job reports its total steps: the rate at which the rest of its run ends when the target
    allows it to (its container's start plus total steps / target), so that its run as a whole
    averages the target. Above the target when the job is behind, below it when the job is
    ahead (it may coast), inf once that time has passed. None when the target is not a
    `steps_per_second>=` floor or the total is not known: the target is then the rate itself."""
    if target.metric != STEPS_PER_SECOND or target.comparison != ">=" or \
            container.total_steps is None or len(container.steps) == 0:
        return None
    done = float(container.steps.values[-1])
    if not math.isfinite(done):
        return None
    remaining = container.total_steps - done
    if remaining <= 0:
        return target.value
    left = (container.started_at + container.total_steps / target.value
            - float(container.steps.times_seconds[-1]))
    return remaining / left if left > 0 else math.inf


def _cores_for(target: Target, got: Measured, model: SpeedModel | None, aim: float, *,
               paced: bool) -> float:
    """Cores at which the metric reaches `aim` (NaN: no way to tell): for steps per second the
    speed model, as fitted over the job's window for a paced job (the fit averages the noise of
    single intervals, and the pace corrects what bias is left), scaled through what was just
    measured for any other (the fit's prior alone says how a job seen on one allocation
    grows); for a named metric, in proportion to the cores (inversely for a `<=` target)."""
    cores_now = got.cores
    if target.metric == STEPS_PER_SECOND and model is not None and bool(model.usable[0]):
        predicted = float(model.steps_per_second(np.array([cores_now]))[0]) if (
            math.isfinite(cores_now) and cores_now > 0) else math.nan
        scale = got.value / predicted if math.isfinite(predicted) and predicted > 0 and \
            got.value > 0 else 1.0
        return cores_for_rate(model, aim, 1.0 if paced else scale)
    if math.isfinite(cores_now) and cores_now > 0 and got.value > 0:
        return (cores_now * aim / got.value if target.comparison == ">="
                else cores_now * got.value / aim)
    return math.inf if got.value <= 0 and target.comparison == ">=" else math.nan


def _need(target: Target, got: Measured, model: SpeedModel | None, *, headroom: float,
          cap: float, rate: float, paced: bool) -> float:
    """Cores meeting `target` at `rate` (module docstring, 2): a paced job's rate itself (the
    pace is its own margin), any other target `headroom` beyond it. A need beyond `cap` is
    infeasible (inf), unless the target itself fits without the headroom: then it is `cap`
    (a job that meets its target on every core it can use is not given up for a margin)."""
    if not math.isfinite(rate):
        return math.inf
    if paced or headroom <= 0:
        aim = rate
    else:
        aim = rate * (1.0 + headroom) if target.comparison == ">=" else rate / (1.0 + headroom)
    need = _cores_for(target, got, model, aim, paced=paced)
    if math.isnan(need) or need <= cap + 1e-9:
        return need
    if aim != rate and _cores_for(target, got, model, rate, paced=paced) <= cap + 1e-9:
        return cap
    return math.inf


SETTLE_HEADROOMS = 3.0
"""A job on track keeps the cores it has while they are within this many headrooms of its
need (in rate for a plain target, in cores for a paced one)."""
RELEASE = 0.5
"""A job with a plain target beyond that band gives back this share of its surplus per
interval."""


def settled(need: float, target: Target, got: Measured, headroom: float) -> float:
    """The cores a job with a plain target (no pace) keeps (module docstring, 3): a short job
    takes the whole step up; a job meeting its target within SETTLE_HEADROOMS x headroom keeps
    what it gets; beyond, it gives back RELEASE of its surplus. A speed model that is wrong by
    some percent then moves a job up in steps and down by halves, rather than back and forth."""
    held = got.cores
    if not (math.isfinite(need) and math.isfinite(held) and held > 0):
        return need
    ratio = target.ratio(got.value)
    if ratio < 1.0:
        return need
    if ratio <= 1.0 + SETTLE_HEADROOMS * headroom:
        return held
    return max(need, held - RELEASE * (held - need))


def paced_keep(need: float, got: Measured, pace: float, headroom: float, *,
               held: float) -> float:
    """The cores a paced job keeps (module docstring, 3), from `held`, the cores its limit
    gives it (not the cores it used: with CPU shares those include what the kernel hands out
    beyond the limits, which comes and goes with the neighbours). Behind its pace, it gets its
    need and `headroom` more, and never less than it holds; on pace, it keeps what it holds
    while that is no more than SETTLE_HEADROOMS headrooms beyond its need, else it drops to
    its need and `headroom` more. So a limit moves up only when the job is behind and down
    only when it is clearly ahead; the pace itself moves with how far ahead or behind the job
    is, so a speed model that is wrong by some percent is corrected over the next intervals
    instead of by a step back."""
    aim = need * (1.0 + headroom)
    if not (math.isfinite(need) and math.isfinite(held) and held > 0):
        return aim
    if got.value < pace:
        return max(aim, held)
    return held if held <= need * (1.0 + SETTLE_HEADROOMS * headroom) else aim


def _jobs(policy: QoEPolicy, snapshot: Snapshot, chosen: Sequence[Container]) -> list[_Job]:
    spec = policy.spec
    capacity = {n.name: n.cpu_capacity for n in snapshot.nodes}
    known = {STEPS_PER_SECOND, *spec.metrics}
    stale = 2.0 * snapshot.interval_seconds(policy.name, spec.interval_seconds)
    targets: dict[str, Target | str | None] = {}
    for c in chosen:
        text = declaration(c)
        targets[c.id] = None if text is None else read_target(text, known)
    models, grow = _speed(snapshot, [c for c in chosen if isinstance(targets[c.id], Target)
                                     and len(c.steps) > 0], soft=spec.mode == "shares")
    jobs = []
    for c in chosen:
        cap = capacity[c.node]
        found = targets[c.id]
        if found is None or isinstance(found, str):
            jobs.append(_Job(container=c, target=None, measured=None, need=None, cap=cap,
                             note=found or ""))
            continue
        model = models.get(c.id)
        usable = cap  # the most it can use, for its need
        if model is not None and bool(model.usable[0]):
            usable = min(cap, max(float(model.cap_cores[0]), 1.0))
            cap = min(cap, max(grow[c.id], 1.0))
        got = measure(found, c, now=snapshot.time, window_seconds=spec.window_seconds,
                      stale_seconds=stale)
        if isinstance(got, str):
            young = snapshot.time - c.started_at <= stale
            jobs.append(_Job(container=c, target=found, measured=None, need=None, cap=cap,
                             note="" if young else got))
            continue
        pace = pace_rate(found, c)
        rate = found.value if pace is None else pace
        need = _need(found, got, model, headroom=spec.headroom, cap=usable, rate=rate,
                     paced=pace is not None)
        if math.isnan(need):
            jobs.append(_Job(container=c, target=found, measured=got, need=None, cap=cap,
                             note="", pace=pace))
            continue
        held = _held(c, capacity[c.node])
        want = (settled(need, found, got, spec.headroom) if pace is None
                else paced_keep(need, got, pace, spec.headroom, held=held))
        jobs.append(_Job(container=c, target=found, measured=got, need=need, cap=cap,
                         note="", pace=pace, want=want, held=held, usable=usable))
    return jobs


@dataclass(frozen=True, kw_only=True)
class _Outcome:
    job: _Job
    cores: float
    selected: bool
    category: str | None
    status: QoeStatus | None
    reason: str


def _status(job: _Job, spec: QoESpec, selected: bool) -> tuple[str, QoeStatus | None]:
    t, m = job.target, job.measured
    if t is None:
        return FREE, None
    if m is None:
        return NEW, None
    ratio = t.ratio(m.value)
    if job.pace is not None:  # short of the pace, not of the target: a job ahead may coast
        ratio = m.value / job.pace if math.isfinite(job.pace) else 0.0
    state: QoeState = ("satisfied" if job.on_track else
                       "infeasible" if job.need is not None and math.isinf(job.need)
                       else "short")
    status = QoeStatus(
        target=t.text, metric=t.metric, comparison=t.comparison, target_value=t.value,
        measured=m.value, state=state,
        shortfall=0.0 if state == "satisfied" else max(1.0 - min(ratio, 1.0), 0.0),
        short_seconds=m.short_seconds,
        alerting=state != "satisfied" and m.short_seconds >= spec.alert_after_seconds,
        cores_needed=job.need if job.need is not None and math.isfinite(job.need) else None)
    return {"satisfied": SATISFIED, "short": SHORT, "infeasible": INFEASIBLE}[state], status


def _reason(job: _Job, status: QoeStatus | None, cores: float, *, selected: bool,
            capacity: float, floor: float) -> str:
    lead = f"{cores:.2f} of {capacity:g} cores"
    if job.target is None:
        return f"no target ({keys.QOE_TARGET}): shares what is left; {lead}"
    if status is None:
        return f"{job.target.text}: not measured yet; shares what is left; {lead}"
    measured = (f"{job.target.metric} {status.measured:.4g} vs {status.comparison} "
                f"{status.target_value:g}")
    if job.pace is not None:
        measured += (f" over its run (pace {job.pace:.4g} from now on)"
                     if math.isfinite(job.pace) else " over its run (its time has passed)")
    if job.need is not None and math.isinf(job.need):
        most = f"{job.usable:.2g} core" + ("" if f"{job.usable:.2g}" == "1" else "s")
        return f"{measured}: infeasible (more than the {most} it can use would be needed); {lead}"
    need = f"needs {job.need:.2f} cores" if job.need is not None else "need unknown"
    if selected:
        return f"{measured}; {need}: met first (smallest needs first); {lead}"
    return (f"{measured}; {need}: left short (meeting it would leave smaller needs unmet); "
            f"{lead} (floor {floor:.2f})")


def _served(job: _Job) -> bool:
    """An incumbent: it is on track now (its pace, or else its target), or already gets the
    cores it needs (it used them, or its limit gives them: a job raised since the window
    began has not used them yet, and must not be given up for it)."""
    m, need = job.measured, job.need
    if m is None or need is None or not math.isfinite(need):
        return False
    gets = max(m.cores if math.isfinite(m.cores) else 0.0,
               job.held if math.isfinite(job.held) else 0.0)
    return job.on_track or gets >= 0.95 * need


def _held(container: Container, capacity: float) -> float:
    """The cores a job's limit gives it; an unlimited job (the whole worker) holds nothing yet."""
    return container.cpu_allocation * capacity if container.cpu_allocation < 1.0 else math.nan


def _node(jobs: list[_Job], capacity: float, spec: QoESpec) -> list[_Outcome]:
    acting = [j for j in jobs if not j.note]
    idle = sum(min(j.container.cpu_allocation * capacity, capacity) for j in jobs if j.note)
    room = max(capacity - idle, 0.0) if acting else 0.0
    hard = spec.mode == "quota"
    claims = [Claim(key=j.container.id, need=j.need, cap=j.cap, incumbent=_served(j),
                    want=j.want, held=j.container.cpu_allocation * capacity if hard else None)
              for j in acting]
    shared = share(claims, room, beta=spec.beta, hysteresis=spec.hysteresis,
                   soft=spec.mode == "shares", min_change=spec.min_change) if acting else None
    out = []
    k = 0
    for j in jobs:
        if j.note:
            out.append(_Outcome(job=j, cores=math.nan, selected=False, category=None,
                                status=None, reason=j.note))
            continue
        assert shared is not None
        cores, selected = shared.cores[k], shared.selected[k]
        k += 1
        category, status = _status(j, spec, selected)
        out.append(_Outcome(job=j, cores=cores, selected=selected, category=category,
                            status=status,
                            reason=_reason(j, status, cores, selected=selected,
                                           capacity=capacity, floor=shared.floor_cores)))
    return out


def _node_note(node: str, outcomes: Sequence[_Outcome]) -> str:
    targeted = [o for o in outcomes if o.job.need is not None]
    met = [o for o in targeted if o.selected]
    left = [o for o in targeted if not o.selected]
    text = f"{node}: {len(met)} of {len(targeted)} measured targets can be met"
    if left:
        shown = ", ".join(f"{o.job.container.id} ("
                          + ("infeasible" if o.job.need is not None and math.isinf(o.job.need)
                             else f"needs {o.job.need:.2f} cores") + ")" for o in left)
        text += f"; left short so that the others are met: {shown}"
    alone = [o for o in outcomes if o.category is None]
    if alone:
        text += f"; {len(alone)} left alone (a malformed target or no metric: see their notes)"
    return text


def plan(policy: PolicyDocument, snapshot: Snapshot) -> Decision:
    """QoE's decision for `snapshot`: a CPU limit per job from its target (module docstring)."""
    policy = _qoe(policy)
    spec, now = policy.spec, snapshot.time
    chosen = sorted((c for c in snapshot.containers if spec.selector.selects(c)),
                    key=lambda c: (c.node, c.id))
    by_node: defaultdict[str, list[_Job]] = defaultdict(list)
    for job in _jobs(policy, snapshot, chosen):
        by_node[job.container.node].append(job)
    capacity = {n.name: n.cpu_capacity for n in snapshot.nodes}
    actions: list[SetCpu] = []
    assessments: list[Assessment] = []
    notes: list[str] = []
    for node in sorted(by_node):
        cap = capacity[node]
        outcomes = _node(by_node[node], cap, spec)
        notes.append(_node_note(node, outcomes))
        for o in outcomes:
            c = o.job.container
            if o.category is None:
                assessments.append(Assessment(container=c.id, node=c.node, category=None,
                                              cpu_fraction_now=c.cpu_allocation, note=o.reason))
                continue
            floor = 1.0 / (spec.beta * len(by_node[node]))
            fraction = min(max(o.cores / cap, floor), 1.0)
            target, note = fraction, o.reason
            now_cores = c.cpu_allocation * cap
            if abs(fraction * cap - now_cores) <= max(spec.min_change * now_cores, 1e-6):
                target = c.cpu_allocation
                if abs(fraction - c.cpu_allocation) > 1e-9:
                    note = (f"{o.reason}; within min_change {spec.min_change:g} of its "
                            f"{now_cores:.2f} cores: unchanged")
            elif (blocked := action_blocked(c, spec, now, disrupts=False)) is not None:
                target, note = c.cpu_allocation, f"no action ({blocked}): {o.reason}"
            else:
                actions.append(SetCpu(policy=policy.name, container=c.id, node=c.node,
                                      fraction=fraction, mode=spec.mode, reason=o.reason))
            assessments.append(Assessment(
                container=c.id, node=c.node, category=o.category,
                gain=o.status.ratio if o.status is not None else None,
                cpu_fraction_now=c.cpu_allocation, cpu_fraction_next=target, note=note,
                qoe=o.status))
    return Decision(policy=policy.name, kind="QoE", time=now, actions=tuple(actions),
                    assessments=tuple(assessments), next_interval=spec.interval_seconds,
                    dry_run=spec.dry_run, notes=tuple(notes))


def _intervals(policy: PolicyDocument) -> Intervals:
    return Intervals.fixed(_qoe(policy).spec.interval_seconds)


def _summary(policy: PolicyDocument) -> str:
    spec = _qoe(policy).spec
    return (f"interval {spec.interval_seconds:g} s, headroom {spec.headroom:g}, beta "
            f"{spec.beta:g}, {spec.mode}")


def _cpu_mode(policy: PolicyDocument) -> CpuMode:
    return _qoe(policy).spec.mode


def _floor(policy: PolicyDocument, jobs: int) -> float:
    return 1.0 / (_qoe(policy).spec.beta * max(jobs, 1))


def _metric_queries(policy: PolicyDocument) -> Mapping[str, str]:
    return dict(_qoe(policy).spec.metrics)


KIND = Kind(
    name="QoE", document=QoEPolicy, plan=plan,
    scope="node",  # each worker's CPU among its own jobs
    intervals=_intervals,
    wakes_on=frozenset({"started", "stopped"}),  # a job that comes or goes changes the shares
    inputs=frozenset({"evaluation", "cpu", "steps", "metrics"}),
    acts_on=frozenset({"cpu"}),
    cpu_mode=_cpu_mode, summary=_summary, gain_label="QOE (measured/target)",
    floor=_floor, metric_queries=_metric_queries,
)
"""QoE's registration entry (`policyd.engine.registry`)."""
