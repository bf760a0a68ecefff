"""Record held-out training curves for the forecast accuracy benchmark.

Trains, for real on this machine's CPU, six small PyTorch jobs chosen to be *unlike* the six
curves the simulator is fitted to (`tools/record_curves.py`: VAE, CNN, LSTM, bidirectional GRU,
GRU, RNN, all Adam at a constant learning rate): other architectures, other optimisers, and
learning-rate schedules that put plateaus and drops into the curve (multi-step decay, warm-up
then cosine, one-cycle, reduce-on-plateau, a saddle plateau under plain SGD). The data is
scikit-learn's bundled digits set and its `make_friedman1` generator: nothing is downloaded.

Per optimizer step the script records the training loss of that mini-batch (the job's
evaluation function, `losses[i]` computed with the parameters after i steps), the wall seconds
(`time.perf_counter`), the CPU-seconds of the process (`time.process_time`, all threads) and the
learning rate. The main run of each job is at 1 torch thread. A separate, shorter speed check
trains the same job for `SPEED_STEPS` steps at 1 thread and then `SPEED_STEPS` more at 2
threads, so the forecast's speed model can be checked against a measured second allocation.

These curves are the forecast's *test set*: they must never be used to fit the simulator's
family, to choose the forecast's curve family, or to tune the forecast
(`benchmarks/forecast_accuracy.py` only reads them; see `benchmarks/data/README.md`).

Run:  flock /tmp/policyd-slow.lock .venv/bin/python tools/record_heldout.py \
          --out benchmarks/data/heldout_curves.json
This is a tool, not library code: it needs torch and scikit-learn, which policyd does not.
"""

from __future__ import annotations

import argparse
import datetime as dt
import itertools
import json
import math
import os
import platform
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import sklearn  # type: ignore[import-untyped]
import torch
from sklearn.datasets import load_digits, make_friedman1  # type: ignore[import-untyped]
from torch import nn
from torch.nn import functional as F

FORMAT_VERSION = 1
DEFAULT_SEED = 20261123
SPEED_STEPS = 100  # steps at 1 thread, then as many at 2 threads, in the speed check


# ----------------------------------------------------------------------------------------------
# Data: (inputs, targets, loss function), all bundled or generated, never downloaded


@dataclass(frozen=True, kw_only=True)
class Data:
    x: torch.Tensor
    y: torch.Tensor
    loss: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    input_noise_std: float = 0.0
    description: str = ""


def digits(noise: float) -> Data:
    d = load_digits()
    return Data(x=torch.tensor(d.data / 16.0, dtype=torch.float32),
                y=torch.tensor(d.target, dtype=torch.long), loss=F.cross_entropy,
                input_noise_std=noise,
                description=f"sklearn load_digits (1797 8x8 images, bundled), pixel noise "
                            f"N(0, {noise}^2) per batch; cross-entropy, nats")


def digits_reconstruction(noise: float) -> Data:
    d = load_digits()
    x = torch.tensor(d.data / 16.0, dtype=torch.float32)
    return Data(x=x, y=x, loss=F.mse_loss, input_noise_std=noise,
                description=f"sklearn load_digits, denoising: input + N(0, {noise}^2) noise, "
                            "target the clean image; mean squared error per pixel")


def friedman(seed: int) -> Data:
    x, y = make_friedman1(n_samples=4000, n_features=10, noise=1.0, random_state=seed)
    xt = torch.tensor(x, dtype=torch.float32)
    yt = torch.tensor(y, dtype=torch.float32)
    yt = ((yt - yt.mean()) / yt.std()).unsqueeze(1)
    return Data(x=(xt - 0.5) * 2.0, y=yt, loss=F.mse_loss,
                description="sklearn make_friedman1 (4000 x 10, generated in the script, noise "
                            "1.0), standardised; mean squared error of the standardised target")


# ----------------------------------------------------------------------------------------------
# Models


def mlp(sizes: list[int], activation: Callable[[], nn.Module] = nn.ReLU) -> nn.Sequential:
    layers: list[nn.Module] = []
    for a, b in itertools.pairwise(sizes):
        layers += [nn.Linear(a, b), activation()]
    return nn.Sequential(*layers[:-1])


class RowTransformer(nn.Module):
    """A tiny Transformer encoder reading an 8x8 image as 8 row tokens; mean-pooled head."""

    def __init__(self, width: int = 32, heads: int = 4, layers: int = 2) -> None:
        super().__init__()
        self.embed = nn.Linear(8, width)
        self.position = nn.Parameter(torch.zeros(1, 8, width))
        layer = nn.TransformerEncoderLayer(width, heads, dim_feedforward=2 * width,
                                           dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(width, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.embed(x.view(-1, 8, 8)) + self.position
        return self.head(self.encoder(h).mean(1))  # type: ignore[no-any-return]


class BatchNormCNN(nn.Module):
    """Two convolutions with batch normalisation, global average pooling, one dense layer."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
            nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10),
        )  # fmt: skip

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x.view(-1, 1, 8, 8))  # type: ignore[no-any-return]


def saddle_mlp() -> nn.Sequential:
    """A deep, narrow tanh MLP with small initial weights: plain SGD sits on a plateau (a saddle
    near the constant predictor) before the loss drops."""
    net = mlp([64, 32, 32, 32, 32, 32, 10], nn.Tanh)
    for m in net:
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, std=0.05)
            nn.init.zeros_(m.bias)
    return net


# ----------------------------------------------------------------------------------------------
# Jobs: model, data, optimiser and schedule


Schedule = Callable[[torch.optim.Optimizer, int], Any]


@dataclass(frozen=True, kw_only=True)
class Job:
    name: str
    description: str
    model: Callable[[], nn.Module]
    data: Callable[[int], Data]
    optimizer: Callable[[Any], torch.optim.Optimizer]
    schedule: Schedule | None  # (optimizer, total steps) -> an LR scheduler, stepped per step
    plateau: bool = False  # ReduceLROnPlateau: stepped with the mean loss of every 100 steps
    steps: int = 3000
    batch_size: int = 64
    hyperparameters: dict[str, Any] | None = None


def _warmup_cosine(optimizer: torch.optim.Optimizer, total: int) -> Any:
    warmup = max(1, total // 20)

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        return 0.5 * (1.0 + math.cos(math.pi * (step - warmup) / max(1, total - warmup)))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


JOBS: dict[str, Job] = {
    j.name: j
    for j in (
        Job(name="mlp-sgd-multistep",
            description="MLP 64-256-256-10 (ReLU) classifying the digits; SGD momentum 0.9, "
                        "lr 0.05, x0.1 at 50% and 75% of the run",
            model=lambda: mlp([64, 256, 256, 10]), data=lambda s: digits(0.4),
            optimizer=lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9),
            schedule=lambda o, n: torch.optim.lr_scheduler.MultiStepLR(
                o, milestones=[n // 2, (3 * n) // 4], gamma=0.1),
            steps=4000,
            hyperparameters={"optimizer": "SGD", "momentum": 0.9, "lr": 0.05,
                             "schedule": "MultiStepLR x0.1 at 50%, 75%", "batch": 64}),
        Job(name="transformer-adamw-cosine",
            description="Transformer encoder (2 layers, width 32, 4 heads) reading the digits "
                        "row by row; AdamW lr 3e-3 weight decay 0.01, 5% linear warm-up then "
                        "cosine decay to 0",
            model=RowTransformer, data=lambda s: digits(0.4),
            optimizer=lambda p: torch.optim.AdamW(p, lr=3e-3, weight_decay=0.01),
            schedule=_warmup_cosine, steps=1000, batch_size=32,
            hyperparameters={"optimizer": "AdamW", "lr": 3e-3, "weight_decay": 0.01,
                             "schedule": "5% linear warm-up, cosine to 0", "batch": 32}),
        Job(name="bncnn-nesterov-onecycle",
            description="CNN with batch norm (conv16-conv32-global pool-fc10) classifying the "
                        "digits; SGD Nesterov momentum 0.9, one-cycle lr up to 0.1",
            model=BatchNormCNN, data=lambda s: digits(0.4),
            optimizer=lambda p: torch.optim.SGD(p, lr=0.01, momentum=0.9, nesterov=True),
            schedule=lambda o, n: torch.optim.lr_scheduler.OneCycleLR(
                o, max_lr=0.1, total_steps=n),
            steps=1200,
            hyperparameters={"optimizer": "SGD", "nesterov": True, "momentum": 0.9,
                             "schedule": "OneCycleLR max_lr 0.1", "batch": 64}),
        Job(name="dae-rmsprop-plateau",
            description="denoising autoencoder 64-128-16-128-64 (ReLU, sigmoid output) on the "
                        "digits; RMSprop lr 1e-3, ReduceLROnPlateau (x0.2, patience 3 x 100 "
                        "steps)",
            model=lambda: nn.Sequential(mlp([64, 128, 16, 128, 64]), nn.Sigmoid()),
            data=lambda s: digits_reconstruction(0.3),
            optimizer=lambda p: torch.optim.RMSprop(p, lr=1e-3), schedule=None, plateau=True,
            steps=4000,
            hyperparameters={"optimizer": "RMSprop", "lr": 1e-3,
                             "schedule": "ReduceLROnPlateau factor 0.2 patience 3 "
                                         "(on the mean loss of every 100 steps)", "batch": 64}),
        Job(name="saddle-tanh-sgd",
            description="deep narrow tanh MLP (5 hidden layers of 32, weights N(0, 0.05^2)) "
                        "classifying the digits; plain SGD lr 0.2: a long plateau, then a drop",
            model=saddle_mlp, data=lambda s: digits(0.2),
            optimizer=lambda p: torch.optim.SGD(p, lr=0.2), schedule=None, steps=6000,
            hyperparameters={"optimizer": "SGD", "lr": 0.2, "schedule": "constant",
                             "batch": 64}),
        Job(name="regression-adagrad-step",
            description="MLP 10-64-64-1 (SiLU) regressing Friedman #1; Adagrad lr 0.05, x0.3 "
                        "every third of the run",
            model=lambda: mlp([10, 64, 64, 1], nn.SiLU), data=friedman,
            optimizer=lambda p: torch.optim.Adagrad(p, lr=0.05),
            schedule=lambda o, n: torch.optim.lr_scheduler.StepLR(o, step_size=n // 3,
                                                                  gamma=0.3),
            steps=4000,
            hyperparameters={"optimizer": "Adagrad", "lr": 0.05,
                             "schedule": "StepLR x0.3 every third", "batch": 64}),
    )
}  # fmt: skip


# ----------------------------------------------------------------------------------------------
# Training


@dataclass(frozen=True, kw_only=True)
class Run:
    losses: list[float]  # losses[i]: loss of batch i with the parameters after i steps
    wall_seconds: list[float]  # per optimizer step
    cpu_seconds: list[float]
    learning_rates: list[float]
    threads: list[int]


def train(job: Job, *, seed: int, threads: list[int]) -> Run:
    """One step per entry of `threads` (the torch thread count of that step)."""
    torch.manual_seed(seed)
    np.random.seed(seed)
    data = job.data(seed)
    batches = torch.Generator().manual_seed(seed + 1)
    model = job.model()
    optimizer = job.optimizer(model.parameters())
    total = len(threads)
    scheduler = job.schedule(optimizer, total) if job.schedule else None
    plateau = (torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, factor=0.2, patience=3)
               if job.plateau else None)

    def batch_loss() -> torch.Tensor:
        idx = torch.randint(0, data.x.shape[0], (job.batch_size,), generator=batches)
        x = data.x[idx]
        if data.input_noise_std:
            x = x + data.input_noise_std * torch.randn(x.shape, generator=batches)
        return data.loss(model(x), data.y[idx])

    run = Run(losses=[], wall_seconds=[], cpu_seconds=[], learning_rates=[], threads=[])
    window: list[float] = []
    for n in threads:
        if torch.get_num_threads() != n:
            torch.set_num_threads(n)
        w0, c0 = time.perf_counter(), time.process_time()
        loss = batch_loss()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()  # type: ignore[no-untyped-call]
        optimizer.step()
        value = loss.item()
        run.learning_rates.append(optimizer.param_groups[0]["lr"])
        if scheduler is not None:
            scheduler.step()
        window.append(value)
        if plateau is not None and len(window) == 100:
            plateau.step(sum(window) / 100)
            window.clear()
        run.wall_seconds.append(time.perf_counter() - w0)
        run.cpu_seconds.append(time.process_time() - c0)
        run.losses.append(value)
        run.threads.append(n)
    with torch.no_grad():
        run.losses.append(batch_loss().item())  # after the last step
    return run


def _sig(x: float, digits: int = 5) -> float:
    return float(f"{x:.{digits}g}")


def _micro(seconds: list[float]) -> list[int]:
    return [round(s * 1e6) for s in seconds]


def machine() -> dict[str, Any]:
    cpu_model = ""
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu_model = line.split(":", 1)[1].strip()
            break
    return {"nproc": len(os.sched_getaffinity(0)), "cpu_model": cpu_model,
            "platform": platform.platform(), "python": platform.python_version()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--jobs", nargs="*", default=list(JOBS), choices=list(JOBS))
    parser.add_argument("--scale", type=float, default=1.0,
                        help="multiply every job's step count (a quick trial: 0.1)")
    args = parser.parse_args(argv)

    started = time.perf_counter()
    load_start = os.getloadavg()
    jobs: dict[str, Any] = {}
    for name in args.jobs:
        job = JOBS[name]
        steps = max(10, round(job.steps * args.scale))
        print(f"[{time.perf_counter() - started:6.1f}s] {name}: {steps} steps at 1 thread",
              flush=True)
        main_run = train(job, seed=args.seed, threads=[1] * steps)
        wall = float(np.sum(main_run.wall_seconds))
        print(f"          loss {main_run.losses[0]:.4g} -> {main_run.losses[-1]:.4g}; "
              f"{wall:.1f} s, {1e3 * wall / steps:.2f} ms/step", flush=True)
        speed = train(job, seed=args.seed, threads=[1] * SPEED_STEPS + [2] * SPEED_STEPS)
        w = np.asarray(speed.wall_seconds)
        t1, t2 = float(np.median(w[:SPEED_STEPS])), float(np.median(w[SPEED_STEPS:]))
        print(f"          speed check: {1e3 * t1:.2f} ms/step at 1 thread, "
              f"{1e3 * t2:.2f} at 2", flush=True)
        jobs[name] = {
            "description": job.description,
            "hyperparameters": job.hyperparameters,
            "data": job.data(args.seed).description,
            "steps": steps,
            "losses": [_sig(v) for v in main_run.losses],
            "wall_microseconds": _micro(main_run.wall_seconds),
            "cpu_microseconds": _micro(main_run.cpu_seconds),
            "learning_rates": [_sig(v, 4) for v in main_run.learning_rates],
            "speed_check": {
                "threads": speed.threads,
                "wall_microseconds": _micro(speed.wall_seconds),
                "cpu_microseconds": _micro(speed.cpu_seconds),
            },
        }

    wall_seconds = time.perf_counter() - started
    document = {
        "format": FORMAT_VERSION,
        "generated_by": "tools/record_heldout.py",
        "command": " ".join(["tools/record_heldout.py",
                             *(argv if argv is not None else sys.argv[1:])]),
        "recorded_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "seed": args.seed,
        "versions": {"torch": torch.__version__, "numpy": np.__version__,
                     "scikit-learn": sklearn.__version__},
        "machine": machine(),
        "load_average_1min": {"start": round(load_start[0], 2),
                              "end": round(os.getloadavg()[0], 2)},
        "recording_wall_seconds": round(wall_seconds, 1),
        "loss_definition": "losses[i]: training loss of mini-batch i with the parameters after"
                           " i optimizer steps (losses[0] before training)",
        "jobs": jobs,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(document, separators=(",", ":")) + "\n")
    print(f"wrote {args.out} ({args.out.stat().st_size / 1024:.1f} KiB) in {wall_seconds:.1f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
