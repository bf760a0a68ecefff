"""FlowCon2's placement: its model of every worker's next interval, the moves of converged jobs
and the admission of held ones (`policyd.engine.flowcon2`'s module docstring, steps 2-4).

One set of rules whether the manager decides from one snapshot (`flowcon2.plan`, the model built
from the containers) or from its node agents' reports (`flowcon2_reports`, the model built from
each worker's reported jobs): both hand them the model (`ModelJob` per job and worker), the jobs
the guards let move, the workers' cores and speeds, and how a moved job is limited on its target
(`Arrival`). Pure: no I/O, no clock.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from policyd.engine.admission import FIT_TOLERANCE_CORES, Candidate, place
from policyd.engine.drain import DrainingJob, finish_seconds
from policyd.engine.forecast_output import Forecast
from policyd.engine.guards import MigrationBudget, action_blocked
from policyd.engine.node_speed import NodeSpeeds
from policyd.engine.predictive_node import FLOOR, Job, node_plans
from policyd.engine.roomiest import Roomiest
from policyd.engine.waterfill import fill
from policyd.model import Action, Admit, Container, Migrate, PendingJob, QueuedJob
from policyd.model.forecast import seconds_per_step

if TYPE_CHECKING:  # the kind's module imports this one
    from policyd.engine.flowcon2 import FlowCon2Policy, FlowCon2Spec
    from policyd.engine.predictive import PredictiveSpec


@dataclass(frozen=True, kw_only=True)
class ModelJob:
    """A job in the model: its weight (next limit), the most cores it can use, whether FlowCon
    counts it converged, its forecast; `hard`: its limit is a CPU quota (`mode: quota`)."""

    id: str
    weight: float
    cap: float
    converged: bool
    forecast: Forecast | None
    speed: float  # the speed of the worker its forecast was measured on
    assumed: Forecast | None = None  # without a forecast: the typical job's (`typical`)
    hard: bool = False

    def draining(self, capacity: float) -> DrainingJob:
        """The job on a worker of `capacity` cores: a weight under shares, a hard cap (and
        the same weight as every job) under quotas."""
        return DrainingJob(weight=1.0 if self.hard else self.weight, cap_cores=self.cap,
                           converged=self.converged, forecast=self.forecast or self.assumed,
                           measured_speed=self.speed if self.forecast is not None else 1.0,
                           limit_cores=self.weight * capacity if self.hard else math.inf)


def equal_share_cores(jobs: Sequence[ModelJob], capacity: float) -> list[float]:
    """The cores each job gets on a worker of `capacity` cores at equal shares, whatever its
    limit: split evenly, none above its cap (water-filling)."""
    cores = [0.0] * len(jobs)
    fill(cores, [j.cap for j in jobs], range(len(jobs)), capacity, [1.0] * len(jobs))
    return cores


def typical(model: Mapping[str, Sequence[ModelJob]]) -> Forecast | None:
    """The forecast a job without one is assumed to have: the median forecast job's (by its
    whole run's seconds on one core), from its first step, on an average core (speed 1);
    None when no job has a forecast."""
    runs = []
    for jobs in model.values():
        for j in jobs:
            f = j.forecast
            if f is None:
                continue
            # the whole run on one average core: `fresh(f, speed).remaining_seconds_at(1.0)`
            one_core = (f.steps_done + f.remaining_steps) * seconds_per_step(
                1.0, cap_cores=f.cap_cores, serial_seconds=f.serial_seconds * j.speed,
                parallel_seconds=f.parallel_seconds * j.speed)
            runs.append((one_core, j.id, f, j.speed))
    if not runs:
        return None
    _, _, f, speed = sorted(runs, key=lambda r: (r[0], r[1]))[len(runs) // 2]
    return _fresh(f, speed)


def _fresh(f: Forecast, speed: float) -> Forecast:
    """`f` (measured on a worker of `speed`) from the job's first step, on an average core."""
    return replace(f, steps_done=0.0, remaining_steps=f.steps_done + f.remaining_steps,
                   serial_seconds=f.serial_seconds * speed,
                   parallel_seconds=f.parallel_seconds * speed)


def total_seconds(jobs: Sequence[ModelJob], capacity: float, speed: float) -> float:
    """Predicted seconds until each forecast job ends, summed, as the worker drains
    (`policyd.engine.drain`)."""
    return drained(jobs, capacity, speed)[1]


def drained(jobs: Sequence[ModelJob], capacity: float, speed: float) -> tuple[list[float], float]:
    """When each of `jobs` ends as the worker drains (inf: never), and the finite ones summed
    (`total_seconds`)."""
    ends = finish_seconds([j.draining(capacity) for j in jobs], capacity, speed)
    return ends, sum(s for s in ends if math.isfinite(s))


@dataclass(frozen=True, kw_only=True)
class Move:
    job: ModelJob
    source: str
    target: str
    gain: float
    freed: float  # seconds the jobs left on the source save
    own: float  # seconds the job itself saves (negative: it runs slower there)
    harm: float  # seconds the jobs on the target lose
    why: str = ""  # what makes it movable, and where (the reason's first clause; chosen moves)


def _rest_seconds(job_index: int, jobs: Sequence[ModelJob], capacity: float,
                  speed: float) -> float:
    """The summed finishes of the other jobs of a worker (`jobs`) as it drains without
    `jobs[job_index]` (`total_seconds`)."""
    gone = jobs[job_index].id
    return total_seconds([j for j in jobs if j.id != gone], capacity, speed)


def source_side(job_index: int, jobs: Sequence[ModelJob], capacity: float, speed: float, *,
                ends: Sequence[float], total: float) -> tuple[float, float]:
    """A move's side on its source, whatever its target: when `jobs[job_index]` ends there as
    the worker (`jobs`, drained: `ends` and `total`, `drained`) drains, and the seconds the
    jobs left there save without it."""
    own_before = ends[job_index]
    return own_before, total - own_before - _rest_seconds(job_index, jobs, capacity, speed)


class _Drains(dict[str, float]):
    """Each worker's `total_seconds` (and its jobs' finishes, `ends`), drained when first
    asked for: a move is priced against few targets."""

    def __init__(self, model: Mapping[str, Sequence[ModelJob]], capacity: Mapping[str, float],
                 speeds: NodeSpeeds) -> None:
        super().__init__()
        self._model, self._capacity, self._speeds = model, capacity, speeds
        self._ends: dict[str, list[float]] = {}

    def __missing__(self, node: str) -> float:
        self._ends[node], self[node] = drained(self._model[node], self._capacity[node],
                                               self._speeds.of(node))
        return self[node]

    def ends(self, node: str) -> list[float]:
        """When each job of `node` ends as it drains, in the model's order."""
        if node not in self._ends:
            self.__missing__(node)
        return self._ends[node]

    def forget(self, node: str) -> None:
        """`node`'s jobs changed: drained again when next asked for."""
        self.pop(node, None)
        self._ends.pop(node, None)


def move_gain(job: ModelJob, source: str, target: str, *,
              model: Mapping[str, Sequence[ModelJob]], capacity: Mapping[str, float],
              speeds: NodeSpeeds, arrive: Arrival, totals: Mapping[str, float],
              leaving: tuple[float, float]) -> Move | None:
    """The predicted gain of moving `job` from `source` to `target` (module docstring, 4),
    where it runs at the limit `arrive` gives it, the target's jobs losing no less than nothing;
    None when the target's jobs cannot be judged or the job has no forecast. `totals` holds
    each worker's `total_seconds` as it is; `leaving`, the move's side on `source`
    (`source_side`), the same for every target."""
    there = model[target]
    if job.forecast is None or any(j.forecast is None for j in there):
        return None
    own_before, freed = leaving
    t_speed = speeds.of(target)
    weight, converged = arrive(job, target, model)
    arriving = replace(job, weight=weight, converged=converged,
                       cap=min(max(job.forecast.cap_cores, 1.0), capacity[target]))
    joined = [*there, arriving]
    # one drain of the target gives both the job's own finish there and the target's total
    ends = finish_seconds([j.draining(capacity[target]) for j in joined], capacity[target],
                          t_speed)
    own_after = ends[-1]
    if not (math.isfinite(own_before) and math.isfinite(own_after)):
        return None  # it would never end on one of them: nothing to compare
    own = own_before - own_after
    # No credit for the target's jobs ending sooner: in the drain model only a change of their
    # limits does that (an arrival counted unconverged where only converged jobs run ends their
    # free competition, and one limited above the others gets more cores), which is the
    # limits' doing, not work the move saves; and a rounding below zero breaks no tie.
    harm = max(sum(s for s in ends if math.isfinite(s)) - own_after - totals[target], 0.0)
    return Move(job=arriving, source=source, target=target, gain=freed + own - harm,
                freed=freed, own=own, harm=harm)


def move_bound(job_index: int, jobs: Sequence[ModelJob], capacity: float, speed: float, *,
               ends: Sequence[float], total: float) -> float:
    """The most a move of `jobs[job_index]` (its worker's jobs `jobs`, drained: `ends` and
    `total`, `drained`) could gain (`move_gain`): the seconds the jobs left on its worker save,
    plus its own finish there, as if it ended at once on its target harming no one there
    (`move_gain` counts no less). -inf when it would never end where it is: nothing to
    compare, no move."""
    if not math.isfinite(ends[job_index]):
        return -math.inf
    return total - _rest_seconds(job_index, jobs, capacity, speed)


Arrival = Callable[[ModelJob, str, Mapping[str, Sequence[ModelJob]]], tuple[float, bool]]
"""A moved job's limit on its target beside the jobs the model has there, and whether the model
counts it converged there (`ModelJob.converged`: it gets a full limit once only such jobs are
left)."""


def _weight_there(there: Sequence[ModelJob], beta: float) -> float:
    """The limit FlowCon gives a converged job on a worker: 1 where every job is converged
    (free competition), else the floor 1 / (beta n)."""
    if all(j.converged for j in there):
        return 1.0
    return 1.0 / (beta * (len(there) + 1))


def growth_arrival(beta: float) -> Arrival:
    """`order: growth`: the moved job stays converged, at FlowCon's limit there."""
    def arrive(job: ModelJob, target: str, model: Mapping[str, Sequence[ModelJob]]
               ) -> tuple[float, bool]:
        return _weight_there(model[target], beta), True
    return arrive


def remaining_arrival(jobs: Mapping[str, Job], capacity: Mapping[str, float],
                      spec: PredictiveSpec, now: float) -> Arrival:
    """`order: remaining`: the limit Predictive's plan of the target gives the moved job
    beside the jobs there (`predictive_node.node_plans`; its key: its forecast's remaining
    time at the most cores it can use there), converged when that is the floor (served last).
    The jobs already there keep their limits in the model, as under `growth`."""
    def arrive(job: ModelJob, target: str, model: Mapping[str, Sequence[ModelJob]]
               ) -> tuple[float, bool]:
        mine = jobs[job.id]
        assert mine.forecast is not None  # only forecast jobs are priced (`move_gain`)
        best = min(max(mine.forecast.cap_cores, 1.0), capacity[target])
        moved = replace(mine, container=replace(mine.container, node=target), best_cores=best,
                        key=mine.forecast.remaining_seconds_at(best))
        plans = node_plans([*(jobs[j.id] for j in model[target]), moved], capacity[target],
                           spec, now=now)
        there = next(p for p in plans if p.job.container.id == job.id)
        return there.fraction, there.category == FLOOR
    return arrive


def may_move(policy: FlowCon2Policy, model: Mapping[str, Sequence[ModelJob]],
             containers: Mapping[str, Container], *, now: float) -> frozenset[str]:
    """The jobs of `model` the guards let move this cycle: counted converged (`ModelJob.
    converged`: FlowCon's CL, or Predictive's FLOOR under `order: remaining`), forecast, not
    moved before (`markers.migrated`) and not held back (opt-out, minimum age, cooldown,
    failed-move back-off)."""
    spec = policy.spec
    return frozenset(
        j.id for jobs in model.values() for j in jobs
        if j.converged and j.forecast is not None and not containers[j.id].markers.migrated
        and action_blocked(containers[j.id], spec, now, disrupts=True) is None)


BOUND_SLACK = 1e-9
"""`_gain_bound`'s margin, relative to the seconds it adds up: far above a float sum's rounding."""


def _bound_head(leaving: tuple[float, float]) -> float:
    """The part of a move's bound (`_gain_bound`) its target does not change: the job's own
    side (`source_side`: its finish where it is, and what the jobs left there save) with the
    margin on those seconds."""
    own_before, freed = leaving
    return freed + own_before + BOUND_SLACK * (1.0 + abs(freed) + own_before)


def _work_seconds(job: ModelJob, capacity: float) -> float:
    """The least seconds `job`'s remaining steps take on a worker of `capacity` cores and speed
    1: on all the cores it can use there (as `move_gain` caps it), its forecast measured at
    `job.speed`; on a worker of speed s, this over s."""
    f = job.forecast
    assert f is not None  # only forecast jobs are candidates (`move_gain` says None else)
    return f.remaining_steps * f.seconds_per_step_at(min(max(f.cap_cores, 1.0), capacity)) \
        * job.speed


def _gain_bound(head: float, work_seconds: float, speed: float) -> float:
    """The most moving a job could gain (`move_gain`) on a worker of `speed`, without draining
    it: its own side (`_bound_head`) less the least time its remaining steps take there (all
    the cores it can use there from now on, `_work_seconds`); the target's jobs lose nothing at
    best (`move_gain` counts no less). A little above, so that rounding never puts a move's
    gain over it: head - fastest x (1 - slack) is the margin of slack on every second added.
    Non-decreasing in `speed` in floating point, not only in value (one rounded division, one
    product by a positive constant, one subtraction, each monotone), so that the workers walked
    fastest first give bounds that never rise (`best_moves`). +inf (price every target) for a
    work that is not a number >= 0, which no forecast gives."""
    if not work_seconds >= 0.0:
        return math.inf
    return head - work_seconds / speed * (1.0 - BOUND_SLACK)


@dataclass(frozen=True, kw_only=True)
class _Candidate:
    """A job a move may take this round: where it is, its place in the order moves tie in
    (`best_moves`), and its move's side on its worker (`source_side`) and bound head."""

    job: ModelJob
    source: str
    source_index: int  # in sorted(model)
    job_index: int  # in model[source]
    leaving: tuple[float, float]
    head: float


@dataclass(frozen=True, kw_only=True)
class _Group:
    """The workers a move may enter this round that have `capacity` cores: (speed, index in
    sorted(model), name), fastest first, then by index (`_targets`)."""

    capacity: float
    workers: tuple[tuple[float, int, str], ...]


def _targets(model: Mapping[str, Sequence[ModelJob]], nodes: Sequence[str],
             capacity: Mapping[str, float], speeds: NodeSpeeds,
             budget: MigrationBudget) -> list[_Group]:
    """The workers a move may enter this round, by capacity: not full (`budget.node_full`),
    and holding only forecast jobs (`move_gain` says None on the others, whatever the job)."""
    by_capacity: dict[float, list[tuple[float, int, str]]] = {}
    for index, node in enumerate(nodes):
        if budget.node_full(node) or any(j.forecast is None for j in model[node]):
            continue
        by_capacity.setdefault(capacity[node], []).append((speeds.of(node), index, node))
    return [_Group(capacity=cores, workers=tuple(sorted(workers, key=lambda w: (-w[0], w[1]))))
            for cores, workers in by_capacity.items()]


_Key = tuple[int, int, int]
"""A move's place in the order of equal gains: its source's index in sorted(model), the job's
in model[source], its target's in sorted(model)."""


def gain_ms(seconds: float) -> float:
    """`seconds` of gain in whole milliseconds, rounded down: the resolution moves are compared
    at (`best_moves`). Non-decreasing in `seconds`, in floating point too (one product by a
    positive constant, then the floor); infinities and NaN as they are."""
    return float(math.floor(seconds * 1000.0)) if math.isfinite(seconds) else seconds


_Walk = tuple[_Group, int, float]
"""A job's walk over a group: the group, the position of the worker next, the job's work
seconds on the group's cores (`_work_seconds`)."""


_Entry = tuple[float, _Key, int, float, _Candidate, "_Walk | None", str, "Move | None"]
"""A heap entry: -bound in ms, key, serial, bound, the job, its walk (group, position, work
seconds) or None, the target, and the move when priced (its gain is the bound)."""


class _Search:
    """The candidate moves, popped from the highest bound on their gain down, in whole
    milliseconds (`gain_ms`; ties by `_Key`): per (job, group of workers of one capacity) a lazy
    walk over the group fastest first, whose bounds never rise (`_gain_bound`), merged in one
    heap, beside single moves (a walk's move popped and put back, or entered again) and priced
    ones, keyed by their gain. A walk passes over the job's own worker and the moves already
    priced, and a job's entries go dead when it is no longer a candidate (`live`): they are
    dropped as they come up, not searched for."""

    def __init__(self, priced: Mapping[tuple[str, str], Move | None],
                 live: Callable[[_Candidate], bool]) -> None:
        self._priced, self._live = priced, live
        self._heap: list[_Entry] = []
        self._heaped = False  # entries are listed until the first pop, then made a heap
        self._serial = 0  # entries never compare past it

    def walk(self, candidate: _Candidate, group: _Group, work_seconds: float) -> None:
        """Starts the walk of `candidate`'s moves into `group`, where its remaining steps take
        `work_seconds` at speed 1 (`_work_seconds`)."""
        self._push_from(candidate, (group, 0, work_seconds))

    def single(self, candidate: _Candidate, target: str, target_index: int,
               bound: float) -> None:
        """One move to price, at its `bound`."""
        self._push(bound, candidate, None, target, target_index)

    def known(self, candidate: _Candidate, target: str, target_index: int, move: Move) -> None:
        """A priced move, entered at its gain."""
        self._push(move.gain, candidate, None, target, target_index, move=move)

    def put_back(self, entry: _Entry) -> None:
        """A popped entry, as it was but for its walk (whose next move entered as it left)."""
        negated_ms, key, _, bound, candidate, _, target, move = entry
        self._add((negated_ms, key, self._serial, bound, candidate, None, target, move))

    def pop(self) -> _Entry | None:
        """The next entry by bound, None when none is left. A live walk's next move enters the
        heap as its move leaves it."""
        if not self._heaped:
            heapq.heapify(self._heap)
            self._heaped = True
        if not self._heap:
            return None
        entry = heapq.heappop(self._heap)
        walk, candidate = entry[5], entry[4]
        if walk is not None and self._live(candidate):
            group, position, work_seconds = walk
            self._push_from(candidate, (group, position + 1, work_seconds))
        return entry

    def _push_from(self, candidate: _Candidate, walk: _Walk) -> None:
        """The first move of `walk` from its position on that is not to the job's own worker
        and not priced before; none past the group's end."""
        group, position, work_seconds = walk
        workers = group.workers
        while position < len(workers):
            speed, index, node = workers[position]
            if node != candidate.source and (candidate.job.id, node) not in self._priced:
                self._push(_gain_bound(candidate.head, work_seconds, speed), candidate,
                           (group, position, work_seconds), node, index)
                return
            position += 1

    def _push(self, bound: float, candidate: _Candidate, walk: _Walk | None, target: str,
              target_index: int, *, move: Move | None = None) -> None:
        key = (candidate.source_index, candidate.job_index, target_index)
        self._add((-gain_ms(bound), key, self._serial, bound, candidate, walk, target, move))

    def _add(self, entry: _Entry) -> None:
        if self._heaped:
            heapq.heappush(self._heap, entry)
        else:
            self._heap.append(entry)
        self._serial += 1


def best_moves(policy: FlowCon2Policy, model: dict[str, list[ModelJob]], *,
               movable: Collection[str], capacity: Mapping[str, float], speeds: NodeSpeeds,
               arrive: Arrival, sides: Mapping[str, tuple[float, float]] | None = None
               ) -> list[Move]:
    """The `movable` jobs (`may_move`) moved while the best move's gain beats its cost
    (module docstring); `model` is updated in place with the moves. A move changes two
    workers: the gains priced on neither are kept for the next round, not priced again.
    `sides`: movable jobs' side of a move (`source_side`) known already (by job id: from their
    agents' reports, worked out on the same model of their worker), used until a move changes
    their worker; each worker is drained only when a side or a move needs it.

    Gains are compared in whole milliseconds (`gain_ms`): of moves whose gains fall in the same
    millisecond the first in the order of the workers, their jobs and the targets wins (`_Key`),
    so that rounding never picks one of several equal targets (a job gains as much on every
    roomy worker of a kind, to the last few digits that the drain's arithmetic rounds
    differently). Each round prices the candidate moves from the highest bound on their gain
    down (`_gain_bound`, in ms), passes over those that could at most tie the best found and
    come after it, and stops where the bound falls under the best gain found or the threshold:
    a move left unpriced could not have been chosen, as if every move had been priced. So the
    move chosen depends only on the bounds being upper bounds and popped never rising, not on
    the order the moves are priced in; and where many targets are alike, the first of them
    priced ends the walk over the others.

    No list of every (job, worker) pair is built: a bound depends on the target only through its
    speed and its capacity, and never rises as the speed falls, so per job and capacity the
    workers are walked fastest first, lazily, all walks merged in one heap (`_Search`). The
    heap lasts from round to round: a move changes only its two workers, so only their jobs
    enter again (new candidates, their old entries dead), and only the moves priced on them
    are priced again (entered at their bound); a worker whose budget is spent is passed over
    as it comes up. A round costs about the entries it pops, plus the two workers' jobs x
    capacities. Left out before any walk: jobs that would never end where they are and
    workers holding a job without a forecast (`move_gain` says None whatever the target, or
    the job), workers whose budget is spent."""
    spec = policy.spec
    threshold = spec.move_threshold_seconds
    threshold_ms = gain_ms(threshold)
    budget = MigrationBudget.of(spec)
    moved: list[Move] = []
    moved_ids: set[str] = set()
    nodes = sorted(model)
    node_index = {node: i for i, node in enumerate(nodes)}
    totals = _Drains(model, capacity, speeds)
    # by job: its side of a move (`source_side`), as reported or worked out when first needed
    leaving: dict[str, tuple[float, float]] = dict(sides or {})
    # by job and capacity (`_work_seconds`): a job's model is the same however its worker
    # changes (only the moved job's is new, and it is never a candidate again)
    work: dict[tuple[str, float], float] = {}
    priced: dict[tuple[str, str], Move | None] = {}  # by (job, target)
    priced_at: dict[str, set[str]] = {}  # by target: the jobs priced there
    candidates: dict[str, _Candidate] = {}  # by job: the candidate as it is now
    search = _Search(priced, lambda c: candidates.get(c.job.id) is c)
    groups = _targets(model, nodes, capacity, speeds, budget)
    group_of = {node: group for group in groups for _, _, node in group.workers}
    speed_of = {node: speed for group in groups for speed, _, node in group.workers}
    fresh = nodes  # the workers whose jobs enter as candidates
    while not budget.exhausted:
        for source in fresh:
            if budget.node_full(source):
                continue
            for job_index, job in enumerate(model[source]):
                if job.id not in movable or job.id in moved_ids or job.forecast is None:
                    continue
                if job.id not in leaving:
                    leaving[job.id] = source_side(job_index, model[source], capacity[source],
                                                  speeds.of(source), ends=totals.ends(source),
                                                  total=totals[source])
                if not math.isfinite(leaving[job.id][0]):
                    continue  # it would never end where it is: `move_gain` says None anywhere
                candidate = _Candidate(job=job, source=source, source_index=node_index[source],
                                       job_index=job_index, leaving=leaving[job.id],
                                       head=_bound_head(leaving[job.id]))
                candidates[job.id] = candidate
                for group in groups:
                    if (job.id, group.capacity) not in work:
                        work[(job.id, group.capacity)] = _work_seconds(job, group.capacity)
                    search.walk(candidate, group, work[(job.id, group.capacity)])
        # the move, the job as it is, its gain in ms, its key
        best: tuple[Move, ModelJob, float, _Key] | None = None
        kept: list[_Entry] = []  # popped entries that stay in the search
        while (entry := search.pop()) is not None:
            negated_ms, key, _, bound, candidate, _, target, known = entry
            bound_ms = -negated_ms
            if (candidates.get(candidate.job.id) is not candidate or budget.node_full(target)
                    or (known is not None and priced.get((candidate.job.id, target)) is not known)):
                continue  # dead: the job moved or its worker changed, the target is full, or
                # the move was priced again
            if bound_ms < threshold_ms or (best is not None and bound_ms < best[2]):
                kept.append(entry)
                break  # no move from here on could gain more than the threshold or the best
            if bound <= threshold:
                continue  # this one never could
            if best is not None and bound_ms == best[2] and key > best[3]:
                kept.append(entry)
                continue  # this one could not, this round
            if known is None:
                if (candidate.job.id, target) not in priced:
                    priced[(candidate.job.id, target)] = move_gain(
                        candidate.job, candidate.source, target, model=model,
                        capacity=capacity, speeds=speeds, arrive=arrive, totals=totals,
                        leaving=candidate.leaving)
                    priced_at.setdefault(target, set()).add(candidate.job.id)
                known = priced[(candidate.job.id, target)]
                if known is None or known.gain <= threshold:
                    continue  # priced again if a move changes its target
                search.known(candidate, target, node_index[target], known)
                continue  # it comes up again at its gain, which is at most its bound
            move_ms = gain_ms(known.gain)
            kept.append(entry)
            if best is None or move_ms > best[2] or (move_ms == best[2] and key < best[3]):
                best = (known, candidate.job, move_ms, key)
        if best is None:
            return moved
        chosen = replace(best[0], why=_movable_why(best[1], best[0], spec, speeds))
        moved.append(chosen)
        moved_ids.add(chosen.job.id)
        budget.spend(chosen.source, chosen.target)
        model[chosen.source] = [j for j in model[chosen.source] if j.id != chosen.job.id]
        model[chosen.target] = [*model[chosen.target], chosen.job]
        touched = (chosen.source, chosen.target)
        for node in touched:
            totals.forget(node)
        on_touched = {j.id for node in touched for j in model[node]} | {chosen.job.id}
        for job_id in on_touched:  # their entries go dead; they enter again as new candidates
            candidates.pop(job_id, None)
            leaving.pop(job_id, None)
        for job_id, target in [k for k in priced if k[0] in on_touched]:
            del priced[(job_id, target)]
            priced_at[target].discard(job_id)
        for node in touched:  # the moves priced there are priced again, entered at their bound
            for job_id in sorted(priced_at.pop(node, set())):
                del priced[(job_id, node)]
                c = candidates[job_id]
                search.single(c, node, node_index[node], _gain_bound(
                    c.head, work[(job_id, group_of[node].capacity)], speed_of[node]))
        for entry in kept:
            search.put_back(entry)
        fresh = sorted(touched)
    return moved


def _movable_why(job: ModelJob, m: Move, spec: FlowCon2Spec, speeds: NodeSpeeds) -> str:
    """What makes `job` movable, named by its forecast under `order: remaining`."""
    if spec.order == "growth":
        return f"converged (CL) on {m.source} (speed {speeds.shown(m.source)})"
    assert job.forecast is not None  # only forecast jobs are priced (`move_gain`)
    return (f"served last, at the floor (FLOOR), on {m.source} (speed "
            f"{speeds.shown(m.source)}): {job.forecast.remaining_seconds_at(job.cap):.0f} s "
            f"of predicted remaining time at its best ({job.cap:.2g} cores), "
            f"{job.forecast.remaining_steps:.0f} steps left ({job.forecast.basis}); limit "
            f"{m.job.weight:.3g} on {m.target}")


def move_reason(m: Move, spec: FlowCon2Spec, speeds: NodeSpeeds) -> str:
    return (f"{m.why}; predicted gain "
            f"{m.gain:.0f} s on {m.target} (speed {speeds.shown(m.target)}): jobs left on "
            f"{m.source} sooner by {m.freed:.0f} s, itself {m.own:+.0f} s, jobs on "
            f"{m.target} later by {m.harm:.0f} s; > migration cost "
            f"{spec.migration_cost_seconds:g} s x (1 + {spec.migration_margin:g})")


# --- both steps ---------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Placed:
    """What FlowCon2 places on one model (`placed`): the moves with their `Migrate` actions,
    the admissions, and the held jobs left waiting."""

    moves: list[Move]
    migrations: list[Migrate]
    admits: list[Admit]
    queue: list[QueuedJob]

    @property
    def actions(self) -> list[Action]:
        """The migrations, then the admissions."""
        return [*self.migrations, *self.admits]

    @property
    def moving(self) -> dict[str, Move]:
        """The moves by the moved job's id."""
        return {m.job.id: m for m in self.moves}


def placed(policy: FlowCon2Policy, model: dict[str, list[ModelJob]],
           pending: Sequence[PendingJob], *, movable: Collection[str],
           capacity: Mapping[str, float], speeds: NodeSpeeds, arrive: Arrival,
           sides: Mapping[str, tuple[float, float]] | None = None) -> Placed:
    """FlowCon2's steps 3-4 on `model` (module docstring), however it was built (one
    snapshot, or the node reports): under `admission: forecast` every job without a forecast
    taken to be the typical job (`typical`); the `movable` jobs moved while a move pays
    (`best_moves`, with `policy.spec.migrate`, and the `sides` of a move known); then the held
    jobs of `pending` admitted (`admit_held`). `model` is updated in place as it goes."""
    spec = policy.spec
    prior = typical(model) if spec.admission == "forecast" else None
    if prior is not None:
        for node, jobs in model.items():
            model[node] = [replace(j, assumed=prior) for j in jobs]
    moves = best_moves(policy, model, movable=movable, capacity=capacity, speeds=speeds,
                       arrive=arrive, sides=sides) if spec.migrate and movable else []
    admits, queue = admit_held(policy, pending, model, capacity, speeds, prior=prior)
    migrations = [
        Migrate(policy=policy.name, container=m.job.id, from_node=m.source, to_node=m.target,
                reason=move_reason(m, spec, speeds), grace_seconds=spec.migration_grace_seconds)
        for m in moves]
    return Placed(moves=moves, migrations=migrations, admits=admits, queue=queue)


# --- admission ----------------------------------------------------------------------------


def admit_held(policy: FlowCon2Policy, pending: Sequence[PendingJob],
               model: dict[str, list[ModelJob]], capacity: Mapping[str, float],
               speeds: NodeSpeeds, *, prior: Forecast | None
               ) -> tuple[list[Admit], list[QueuedJob]]:
    """Held jobs, oldest first, each on the worker where it grows fastest (module
    docstring, 3); under `admission: forecast` each taken to be the typical job (`prior`,
    None when no job has a forecast, or under `admission: growth`)."""
    spec = policy.spec
    hard = spec.mode == "quota"
    admits: list[Admit] = []
    waiting: list[QueuedJob] = []
    forecast = prior is not None
    totals = ({node: total_seconds(jobs, capacity[node], speeds.of(node))
               for node, jobs in model.items()} if spec.admission == "forecast" else {})
    offer: dict[str, float] = {}
    added: dict[str, float] = {}

    def price(node: str) -> None:
        """What `node` offers a held job (any: the offer is the worker's, not the job's),
        into `offer` and `added`: worked out once a worker, again when it admits one."""
        newcomer = ModelJob(id="(held)", weight=1.0, cap=capacity[node], converged=False,
                            forecast=None, speed=speeds.of(node), assumed=prior, hard=hard)
        # At equal shares: a converged job's floor is soft (shares), it takes its cores
        # back as the worker empties and gets a full limit once only converged jobs are
        # left, so admission does not count on the cores the floor lends.
        cores = equal_share_cores([*model[node], newcomer], capacity[node])[-1]
        offer[node] = speeds.effective_cores(node, cores)
        if forecast:
            added[node] = (total_seconds([*model[node], newcomer], capacity[node],
                                         speeds.of(node)) - totals[node])

    held = sorted((p for p in pending if spec.selector.selects(p)),
                  key=lambda p: (p.submitted_at, p.id))
    for node in sorted(model) if held else ():
        price(node)
    ranked = Roomiest(offer)  # the most effective cores first, ties by name
    for p in held:
        if spec.selector.opted_out(p):
            blocked = f"opted out ({spec.selector.opt_out_key}=true)"
        else:
            blocked = ""
        best = ranked.first(p.node)  # its own worker first of the roomiest
        if best is None:  # no worker at all (no node report reached the manager): it waits
            placed = place([Candidate(job=p, key=(p.submitted_at,), about="no worker",
                                      cores=spec.admission_min_cores, blocked=blocked)], {},
                           policy=policy.name)
            waiting += [replace(q, position=len(waiting) + 1) for q in placed.queue]
            continue
        if added:
            best = min((n for n in offer if offer[n] + FIT_TOLERANCE_CORES
                        >= spec.admission_min_cores), default=best,
                       key=lambda n: (added[n], n != p.node, n))
        about = (f"grows fastest on {best}: {offer[best]:.2f} effective cores (cores x speed "
                 f"{speeds.shown(best)}) at an equal share beside {len(model[best])} job(s) "
                 f"there"
                 if not added else
                 f"adds least to the predicted completion times on {best}: "
                 f"{added[best]:.0f} s (its own and the delay to the {len(model[best])} "
                 f"job(s) there, taken to be a typical job), {offer[best]:.2f} effective cores "
                 f"(cores x speed {speeds.shown(best)})")
        about += f"; {speeds.notes[best]}" if best in speeds.notes else ""
        # `best` is where `place` would put it among all the workers: their roomiest
        placed = place([Candidate(job=p, key=(p.submitted_at,), cores=spec.admission_min_cores,
                                  about=about, blocked=blocked)],
                       {best: offer[best]}, policy=policy.name)
        for admit in placed.admits:
            admits.append(admit)
            model[admit.node] = [*model[admit.node],
                                 ModelJob(id=p.id, weight=1.0, cap=capacity[admit.node],
                                      converged=False, forecast=None,
                                      speed=speeds.of(admit.node), assumed=prior, hard=hard)]
            if added:
                totals[admit.node] += added[admit.node]
            price(admit.node)
            ranked.set(admit.node, offer[admit.node])
        waiting += [replace(q, position=len(waiting) + 1) for q in placed.queue]
    return admits, waiting
