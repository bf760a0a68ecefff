"""Hugging Face Trainer: report the training loss the Trainer logs; stop with a checkpoint.

`huggingface_callback`: `on_log(args, state, control, logs)`: training logs hold `loss`, the
mean over the last `logging_steps` steps (evaluation logs hold `eval_loss` instead and are
skipped unless `key="eval_loss"`). The steps counter follows `state.global_step` at every step
(`on_step_end`), and starts at it in `on_train_begin`, where a resumed Trainer already holds its
checkpoint's step; the total is `state.max_steps`.

Because the Trainer already averages, build the metrics with `smoothing_steps=1` and set
`TrainingArguments(logging_steps=100)`: that reports the 100-step mean policyd expects; the
default window of 100 would average 100 logs, i.e. 100 x logging_steps steps.

`huggingface_stop_callback(should_stop)`: at the end of the first step where `should_stop()` is
true (e.g. `threading.Event.is_set`, set by a SIGTERM handler), asks the Trainer to save its own
checkpoint (`output_dir/checkpoint-<step>`) and to stop; `trainer.train()` then returns and the
script exits 0. The next start resumes with `train(resume_from_checkpoint=...)`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from policyd_exporters.callbacks._framework import import_base
from policyd_exporters.callbacks._hooks import Liveness, bind
from policyd_exporters.metrics import TrainingMetrics

FRAMEWORK = "Hugging Face transformers"
HOOKS: dict[str, tuple[str, ...]] = {
    "on_train_begin": (),
    "on_step_end": (),
    "on_log": (),
    "on_train_end": (),
}
"""Our hooks and the Trainer's other names for them (none known)."""


class HuggingFaceHooks:
    """The hook methods; `huggingface_callback` puts them in front of `TrainerCallback`."""

    def __init__(self, metrics: TrainingMetrics, *, key: str = "loss") -> None:
        super().__init__()
        self.metrics = metrics
        self.key = key
        self.logs = Liveness("on_log", framework=FRAMEWORK)

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        total = getattr(state, "max_steps", None)
        if isinstance(total, int) and total > 0:
            self.metrics.set_total_steps(total)
        step = int(state.global_step)  # the checkpoint's step when resuming
        self.metrics.set_step(step)
        self.logs.start(step)

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        step = int(state.global_step)
        if step > self.metrics.step:
            self.metrics.set_step(step)

    def on_log(
        self,
        args: Any,
        state: Any,
        control: Any,
        logs: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        self.logs.called()
        if logs is None or logs.get(self.key) is None:
            return
        self.metrics.observe(logs[self.key], step=int(state.global_step))

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        # The Trainer logs its summary (on_log) before on_train_end, whatever logging_steps is.
        self.on_step_end(args, state, control)
        self.logs.check(int(state.global_step))


class HuggingFaceStopHooks:
    """`on_step_end`: save and stop once `should_stop()`; see `huggingface_stop_callback`."""

    def __init__(self, should_stop: Callable[[], bool]) -> None:
        super().__init__()
        self.should_stop = should_stop

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.should_stop():
            control.should_save = True
            control.should_training_stop = True


def _trainer_callback() -> type:
    return import_base(
        ("transformers",), "TrainerCallback", framework=FRAMEWORK, extra="transformers"
    )


def huggingface_callback(
    metrics: TrainingMetrics, *, key: str = "loss", base: type | None = None
) -> Any:
    """A `transformers.TrainerCallback` feeding `metrics`; pass it in `Trainer(callbacks=[...])`.

    `base`: the class to extend (default: `transformers.TrainerCallback`; ImportError naming the
    extra if transformers is missing).
    """
    cls = bind("PolicydHuggingFaceCallback", HuggingFaceHooks, base or _trainer_callback(), HOOKS,
               framework=FRAMEWORK)
    return cls(metrics, key=key)


def huggingface_stop_callback(should_stop: Callable[[], bool], *, base: type | None = None) -> Any:
    """A `transformers.TrainerCallback` that makes the Trainer save a checkpoint and stop at the
    end of the step where `should_stop()` is true (the checkpoint protocol: SIGTERM ->
    checkpoint -> exit 0)."""
    cls = bind("PolicydHuggingFaceStopCallback", HuggingFaceStopHooks,
               base or _trainer_callback(), {"on_step_end": ()}, framework=FRAMEWORK)
    return cls(should_stop)
