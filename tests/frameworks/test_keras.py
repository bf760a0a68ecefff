"""`keras_callback` in a real `model.fit` (Keras 3 on the PyTorch backend, CPU): a linear
regression of 4 inputs, 8 batches an epoch; the exporter is scraped over HTTP during and after
training, after a resume by Keras's own `BackupAndRestore`, and with a Keras whose batch hook
is no longer called (a renamed hook)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import keras
import numpy as np
import pytest
from policyd_exporters.callbacks import HookWarning, keras_callback

from tests.frameworks.exporter import Exporter, Scrape, exporter, mean_of_last

# Keras 3.15's torch backend converts torch tensors with np.array(), and torch's __array__ has
# no `copy` argument, which numpy 2 deprecates: theirs, on every fit, not ours.
pytestmark = pytest.mark.filterwarnings(
    "ignore:__array__ implementation doesn't accept a copy keyword:DeprecationWarning")

BATCHES = 8
WINDOW = 4


def test_keras_runs_on_pytorch() -> None:
    assert keras.backend.backend() == "torch"


def data() -> tuple[np.ndarray, np.ndarray]:
    x = np.random.default_rng(0).normal(size=(BATCHES * 8, 4)).astype("float32")
    return x, x.sum(axis=1, keepdims=True)


def model() -> keras.Model:
    m = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    m.compile(optimizer=keras.optimizers.SGD(0.05), loss="mse")
    return m


class Probe(keras.callbacks.Callback):
    """Records the loss Keras logs and scrapes the exporter after each batch and at each epoch's
    start (after the policyd callback, which comes first in `callbacks`)."""

    def __init__(self, job: Exporter, *, stop_at_epoch: int | None = None) -> None:
        super().__init__()
        self.job = job
        self.stop_at_epoch = stop_at_epoch
        self.logged: list[float] = []
        self.after: list[Scrape] = []
        self.at_epoch: dict[int, Scrape] = {}

    def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
        if epoch == self.stop_at_epoch:
            raise RuntimeError("interrupted")  # as the BackupAndRestore documentation does
        self.at_epoch[epoch] = self.job.scrape()

    def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
        self.logged.append(float(logs["loss"]))
        self.after.append(self.job.scrape())


def test_fit_reports_keras_logged_loss_steps_and_total() -> None:
    x, y = data()
    with exporter("keras", smoothing_steps=WINDOW) as job:
        probe = Probe(job)
        m = model()
        m.fit(x, y, batch_size=8, epochs=3, verbose=0,
              callbacks=[keras_callback(job.metrics), probe])
        after = job.scrape()
    total = 3 * BATCHES
    assert int(m.optimizer.iterations.value) == total
    for step in (1, 5, total):
        assert probe.after[step - 1] == Scrape(
            steps=step, loss=pytest.approx(mean_of_last(probe.logged[:step], WINDOW)),
            progress=pytest.approx(step / total))
    assert after == probe.after[-1]


def test_resume_by_backup_and_restore_continues_the_counter(tmp_path: Path) -> None:
    x, y = data()
    with exporter("keras", smoothing_steps=WINDOW) as job:
        with pytest.raises(RuntimeError, match="interrupted"):
            model().fit(x, y, batch_size=8, epochs=3, verbose=0, callbacks=[
                keras_callback(job.metrics), Probe(job, stop_at_epoch=2),
                keras.callbacks.BackupAndRestore(str(tmp_path))])
        assert job.scrape().steps == 2 * BATCHES

    with exporter("keras", smoothing_steps=WINDOW) as job:  # a new process: all new
        probe = Probe(job)
        m = model()
        m.fit(x, y, batch_size=8, epochs=3, verbose=0, callbacks=[
            keras_callback(job.metrics), probe, keras.callbacks.BackupAndRestore(str(tmp_path))])
        after = job.scrape()
    assert list(probe.at_epoch) == [2]  # Keras resumed at the third epoch
    assert probe.at_epoch[2] == Scrape(steps=2 * BATCHES, loss=None,
                                       progress=pytest.approx(2 / 3))
    assert after == Scrape(steps=3 * BATCHES, loss=pytest.approx(mean_of_last(
        probe.logged, WINDOW)), progress=1.0)


class SkipsBatchHooks(keras.callbacks.CallbackList):
    """A Keras that no longer calls `on_train_batch_end` (renamed it, say): the callback list
    Keras builds, minus that dispatch. `model.fit` takes a CallbackList as it is."""

    def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
        return None


def test_a_batch_hook_keras_stopped_calling_is_reported_and_steps_go_on() -> None:
    x, y = data()
    with exporter("keras", smoothing_steps=WINDOW) as job:
        m = model()
        callbacks = SkipsBatchHooks([keras_callback(job.metrics)], add_history=True,
                                    model=m, epochs=2, steps=BATCHES, verbose=0)
        with pytest.warns(HookWarning, match="Keras did 8 steps but never called "
                          "on_train_batch_end"):
            m.fit(x, y, batch_size=8, epochs=2, verbose=0, callbacks=callbacks)
        after = job.scrape()
    assert after == Scrape(steps=2 * BATCHES, loss=None, progress=1.0)
