"""`TrainingMetrics`: what one training job tells policyd, as a Prometheus collector.

Owns the metric names, types and help texts of the contract with policyd (README.md, "The
contract"); the smoothing arithmetic lives in `window`, the identity labels in `identity`, the HTTP
endpoint in `server`. The training loop calls `observe()` from its own thread while the HTTP
server's thread calls `collect()`: one lock guards the state.

It is a custom collector rather than a Gauge plus a Counter because (a) the steps counter must
start at the checkpoint's step after a resume, which a `Counter` cannot do, and (b) the loss gauge
must not exist before the first finite value (a Gauge starts at 0, which reads as "converged").
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from typing import SupportsFloat

from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import REGISTRY, CollectorRegistry

from policyd_exporters.identity import Identity
from policyd_exporters.window import DEFAULT_SMOOTHING_STEPS, RunningMean

LOSS = "policyd_training_loss"
STEPS = "policyd_training_steps"  # exposed as policyd_training_steps_total (a counter)
PROGRESS = "policyd_training_progress_ratio"
INVALID = "policyd_training_invalid_values"  # exposed as policyd_training_invalid_values_total

_HELP = {
    LOSS: "The job's evaluation function (loss by default): mean of the last smoothing_steps "
    "finite observed values.",
    STEPS: "Optimizer steps done by the job, continued across restarts from a checkpoint.",
    PROGRESS: "Steps done / total steps of the job.",
    INVALID: "Observed values that were NaN or infinite (left out of the loss mean).",
}


class TrainingMetrics:
    """The exporter of one training job.

    `identity` gives the labels of every series. `registry` follows prometheus_client: the default
    registry unless another is given, None to register nowhere (register it yourself).
    `smoothing_steps` is the window of `policyd_training_loss` (1: the raw value).
    `total_steps`, when known, adds `policyd_training_progress_ratio`.
    """

    def __init__(
        self,
        identity: Identity,
        *,
        registry: CollectorRegistry | None = REGISTRY,
        smoothing_steps: int = DEFAULT_SMOOTHING_STEPS,
        total_steps: int | None = None,
    ) -> None:
        self._labels = identity.labels()
        self._lock = threading.Lock()
        self._window = RunningMean(smoothing_steps)
        self._step = 0
        self._invalid = 0
        self._total_steps: int | None = None
        self.set_total_steps(total_steps)
        if registry is not None:
            registry.register(self)

    # -- the training loop's side -------------------------------------------------------------

    def observe(self, value: SupportsFloat, step: int | None = None) -> None:
        """Record the value of one optimizer step (a float, or anything `float()` accepts: a
        0-d tensor, a numpy scalar).

        `step` is the number of optimizer steps done, this one included (Lightning's and Hugging
        Face's `global_step` after the step); None counts one more step. It may repeat the
        current step (several values logged for one step) but not go back: use `set_step` when
        the job resumes from a checkpoint. A tensor is detached from its graph first. NaN and
        infinities count as a step and in
        `policyd_training_invalid_values_total`, but are not averaged in.
        """
        detach = getattr(value, "detach", None)
        if callable(detach):  # a tensor that requires grad: float() of it warns in torch
            value = detach()
        v = float(value)
        with self._lock:
            if step is None:
                new_step = self._step + 1
            elif step < self._step:
                raise ValueError(
                    f"step went back from {self._step} to {step}: call set_step() when the job "
                    "resumes from a checkpoint"
                )
            else:
                new_step = step
            self._step = new_step
            if not self._window.add(v):
                self._invalid += 1

    def set_step(self, step: int) -> None:
        """Set the optimizer steps done, in either direction (resume from a checkpoint)."""
        if step < 0:
            raise ValueError(f"step must be >= 0, got {step}")
        with self._lock:
            self._step = step

    def set_total_steps(self, total_steps: int | None) -> None:
        """Set (or forget, with None) the job's total steps, for the progress ratio."""
        if total_steps is not None and total_steps <= 0:
            raise ValueError(f"total_steps must be positive or None, got {total_steps}")
        with self._lock:
            self._total_steps = total_steps

    @property
    def step(self) -> int:
        with self._lock:
            return self._step

    @property
    def value(self) -> float | None:
        """The value `policyd_training_loss` shows now (None: not exposed yet)."""
        with self._lock:
            return self._window.mean()

    @property
    def smoothing_steps(self) -> int:
        return self._window.size

    def state_dict(self) -> dict[str, object]:
        """What a checkpoint should hold so that a resumed job reports the same step and mean:
        plain ints, floats, None and lists (fine for `torch.save` and `torch.load(...,
        weights_only=True)`, and for JSON)."""
        with self._lock:
            return {"step": self._step, "window": self._window.slots()}

    def load_state_dict(self, state: Mapping[str, object]) -> None:
        """Restore `state_dict()`'s output: the step count and the smoothing window."""
        step, window = state["step"], state["window"]
        if not isinstance(step, int) or not isinstance(window, list):
            raise ValueError("expected {'step': int, 'window': list} from state_dict()")
        self.set_step(step)
        with self._lock:
            self._window.restore(window)

    # -- the Prometheus side ------------------------------------------------------------------

    def describe(self) -> Iterator[Metric]:
        """The families this collector may expose, so a registry can refuse duplicates."""
        names = list(self._labels)
        yield GaugeMetricFamily(LOSS, _HELP[LOSS], labels=names)
        yield CounterMetricFamily(STEPS, _HELP[STEPS], labels=names)
        yield GaugeMetricFamily(PROGRESS, _HELP[PROGRESS], labels=names)
        yield CounterMetricFamily(INVALID, _HELP[INVALID], labels=names)

    def collect(self) -> Iterator[Metric]:
        names, values = list(self._labels), list(self._labels.values())
        with self._lock:
            mean, step, invalid, total = (
                self._window.mean(),
                self._step,
                self._invalid,
                self._total_steps,
            )
        if mean is not None:
            loss = GaugeMetricFamily(LOSS, _HELP[LOSS], labels=names)
            loss.add_metric(values, mean)
            yield loss
        steps = CounterMetricFamily(STEPS, _HELP[STEPS], labels=names)
        steps.add_metric(values, float(step))
        yield steps
        if total is not None:
            progress = GaugeMetricFamily(PROGRESS, _HELP[PROGRESS], labels=names)
            progress.add_metric(values, step / total)
            yield progress
        bad = CounterMetricFamily(INVALID, _HELP[INVALID], labels=names)
        bad.add_metric(values, float(invalid))
        yield bad
