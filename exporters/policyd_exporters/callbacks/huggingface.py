"""Hugging Face Trainer: report the training loss the Trainer logs.

`on_log(args, state, control, logs)`: training logs hold `loss`, the mean over the last
`logging_steps` steps (evaluation logs hold `eval_loss` instead and are skipped unless
`key="eval_loss"`). The step is `state.global_step` (restored by the Trainer when it resumes from
its checkpoint), the total `state.max_steps`.

Because the Trainer already averages, build the metrics with `smoothing_steps=1` and set
`TrainingArguments(logging_steps=100)`: that reports the 100-step mean policyd expects; the
default window of 100 would average 100 logs, i.e. 100 x logging_steps steps.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from policyd_exporters.callbacks._framework import combine, import_base
from policyd_exporters.metrics import TrainingMetrics


class HuggingFaceHooks:
    """The hook methods; `huggingface_callback` puts them in front of `TrainerCallback`."""

    def __init__(self, metrics: TrainingMetrics, *, key: str = "loss") -> None:
        super().__init__()
        self.metrics = metrics
        self.key = key

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        total = getattr(state, "max_steps", None)
        if isinstance(total, int) and total > 0:
            self.metrics.set_total_steps(total)

    def on_log(
        self,
        args: Any,
        state: Any,
        control: Any,
        logs: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        if logs is None or logs.get(self.key) is None:
            return
        self.metrics.observe(logs[self.key], step=int(state.global_step))


def huggingface_callback(
    metrics: TrainingMetrics, *, key: str = "loss", base: type | None = None
) -> Any:
    """A `transformers.TrainerCallback` feeding `metrics`; pass it in `Trainer(callbacks=[...])`.

    `base`: the class to extend (default: `transformers.TrainerCallback`; ImportError naming the
    extra if transformers is missing).
    """
    if base is None:
        base = import_base(
            ("transformers",), "TrainerCallback", framework="Hugging Face transformers",
            extra="transformers",
        )
    return combine("PolicydHuggingFaceCallback", HuggingFaceHooks, base)(metrics, key=key)
