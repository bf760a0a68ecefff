"""A Hugging Face Trainer job that follows policyd's checkpoint protocol, run as a process by
test_checkpoint_protocol.py:  python -m tests.frameworks.huggingface_job OUTPUT_DIR STEPS

The lines marked `# policyd` are what exporters/README.md tells a user to add; the rest is the
job and what the test reads: "metrics: URL", "train start: step=N exported=N ...",
"step=N" per step, then
"stopped: step=N" or "done: step=N"; the process exits 0 either way.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from typing import Any

import torch
from policyd_exporters import Identity, TrainingMetrics, serve
from policyd_exporters.callbacks import huggingface_callback, huggingface_stop_callback
from transformers import Trainer, TrainerCallback, TrainingArguments
from transformers.trainer_utils import get_last_checkpoint

from tests.frameworks.bert_model import Tokens, bert

METRICS = TrainingMetrics(Identity(job_name="job"), smoothing_steps=4, registry=None)
"""Replaced in main(); Report prints what the exporter holds when training starts (after the
policyd callback's own on_train_start, which comes first in `callbacks`)."""


class Report(TrainerCallback):
    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        print(f"train start: step={state.global_step} exported={METRICS.step}", flush=True)

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        print(f"step={state.global_step}", flush=True)
        time.sleep(0.05)


def main(directory: str, steps: int) -> None:
    torch.set_num_threads(1)
    stop = threading.Event()  # policyd
    signal.signal(signal.SIGTERM, lambda signum, frame: stop.set())  # policyd
    global METRICS  # noqa: PLW0603 (the job is a script)
    metrics = METRICS = TrainingMetrics(Identity(job_name="hf-job"), smoothing_steps=1)
    server = serve(0, addr="127.0.0.1")
    print(f"metrics: {server.url}", flush=True)
    args = TrainingArguments(output_dir=directory, use_cpu=True, report_to=[], max_steps=steps,
                             logging_steps=2, save_strategy="no", per_device_train_batch_size=8,
                             disable_tqdm=True)
    trainer = Trainer(model=bert(), args=args, train_dataset=Tokens(), callbacks=[
        huggingface_callback(metrics), huggingface_stop_callback(stop.is_set),  # policyd
        Report()])
    last = get_last_checkpoint(directory) if os.path.isdir(directory) else None  # policyd
    trainer.train(resume_from_checkpoint=last)  # policyd: resume_from_checkpoint
    print(f"{'stopped' if stop.is_set() else 'done'}: step={trainer.state.global_step}",
          flush=True)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
