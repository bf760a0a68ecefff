"""`huggingface_callback` in a real `Trainer.train` on CPU: a two-layer BERT built from its
config (nothing downloaded: the conftest switches the hub off) classifying synthetic token
sequences; the exporter is scraped over HTTP during and after training, and after a resume from
the Trainer's own checkpoint (`resume_from_checkpoint=`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from policyd_exporters.callbacks import huggingface_callback
from transformers import Trainer, TrainerCallback, TrainingArguments

from tests.frameworks.bert_model import Tokens, bert
from tests.frameworks.exporter import Exporter, Scrape, exporter, mean_of_last

STEPS = 12
LOGGING_STEPS = 2  # the Trainer's mean over 2 steps; the exporter's window over 2 logs on top
WINDOW = 2


class Probe(TrainerCallback):
    """Records the training losses the Trainer logs and scrapes the exporter at train start and
    after each step and each log (after the policyd callback, which comes first)."""

    def __init__(self, job: Exporter) -> None:
        self.job = job
        self.logged: list[float] = []
        self.at_start: Scrape | None = None
        self.after_step: dict[int, Scrape] = {}
        self.after_log: dict[int, Scrape] = {}

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.at_start = self.job.scrape()

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.after_step[state.global_step] = self.job.scrape()

    def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kwargs: Any
               ) -> None:
        if logs and "loss" in logs:
            self.logged.append(float(logs["loss"]))
            self.after_log[state.global_step] = self.job.scrape()


def trainer(job: Exporter, probe: Probe, output: Path, **kwargs: Any) -> Trainer:
    args = TrainingArguments(output_dir=str(output), use_cpu=True, report_to=[],
                             max_steps=STEPS, logging_steps=LOGGING_STEPS,
                             per_device_train_batch_size=8, learning_rate=1e-3,
                             disable_tqdm=True, **kwargs)
    return Trainer(model=bert(), args=args, train_dataset=Tokens(),
                   callbacks=[huggingface_callback(job.metrics), probe])


def test_train_reports_the_trainers_logged_loss_steps_and_total(tmp_path: Path) -> None:
    with exporter("hf", smoothing_steps=WINDOW) as job:
        probe = Probe(job)
        run = trainer(job, probe, tmp_path, save_strategy="no")
        run.train()
        after = job.scrape()
    assert run.state.global_step == STEPS
    assert probe.at_start == Scrape(steps=0, loss=None, progress=0.0)
    assert len(probe.logged) == STEPS // LOGGING_STEPS
    # every step moves the counter (the Trainer calls on_step_end before it logs)
    for step in range(1, STEPS + 1):
        assert probe.after_step[step].steps == step
        assert probe.after_step[step].progress == pytest.approx(step / STEPS)
    assert probe.after_step[1].loss is None
    # each log moves the loss: the mean of the last WINDOW logged means
    assert sorted(probe.after_log) == list(range(LOGGING_STEPS, STEPS + 1, LOGGING_STEPS))
    for step, seen in probe.after_log.items():
        logs = probe.logged[:step // LOGGING_STEPS]
        assert seen == Scrape(steps=step, loss=pytest.approx(mean_of_last(logs, WINDOW)),
                              progress=pytest.approx(step / STEPS))
    assert after == probe.after_log[STEPS]


def test_resume_from_the_trainers_checkpoint_continues_the_counter(tmp_path: Path) -> None:
    with exporter("hf", smoothing_steps=WINDOW) as job:
        trainer(job, Probe(job), tmp_path, save_strategy="steps", save_steps=4).train()
    checkpoint = tmp_path / "checkpoint-8"
    assert checkpoint.is_dir()

    with exporter("hf", smoothing_steps=WINDOW) as job:  # a new process: all new
        probe = Probe(job)
        trainer(job, probe, tmp_path, save_strategy="no").train(
            resume_from_checkpoint=str(checkpoint))
        after = job.scrape()
    assert probe.at_start == Scrape(steps=8, loss=None, progress=pytest.approx(8 / STEPS))
    assert sorted(probe.after_step) == [9, 10, 11, 12]
    assert after == Scrape(steps=STEPS, loss=pytest.approx(mean_of_last(probe.logged, WINDOW)),
                           progress=1.0)
