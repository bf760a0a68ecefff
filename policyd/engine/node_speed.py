"""How fast each node's cores train, relative to an average core: what placement compares.

A node's speed is what the operator states (`Node.speed`, the `policyd.io/speed` label). A node
whose speed is not stated is *judged* from the jobs that ran on it, when it can be:

* A step's cost differs from job to job, so a node is only compared through jobs of the same
  *workload*: the jobs that declare the same `policyd.io/workload` (label or annotation; the
  same code and batch, e.g. a sweep's trials). Each forecast job gives the seconds one of its
  steps takes on one core of its node (its speed model's serial + parallel parts, measured on
  that node), and on a node of speed s a step of a workload that costs T on an average core
  takes T / s. So  log t(job) = log T(workload) - log s(node)  plus noise, a least-squares
  fit by alternating means (each workload's cost from its jobs at the current speeds, then
  each unstated node's speed from its jobs at those costs, until nothing moves), first
  leaving out a job more than `OUTLIER` spreads off the median of its workload's jobs on its
  node, so that one odd job does not move a node. Stated speeds stay as stated and anchor the
  scale; nodes linked only among themselves (no stated node shares a workload with them) are
  scaled so that their geometric mean is the average. (Alternating *medians* were tried
  first: a node's own jobs then outvote the stated ones on their workload's cost, and the fit
  stays where it started.) A job whose steps reach back before its container started (moved,
  its window still holding steps made on its former node) is left out.
* A judged speed is used only when it stands out of the noise: more than `SIGNIFICANCE`
  standard errors from the average, the error being the spread of the shared jobs' residuals
  (corrected for the parameters fitted, at least `MIN_SPREAD`) over the square root of the
  node's job count. A node within the noise is taken as average, and says by how much it was
  judged.
* A judged speed more than `MOST_RATIO` times the average either way is not believed (an odd
  measurement, not a machine): the node is taken as average and says so.
* A node no job can judge (none ran there, none declares a workload, or none shares its
  workload with a job on another node) is treated as average: the mean of the stated speeds,
  or 1.0 when none is stated.

Every node not stated carries a note (`notes`) that reasons quote, so that a placement resting
on a judged or assumed speed is never silent.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from policyd.engine.declarations import declared_value
from policyd.engine.forecast_output import Forecast
from policyd.model import Container, Snapshot
from policyd.model import labels as keys
from policyd.model.snapshot import FloatArray

AVERAGE_SPEED = 1.0
"""The speed of an average core, when no node's speed is stated."""
SIGNIFICANCE = 2.0
"""Standard errors a judged speed must stand from the average to be used (about 95 %)."""
MIN_SPREAD = 0.2
"""The least spread (in log seconds a step: about 20 %) a job's one-core step time is taken to
have around its workload's, and the spread taken when the jobs are too few to measure it. A
job seen on one allocation is converted to one core with the prior parallel fraction, off by
up to ~18 % (`speed.py`), which the residuals of a fit with about as many parameters as jobs
cannot show. Calibrated in the simulator (benchmarks/README.md, "node_speed.py"): at 0.2 the
truth lay within one stated error in 65 % and within two in 96 % of the judgements (seeds
1-10 of flowcon2-8w-60-hetero); at 0.05, in 43 % and 65 %."""
OUTLIER = 3.0
"""A job whose step time is off the median of its workload's jobs on its node by more than this
many spreads is left out of the fit."""
MOST_RATIO = 10.0
"""A judged speed more than this many times the average, or less than its inverse, is not
believed (no generation of machines differs so; a job's odd measurement does): the node is
taken as average, and says so."""
UNJUDGED = "decided from node reports, which carry no job's step times"
"""Why a node's speed is not judged under the split of a kind across node agents and the
manager (`unjudged`): FlowCon2's and Predictive's."""
MAX_ROUNDS = 500
"""Rounds of alternating means at most; the fit stops earlier once no speed moves by 1e-9."""


@dataclass(frozen=True, kw_only=True)
class NodeSpeeds:
    """Per node its relative speed, and for those not stated, how it was found (or why not);
    `judged` every unstated node's judged speed, `by_node` holding it unless the node is in
    `not_used` (within the noise, or not believed: then the average), and its standard error
    (of the log speed) in `log_errors`."""

    by_node: Mapping[str, float]
    notes: Mapping[str, str]
    judged: Mapping[str, float] = field(default_factory=dict)
    not_used: frozenset[str] = frozenset()
    log_errors: Mapping[str, float] = field(default_factory=dict)  # per judged node, in log

    def of(self, node: str) -> float:
        return self.by_node[node]

    def shown(self, node: str) -> str:
        """Its speed as a reason shows it: `1.5` when stated, `1.42 judged` or `1 average`
        (the note says how or why)."""
        speed = f"{self.by_node[node]:g}"
        if node not in self.notes:
            return speed
        used = node in self.judged and node not in self.not_used
        return f"{speed} {'judged' if used else 'average'}"

    def effective_cores(self, node: str, cores: float) -> float:
        """`cores` of `node` as average cores: what they train at."""
        return cores * self.by_node[node]


def workload_of(container: Container) -> str | None:
    """The workload a job declares (`policyd.io/workload`; an annotation wins), or None."""
    return declared_value(container.labels, container.annotations, keys.WORKLOAD)


def node_speeds(snapshot: Snapshot,
                forecasts: Mapping[str, Forecast | None] | None = None) -> NodeSpeeds:
    """Every node's speed: stated, judged from `forecasts` (by container id) through shared
    workloads, or the average of the stated ones (1.0 if none), noted (module docstring)."""
    stated = {n.name: n.speed for n in snapshot.nodes if n.speed is not None}
    average = sum(stated.values()) / len(stated) if stated else AVERAGE_SPEED
    judged = _judge(snapshot, forecasts or {}, stated, average)
    by_node: dict[str, float] = {}
    notes: dict[str, str] = {}
    for node in snapshot.nodes:
        name = node.name
        if name in stated:
            by_node[name] = stated[name]
            continue
        found = judged.get(name)
        if found is None:
            by_node[name] = average
            notes[name] = (f"speed of {name} not stated and not judged (no job there shares "
                           f"a workload ({keys.WORKLOAD}) with a job on another node): "
                           f"treated as average ({average:g})")
        elif not found.why_not:
            by_node[name] = found.speed
            notes[name] = f"speed of {name} not stated: {found.text}"
        else:
            by_node[name] = average
            notes[name] = (f"speed of {name} not stated: {found.text}, {found.why_not}: "
                           f"treated as average ({average:g})")
    return NodeSpeeds(by_node=by_node, notes=notes,
                      judged={n: j.speed for n, j in judged.items()},
                      log_errors={n: j.log_error for n, j in judged.items()},
                      not_used=frozenset(n for n, j in judged.items() if j.why_not))


def unjudged(stated: Mapping[str, float | None], why: str) -> NodeSpeeds:
    """Every node's speed without judging any: its stated speed (`stated`, by node; None when
    not stated), else the average of the stated ones (1.0 if none), noted with `why` it was not
    judged (a decision from node reports: no job's step times reach the manager)."""
    known = {name: speed for name, speed in stated.items() if speed is not None}
    average = sum(known.values()) / len(known) if known else AVERAGE_SPEED
    return NodeSpeeds(
        by_node={name: known.get(name, average) for name in stated},
        notes={name: f"speed of {name} not stated and not judged ({why}): treated as average "
                     f"({average:g})" for name in stated if name not in known})


@dataclass(frozen=True)
class _Judged:
    speed: float
    why_not: str  # why it is not used ("" when it is)
    text: str
    log_error: float


def _observations(snapshot: Snapshot, forecasts: Mapping[str, Forecast | None],
                  nodes: Mapping[str, int]) -> tuple[list[int], list[str], list[float]]:
    """(node index, workload, log seconds a step on one core) of every forecast job that
    declares a workload, for the workloads seen on two nodes or more."""
    rows: list[tuple[int, str, float]] = []
    for c in snapshot.containers:
        f = forecasts.get(c.id)
        workload = workload_of(c) if f is not None else None
        if f is None or workload is None or c.node not in nodes or _came_along(c):
            continue
        one_core = f.serial_seconds + f.parallel_seconds
        if one_core > 0 and math.isfinite(one_core):
            rows.append((nodes[c.node], workload, math.log(one_core)))
    spread: dict[str, set[int]] = {}
    for node, workload, _ in rows:
        spread.setdefault(workload, set()).add(node)
    kept = [r for r in rows if len(spread[r[1]]) > 1]
    return [r[0] for r in kept], [r[1] for r in kept], [r[2] for r in kept]


def _came_along(container: Container) -> bool:
    """Whether its steps reach back before its container started: a moved job whose window
    still holds steps made on its former node, which its speed model mixes in."""
    times = container.steps.times_seconds
    return len(times) > 0 and float(times[0]) < container.started_at - 1.0


@dataclass(frozen=True, kw_only=True, eq=False)
class _Problem:
    """The fit's data: per job its node, workload and log seconds a step on one core; per node
    whether its speed is stated and the component of nodes it is linked to."""

    node: np.ndarray
    work: np.ndarray
    log_t: FloatArray
    workloads: int
    fixed: np.ndarray
    component: np.ndarray
    anchored: frozenset[int]  # the components holding a stated node
    level: float  # log of the average speed


def _judge(snapshot: Snapshot, forecasts: Mapping[str, Forecast | None],
           stated: Mapping[str, float], average: float) -> dict[str, _Judged]:
    """The unstated nodes the shared workloads link to another node, with their speeds."""
    names = [n.name for n in snapshot.nodes]
    index = {name: i for i, name in enumerate(names)}
    node_of, workload_names, log_t = _observations(snapshot, forecasts, index)
    if not node_of or all(names[i] in stated for i in node_of):
        return {}
    workloads = sorted(set(workload_names))
    w_index = {w: i for i, w in enumerate(workloads)}
    obs_node = np.asarray(node_of, dtype=np.int64)
    obs_work = np.asarray([w_index[w] for w in workload_names], dtype=np.int64)
    component = _components(obs_node, obs_work, len(names))
    fixed = np.asarray([name in stated for name in names])
    p = _Problem(node=obs_node, work=obs_work, log_t=np.asarray(log_t),
                 workloads=len(workloads), fixed=fixed, component=component,
                 anchored=frozenset(int(component[i]) for i in set(node_of) if fixed[i]),
                 level=math.log(average))
    x = np.full(len(names), p.level)
    for name, speed in stated.items():
        x[index[name]] = math.log(speed)
    cell = obs_node * len(workloads) + obs_work  # one workload's jobs on one node
    off = p.log_t - _group_median(cell, p.log_t, len(names) * len(workloads))[cell]
    keep = np.abs(off) <= OUTLIER * max(_spread(off), MIN_SPREAD)
    x = _fit(p, x, keep)
    residual = p.log_t - (_costs(p, x, keep)[obs_work] - x[obs_node])
    free = ~fixed[obs_node] & keep
    counts = np.bincount(obs_node[free], minlength=len(names))
    scale = _dof_scale(p, keep, counts)
    spread = max(_spread(residual[keep]) * scale, MIN_SPREAD) if math.isfinite(scale) \
        else MIN_SPREAD
    out: dict[str, _Judged] = {}
    for i in np.flatnonzero(counts):
        jobs = int(counts[i])
        shared = sorted({workloads[w] for w in obs_work[free & (obs_node == i)]})
        error = spread / math.sqrt(jobs)
        basis = ("against stated speeds" if int(component[i]) in p.anchored
                 else "against the other unstated nodes it shares workloads with")
        text = (f"judged {math.exp(x[i]):.3g} (+-{100 * (math.exp(error) - 1):.0f} %) from "
                f"the step times of {jobs} job(s) of {len(shared)} workload(s) "
                f"({keys.WORKLOAD}: {', '.join(shared[:3])}{', ...' if len(shared) > 3 else ''})"
                f" {basis}")
        apart = abs(x[i] - p.level)  # from the average, in log
        why_not = ("within the noise" if apart <= SIGNIFICANCE * error else
                   f"more than {MOST_RATIO:g}x off the average, not believed"
                   if apart > math.log(MOST_RATIO) else "")
        out[names[i]] = _Judged(speed=float(math.exp(x[i])), why_not=why_not, text=text,
                                log_error=error)
    return out


def _fit(p: _Problem, start: FloatArray, keep: np.ndarray) -> FloatArray:
    """The unstated nodes' log speeds by alternating means over the `keep` jobs, from
    `start` (the stated nodes' stay)."""
    x = start.copy()
    free = ~p.fixed[p.node] & keep
    for _ in range(MAX_ROUNDS):
        cost = _costs(p, x, keep)
        fitted = _group_mean(p.node[free], cost[p.work[free]] - p.log_t[free], len(x))
        judged = ~np.isnan(fitted) & ~p.fixed
        before = x.copy()
        x[judged] = fitted[judged]
        _recentre(x, judged, p)
        if not np.any(np.abs(x - before) > 1e-9):
            break
    return x


def _costs(p: _Problem, x: FloatArray, keep: np.ndarray) -> FloatArray:
    """Per workload its log seconds a step on an average core, at the log speeds `x`."""
    return _group_mean(p.work[keep], (p.log_t + x[p.node])[keep], p.workloads)


def _recentre(x: FloatArray, judged: np.ndarray, p: _Problem) -> None:
    """Shift each unanchored component's judged nodes (in place) so that their mean log speed
    is the average's: without a stated node their scale is free."""
    for c in set(p.component[judged].tolist()) - p.anchored:
        members = judged & (p.component == c)
        x[members] += p.level - float(x[members].mean())


def _dof_scale(p: _Problem, keep: np.ndarray, counts: np.ndarray) -> float:
    """How much the fit's residuals understate the jobs' spread: sqrt(jobs / (jobs -
    parameters)), the parameters being a cost per workload and a speed per judged node, less
    one per unanchored component (its level is set, not fitted); inf when the jobs are no more
    than the parameters (the residuals then say nothing of the spread, and `MIN_SPREAD` is
    taken)."""
    jobs = int(keep.sum())
    judged = np.flatnonzero(counts)
    free_components = len({int(p.component[i]) for i in judged} - p.anchored)
    parameters = len(set(p.work[keep].tolist())) + len(judged) - free_components
    return math.sqrt(jobs / (jobs - parameters)) if jobs > parameters else math.inf


def _spread(residuals: FloatArray) -> float:
    """A robust standard deviation: 1.4826 x the median absolute residual."""
    return 1.4826 * float(np.median(np.abs(residuals))) if len(residuals) else 0.0


def _group_median(groups: np.ndarray, values: FloatArray, n: int) -> FloatArray:
    """Per group 0..n-1 the median of its `values` (NaN for a group without any)."""
    out = np.full(n, np.nan)
    order = np.lexsort((values, groups))
    g, v = groups[order], values[order]
    counts = np.bincount(g, minlength=n)
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    seen = counts > 0
    lo = starts[seen] + (counts[seen] - 1) // 2
    hi = starts[seen] + counts[seen] // 2
    out[seen] = (v[lo] + v[hi]) / 2
    return out


def _group_mean(groups: np.ndarray, values: FloatArray, n: int) -> FloatArray:
    """Per group 0..n-1 the mean of its `values` (NaN for a group without any)."""
    counts = np.bincount(groups, minlength=n)
    sums = np.bincount(groups, weights=values, minlength=n)
    out = np.full(n, np.nan)
    np.divide(sums, counts, out=out, where=counts > 0)
    return out


def _components(obs_node: np.ndarray, obs_work: np.ndarray, n_nodes: int) -> np.ndarray:
    """Per node the smallest node index it is linked to through shared workloads."""
    parent = list(range(n_nodes))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    first: dict[int, int] = {}
    for node, work in zip(obs_node.tolist(), obs_work.tolist(), strict=True):
        other = first.setdefault(work, node)
        a, b = root(node), root(other)
        if a != b:
            parent[max(a, b)] = min(a, b)
    return np.asarray([root(i) for i in range(n_nodes)], dtype=np.int64)
