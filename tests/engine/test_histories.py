"""The forecast's histories read out of a snapshot: series read at the same times as the loss
(what Prometheus gives for one range and step) are taken sample for sample, and that reading
equals the general one (the last sample at or before each loss sample)."""

from __future__ import annotations

import numpy as np
import pytest

from policyd.engine.forecasting import histories
from policyd.model import Container, Markers, Node, Series, Snapshot

NOW = 1_700_001_000.0


def job(cid: str, node: str, *, rate: float, cores: float, early: bool = False,
        samples: int = 12) -> Container:
    """A job scraped every 5 s; `early`: its steps and CPU series hold one more, earlier
    sample than its loss (so they are not read sample for sample)."""
    t = NOW - 5.0 * np.arange(samples - 1, -1, -1)
    steps = rate * (t - t[0]) + 100.0
    used = cores + 0.1 * np.sin(t)
    if early:
        t_more = np.concatenate(([t[0] - 2.5], t))
        steps_series = Series.of(t_more, np.concatenate(([50.0], steps)))
        cpu_series = Series.of(t_more, np.concatenate(([9.0], used)))
    else:
        steps_series, cpu_series = Series.of(t, steps), Series.of(t, used)
    return Container(id=cid, name=cid, node=node, started_at=float(t[0]) - 60.0,
                     evaluation=Series.of(t, 2.0 * np.exp(-steps / 500.0) + 0.1),
                     cpu_usage=cpu_series, cpu_allocation=0.5, labels={}, markers=Markers(),
                     steps=steps_series, total_steps=None)


def snapshot(*containers: Container) -> Snapshot:
    return Snapshot(time=NOW, nodes=(Node(name="w1", cpu_capacity=2.0),
                                     Node(name="w2", cpu_capacity=4.0)),
                    containers=containers)


FIELDS = ("times_seconds", "losses", "steps", "cores", "busy", "lengths", "allocation_cores",
          "max_cores")


@pytest.mark.parametrize("misaligned", [(), ("b",)], ids=["all-aligned", "one-misaligned"])
def test_reading_sample_for_sample_equals_the_general_reading(misaligned: tuple[str, ...]) -> None:
    specs = [("a", "w1", 3.0, 1.0), ("b", "w1", 5.0, 0.95), ("c", "w2", 2.0, 3.9)]
    aligned = snapshot(*(job(cid, node, rate=r, cores=c, early=cid in misaligned)
                         for cid, node, r, c in specs))
    general = snapshot(*(job(cid, node, rate=r, cores=c, early=True)
                         for cid, node, r, c in specs))
    fast, slow = (histories(s, s.containers) for s in (aligned, general))
    for name in FIELDS:
        np.testing.assert_array_equal(getattr(fast, name), getattr(slow, name), err_msg=name)
    # Each loss sample reads the steps and CPU taken at its own time.
    np.testing.assert_array_equal(fast.steps[0], aligned.containers[0].steps.values[-12:])
    # A node is busy where its containers use at least 90 % of its cores (w1: 2, w2: 4).
    use = {c.id: c.cpu_usage.values[-12:] for c in aligned.containers}
    w1 = (use["a"] + use["b"] >= 0.9 * 2.0).astype(float)
    w2 = (use["c"] >= 0.9 * 4.0).astype(float)
    np.testing.assert_array_equal(fast.busy, np.stack([w1, w1, w2]))
    assert 0 < w1.sum() < 12  # both readings occur
