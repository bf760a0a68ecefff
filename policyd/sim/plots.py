"""The pictures people would rather look at than read, as PNG files (matplotlib, no display).

- `<scenario>-cpu.png`: cores used per job over time, policy beside baseline (thesis Figs. 6.5,
  6.6, 6.8, 6.9), for single-node scenarios.
- `<scenario>-jct.png`: completion time per job, policy vs baseline, oracle marked (Figs. 6.16,
  6.19, 6.20).
- `<scenario>-workers.png`: running jobs per worker over time, policy beside baseline (Figs. 6.21,
  6.22), for multi-node scenarios.
- `<scenario>-worker-cpu.png`: cores used per worker over time as a share of the worker's cores
  (workers of unequal size compare), policy beside baseline, for multi-node scenarios.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from policyd.sim.report import Outcome
from policyd.sim.types import RunResult

Panel = Callable[[Axes, RunResult, str], None]
"""Draws one run into one panel under a title."""


def _slug(outcome: Outcome) -> str:
    label = outcome.label.replace(" ", "-").replace("=", "").replace("%", "")
    return f"{outcome.scenario.name}{'-' + label if label else ''}"


def _cpu_panel(ax: Axes, run: RunResult, jobs: Sequence[str], title: str) -> None:
    times = np.array([s.time for s in run.timeline])
    used = np.array([[s.jobs.get(j, ("", 0.0, 0.0))[1] for s in run.timeline] for j in jobs])
    if times.size:
        ax.stackplot(times, used, labels=jobs, step="pre")  # a sample covers the interval before
    ax.set_title(title)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("cores used")


def _save(fig: Figure, outcome: Outcome, directory: Path, suffix: str) -> Path:
    fig.tight_layout()
    path = directory / f"{_slug(outcome)}-{suffix}.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _side_by_side(outcome: Outcome, *, panel: Panel, what: str) -> Figure:
    """The policy's run beside the baseline's, one panel each, a shared legend on the right."""
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.5), sharey=True)
    panel(axes[0], outcome.runs["policy"], outcome.scenario.policy.kind)
    panel(axes[1], outcome.runs["baseline"], f"{outcome.scenario.baseline} (baseline)")
    axes[1].legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")
    fig.suptitle(f"{outcome.scenario.name}: {what}")
    return fig


def plot_cpu(outcome: Outcome, directory: Path) -> Path:
    jobs = [j.id for j in outcome.scenario.jobs]
    fig = _side_by_side(outcome, what="CPU per job over time",
                        panel=lambda ax, run, title: _cpu_panel(ax, run, jobs, title))
    return _save(fig, outcome, directory, "cpu")


def plot_jct(outcome: Outcome, directory: Path) -> Path:
    policy, baseline = outcome.runs["policy"], outcome.runs["baseline"]
    ids = [j.id.removeprefix("job-") for j in policy.jobs]
    x = np.arange(len(ids))
    fig, ax = plt.subplots(figsize=(max(6.0, 0.45 * len(ids) + 2), 4.5))
    ax.bar(x - 0.2, [j.jct for j in policy.jobs], 0.4, label=outcome.scenario.policy.kind)
    ax.bar(x + 0.2, [j.jct for j in baseline.jobs], 0.4, label=outcome.scenario.baseline)
    if "oracle" in outcome.runs:
        ax.scatter(x, [j.jct for j in outcome.runs["oracle"].jobs], marker="_", s=120,
                   color="black", label="oracle (SRPT)", zorder=3)
    ax.set_xticks(x, ids)
    ax.set_xlabel("job")
    ax.set_ylabel("completion time (s)")
    ax.set_title(f"{outcome.scenario.name}: completion time per job "
                 f"(avg {policy.avg_jct:.0f} s vs {baseline.avg_jct:.0f} s)")
    ax.legend()
    return _save(fig, outcome, directory, "jct")


def _workers_panel(ax: Axes, run: RunResult, workers: Sequence[str], title: str) -> None:
    times = [s.time for s in run.timeline]
    counts: dict[str, list[int]] = defaultdict(list)
    for sample in run.timeline:
        per: defaultdict[str, int] = defaultdict(int)
        for node, _, _ in sample.jobs.values():
            per[node] += 1
        for w in workers:
            counts[w].append(per[w])
    for w in workers:
        ax.step(times, counts[w], where="post", label=w)
    ax.set_title(f"{title} ({run.migrations} migrations)")
    ax.set_xlabel("time (s)")
    ax.set_ylabel("running jobs")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))  # whole jobs: no 0.5 ticks


def workers_figure(outcome: Outcome) -> Figure:
    """Running jobs per worker over time, policy beside baseline (not saved, not closed)."""
    workers = [n.name for n in outcome.scenario.nodes]
    return _side_by_side(outcome, what="jobs per worker over time",
                         panel=lambda ax, run, title: _workers_panel(ax, run, workers, title))


def plot_workers(outcome: Outcome, directory: Path) -> Path:
    return _save(workers_figure(outcome), outcome, directory, "workers")


def _worker_cpu_panel(ax: Axes, run: RunResult, cores: dict[str, float], title: str) -> None:
    times = [s.time for s in run.timeline]
    for worker, capacity in cores.items():
        used = [sum(c for node, c, _ in s.jobs.values() if node == worker) / capacity
                for s in run.timeline]
        ax.step(times, used, where="pre", label=f"{worker} ({capacity:g} cores)")
    ax.set_title(title)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("share of the worker's cores used")
    ax.set_ylim(0.0, 1.05)


def worker_cpu_figure(outcome: Outcome) -> Figure:
    """CPU used per worker over time, policy beside baseline (not saved, not closed)."""
    cores = {n.name: n.cores for n in outcome.scenario.nodes}
    return _side_by_side(
        outcome, what="CPU per worker over time",
        panel=lambda ax, run, title: _worker_cpu_panel(ax, run, cores, title))


def plot_worker_cpu(outcome: Outcome, directory: Path) -> Path:
    return _save(worker_cpu_figure(outcome), outcome, directory, "worker-cpu")


def plot_all(outcomes: Sequence[Outcome], directory: Path) -> list[Path]:
    """Every picture for every outcome; returns the files written."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for outcome in outcomes:
        written.append(plot_jct(outcome, directory))
        if len(outcome.scenario.nodes) == 1:
            written.append(plot_cpu(outcome, directory))
        else:
            written.append(plot_workers(outcome, directory))
            written.append(plot_worker_cpu(outcome, directory))
    return written
