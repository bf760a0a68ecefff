"""`lightning_callback` in a real `Trainer.fit` on CPU: a linear regression of 4 inputs, 8
batches an epoch; the exporter is scraped over HTTP during and after training, and after a
resume from Lightning's own checkpoint (`ckpt_path=`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lightning as L
import pytest
from policyd_exporters.callbacks import lightning_callback

from tests.frameworks.exporter import Exporter, Scrape, exporter, mean_of_last
from tests.frameworks.lightning_model import BATCHES, Regression, data

# Lightning 2.6.6's own pytree helper uses a torch API that torch 2.13 deprecates: theirs, not ours.
pytestmark = pytest.mark.filterwarnings(
    r"ignore:`isinstance\(treespec, LeafSpec\)` is deprecated:FutureWarning")

WINDOW = 4


class Probe(L.Callback):
    """Scrapes the exporter at train start and after each batch (after the policyd callback,
    which comes first in `callbacks`)."""

    def __init__(self, job: Exporter) -> None:
        self.job = job
        self.at_start: Scrape | None = None
        self.after: dict[int, Scrape] = {}

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.at_start = self.job.scrape()

    def on_train_batch_end(self, trainer: L.Trainer, *args: Any) -> None:
        self.after[trainer.global_step] = self.job.scrape()


def trainer(job: Exporter, probe: Probe, **kwargs: Any) -> L.Trainer:
    return L.Trainer(accelerator="cpu", logger=False, enable_checkpointing=False,
                     enable_progress_bar=False, enable_model_summary=False,
                     callbacks=[lightning_callback(job.metrics), probe], **kwargs)


def test_fit_reports_lightnings_loss_steps_and_total(tmp_path: Path) -> None:
    model = Regression()
    with exporter("lightning", smoothing_steps=WINDOW) as job:
        probe = Probe(job)
        run = trainer(job, probe, max_epochs=3)
        run.fit(model, data())
        after = job.scrape()
    total = 3 * BATCHES
    assert run.global_step == total == run.estimated_stepping_batches
    assert probe.at_start == Scrape(steps=0, loss=None, progress=0.0)
    for step in (1, 5, total):  # during training: the step Lightning is at, its losses so far
        assert probe.after[step] == Scrape(
            steps=step, loss=pytest.approx(mean_of_last(model.losses[:step], WINDOW)),
            progress=pytest.approx(step / total))
    assert after == probe.after[total]


def test_resume_from_lightnings_checkpoint_continues_the_counter_and_the_window(
    tmp_path: Path,
) -> None:
    checkpoint = tmp_path / "epoch-2.ckpt"
    first = Regression()
    with exporter("lightning", smoothing_steps=WINDOW) as job:
        run = trainer(job, Probe(job), max_epochs=2)
        run.fit(first, data())
        run.save_checkpoint(checkpoint)  # holds the callback's state_dict too
        before = job.scrape()
    assert before.steps == 2 * BATCHES

    second = Regression()  # a new process: new model, new exporter, same checkpoint
    with exporter("lightning", smoothing_steps=WINDOW) as job:
        probe = Probe(job)
        run = trainer(job, probe, max_epochs=3)
        run.fit(second, data(), ckpt_path=checkpoint)
        after = job.scrape()
    # Before its first batch, the resumed job shows the step and loss it stopped at.
    assert probe.at_start == Scrape(steps=2 * BATCHES, loss=before.loss,
                                    progress=pytest.approx(2 / 3))
    assert len(second.losses) == BATCHES  # only the third epoch was trained again
    assert after == Scrape(steps=3 * BATCHES, loss=pytest.approx(mean_of_last(
        second.losses, WINDOW)), progress=1.0)
