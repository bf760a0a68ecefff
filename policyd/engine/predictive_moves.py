"""Predictive's moves (`migrate`): jobs waiting at the floor moved to workers with whole cores
to spare, when the forecast says they finish sooner there by more than the move costs.

Theory of operation. Every worker's plan leaves some jobs short of a whole first core
(`WaitingJob`: how long each is predicted to take where it is, counting the work served before
it, and its speed model) and some workers with cores no plan uses (`spare`). Workers are served
most spare first (then by name); while one has a whole core to spare, the waiting job with the
largest predicted gain moves there: gain = its time where it is - its remaining time on the
cores it would get there (the spare, at most what it can use), and only a gain above
`migration_cost_seconds` x (1 + `migration_margin`) counts. The job's speed model was fitted on
its own worker, so its time on the target is that model's time x speed here / speed there
(`policyd.engine.node_speed`: a node's relative speed, stated or judged, else the average of
the stated ones, 1.0 when none is): a core of a 0.6-speed worker is not a core of a 1.5-speed
one. Each move spends the migration budget (per cycle and per worker) and the target's spare
cores. The search ends as soon as no
move can follow: the cycle's budget spent, or no job gaining enough on a target with the most
spare cores left and none faster after it (a job gains less on fewer or slower cores), so a
cluster of many workers costs a pass over the waiting jobs per target that gets a move, not
one per worker. The callers have applied the other guards (opt-out, minimum age, cooldown,
back-off): they do not depend on the target.

The same function serves the one-snapshot planner (`policyd.engine.predictive`, its waiting
jobs from its own plans) and the manager deciding from node reports (`predictive_reports`,
from the agents' reports): one rule, priced by the same arithmetic. Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from policyd.engine.guards import MigrationBudget
from policyd.engine.node_speed import NodeSpeeds
from policyd.engine.spec import MoveGain
from policyd.model import Migrate, WaitingJob


def plan_moves(policy: str, spec: MoveGain, waiting: Sequence[tuple[str, WaitingJob]],
               spare: Mapping[str, float], budget: MigrationBudget, *, speeds: NodeSpeeds
               ) -> dict[str, tuple[Migrate, str]]:
    """The moves of one cycle, by container: each `Migrate` and its reason (module docstring).
    `waiting`: (worker, job) pairs, in the order ties go to the first; `spare`: every worker's
    unused cores; `speeds`: every worker's relative speed."""
    left = dict(spare)
    candidates = list(waiting)
    threshold = spec.move_threshold_seconds
    moves: dict[str, tuple[Migrate, str]] = {}
    order = sorted(left, key=lambda node: (-left[node], node))
    for k, target in enumerate(order):
        if budget.exhausted:
            break
        while left[target] >= 1.0 - 1e-9 and candidates and not budget.exhausted \
                and not budget.node_full(target):
            best: tuple[float, int, float, float] | None = None
            beside = False  # a candidate on the target itself, not priced here
            for i, (node, job) in enumerate(candidates):
                if node == target:
                    beside = True
                    continue
                there = min(left[target], job.best_cores)
                moved = _time_there(job, there, speeds.of(node), speeds.of(target))
                gain = job.ahead_seconds - moved
                if gain > threshold and (best is None or gain > best[0]):
                    best = (gain, i, there, moved)
            if best is None:
                # A job gains no more on fewer or slower cores: when no job gains enough on
                # this target's spare cores and no later target has more or faster ones, none
                # will anywhere.
                later = order[k + 1:]
                if not beside and (not later or left[target] >= left[later[0]]) \
                        and all(speeds.of(t) <= speeds.of(target) for t in later):
                    return moves
                break
            gain, i, there, moved = best
            node, job = candidates.pop(i)
            here, far = speeds.of(node), speeds.of(target)
            at_speed = "" if here == far else (
                f" at speed {speeds.shown(target)} against {speeds.shown(node)} on {node} "
                f"({job.remaining_seconds_at(there):.0f} s at the speed of {node})")
            reason = (f"waits on {node}: predicted to finish in {job.ahead_seconds:.0f} s "
                      f"there (its work and the work served before it, over the worker's "
                      f"cores); on {target}, {left[target]:.2g} cores to spare: "
                      f"{moved:.0f} s on {there:.2g} cores{at_speed}; gain {gain:.0f} s > "
                      f"move cost {spec.migration_cost_seconds:g} s x "
                      f"(1 + {spec.migration_margin:g})")
            moves[job.container] = (Migrate(policy=policy, container=job.container,
                                            from_node=node, to_node=target, reason=reason,
                                            grace_seconds=spec.migration_grace_seconds), reason)
            budget.spend(node, target)
            left[target] -= there
            # the budget's other refusals, found before pricing: the cycle's (the loop's test),
            # the target's (likewise) and a source's, whose jobs leave the candidates
            candidates = [(n, j) for n, j in candidates if not budget.node_full(n)]
    return moves


def _time_there(job: WaitingJob, cores: float, here: float, there: float) -> float:
    """The job's remaining seconds on `cores` of a worker of speed `there`, its model measured
    on one of speed `here`: a step that takes t at speed `here` takes t x here / there."""
    own = job.remaining_seconds_at(cores)
    return own if here == there else own * here / there
