"""The pictures' axes say what they count: jobs per worker are whole numbers."""

from __future__ import annotations

import matplotlib.pyplot as plt

from policyd.sim.experiment import run_outcome
from policyd.sim.plots import worker_cpu_figure, workers_figure
from tests.sim.test_world import job, profile, scenario, specon


def test_jobs_per_worker_has_whole_number_ticks() -> None:
    # One or two jobs per worker: matplotlib's default locator ticks 0.25, 0.5, ... there.
    world = scenario(job("a", profile(iterations=40)), job("b", profile(iterations=60)),
                     job("c", profile(iterations=30), submit=10.0),
                     nodes={"w1": 1.0, "w2": 1.0}, policy=specon())
    figure = workers_figure(run_outcome(world, timeline=True))
    try:
        for ax in figure.axes:
            low, high = ax.get_ylim()
            ticks = [t for t in ax.get_yticks() if low <= t <= high]
            assert len(ticks) >= 2 and all(float(t).is_integer() for t in ticks), ticks
    finally:
        plt.close(figure)


def test_cpu_per_worker_is_a_share_of_each_workers_cores() -> None:
    world = scenario(job("a", profile(iterations=40), node="w1"),
                     job("b", profile(iterations=60), node="w2"),
                     nodes={"w1": 1.0, "w2": 4.0}, policy=specon())
    figure = worker_cpu_figure(run_outcome(world, timeline=True))
    try:
        for ax in figure.axes[:2]:
            shares = {line.get_label(): max(line.get_ydata()) for line in ax.get_lines()}
            # one 1-core job each: all of w1, a quarter of w2
            assert shares == {"w1 (1 cores)": 1.0, "w2 (4 cores)": 0.25}
    finally:
        plt.close(figure)
