"""Run scenarios under their policy, their baselines and the oracle: the runs a report compares.
The runs of one scenario share its world (every random draw is made when it is built), so they
are independent of each other and of other scenarios' runs, and `run_outcomes` spreads them over
worker processes: each run is a few tenths of a second to a few seconds of pure Python, and the
default set is over forty runs.

Processes are forked, so a worker finds the scenarios in its copy of this module's memory and
only a run's index goes to it (a scenario holds read-only mappings that cannot be pickled); its
`RunResult` (a few hundred kB at most) comes back pickled. Forking is safe only from a process
with no other thread (a thread could hold a lock the child inherits held), so where another
thread runs, or one process is asked for, the runs are made here, one after another. Either way
every run is the same computation: the outcomes are identical.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import multiprocessing.pool
import os
import threading
from collections.abc import Callable, Iterator, Sequence

from policyd.sim.report import STRATEGIES, Outcome
from policyd.sim.run import run
from policyd.sim.types import RunResult, Scenario, Strategy

_FORKED_WORK: tuple[Sequence[Scenario], bool] | None = None
"""The scenarios and the timeline flag, set before the workers fork and read by them."""


def run_outcome(scenario: Scenario, *, label: str = "", timeline: bool = False) -> Outcome:
    """The policy, baseline and oracle runs of `scenario`, in this process."""
    (outcome,) = run_outcomes([(label, scenario)], timeline=timeline, processes=1)
    return outcome


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity, not the machine's count)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (
        os.cpu_count() or 1)


def run_outcomes(work: Sequence[tuple[str, Scenario]], *, timeline: bool = False,
                 processes: int | None = None,
                 done: Callable[[int, Outcome], None] | None = None) -> list[Outcome]:
    """Every (label, scenario)'s outcome, in `work`'s order, its runs spread over `processes`
    worker processes (default: the usable CPUs). `done(i, outcome)` is called here as each
    scenario's outcome is complete, in `work`'s order, so progress can be told as it goes."""
    tasks = [(i, strategy) for i in range(len(work)) for strategy in STRATEGIES]
    wanted = min(processes or usable_cpus(), len(tasks))
    results: dict[tuple[int, Strategy], RunResult] = {}
    outcomes: list[Outcome] = []

    def collect() -> None:
        while len(outcomes) < len(work) and all(
                (len(outcomes), s) in results for s in STRATEGIES):
            i = len(outcomes)
            label, scenario = work[i]
            outcomes.append(Outcome(scenario=scenario, label=label,
                                    runs={s: results.pop((i, s)) for s in STRATEGIES}))
            if done is not None:
                done(i, outcomes[-1])

    with _forked_pool(wanted, work, timeline) as pool:
        if pool is None:
            for i, strategy in tasks:
                results[i, strategy] = run(work[i][1], strategy, record_timeline=timeline)
                collect()
        else:
            for key, result in pool.imap_unordered(_run_forked, tasks):
                results[key] = result
                collect()
    return outcomes


@contextlib.contextmanager
def _forked_pool(processes: int, work: Sequence[tuple[str, Scenario]],
                 timeline: bool) -> Iterator[multiprocessing.pool.Pool | None]:
    """`processes` workers forked with `work` in their memory for the block, or None where the
    runs should stay in this process: fewer than two asked for, another thread running, no fork
    on this platform, or no pool to be had (a process limit, no shared memory for its locks)."""
    global _FORKED_WORK  # noqa: PLW0603 - handed to the forked workers by memory (module doc)
    if processes < 2 or threading.active_count() > 1 or "fork" not in (
            multiprocessing.get_all_start_methods()):
        yield None
        return
    _FORKED_WORK = ([scenario for _, scenario in work], timeline)
    try:
        try:
            pool = multiprocessing.get_context("fork").Pool(processes)
        except OSError:
            yield None
            return
        with pool:
            yield pool
    finally:
        _FORKED_WORK = None


def _run_forked(task: tuple[int, Strategy]) -> tuple[tuple[int, Strategy], RunResult]:
    """One run, in a forked worker (see the module's docstring)."""
    assert _FORKED_WORK is not None, "a worker forked before the work was set"
    scenarios, timeline = _FORKED_WORK
    i, strategy = task
    return task, run(scenarios[i], strategy, record_timeline=timeline)
