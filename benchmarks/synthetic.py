"""Synthetic clusters for the scale benchmarks: many training jobs with loss curves that decay
at different rates, so every category (new, watching, converged) is present.

Seeded and deterministic. The curves are exponential decays with multiplicative noise, not
recorded training runs: they exercise the engine's cost, not its quality.
"""

from __future__ import annotations

import numpy as np

from policyd.model import Container, Node, Series, Snapshot

NOW = 1_700_000_000.0
SAMPLE_SPACING_SECONDS = 10.0


def make_snapshot(containers: int, *, per_node: int = 10, samples: int = 60,
                  seed: int = 7) -> Snapshot:
    """A snapshot of `containers` jobs, `per_node` on each node, `samples` points per series."""
    rng = np.random.default_rng(seed)
    nodes = max(1, containers // per_node)
    times = NOW - SAMPLE_SPACING_SECONDS * np.arange(samples - 1, -1, -1, dtype=np.float64)
    # Ages spread so that some jobs are new (few samples) and most have a full history.
    ages = rng.uniform(0.1, 3.0, size=containers) * samples * SAMPLE_SPACING_SECONDS
    taus = rng.uniform(50.0, 900.0, size=containers)
    scales = rng.uniform(0.5, 5.0, size=containers)
    built = []
    for i in range(containers):
        started = NOW - ages[i]
        mask = times >= started
        t = times[mask]
        progress = (t - started) / taus[i]
        noise = 1.0 + 0.01 * rng.standard_normal(t.size)
        loss = (scales[i] * np.exp(-progress) + 0.05) * noise
        usage = np.clip(0.8 + 0.2 * rng.standard_normal(t.size), 0.05, 4.0)
        built.append(Container(
            id=f"c{i}", name=f"job-{i}", node=f"w{i % nodes}", started_at=float(started),
            evaluation=Series.of(t, loss), cpu_usage=Series.of(t, usage),
            cpu_allocation=1.0, namespace="training", labels={"app": "train"},
        ))
    return Snapshot(
        time=NOW,
        nodes=tuple(Node(name=f"w{n}", cpu_capacity=16.0, cpu_usage=float(rng.uniform(2, 14)))
                    for n in range(nodes)),
        containers=tuple(built),
    )
