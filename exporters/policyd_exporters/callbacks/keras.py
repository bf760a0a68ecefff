"""Keras: report `logs["loss"]` after every training batch.

`on_train_batch_end(batch, logs)`: in Keras 3 `logs["loss"]` is already the mean of the epoch so
far (it restarts at each epoch); the exporter's window smooths on top of it. The step is the
optimizer's own counter, `model.optimizer.iterations`, which Keras saves with the model and
`BackupAndRestore` restores, so a resumed job's counter continues (without an optimizer counter
the callback counts one step per batch from `metrics.step`). The total, for the progress ratio,
is `params["steps"] * params["epochs"]` when Keras knows both.

Keras has no callback state: after a resume the loss window starts empty (restore it with
`metrics.load_state_dict` if you checkpoint it yourself).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from policyd_exporters.callbacks._framework import import_base
from policyd_exporters.callbacks._hooks import Liveness, bind
from policyd_exporters.metrics import TrainingMetrics

MODULES = ("keras", "tensorflow.keras")
FRAMEWORK = "Keras"
HOOKS: dict[str, tuple[str, ...]] = {
    "on_train_begin": (),
    "on_epoch_begin": (),
    "on_train_batch_end": ("on_batch_end",),  # Keras 2's name
    "on_epoch_end": (),
    "on_train_end": (),
}
"""Our hooks and Keras's other names for them."""


def optimizer_steps(model: Any) -> int | None:
    """`model.optimizer.iterations` as an int (None: no optimizer counter).

    Read through the variable's backend value (a torch/jax/tf scalar): `int()` of a Keras 3
    Variable goes through numpy, which warns with torch tensors under numpy 2.
    """
    iterations = getattr(getattr(model, "optimizer", None), "iterations", None)
    if iterations is None:
        return None
    value = getattr(iterations, "value", iterations)
    if callable(value):  # tf.Variable.value() in tf.keras
        value = value()
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


class KerasHooks:
    """The hook methods; `keras_callback` puts them in front of `keras.callbacks.Callback`."""

    def __init__(self, metrics: TrainingMetrics, *, key: str = "loss") -> None:
        super().__init__()
        self.metrics = metrics
        self.key = key
        self.batches = Liveness("on_train_batch_end", framework=FRAMEWORK)
        self._started = False

    def on_train_begin(self, logs: Mapping[str, Any] | None = None) -> None:
        params = getattr(self, "params", None) or {}
        steps, epochs = params.get("steps"), params.get("epochs")
        if isinstance(steps, int) and isinstance(epochs, int) and steps > 0 and epochs > 0:
            self.metrics.set_total_steps(steps * epochs)
        self._started = False

    def on_epoch_begin(self, epoch: int, logs: Mapping[str, Any] | None = None) -> None:
        # Here rather than in on_train_begin: BackupAndRestore restores the optimizer in its own
        # on_train_begin, which may run after ours.
        step = optimizer_steps(getattr(self, "model", None))
        if not self._started and step is not None:
            self.metrics.set_step(step)
            self.batches.start(step)
        self._started = True

    def on_train_batch_end(self, batch: int, logs: Mapping[str, Any] | None = None) -> None:
        self.batches.called()
        step = optimizer_steps(getattr(self, "model", None))
        if logs is None or logs.get(self.key) is None:
            if step is not None:
                self._advance(step)
            return
        self.metrics.observe(logs[self.key], step=step)

    def on_epoch_end(self, epoch: int, logs: Mapping[str, Any] | None = None) -> None:
        step = optimizer_steps(getattr(self, "model", None))
        if step is not None:
            self._advance(step)
            self.batches.check(step)

    def on_train_end(self, logs: Mapping[str, Any] | None = None) -> None:
        self.on_epoch_end(-1, logs)

    def _advance(self, step: int) -> None:
        if step > self.metrics.step:
            self.metrics.set_step(step)


def keras_callback(
    metrics: TrainingMetrics, *, key: str = "loss", base: type | None = None
) -> Any:
    """A `keras.callbacks.Callback` feeding `metrics` (`key`: the entry of `logs` to report).

    `base`: the Callback class to extend (default: `keras.callbacks.Callback`, else
    `tensorflow.keras.callbacks.Callback`; ImportError naming the extra if neither is installed).
    """
    if base is None:
        modules = tuple(f"{m}.callbacks" for m in MODULES)
        base = import_base(modules, "Callback", framework=FRAMEWORK, extra="keras")
    cls = bind("PolicydKerasCallback", KerasHooks, base, HOOKS, framework=FRAMEWORK)
    return cls(metrics, key=key)
