"""A job stopped by its checkpoint protocol once it reaches the loss it declares, on one
one-core engine under `policyd run` (QoE with `on_target: stop`). Every figure from the
engine, the trainer's log and the checkpoint on disk.

One job declares `policyd.io/target-loss` (a label) and far more steps than it needs to get
there. Once its loss (the exporter's smoothed mean, scraped by Prometheus) is at or below the
target, policyd sends SIGTERM (the Docker actuator's `Stopper`), the trainer writes its
checkpoint and exits 0, and the container stays exited (its restart policy set to "no"). The
checkpoint is read back from the host's disk (`torch.load`): its step, and its loss (the mean
of the smoothing window it holds). The job declares no QoE target: QoE shares the core with it
as a job without one, and the stop is the step every kind shares (`policyd.engine.delivery`).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path

from tests.e2e.harness import JobSpec, Lab, docker_time, log_points, policyd_run, run_job, wait_for
from tests.e2e.qoe_targets import qoe_policy

TARGET_LOSS_LABEL = "policyd.io/target-loss"
CHECKPOINT_LINE = re.compile(r"checkpoint: step=(\d+) path=(\S+)")


def stop_name(round_: int = 0) -> str:
    return f"tl{round_ or ''}-qoe-stop"


def all_job_names(repeats: int = 1) -> list[str]:
    """The stop job's name in each of `repeats` rounds (the lab's scrape targets)."""
    return [stop_name(r) for r in range(repeats)]


@dataclass(frozen=True)
class StopShape:
    """One job far longer than it needs to reach its target loss (the smoothed mean of the
    FlowCon proof's trainer falls below 0.5 after roughly 10,000 steps: seconds of a core)."""

    target_loss: float = 0.5
    steps: int = 2_000_000
    lr: float = 0.001
    smoothing: int = 500


@dataclass
class Stopped:
    """What the engine, the log and the checkpoint on disk showed of the stop."""

    name: str
    target_loss: float
    steps: int
    started: float
    reached_at: float | None
    """The first logged smoothed loss at or below the target (engine time), or None."""
    finished: float
    exit_code: int
    restarts: int
    last_logged_step: int
    checkpoint_step: int
    checkpoint_path: Path | None
    checkpoint_loss: float | None
    """The mean of the smoothing window the checkpoint holds: the loss the job stopped at."""
    policyd_log: str

    @property
    def stop_after_target_seconds(self) -> float | None:
        return None if self.reached_at is None else self.finished - self.reached_at

    def table(self) -> dict[str, object]:
        return {"job": self.name, "target_loss": self.target_loss, "steps": self.steps,
                "reached_after_s": None if self.reached_at is None
                else round(self.reached_at - self.started, 1),
                "stopped_after_s": round(self.finished - self.started, 1),
                "stop_after_target_s": None if self.stop_after_target_seconds is None
                else round(self.stop_after_target_seconds, 1),
                "exit_code": self.exit_code, "restarts": self.restarts,
                "checkpoint_step": self.checkpoint_step,
                "checkpoint_path": str(self.checkpoint_path) if self.checkpoint_path else None,
                "checkpoint_loss": None if self.checkpoint_loss is None
                else round(self.checkpoint_loss, 4),
                "policyd_says": self.policyd_log}


def checkpoint_loss(path: Path) -> tuple[int, float]:
    """(step, mean of the smoothing window) of a trainer's checkpoint file on disk."""
    import torch  # noqa: PLC0415 (the trainer's own format; only this reader needs torch)

    state = torch.load(path, weights_only=True)
    metrics = state["metrics"]
    window = [v for v in metrics["window"] if v is not None]
    return int(metrics["step"]), sum(window) / len(window)


def run_stop(lab_: Lab, shape: StopShape, directory: Path, *, round_: int = 0,
             timeout_seconds: float = 300) -> Stopped:
    """`policyd run` with QoE and `on_target: stop`; one job declaring a target loss; wait
    until it has exited; the figures."""
    name = stop_name(round_)
    ckpt_root = lab_.ckpt / f"stop-{round_}"
    with policyd_run(directory / f"policyd-{name}", qoe_policy(on_target="stop"),
                     engines=lab_.engines, prometheus_url=lab_.prometheus.url) as policyd:
        container = run_job(lab_.engine("e1"), JobSpec(
            name, steps=shape.steps, lr=shape.lr, smoothing=shape.smoothing, cpuset="0",
            print_every=500), lab_.ports[name], ckpt_root,
            labels={TARGET_LOSS_LABEL: f"{shape.target_loss:g}"})
        wait_for(lambda: lab_.events.of(name, "die"), timeout_seconds=timeout_seconds,
                 what=f"{name} to be stopped", every=0.5,
                 state=lambda: log_points(container)[-1:])
        time.sleep(2)  # the engine's restart policy would act now, were it left as it was
        said = "\n".join(line for line in policyd.text().splitlines()
                         if "delivered" in line and name in line)
    container.reload()
    state = container.attrs["State"]
    text = container.logs().decode(errors="replace")
    points = log_points(container)
    found = CHECKPOINT_LINE.findall(text)
    path = None
    step, loss = -1, None
    if found:
        step_text, inside = found[-1]
        path = ckpt_root / name / Path(inside).relative_to("/ckpt")
        if path.exists():
            step, loss = checkpoint_loss(path)
        else:
            step = int(step_text)
    out = Stopped(
        name=name, target_loss=shape.target_loss, steps=shape.steps,
        started=docker_time(state["StartedAt"]),
        reached_at=next((t for t, _, mean in points if mean <= shape.target_loss), None),
        finished=docker_time(state["FinishedAt"]), exit_code=int(state["ExitCode"]),
        restarts=len(lab_.events.of(name, "start")) - 1,
        last_logged_step=points[-1][1] if points else -1, checkpoint_step=step,
        checkpoint_path=path, checkpoint_loss=loss, policyd_log=said[-600:])
    container.remove(force=True)
    return out

