"""Framework callbacks, exercised by shape with fake base classes (fast, and the only way to show
what happens with a framework version that renamed a hook).

Each factory takes the framework's base class as `base=`; these fakes stand in for
`lightning.pytorch.Callback`, `keras.callbacks.Callback` and `transformers.TrainerCallback`, and
the hooks are called with the arguments those frameworks pass. tests/frameworks/ runs the same
callbacks in real training runs. Without the framework, a factory must raise an ImportError
naming the pip extra.
"""

from __future__ import annotations

import sys
import threading
from dataclasses import dataclass
from typing import Any

import pytest
from policyd_exporters import Identity, TrainingMetrics
from policyd_exporters.callbacks import (
    HookWarning,
    huggingface_callback,
    huggingface_stop_callback,
    keras_callback,
    lightning_callback,
)
from prometheus_client.registry import CollectorRegistry


@pytest.fixture
def metrics() -> TrainingMetrics:
    return TrainingMetrics(Identity(job_name="j"), registry=CollectorRegistry(), smoothing_steps=2)


class FakeBase:
    """What the frameworks' base classes share: a no-argument constructor."""

    init_called = False

    def __init__(self) -> None:
        self.init_called = True


def _noop(self: object, *args: Any, **kwargs: Any) -> None:
    """A base-class hook: does nothing (ours must override it)."""


def fake_base(name: str, *hooks: str) -> type:
    """A base class defining `hooks` as no-ops, like the frameworks' Callback classes."""
    return type(name, (FakeBase,), dict.fromkeys(hooks, _noop))


LightningBase = fake_base("LightningBase", "on_train_start", "on_train_batch_end",
                          "on_train_epoch_end", "on_train_end", "state_dict", "load_state_dict")
KerasBase = fake_base("KerasBase", "on_train_begin", "on_epoch_begin", "on_train_batch_end",
                      "on_batch_end", "on_epoch_end", "on_train_end")
HuggingFaceBase = fake_base("HuggingFaceBase", "on_train_begin", "on_step_end", "on_log",
                            "on_train_end")


class Tensor:
    """A 0-d tensor: float() works, as with torch."""

    def __init__(self, v: float) -> None:
        self.v = v

    def __float__(self) -> float:
        return self.v


@dataclass
class Trainer:
    global_step: int
    estimated_stepping_batches: float = float("inf")


def test_lightning(metrics: TrainingMetrics) -> None:
    cb = lightning_callback(metrics, base=LightningBase)
    assert LightningBase in type(cb).__mro__
    assert cb.init_called
    cb.on_train_start(Trainer(0, estimated_stepping_batches=100), None)
    cb.on_train_batch_end(Trainer(1), None, {"loss": Tensor(3.0)}, None, 0)
    cb.on_train_batch_end(Trainer(2), None, Tensor(1.0), None, 1)  # a bare tensor
    cb.on_train_batch_end(Trainer(3), None, None, None, 2)  # manual optimisation: no value
    assert (metrics.step, metrics.value) == (3, 2.0)
    assert cb.state_dict() == metrics.state_dict() == {"step": 3, "window": [3.0, 1.0]}


def test_lightning_resumes_from_its_checkpoint_state(metrics: TrainingMetrics) -> None:
    cb = lightning_callback(metrics, base=LightningBase)
    cb.load_state_dict({"step": 40, "window": [2.0, 1.0]})  # Lightning restores before start
    cb.on_train_start(Trainer(40, estimated_stepping_batches=100), None)
    assert (metrics.step, metrics.value) == (40, 1.5)
    cb.load_state_dict({})  # a checkpoint written without this callback
    assert metrics.step == 40


def test_lightning_infinite_total_is_ignored(metrics: TrainingMetrics) -> None:
    cb = lightning_callback(metrics, base=LightningBase)
    cb.on_train_start(Trainer(0), None)
    cb.on_train_batch_end(Trainer(5), None, {"loss": 1.0}, None, 0)
    assert metrics.step == 5


def test_keras_without_optimizer_counts_batches(metrics: TrainingMetrics) -> None:
    cb = keras_callback(metrics, base=KerasBase)
    cb.params = {"steps": 10, "epochs": 3}  # Keras sets this before on_train_begin
    cb.on_train_begin()
    cb.on_epoch_begin(0)
    for batch, loss in enumerate([4.0, 2.0, 1.0]):
        cb.on_train_batch_end(batch, {"loss": loss, "accuracy": 0.5})
    cb.on_train_batch_end(0, {"accuracy": 0.5})  # no loss: nothing
    cb.on_train_batch_end(1, None)
    assert (metrics.step, metrics.value) == (3, 1.5)


@dataclass
class Iterations:
    value: int  # a Keras 3 Variable's backend value


@dataclass
class Optimizer:
    iterations: Iterations


@dataclass
class Model:
    optimizer: Optimizer


def test_keras_steps_are_the_optimizer_iterations(metrics: TrainingMetrics) -> None:
    cb = keras_callback(metrics, base=KerasBase)
    cb.model = Model(Optimizer(Iterations(24)))  # restored by BackupAndRestore
    cb.params = {"steps": 8, "epochs": 5}
    cb.on_train_begin()
    cb.on_epoch_begin(3)
    assert metrics.step == 24
    cb.model.optimizer.iterations.value = 25
    cb.on_train_batch_end(0, {"loss": 2.0})
    assert (metrics.step, metrics.value) == (25, 2.0)


def test_huggingface(metrics: TrainingMetrics) -> None:
    @dataclass
    class State:
        global_step: int
        max_steps: int = 1000

    cb = huggingface_callback(metrics, base=HuggingFaceBase)
    cb.on_train_begin(None, State(0), None)
    cb.on_log(None, State(500), None, logs={"loss": 2.0, "learning_rate": 1e-3, "epoch": 0.5})
    cb.on_log(None, State(500), None, logs={"eval_loss": 9.0})  # evaluation: skipped
    cb.on_step_end(None, State(501), None)  # every step: the counter follows
    assert metrics.step == 501
    cb.on_log(None, State(1000), None, logs={"loss": 1.0})
    assert (metrics.step, metrics.value) == (1000, 1.5)


@dataclass
class Control:
    should_save: bool = False
    should_training_stop: bool = False


def test_huggingface_stop_saves_and_stops_once_asked() -> None:
    asked = threading.Event()
    cb = huggingface_stop_callback(asked.is_set, base=HuggingFaceBase)
    control = Control()
    cb.on_step_end(None, None, control)
    assert control == Control()
    asked.set()
    cb.on_step_end(None, None, control)
    assert control == Control(should_save=True, should_training_stop=True)


# -- renamed hooks ------------------------------------------------------------------------------


def test_a_hook_known_under_another_name_is_bound_to_it(metrics: TrainingMetrics) -> None:
    keras2 = fake_base("Keras2Base", "on_train_begin", "on_epoch_begin", "on_batch_end",
                       "on_epoch_end", "on_train_end")  # no on_train_batch_end
    cb = keras_callback(metrics, base=keras2)
    cb.on_batch_end(0, {"loss": 3.0})  # what that framework calls
    assert (metrics.step, metrics.value) == (1, 3.0)


def test_a_hook_the_framework_lacks_is_reported_when_the_callback_is_built(
    metrics: TrainingMetrics,
) -> None:
    renamed = fake_base("LightningV9", "on_train_start", "on_train_step_end",
                        "on_train_epoch_end", "on_train_end", "state_dict", "load_state_dict")
    with pytest.warns(HookWarning, match=r"LightningV9 has no hook on_train_batch_end \(renamed"):
        cb = lightning_callback(metrics, base=renamed)
    # the other hooks still work: steps and progress go on from the epoch-level hooks
    cb.on_train_start(Trainer(0, estimated_stepping_batches=20), None)
    with pytest.warns(HookWarning, match=r"did 10 steps but never called on_train_batch_end"):
        cb.on_train_epoch_end(Trainer(10), None)
    assert metrics.step == 10
    cb.on_train_epoch_end(Trainer(20), None)  # warned once
    assert metrics.step == 20


def test_a_hook_never_called_is_reported_once_steps_were_done(metrics: TrainingMetrics) -> None:
    @dataclass
    class State:
        global_step: int
        max_steps: int = 100

    cb = huggingface_callback(metrics, base=HuggingFaceBase)
    cb.on_train_begin(None, State(30), None)  # resumed at 30
    cb.on_train_end(None, State(30), None)  # no step done: nothing to say
    cb.on_step_end(None, State(31), None)
    with pytest.warns(HookWarning, match="Hugging Face transformers did 1 steps but never called "
                      "on_log"):
        cb.on_train_end(None, State(31), None)


@pytest.mark.parametrize(
    ("factory", "modules", "extra"),
    [
        (lightning_callback, ["lightning.pytorch", "pytorch_lightning"], "lightning"),
        (keras_callback, ["keras.callbacks", "tensorflow.keras.callbacks"], "keras"),
        (huggingface_callback, ["transformers"], "transformers"),
    ],
    ids=["lightning", "keras", "transformers"],
)
def test_missing_framework_names_the_extra(
    metrics: TrainingMetrics, factory: Any, modules: list[str], extra: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for module in modules:  # None in sys.modules: "import" fails as for a missing package
        monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(ImportError, match=rf"pip install 'policyd-exporters\[{extra}\]'"):
        factory(metrics)
