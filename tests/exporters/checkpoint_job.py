"""A tiny training job for the process tests: a "model" that is one number decaying each step.

Run by test_checkpoint_process.py as a real process:
    python checkpoint_job.py CHECKPOINT_DIR
Prints "metrics: URL", then "resumed: step=N" or "fresh start", then "step=N loss=X" per step.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from policyd_exporters import Checkpointer, Identity, TrainingMetrics, serve
from prometheus_client.registry import CollectorRegistry


def main(directory: str) -> None:
    registry = CollectorRegistry()
    metrics = TrainingMetrics(Identity(job_name="tiny"), registry=registry, smoothing_steps=5)
    server = serve(0, addr="127.0.0.1", registry=registry)
    print(f"metrics: {server.url}", flush=True)
    model = {"x": 1.0}

    def save(path: Path) -> None:
        path.write_text(json.dumps({"model": model, "metrics": metrics.state_dict()}))

    def load(path: Path) -> dict[str, Any]:
        loaded: dict[str, Any] = json.loads(path.read_text())
        return loaded

    checkpointer = Checkpointer(directory, save=save, load=load, keep=2, grace_seconds=5)
    resumed = checkpointer.resume()
    if resumed is None:
        print("fresh start", flush=True)
    else:
        model.update(resumed.state["model"])
        metrics.load_state_dict(resumed.state["metrics"])
        print(f"resumed: step={resumed.step}", flush=True)
    step = metrics.step
    while True:
        model["x"] *= 0.98  # one "optimizer step"
        step += 1
        metrics.observe(model["x"], step=step)
        print(f"step={step} loss={model['x']:.6f}", flush=True)
        checkpointer.step(step)  # SIGTERM: saves step-<step>.ckpt, raises SystemExit(0)
        time.sleep(0.005)


if __name__ == "__main__":
    main(sys.argv[1])
