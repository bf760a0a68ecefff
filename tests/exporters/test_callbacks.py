"""Framework callbacks, exercised by shape: none of the frameworks is installed here.

Each factory takes the framework's base class as `base=`; these fakes stand in for
`lightning.pytorch.Callback`, `keras.callbacks.Callback` and `transformers.TrainerCallback`, and
the hooks are called with the arguments those frameworks pass (as documented by them). Without
`base=`, a missing framework must raise an ImportError naming the pip extra.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from typing import Any

import pytest
from policyd_exporters import Identity, TrainingMetrics
from policyd_exporters.callbacks import huggingface_callback, keras_callback, lightning_callback
from prometheus_client.registry import CollectorRegistry


@pytest.fixture
def metrics() -> TrainingMetrics:
    return TrainingMetrics(Identity(job_name="j"), registry=CollectorRegistry(), smoothing_steps=2)


class FakeBase:
    """What the three frameworks' base classes share: a no-argument constructor, no-op hooks."""

    init_called = False

    def __init__(self) -> None:
        self.init_called = True

    def on_train_batch_end(self, *args: Any, **kwargs: Any) -> None:
        raise AssertionError("the base's hook must be overridden")


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
    cb = lightning_callback(metrics, base=FakeBase)
    assert FakeBase in type(cb).__mro__
    assert cb.init_called
    cb.on_train_start(Trainer(0, estimated_stepping_batches=100), None)
    cb.on_train_batch_end(Trainer(1), None, {"loss": Tensor(3.0)}, None, 0)
    cb.on_train_batch_end(Trainer(2), None, Tensor(1.0), None, 1)  # a bare tensor
    cb.on_train_batch_end(Trainer(2), None, None, None, 2)  # manual optimisation: nothing
    assert (metrics.step, metrics.value) == (2, 2.0)
    assert metrics.state_dict()["step"] == 2


def test_lightning_infinite_total_is_ignored(metrics: TrainingMetrics) -> None:
    cb = lightning_callback(metrics, base=FakeBase)
    cb.on_train_start(Trainer(0), None)
    cb.on_train_batch_end(Trainer(5), None, {"loss": 1.0}, None, 0)
    assert metrics.step == 5


def test_keras(metrics: TrainingMetrics) -> None:
    cb = keras_callback(metrics, base=FakeBase)
    cb.params = {"steps": 10, "epochs": 3}  # Keras sets this before on_train_begin
    cb.on_train_begin()
    for batch, loss in enumerate([4.0, 2.0, 1.0]):
        cb.on_train_batch_end(batch, {"loss": loss, "accuracy": 0.5})
    cb.on_train_batch_end(0, {"accuracy": 0.5})  # no loss: nothing
    cb.on_train_batch_end(1, None)
    assert (metrics.step, metrics.value) == (3, 1.5)


def test_huggingface(metrics: TrainingMetrics) -> None:
    @dataclass
    class State:
        global_step: int
        max_steps: int = 1000

    cb = huggingface_callback(metrics, base=FakeBase)
    cb.on_train_begin(None, State(0), None)
    cb.on_log(None, State(500), None, logs={"loss": 2.0, "learning_rate": 1e-3, "epoch": 0.5})
    cb.on_log(None, State(500), None, logs={"eval_loss": 9.0})  # evaluation: skipped
    cb.on_log(None, State(1000), None, logs={"loss": 1.0})
    assert (metrics.step, metrics.value) == (1000, 1.5)


@pytest.mark.parametrize(
    ("factory", "module", "extra"),
    [
        (lightning_callback, "lightning", "lightning"),
        (keras_callback, "keras", "keras"),
        (huggingface_callback, "transformers", "transformers"),
    ],
    ids=["lightning", "keras", "transformers"],
)
def test_missing_framework_names_the_extra(
    metrics: TrainingMetrics, factory: Any, module: str, extra: str
) -> None:
    if importlib.util.find_spec(module) is not None:
        pytest.skip(f"{module} is installed here")
    with pytest.raises(ImportError, match=rf"pip install 'policyd-exporters\[{extra}\]'"):
        factory(metrics)
