"""FlowCon: growth-efficiency CPU limits per worker (thesis section 5.1, Algorithms 1 and 2).

Theory of operation. The thesis runs Algorithm 1 on every worker every `itval` seconds and keeps
three lists (NL new, WL watching, CL completing) in memory between runs; Algorithm 2 listens for
containers that appear or disappear. policyd keeps no memory, so each call *recomputes* the lists:

1. Read the evaluation function E of every selected container at the window's boundaries
   t_m = now - (M - m) * itval, m = 0..M (`series.sample_window`; itval is the policy's current,
   possibly backed-off interval from the snapshot), and turn each interval into a growth
   efficiency G (docs/design.md, "Growth efficiency"): the relative gain per *base* interval
   itval_0 per core used.
2. Replay Algorithm 1, lines 2-13, over those M steps as a fold (`replay`): every container
   enters NL at its first readable boundary (Algorithm 2, line 7) and moves NL -> WL -> CL while
   G < alpha and back to NL when G >= alpha. A step without a G leaves the category as it was.
   Replaying the window in two pieces gives what one replay gives, so a daemon that caches the
   categories and feeds only new steps agrees with a restarted one (up to the bounded window).
3. Set the limits of Algorithm 1, lines 14-26, per node (free competition when every categorised
   container is in CL; otherwise CL by share of growth with a floor, WL unchanged, NL 1).
4. Decide the next interval: doubled (capped) where a node is all CL (line 17), the base interval
   where a container appeared during the current interval (Algorithm 2, line 8), the base
   interval elsewhere; the policy's interval is the minimum over the nodes that took part.

A container that *disappeared* (Algorithm 2, lines 10-17) is simply absent from the snapshot: it
has no category and no limit to release here. Resetting the interval on disappearance is the
daemon's listener's job (it writes the base interval into the snapshot's `intervals`).

Everything per container is numpy over all containers at once; Python loops run over the M
steps, the nodes, and finally once over the containers to build the assessments and actions.
This module does no I/O and reads no clock: `now` is `snapshot.time`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt
from pydantic import Field, model_validator

from policyd.engine import series
from policyd.engine.guards import action_blocked
from policyd.engine.kind import CpuMode, Intervals, Kind
from policyd.engine.spec import CommonSpec, PolicyDocument, check_relative_alpha
from policyd.model import Assessment, Container, Decision, SetCpu, Snapshot
from policyd.model.snapshot import FloatArray


class FlowConSpec(CommonSpec):
    """FlowCon's arguments (thesis Algorithm 1, line 1; section 6.1 for the values used)."""

    alpha: float = Field(
        default=0.05, gt=0,
        description=(
            "Growth-efficiency threshold: below it a job moves NL -> WL -> CL. With relative "
            "normalization a fraction (0.05 = improved by under 5% per interval per core)."
        ),
    )
    interval_seconds: float = Field(
        default=20.0, ge=1, le=86400, description="Base evaluation interval itval_0, seconds."
    )
    max_interval_seconds: float = Field(
        default=320.0, ge=1, le=86400,
        description="Cap of the exponential back-off while every job is in CL, seconds.",
    )
    beta: float = Field(
        default=2.0, ge=1, le=100,
        description="CL floor: a CL job keeps at least 1 / (beta * n) of the node (n jobs).",
    )
    mode: Literal["shares", "quota"] = Field(
        default="shares",
        description="shares: soft, work-conserving limits; quota: hard caps.",
    )

    @model_validator(mode="after")
    def _check(self) -> FlowConSpec:
        if self.max_interval_seconds < self.interval_seconds:
            raise ValueError(
                f"max_interval_seconds ({self.max_interval_seconds:g}) must be at least "
                f"interval_seconds ({self.interval_seconds:g})"
            )
        check_relative_alpha(self.alpha, self.evaluation, "0.05 = 5%")
        return self


class FlowConPolicy(PolicyDocument):
    kind: Literal["FlowCon"]
    spec: FlowConSpec



CategoryArray = npt.NDArray[np.int8]
BoolArray = npt.NDArray[np.bool_]

NL, WL, CL = 0, 1, 2
"""Category codes of Algorithm 1 (New, Watching, Completing lists)."""
CATEGORY_NAMES = ("NL", "WL", "CL")
UNCATEGORISED = -1
"""Code of a container left alone (a broken series, no CPU figure, too few samples)."""

MIN_CORES = 0.001
"""Floor of R_c, the mean cores used in an interval, in G = g / R_c. A job that reported zero (or
nearly zero) CPU use while its loss still moved, e.g. a sampling artefact, would otherwise get an
infinite or absurd efficiency; a thousandth of a core is far below what a training step runs
on, so the floor only matters when the usage figure is noise."""

CHANGE_TOLERANCE = 1e-6
"""A limit that moves by no more than this is left as it is (no `SetCpu`)."""

# Algorithm 1, lines 4-9: below alpha, NL -> WL and WL -> CL; CL stays CL (no branch moves it).
_SLOWER = np.array([WL, CL, CL], dtype=np.int8)


def replay(categories: npt.ArrayLike, efficiencies: npt.ArrayLike, alpha: float) -> CategoryArray:
    """Algorithm 1, lines 2-13, folded over the columns of `efficiencies`.

    `categories` (N,) holds NL/WL/CL codes before the first step; `efficiencies` (N, K) the
    growth efficiency G of each container at each step, NaN where there is none (the category
    then stays). Returns the categories after the last step. Being a fold, replaying
    E[:, :k] then E[:, k:] equals replaying E.
    """
    cats = np.array(categories, dtype=np.int8)
    steps = np.asarray(efficiencies, dtype=np.float64)
    if cats.ndim != 1 or steps.ndim != 2 or steps.shape[0] != cats.shape[0]:
        raise ValueError(
            f"expected categories (N,) and efficiencies (N, K), got {cats.shape} and {steps.shape}"
        )
    if cats.size and (cats.min() < NL or cats.max() > CL):
        raise ValueError(f"categories must be NL ({NL}), WL ({WL}) or CL ({CL})")
    for g in steps.T:
        # NaN compares false both ways, so a step without a G changes nothing.
        slower = g < alpha  # lines 4 and 7: NL -> WL, WL -> CL (CL has no branch: it stays)
        growing = g >= alpha  # line 10: back to NL from anywhere
        cats = np.where(growing, np.int8(NL), np.where(slower, _SLOWER[cats], cats))
    return cats.astype(np.int8, copy=False)


@dataclass(frozen=True, kw_only=True, eq=False)
class _Assessed:
    """Per-container results, aligned with the selected containers (sorted by node, id)."""

    categories: CategoryArray  # NL/WL/CL, or UNCATEGORISED
    efficiency: FloatArray  # G of the last step; NaN when there is none
    unmeasured: BoolArray  # young NL containers without a G yet (Algorithm 2, line 7)
    notes: list[str]  # why an UNCATEGORISED container is left alone ("" otherwise)


def _assess(
    containers: Sequence[Container], spec: FlowConSpec, now: float, itval: float
) -> _Assessed:
    """Categories and last-step growth efficiencies of every selected container."""
    steps = spec.window_intervals
    window = series.sample_window(
        containers, now=now, interval_seconds=itval, intervals=steps,
        max_sample_age_seconds=2 * itval,
    )
    bounds = window.boundaries
    ev = spec.evaluation
    gains = series.gains(window, ev.normalization, gain=ev.gain, direction=ev.direction)
    # NaN where an interval has no CPU figure; NaN/Inf samples and broken series are problems.
    cpu = series.mean_cpu_cores(containers, window, now=now)
    cores = cpu.cores
    problems = list(cpu.problems)
    # docs/design.md, "Growth efficiency" (thesis eq. 4.1-4.2 up to a constant):
    #   G_m = g_m / (t_m - t_{m-1}) * itval_0 / max(R_m, MIN_CORES)
    # g_m / (t_m - t_{m-1}) is the relative gain per second; times itval_0 it is the gain per
    # *base* interval, so backing off does not rescale G against alpha; dividing by R_m (mean
    # cores used in the interval) makes it per core. NaN in g or R (no reading) stays NaN.
    spans = np.diff(window.boundaries)
    with np.errstate(invalid="ignore", over="ignore"):  # inf: a loss of 1e308, read as is
        efficiencies = (gains / spans[None, :] * spec.interval_seconds
                        / np.maximum(cores, MIN_CORES))

    n = len(containers)
    started = np.fromiter((c.started_at for c in containers), dtype=np.float64, count=n)
    for i, p in enumerate(window.problems):
        problems[i] = p or problems[i]
    usable = np.fromiter((p is None for p in problems), dtype=np.bool_, count=n)
    readable = (steps + 1) - window.first  # boundaries from the first readable one to t_M
    no_gain = readable < 2
    young = (now - started) <= 2 * itval
    last = efficiencies[:, -1]  # window_intervals >= 2: there is always a last step
    measured = usable & ~no_gain & np.isfinite(last)
    unmeasured = usable & no_gain & young  # Algorithm 2, line 7: a new container is NL

    # Algorithm 1, lines 2-13, replayed from NL at t_0 (steps before a container's first reading
    # have no G and leave it in NL, so it effectively enters NL at its first readable boundary).
    replayed = replay(np.full(n, NL, dtype=np.int8), efficiencies, spec.alpha)
    categories = np.where(measured, replayed,
                          np.where(unmeasured, np.int8(NL), np.int8(UNCATEGORISED)))

    notes = [""] * n
    window_seconds = steps * itval
    for i in np.flatnonzero(~measured & ~unmeasured).tolist():
        if problems[i] is not None:
            notes[i] = f"no action: {problems[i]}"
        elif no_gain[i]:
            t = containers[i].evaluation.times_seconds
            count = int(np.count_nonzero((t >= bounds[0]) & (t <= now)))
            notes[i] = (
                f"no action: too few evaluation samples: {count} in the last "
                f"{window_seconds:.0f} s (a gain needs readings at two interval boundaries; "
                f"started {now - started[i]:.0f} s ago, more than 2 intervals)"
            )
        else:
            notes[i] = (
                f"no action: no CPU usage reported for the last interval "
                f"({bounds[-2]:.0f}, {bounds[-1]:.0f}], so no growth efficiency"
            )
    return _Assessed(
        categories=categories.astype(np.int8),
        efficiency=np.where(measured, last, np.nan),
        unmeasured=unmeasured,
        notes=notes,
    )


@dataclass(frozen=True, kw_only=True, eq=False)
class _Nodes:
    """Per-node figures of Algorithm 1, indexed by node name in sorted order."""

    selected: npt.NDArray[np.int64]  # n: selected containers (skipped ones included)
    categorised: npt.NDArray[np.int64]
    in_cl: npt.NDArray[np.int64]
    all_cl: BoolArray  # line 14: every categorised container is in CL
    has_unmeasured: BoolArray  # a young NL container without a G yet
    sum_g: FloatArray  # Σ G over the measured containers
    appeared: BoolArray  # Algorithm 2, line 5: a container started during the current interval
    next_interval: FloatArray


def _per_node(
    node_index: npt.NDArray[np.int64], assessed: _Assessed, *, started: FloatArray,
    count: int, spec: FlowConSpec, now: float, itval: float,
) -> _Nodes:
    cats = assessed.categories
    categorised = cats != UNCATEGORISED
    measured = np.isfinite(assessed.efficiency)
    in_cl = np.bincount(node_index[cats == CL], minlength=count)
    n_cat = np.bincount(node_index[categorised], minlength=count)
    all_cl = (n_cat > 0) & (in_cl == n_cat)
    appeared = np.bincount(node_index[(now - started) < itval], minlength=count) > 0
    # Line 17: itval = itval * 2 while every container is in CL, capped by max_interval_seconds.
    # Algorithm 2, line 8: a new container resets itval to its initial value.
    backoff = min(2 * itval, spec.max_interval_seconds)
    next_interval = np.where(all_cl & ~appeared, backoff, spec.interval_seconds)
    return _Nodes(
        selected=np.bincount(node_index, minlength=count),
        categorised=n_cat,
        in_cl=in_cl,
        all_cl=all_cl,
        has_unmeasured=np.bincount(node_index[assessed.unmeasured], minlength=count) > 0,
        sum_g=np.bincount(node_index[measured], weights=assessed.efficiency[measured],
                          minlength=count).astype(np.float64),
        appeared=appeared,
        next_interval=next_interval.astype(np.float64),
    )


def _limits(
    node_index: npt.NDArray[np.int64], assessed: _Assessed, nodes: _Nodes, *,
    allocation: FloatArray, beta: float,
) -> tuple[FloatArray, FloatArray]:
    """Algorithm 1, lines 14-26: each container's next limit, and its CL share G_c / Σ G."""
    cats = assessed.categories
    g = assessed.efficiency
    sum_g = nodes.sum_g[node_index]
    # Line 22's lower bound 1 / (beta * |c|): |c| counts every selected container on the node,
    # skipped ones too (they exist and compete for the CPU).
    floor = (1.0 / (beta * nodes.selected[node_index])).astype(np.float64)
    # Line 21: the share G_c / Σ G. A young NL container without a G yet is growing faster than
    # any measured one, so next to it a CL container's share is 0 (the thesis example: VAE gets
    # the floor 0.25 the moment MNIST starts). Σ G = 0 (nothing grows at all) also gives 0.
    shareable = np.isfinite(g) & ~nodes.has_unmeasured[node_index] & (sum_g > 0)
    share = np.zeros_like(g)
    np.divide(g, sum_g, out=share, where=shareable)
    limits = np.select(
        [nodes.all_cl[node_index], cats == NL, cats == WL, cats == CL],
        [
            np.ones_like(g),  # lines 14-16: all in CL -> 1 (free competition)
            np.ones_like(g),  # line 26: NL -> allocate more: 1 (thesis example)
            allocation,  # line 24: WL -> unchanged
            np.maximum(share, floor),  # lines 21-22: CL -> max(share, floor)
        ],
        default=np.nan,
    )
    # Clip into (0, 1]: every branch is already > 0 (floor > 0, allocations > 0).
    clipped: FloatArray = np.minimum(limits, 1.0).astype(np.float64)
    return clipped, share


def _flowcon(policy: PolicyDocument) -> FlowConPolicy:
    if not isinstance(policy, FlowConPolicy):
        raise TypeError(f"flowcon needs a FlowCon policy, got kind {policy.kind!r}")
    return policy


def plan(policy: PolicyDocument, snapshot: Snapshot) -> Decision:
    """FlowCon's decision for `snapshot`: CPU limits per container and the next interval."""
    policy = _flowcon(policy)
    spec = policy.spec
    now = snapshot.time
    itval_0 = spec.interval_seconds
    itval = snapshot.interval_seconds(policy.name, itval_0)
    selector = spec.selector
    chosen = sorted((c for c in snapshot.containers if selector.selects(c)),
                    key=lambda c: (c.node, c.id))
    n = len(chosen)
    node_names = sorted(node.name for node in snapshot.nodes)  # notes in name order
    position = {name: k for k, name in enumerate(node_names)}
    node_index = np.fromiter((position[c.node] for c in chosen), dtype=np.int64, count=n)
    started = np.fromiter((c.started_at for c in chosen), dtype=np.float64, count=n)
    allocation = np.fromiter((c.cpu_allocation for c in chosen), dtype=np.float64, count=n)

    assessed = _assess(chosen, spec, now, itval)
    nodes = _per_node(node_index, assessed, started=started, count=len(node_names), spec=spec,
                      now=now, itval=itval)
    limits, share = _limits(node_index, assessed, nodes, allocation=allocation, beta=spec.beta)

    actions, assessments = _emit(
        policy.name, spec, chosen, assessed, nodes, node_names=node_names, node_index=node_index,
        limits=limits, share=share, itval=itval, now=now,
    )
    taking_part = (nodes.categorised > 0) | nodes.appeared
    next_interval = (float(nodes.next_interval[taking_part].min()) if taking_part.any()
                     else itval_0)
    return Decision(
        policy=policy.name, kind="FlowCon", time=now, actions=tuple(actions),
        assessments=tuple(assessments), next_interval=next_interval, dry_run=spec.dry_run,
        notes=_notes(node_names, nodes, itval=itval, itval_0=itval_0,
                     steps=spec.window_intervals, next_interval=next_interval),
    )


def _node_texts(names: list[str], nodes: _Nodes, *, itval: float, beta: float
                ) -> dict[int, tuple[str, str]]:
    """Per node with selected containers: the all-CL reason (or the CL reason's prefix) and the
    CL reason's suffix naming the floor, so the per-container text is one short f-string."""
    texts: dict[int, tuple[str, str]] = {}
    for k in np.flatnonzero(nodes.selected).tolist():
        n, count = int(nodes.selected[k]), int(nodes.categorised[k])
        if nodes.all_cl[k]:
            who = (f"all {count} containers" if count == n else
                   f"all {count} categorised containers ({n - count} skipped)")
            reset = " (reset: a container appeared)" if nodes.appeared[k] else ""
            texts[k] = (
                f"{who} on {names[k]} in CL: free competition, interval {itval:g} s -> "
                f"{nodes.next_interval[k]:g} s{reset}", "")
            continue
        floor = 1.0 / (beta * n)
        texts[k] = (f"CL on {names[k]}: ", f" (floor 1/({beta:g}*{n})={floor:.3g})")
    return texts


def _emit(
    name: str, spec: FlowConSpec, chosen: Sequence[Container], assessed: _Assessed,
    nodes: _Nodes, *, node_names: list[str], node_index: npt.NDArray[np.int64],
    limits: FloatArray, share: FloatArray, itval: float, now: float,
) -> tuple[list[SetCpu], list[Assessment]]:
    """One assessment per container and a `SetCpu` where the limit moves and the guards allow.

    The one loop over containers: plain Python values only (lists, not numpy scalars).
    """
    texts = _node_texts(node_names, nodes, itval=itval, beta=spec.beta)
    all_cl = nodes.all_cl.tolist()
    unmeasured_on = nodes.has_unmeasured.tolist()
    sum_g = nodes.sum_g.tolist()
    cats, gs = assessed.categories.tolist(), assessed.efficiency.tolist()
    limit_list, share_list, where = limits.tolist(), share.tolist(), node_index.tolist()
    alpha = spec.alpha
    actions: list[SetCpu] = []
    assessments: list[Assessment] = []
    for i, c in enumerate(chosen):
        cat = cats[i]
        if cat == UNCATEGORISED:
            assessments.append(Assessment(
                container=c.id, node=c.node, category=None, gain=None,
                cpu_fraction_now=c.cpu_allocation, cpu_fraction_next=None,
                note=assessed.notes[i],
            ))
            continue
        g, limit, k = gs[i], limit_list[i], where[i]
        measured = not math.isnan(g)
        head, tail = texts[k]
        if all_cl[k]:
            reason = head
        elif cat == NL:
            reason = (f"NL: growing (G={g:.3g} >= alpha={alpha:g}) -> {limit:.3g}" if measured
                      else f"NL: new job without a G yet (started {now - c.started_at:.0f} s "
                      f"ago) -> {limit:.3g}")
        elif cat == WL:
            reason = f"WL: watching (G={g:.3g} < alpha={alpha:g}), limit unchanged"
        elif unmeasured_on[k]:
            reason = (f"{head}G={g:.3g}, share 0 next to a new job without a G yet -> "
                      f"{limit:.3g}{tail}")
        else:
            reason = (f"{head}G={g:.3g} of ΣG={sum_g[k]:.3g} = {share_list[i]:.3g} -> "
                      f"{limit:.3g}{tail}")
        note = reason
        if abs(limit - c.cpu_allocation) > CHANGE_TOLERANCE:
            blocked = action_blocked(c, spec, now, disrupts=False)
            if blocked is None:
                actions.append(SetCpu(policy=name, container=c.id, node=c.node,
                                      fraction=limit, mode=spec.mode, reason=reason))
            else:
                note = f"no action ({blocked}): {reason}"
        assessments.append(Assessment(
            container=c.id, node=c.node, category=CATEGORY_NAMES[cat],
            gain=g if measured else None, cpu_fraction_now=c.cpu_allocation,
            cpu_fraction_next=limit, note=note,
        ))
    return actions, assessments


def _notes(names: list[str], nodes: _Nodes, *, itval: float, itval_0: float, steps: int,
           next_interval: float) -> tuple[str, ...]:
    lines = [f"interval {itval:g} s (base {itval_0:g} s), {steps} intervals replayed; "
             f"next interval {next_interval:g} s"]
    for k in np.flatnonzero(nodes.selected).tolist():
        n, n_cat = int(nodes.selected[k]), int(nodes.categorised[k])
        line = f"{names[k]}: {n_cat} of {n} containers categorised, {int(nodes.in_cl[k])} in CL"
        if n_cat:
            line += f", ΣG={float(nodes.sum_g[k]):.3g}"
        if nodes.all_cl[k]:
            line += "; all in CL: free competition (Algorithm 1, lines 14-17)"
        if nodes.appeared[k]:
            line += (f"; a container appeared: interval reset to {itval_0:g} s "
                     "(Algorithm 2, line 8)")
        lines.append(line)
    return tuple(lines)


def _intervals(policy: PolicyDocument) -> Intervals:
    spec = _flowcon(policy).spec
    return Intervals(base_seconds=spec.interval_seconds,
                     longest_seconds=spec.max_interval_seconds)


def _summary(policy: PolicyDocument) -> str:
    spec = _flowcon(policy).spec
    return (f"alpha {100 * spec.alpha:g}%, interval {spec.interval_seconds:g} s, "
            f"beta {spec.beta:g}, {spec.mode}")


def _cpu_mode(policy: PolicyDocument) -> CpuMode:
    return _flowcon(policy).spec.mode


KIND = Kind(
    name="FlowCon", document=FlowConPolicy, plan=plan,
    scope="node",  # Algorithm 1 runs on every worker for the containers on it
    intervals=_intervals,  # itval_0, doubled while all is CL up to max_interval_seconds
    wakes_on=frozenset({"started", "stopped"}),  # Algorithm 2's listener
    inputs=frozenset({"evaluation", "cpu"}),  # G needs the cores each container used
    acts_on=frozenset({"cpu"}),
    convergence_alpha=lambda p: _flowcon(p).spec.alpha,
    cpu_mode=_cpu_mode, summary=_summary, gain_label="G (growth eff.)",
    floor=lambda p, n: 1.0 / (_flowcon(p).spec.beta * max(n, 1)),  # CL's floor
)
"""FlowCon's registration entry (`policyd.engine.registry`)."""
