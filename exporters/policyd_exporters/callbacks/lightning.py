"""PyTorch Lightning: report `training_step`'s loss after every training batch.

`on_train_batch_end(trainer, pl_module, outputs, batch, batch_idx)`: `outputs` is what
`training_step` returned: a tensor, or a mapping holding `loss` (None with manual optimisation
returning nothing: the step still counts, no value is reported). The step is
`trainer.global_step` (optimizer steps done). The total, for the progress ratio, is
`trainer.estimated_stepping_batches` when finite.

Resuming with `trainer.fit(..., ckpt_path=...)`: Lightning restores `global_step` before
`on_train_start`, which sets the steps counter to it; and the callback's `state_dict()` (the
exporter's step and smoothing window) is saved in Lightning's checkpoints and loaded back, so the
loss gauge goes on from the same window.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from policyd_exporters.callbacks._framework import import_base
from policyd_exporters.callbacks._hooks import Liveness, bind
from policyd_exporters.metrics import TrainingMetrics

MODULES = ("lightning.pytorch", "pytorch_lightning")
FRAMEWORK = "PyTorch Lightning"
HOOKS: dict[str, tuple[str, ...]] = {
    "on_train_start": (),
    "on_train_batch_end": (),
    "on_train_epoch_end": (),
    "on_train_end": (),
    "state_dict": (),
    "load_state_dict": (),
}
"""Our hooks and Lightning's other names for them (none known since 2.0)."""


class LightningHooks:
    """The hook methods; `lightning_callback` puts them in front of Lightning's `Callback`."""

    def __init__(self, metrics: TrainingMetrics, *, key: str = "loss") -> None:
        super().__init__()
        self.metrics = metrics
        self.key = key
        self.batches = Liveness("on_train_batch_end", framework=FRAMEWORK)

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        total = getattr(trainer, "estimated_stepping_batches", None)
        if isinstance(total, int | float) and math.isfinite(total) and total > 0:
            self.metrics.set_total_steps(int(total))
        step = int(trainer.global_step)  # the checkpoint's step when resuming
        self.metrics.set_step(step)
        self.batches.start(step)

    def on_train_batch_end(
        self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int, *rest: Any
    ) -> None:
        # *rest: Lightning 1.x passed dataloader_idx too.
        self.batches.called()
        step = int(trainer.global_step)
        value = outputs.get(self.key) if isinstance(outputs, Mapping) else outputs
        if value is None:
            self._advance(step)
        else:
            self.metrics.observe(value, step=step)

    def on_train_epoch_end(self, trainer: Any, pl_module: Any) -> None:
        step = int(trainer.global_step)
        self._advance(step)
        self.batches.check(step)

    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        self.on_train_epoch_end(trainer, pl_module)

    def state_dict(self) -> dict[str, Any]:
        """Saved by Lightning in its checkpoints (plain ints, floats and lists)."""
        return self.metrics.state_dict()

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        if state_dict:  # checkpoints written without this callback hold {}
            self.metrics.load_state_dict(state_dict)

    def _advance(self, step: int) -> None:
        if step > self.metrics.step:
            self.metrics.set_step(step)


def lightning_callback(
    metrics: TrainingMetrics, *, key: str = "loss", base: type | None = None
) -> Any:
    """A `lightning.pytorch.Callback` (or `pytorch_lightning.Callback`) feeding `metrics`.

    `key`: the entry of `training_step`'s returned mapping to report. `base`: the Callback class
    to extend (default: imported from Lightning; ImportError naming the extra if missing).
    """
    if base is None:
        base = import_base(MODULES, "Callback", framework=FRAMEWORK, extra="lightning")
    cls = bind("PolicydLightningCallback", LightningHooks, base, HOOKS, framework=FRAMEWORK)
    return cls(metrics, key=key)
