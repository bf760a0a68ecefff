"""One job's exporter on 127.0.0.1, its own registry, and what a scrape of it shows."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

from policyd_exporters import Identity, MetricsServer, TrainingMetrics, serve
from prometheus_client.registry import CollectorRegistry

from tests.exporters.scrape import get, parse

STEPS = "policyd_training_steps_total"
LOSS = "policyd_training_loss"
PROGRESS = "policyd_training_progress_ratio"


@dataclass(frozen=True)
class Scrape:
    """The contract's series as one HTTP scrape saw them (None: not exposed)."""

    steps: float
    loss: float | None
    progress: float | None


@dataclass
class Exporter:
    metrics: TrainingMetrics
    server: MetricsServer

    def scrape(self) -> Scrape:
        samples = parse(get(self.server.url))

        def one(name: str) -> float | None:
            found = samples.get(name, [])
            assert len(found) <= 1, found
            return found[0][1] if found else None

        steps = one(STEPS)
        assert steps is not None
        return Scrape(steps=steps, loss=one(LOSS), progress=one(PROGRESS))


@contextlib.contextmanager
def exporter(job_name: str, *, smoothing_steps: int) -> Iterator[Exporter]:
    registry = CollectorRegistry()
    metrics = TrainingMetrics(Identity(job_name=job_name), registry=registry,
                              smoothing_steps=smoothing_steps)
    with serve(0, addr="127.0.0.1", registry=registry) as server:
        yield Exporter(metrics, server)


def mean_of_last(values: list[float], n: int) -> float:
    """The exporter's loss: the mean of the last `n` observed values."""
    window = values[-n:]
    return sum(window) / len(window)
