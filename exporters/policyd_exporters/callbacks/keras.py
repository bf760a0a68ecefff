"""Keras: report `logs["loss"]` after every training batch.

`on_train_batch_end(batch, logs)`: in Keras 3 `logs["loss"]` is already the mean of the epoch so
far (it restarts at each epoch); the exporter's window smooths on top of it. `batch` restarts at
each epoch too, so steps are counted here, one per batch, continuing from `metrics.step` (restore
it with `metrics.load_state_dict`/`set_step` when resuming with `initial_epoch`). The total, for
the progress ratio, is `params["steps"] * params["epochs"]` when Keras knows both.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from policyd_exporters.callbacks._framework import combine, import_base
from policyd_exporters.metrics import TrainingMetrics

MODULES = ("keras", "tensorflow.keras")


class KerasHooks:
    """The hook methods; `keras_callback` puts them in front of `keras.callbacks.Callback`."""

    def __init__(self, metrics: TrainingMetrics, *, key: str = "loss") -> None:
        super().__init__()
        self.metrics = metrics
        self.key = key

    def on_train_begin(self, logs: Mapping[str, Any] | None = None) -> None:
        params = getattr(self, "params", None) or {}
        steps, epochs = params.get("steps"), params.get("epochs")
        if isinstance(steps, int) and isinstance(epochs, int) and steps > 0 and epochs > 0:
            self.metrics.set_total_steps(steps * epochs)

    def on_train_batch_end(self, batch: int, logs: Mapping[str, Any] | None = None) -> None:
        if logs is None or logs.get(self.key) is None:
            return
        self.metrics.observe(logs[self.key])


def keras_callback(
    metrics: TrainingMetrics, *, key: str = "loss", base: type | None = None
) -> Any:
    """A `keras.callbacks.Callback` feeding `metrics` (`key`: the entry of `logs` to report).

    `base`: the Callback class to extend (default: `keras.callbacks.Callback`, else
    `tensorflow.keras.callbacks.Callback`; ImportError naming the extra if neither is installed).
    """
    if base is None:
        modules = tuple(f"{m}.callbacks" for m in MODULES)
        base = import_base(modules, "Callback", framework="Keras", extra="keras")
    return combine("PolicydKerasCallback", KerasHooks, base)(metrics, key=key)
