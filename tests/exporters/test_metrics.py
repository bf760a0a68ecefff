"""TrainingMetrics as Prometheus sees it: names, labels, smoothing, NaN, steps, progress."""

from __future__ import annotations

import math

import pytest
from policyd_exporters import Identity, TrainingMetrics
from prometheus_client.registry import CollectorRegistry

from tests.exporters.scrape import from_registry, value

ID = Identity(job_name="vae-1", namespace="ml", pod="vae-1-x", container="trainer")
LABELS = {"job_name": "vae-1", "namespace": "ml", "pod": "vae-1-x", "container": "trainer"}


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()


def test_no_loss_before_the_first_value_but_steps_and_invalid_at_zero(
    registry: CollectorRegistry,
) -> None:
    TrainingMetrics(ID, registry=registry)
    samples = from_registry(registry)
    assert "policyd_training_loss" not in samples  # a 0 would read as "converged"
    assert samples["policyd_training_steps_total"] == [(LABELS, 0.0)]
    assert samples["policyd_training_invalid_values_total"] == [(LABELS, 0.0)]
    assert "policyd_training_progress_ratio" not in samples


def test_every_series_carries_the_identity_labels(registry: CollectorRegistry) -> None:
    m = TrainingMetrics(ID, registry=registry, total_steps=10)
    m.observe(1.0)
    samples = from_registry(registry)
    assert set(samples) == {
        "policyd_training_loss",
        "policyd_training_steps_total",
        "policyd_training_progress_ratio",
        "policyd_training_invalid_values_total",
    }
    assert all(labels == LABELS for series in samples.values() for labels, _ in series)


def test_loss_is_the_mean_of_the_last_smoothing_steps_values(registry: CollectorRegistry) -> None:
    m = TrainingMetrics(ID, registry=registry, smoothing_steps=100)
    for i in range(150):  # values 0..149: the last 100 are 50..149
        m.observe(float(i))
    assert value(from_registry(registry), "policyd_training_loss") == pytest.approx(99.5)
    assert value(from_registry(registry), "policyd_training_steps_total") == 150


def test_smoothing_steps_1_is_the_raw_value(registry: CollectorRegistry) -> None:
    m = TrainingMetrics(ID, registry=registry, smoothing_steps=1)
    for v in (2.0, 0.5, 0.25):
        m.observe(v)
    assert value(from_registry(registry), "policyd_training_loss") == 0.25


def test_a_nan_batch_does_not_poison_the_loss_but_is_counted(registry: CollectorRegistry) -> None:
    m = TrainingMetrics(ID, registry=registry, smoothing_steps=4)
    for v in (1.0, math.nan, 3.0, math.inf):
        m.observe(v)
    samples = from_registry(registry)
    assert value(samples, "policyd_training_loss") == 2.0
    assert value(samples, "policyd_training_invalid_values_total") == 2
    assert value(samples, "policyd_training_steps_total") == 4  # bad batches are still steps


def test_a_window_of_only_invalid_values_hides_the_loss(registry: CollectorRegistry) -> None:
    m = TrainingMetrics(ID, registry=registry, smoothing_steps=2)
    for v in (1.0, math.nan, math.nan):
        m.observe(v)
    assert "policyd_training_loss" not in from_registry(registry)  # diverged: no frozen value


def test_steps_explicit_repeat_and_backwards(registry: CollectorRegistry) -> None:
    m = TrainingMetrics(ID, registry=registry)
    m.observe(1.0, step=10)
    m.observe(1.0, step=10)  # two values logged for one step
    m.observe(1.0)
    assert m.step == 11
    with pytest.raises(ValueError, match="set_step"):
        m.observe(1.0, step=3)
    m.set_step(3)  # what a resume does
    assert value(from_registry(registry), "policyd_training_steps_total") == 3


def test_progress_ratio(registry: CollectorRegistry) -> None:
    m = TrainingMetrics(ID, registry=registry, total_steps=200)
    m.observe(1.0, step=50)
    assert value(from_registry(registry), "policyd_training_progress_ratio") == 0.25
    m.set_total_steps(None)
    assert "policyd_training_progress_ratio" not in from_registry(registry)


def test_accepts_anything_float_accepts(registry: CollectorRegistry) -> None:
    class Tensorish:
        def __float__(self) -> float:
            return 0.75

    m = TrainingMetrics(ID, registry=registry, smoothing_steps=1)
    m.observe(Tensorish())
    assert m.value == 0.75


def test_a_tensor_that_requires_grad_is_read_without_torchs_warning(
    registry: CollectorRegistry,
) -> None:
    import torch  # noqa: PLC0415 (heavy: only this test needs it)

    loss = (torch.tensor(1.5, requires_grad=True) * 0.5)  # what Lightning hands its callbacks
    m = TrainingMetrics(ID, registry=registry, smoothing_steps=1)
    m.observe(loss)  # float(loss) would warn, an error under this suite's filterwarnings
    assert m.value == 0.75


def test_state_dict_restores_step_and_window(registry: CollectorRegistry) -> None:
    m = TrainingMetrics(ID, registry=registry, smoothing_steps=3)
    for v in (9.0, 1.0, math.nan, 2.0):
        m.observe(v)
    other = CollectorRegistry()
    resumed = TrainingMetrics(ID, registry=other, smoothing_steps=3)
    resumed.load_state_dict(m.state_dict())
    assert from_registry(other) == from_registry(registry) | {
        "policyd_training_invalid_values_total": [(LABELS, 0.0)]  # a counter of this process
    }
    assert resumed.value == 1.5
    assert resumed.step == 4


def test_two_exporters_on_one_registry_are_refused(registry: CollectorRegistry) -> None:
    TrainingMetrics(ID, registry=registry)
    with pytest.raises(ValueError, match="Duplicated"):
        TrainingMetrics(ID, registry=registry)


def test_registry_none_registers_nowhere(registry: CollectorRegistry) -> None:
    m = TrainingMetrics(ID, registry=None)
    registry.register(m)
    m.observe(1.5)
    assert value(from_registry(registry), "policyd_training_loss") == 1.5


def test_only_known_labels(registry: CollectorRegistry) -> None:
    TrainingMetrics(Identity(job_name="j"), registry=registry).observe(1.0)
    ((labels, _),) = from_registry(registry)["policyd_training_loss"]
    assert labels == {"job_name": "j"}
