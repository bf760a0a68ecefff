"""PyTorch Lightning: report `training_step`'s loss after every training batch.

`on_train_batch_end(trainer, pl_module, outputs, batch, batch_idx)`: `outputs` is what
`training_step` returned: a tensor, or a mapping holding `loss` (None with manual optimisation
returning nothing: nothing is reported). The step is `trainer.global_step` (optimizer steps done,
restored by Lightning when it resumes from its own checkpoint). The total, for the progress ratio,
is `trainer.estimated_stepping_batches` when finite.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from policyd_exporters.callbacks._framework import combine, import_base
from policyd_exporters.metrics import TrainingMetrics

MODULES = ("lightning.pytorch", "pytorch_lightning")


class LightningHooks:
    """The hook methods; `lightning_callback` puts them in front of Lightning's `Callback`."""

    def __init__(self, metrics: TrainingMetrics, *, key: str = "loss") -> None:
        super().__init__()
        self.metrics = metrics
        self.key = key

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        total = getattr(trainer, "estimated_stepping_batches", None)
        if isinstance(total, int | float) and math.isfinite(total) and total > 0:
            self.metrics.set_total_steps(int(total))

    def on_train_batch_end(
        self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        value = outputs.get(self.key) if isinstance(outputs, Mapping) else outputs
        if value is None:
            return
        self.metrics.observe(value, step=int(trainer.global_step))


def lightning_callback(
    metrics: TrainingMetrics, *, key: str = "loss", base: type | None = None
) -> Any:
    """A `lightning.pytorch.Callback` (or `pytorch_lightning.Callback`) feeding `metrics`.

    `key`: the entry of `training_step`'s returned mapping to report. `base`: the Callback class
    to extend (default: imported from Lightning; ImportError naming the extra if missing).
    """
    if base is None:
        base = import_base(MODULES, "Callback", framework="PyTorch Lightning", extra="lightning")
    return combine("PolicydLightningCallback", LightningHooks, base)(metrics, key=key)
