"""The deadline oracle: earliest deadline first with perfect knowledge of every job's work.

A reference point for the Deadline kind, as `policyd.sim.oracle` (SRPT) is for the others: no
real scheduler knows how much work a training job has left; this one does, exactly
(`SimJob.cores_to_finish_within`, the inverse of the job's own speed law). It decides two
things, at every event of the world:

* Cores, per node (`edf_share`): jobs in deadline order each get the fewest cores with which
  they finish exactly at their deadline, as far as the node's cores go; a job that cannot
  make it with what is left gets nothing in that round. What is left then goes, up to each
  job's demand, first to the jobs that make their deadlines (earliest first: finishing early
  frees cores for later arrivals), then to jobs without a deadline and to those that cannot
  make it, least remaining work first (they end sooner and give their cores back).
* Admission of held jobs (`edf_admit`), earliest deadline first: a job starts on the node
  with the most free cores (capacity minus the cores its deadline-meeting jobs need) where
  its own exact need fits; one that fits nowhere now but could on an empty node waits for
  cores to free; one that could not make it even alone on a node, or whose deadline has
  passed, starts only when no other job waits (never starved), on the freest node. Jobs
  without a deadline start after every deadline job that waits, on the freest node.

It is per node (no migrations) and greedy, not an optimum: it shows what ordering and sizing
with exact knowledge reach, as the target the policy is measured against.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from policyd.sim.job import SimJob

EPSILON_CORES = 1e-9


def _time_left(job: SimJob, now: float) -> float:
    deadline = job.spec.deadline_seconds
    return math.inf if deadline is None else deadline - now


def need(job: SimJob, now: float) -> float:
    """Cores it needs from now to finish by its deadline (inf: impossible; 0: none)."""
    left = _time_left(job, now)
    return 0.0 if math.isinf(left) else job.cores_to_finish_within(left)


def edf_share(capacity_cores: float, jobs: Sequence[SimJob], now: float) -> list[float]:
    """Cores per job of one node, in `jobs`' order (module docstring)."""
    cores = [0.0] * len(jobs)
    left = float(capacity_cores)
    order = sorted(range(len(jobs)), key=lambda i: (_time_left(jobs[i], now), jobs[i].id))
    meeting: list[int] = []
    for i in order:
        if math.isinf(_time_left(jobs[i], now)):
            continue
        wanted = need(jobs[i], now)
        if wanted <= min(jobs[i].demand, left) + EPSILON_CORES:
            cores[i] = min(wanted, jobs[i].demand)
            left -= cores[i]
            meeting.append(i)
    rest = sorted((i for i in range(len(jobs)) if i not in meeting),
                  key=lambda i: (jobs[i].remaining_work_seconds(capacity_cores), jobs[i].id))
    for i in [*meeting, *rest]:
        if left <= EPSILON_CORES:
            break
        extra = min(jobs[i].demand - cores[i], left)
        if extra > 0:
            cores[i] += extra
            left -= extra
    return cores


def edf_admit(held: Sequence[SimJob], running: Mapping[str, Sequence[SimJob]],
              capacity: Mapping[str, float], now: float) -> list[tuple[SimJob, str]]:
    """The held jobs to start now and their nodes, in order (module docstring)."""
    free = {node: cap - sum(n for n in (need(j, now) for j in running.get(node, ()))
                            if math.isfinite(n))
            for node, cap in capacity.items()}
    order = sorted(held, key=lambda j: (_time_left(j, now), j.spec.submit_seconds, j.id))
    started: list[tuple[SimJob, str]] = []
    waiting = False
    later: list[SimJob] = []
    for job in order:
        wanted = need(job, now)
        if math.isinf(_time_left(job, now)):
            later.append(job)
            continue
        alone = max(min(job.demand, c) for c in capacity.values())
        if not wanted <= alone + EPSILON_CORES:
            later.append(job)  # cannot make it anywhere: last
            continue
        fits = [n for n in sorted(free) if wanted <= free[n] + EPSILON_CORES]
        if not fits:
            waiting = True
            continue
        node = min(fits, key=lambda n: (-free[n], n))
        free[node] -= wanted
        started.append((job, node))
    if not waiting:
        for job in sorted(later, key=lambda j: (j.spec.deadline_seconds is None,
                                               j.spec.submit_seconds, j.id)):
            node = min(free, key=lambda n: (-free[n], n))
            free[node] -= min(job.demand, max(free[node], 0.0))
            started.append((job, node))
    return started
