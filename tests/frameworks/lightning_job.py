"""A Lightning training job that follows policyd's checkpoint protocol, run as a process by
test_checkpoint_protocol.py:  python -m tests.frameworks.lightning_job CHECKPOINT_DIR STEPS

The lines marked `# policyd` are what exporters/README.md tells a user to add; the rest is the
job and what the test reads: "metrics: URL", "train start: step=N exported=N ...",
"step=N" per step, "done: step=N" (a SIGTERM ends the process inside `fit`, with exit
code 0).
"""

from __future__ import annotations

import os
import sys
from typing import Any

import lightning as L
import torch
from lightning.pytorch.callbacks import OnExceptionCheckpoint
from policyd_exporters import Identity, TrainingMetrics, serve
from policyd_exporters.callbacks import lightning_callback

from tests.frameworks.lightning_model import Regression, data

METRICS = TrainingMetrics(Identity(job_name="job"), smoothing_steps=4, registry=None)
"""Replaced in main(); Report prints what the exporter holds when training starts (after the
policyd callback's own on_train_start, which comes first in `callbacks`)."""


class Report(L.Callback):
    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        print(f"train start: step={trainer.global_step} exported={METRICS.step} "
              f"loss={METRICS.value}", flush=True)

    def on_train_batch_end(self, trainer: L.Trainer, *args: Any) -> None:
        print(f"step={trainer.global_step}", flush=True)


def main(directory: str, steps: int) -> None:
    torch.set_num_threads(1)
    global METRICS  # noqa: PLW0603 (the job is a script)
    metrics = METRICS = TrainingMetrics(Identity(job_name="lightning-job"), smoothing_steps=4)
    server = serve(0, addr="127.0.0.1")
    print(f"metrics: {server.url}", flush=True)
    # Lightning turns SIGTERM into an exception at the next batch end; this saves a checkpoint
    # on it, and the exception ends the process with status 0.
    on_stop = OnExceptionCheckpoint(directory, filename="stopped")  # policyd
    trainer = L.Trainer(accelerator="cpu", logger=False, default_root_dir=directory,
                        enable_progress_bar=False, enable_model_summary=False, max_steps=steps,
                        callbacks=[lightning_callback(metrics), on_stop, Report()])  # policyd
    resume = on_stop.ckpt_path if os.path.exists(on_stop.ckpt_path) else None  # policyd
    trainer.fit(Regression(step_sleep=0.05), data(), ckpt_path=resume)  # policyd: ckpt_path
    print(f"done: step={trainer.global_step}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
