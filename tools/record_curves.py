"""Record real loss curves and per-iteration costs for the simulator's profiles.

Trains, for real and on this machine's CPU, one small PyTorch model per family the thesis uses
(chapter 6, tables 6.1 and 6.3): a VAE, an MNIST-style CNN, an LSTM, a bidirectional GRU, a GRU
and a plain RNN. The data is scikit-learn's bundled digits (`load_digits`: 1797 images of 8x8
pixels, nothing is downloaded). The VAE reconstructs the images; the CNN classifies them; the
recurrent models classify them read row by row as 8-step sequences of 8 pixels (row-by-row
MNIST). Classifier inputs get fresh Gaussian pixel noise every batch (standard noise
augmentation), so their training loss settles on a plateau instead of sliding to zero, as real
training losses do.

Per iteration (one optimizer step on one mini-batch) the script records the training loss of
that batch (the job's evaluation function), the wall seconds (`time.perf_counter`) and the
CPU-seconds (`time.process_time`, all threads). Every model is trained at 1 and at 2 torch
threads from the same seed; the loss curve kept is the 1-thread one, the 2-thread run is for
timing (its agreement with the 1-thread curve is recorded as a check).

Fit per model (what `policyd.sim.profiles` turns into a `Profile`):
  iteration_seconds_1core = median wall seconds per iteration at 1 thread;
  parallel_fraction p from Amdahl's law at c = 2: t2 / t1 = (1 - p) + p / 2, so
  p = 2 (1 - t2 / t1), clipped to [0, 1];
  max_parallelism = 2, the most threads measured (we cannot vouch for more).

Run:  .venv/bin/python tools/record_curves.py --out policyd/sim/data/curves.json
This is a tool, not library code: it needs torch and scikit-learn, which policyd does not.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import sklearn  # type: ignore[import-untyped]
import torch
from sklearn.datasets import load_digits  # type: ignore[import-untyped]
from torch import nn
from torch.nn import functional as F

FORMAT_VERSION = 1
DEFAULT_SEED = 20240601
DEFAULT_ITERATIONS = 2000
THREADS = (1, 2)
KEEP_ITERATIONS = 2000  # losses kept per curve (every iteration up to this many)


# ----------------------------------------------------------------------------------------------
# Models


class VAE(nn.Module):
    """Kingma & Welling's VAE, sized like PyTorch's MNIST example (hidden 400, latent 20)."""

    def __init__(self, pixels: int = 64, hidden: int = 400, latent: int = 20) -> None:
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(pixels, hidden), nn.ReLU())
        self.mu = nn.Linear(hidden, latent)
        self.log_var = nn.Linear(hidden, latent)
        self.decoder = nn.Sequential(
            nn.Linear(latent, hidden), nn.ReLU(), nn.Linear(hidden, pixels)
        )

    def loss(self, x: torch.Tensor) -> torch.Tensor:
        """Bernoulli reconstruction loss + KL divergence, summed per image, mean over the batch."""
        h = self.encoder(x)
        mu, log_var = self.mu(h), self.log_var(h)
        z = mu + torch.randn_like(mu) * torch.exp(0.5 * log_var)
        logits = self.decoder(z)
        reconstruction = F.binary_cross_entropy_with_logits(logits, x, reduction="sum")
        kl = -0.5 * torch.sum(1 + log_var - mu.pow(2) - log_var.exp())
        return (reconstruction + kl) / x.shape[0]


class CNN(nn.Module):
    """The PyTorch MNIST example's shape, scaled to 8x8 inputs: 2 convolutions, pool, 2 dense."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(),
            nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(),
            nn.MaxPool2d(2), nn.Flatten(),
            nn.Linear(64 * 4 * 4, 128), nn.ReLU(),
            nn.Linear(128, 10),
        )  # fmt: skip

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x.view(-1, 1, 8, 8))  # type: ignore[no-any-return]


class RowClassifier(nn.Module):
    """Reads an 8x8 image row by row (8 steps of 8 pixels); classifies from the last step."""

    def __init__(
        self, cell: Callable[..., nn.Module], hidden: int, bidirectional: bool = False
    ) -> None:
        super().__init__()
        self.rnn = cell(8, hidden, batch_first=True, bidirectional=bidirectional)
        self.head = nn.Linear(hidden * (2 if bidirectional else 1), 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.rnn(x.view(-1, 8, 8))
        return self.head(out[:, -1])  # type: ignore[no-any-return]


@dataclass(frozen=True, kw_only=True)
class Recipe:
    """One model family: how to build it, what it computes, and its hyper-parameters."""

    name: str
    description: str
    evaluation: str
    build: Callable[[], nn.Module]
    classifier: bool
    batch_size: int = 128
    learning_rate: float = 1e-3
    input_noise_std: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    def hyperparameters(self) -> dict[str, Any]:
        return {
            "optimizer": "Adam",
            "learning_rate": self.learning_rate,
            "batch_size": self.batch_size,
            "input_noise_std": self.input_noise_std,
            **self.extra,
        }


HIDDEN = 128
NOISE = 0.5  # std of the Gaussian pixel noise added to classifier inputs (pixels in [0, 1])

RECIPES: dict[str, Recipe] = {
    r.name: r
    for r in (
        Recipe(
            name="vae", build=VAE, classifier=False,
            description="VAE 64-400-(20)-400-64 reconstructing the digits",
            evaluation="reconstruction (Bernoulli BCE) + KL, nats per image",
            extra={"hidden": 400, "latent": 20},
        ),
        Recipe(
            name="cnn", build=CNN, classifier=True, input_noise_std=NOISE,
            description="MNIST-style CNN (conv32-conv64-pool-fc128-fc10) classifying the digits",
            evaluation="cross-entropy, nats",
            extra={"conv_channels": [32, 64], "dense": 128},
        ),
        Recipe(
            name="lstm", build=lambda: RowClassifier(nn.LSTM, HIDDEN), classifier=True,
            input_noise_std=NOISE,
            description="LSTM classifying the digits read row by row (8 steps x 8 pixels)",
            evaluation="cross-entropy, nats", extra={"hidden": HIDDEN},
        ),
        Recipe(
            name="birnn", build=lambda: RowClassifier(nn.GRU, HIDDEN, bidirectional=True),
            classifier=True, input_noise_std=NOISE,
            description="bidirectional GRU classifying the digits read row by row",
            evaluation="cross-entropy, nats", extra={"hidden": HIDDEN, "cell": "GRU"},
        ),
        Recipe(
            name="gru", build=lambda: RowClassifier(nn.GRU, HIDDEN), classifier=True,
            input_noise_std=NOISE,
            description="GRU classifying the digits read row by row",
            evaluation="cross-entropy, nats", extra={"hidden": HIDDEN},
        ),
        Recipe(
            name="rnn", build=lambda: RowClassifier(nn.RNN, HIDDEN), classifier=True,
            input_noise_std=NOISE,
            description="plain tanh RNN classifying the digits read row by row",
            evaluation="cross-entropy, nats", extra={"hidden": HIDDEN},
        ),
    )
}  # fmt: skip


# ----------------------------------------------------------------------------------------------
# Training


@dataclass(frozen=True, kw_only=True)
class Run:
    losses: list[float]  # losses[i]: loss of batch i with the parameters after i steps
    wall_seconds: list[float]  # per optimizer step
    cpu_seconds: list[float]


def train(recipe: Recipe, *, threads: int, iterations: int, seed: int) -> Run:
    """Train `recipe` for `iterations` steps; losses has iterations + 1 values."""
    torch.set_num_threads(threads)
    torch.manual_seed(seed)
    np.random.seed(seed)
    digits = load_digits()
    x_all = torch.tensor(digits.data / 16.0, dtype=torch.float32)  # pixels 0..16 -> [0, 1]
    y_all = torch.tensor(digits.target, dtype=torch.long)
    batches = torch.Generator().manual_seed(seed + 1)  # batch indices and input noise
    model = recipe.build()
    optimizer = torch.optim.Adam(model.parameters(), lr=recipe.learning_rate)

    def batch_loss() -> torch.Tensor:
        idx = torch.randint(0, x_all.shape[0], (recipe.batch_size,), generator=batches)
        x = x_all[idx]
        if recipe.input_noise_std:
            x = x + recipe.input_noise_std * torch.randn(x.shape, generator=batches)
        if recipe.classifier:
            return F.cross_entropy(model(x), y_all[idx])
        assert isinstance(model, VAE)
        return model.loss(x)

    losses: list[float] = []
    wall: list[float] = []
    cpu: list[float] = []
    for _ in range(iterations):
        w0, c0 = time.perf_counter(), time.process_time()
        loss = batch_loss()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()  # type: ignore[no-untyped-call]
        optimizer.step()
        value = loss.item()
        wall.append(time.perf_counter() - w0)
        cpu.append(time.process_time() - c0)
        losses.append(value)
    with torch.no_grad():
        losses.append(batch_loss().item())  # after the last step
    return Run(losses=losses, wall_seconds=wall, cpu_seconds=cpu)


def timing_summary(run: Run) -> dict[str, float]:
    wall = np.asarray(run.wall_seconds)
    cpu = np.asarray(run.cpu_seconds)
    return {
        "median_wall_seconds": _sig(float(np.median(wall))),
        "mean_wall_seconds": _sig(float(wall.mean())),
        "p10_wall_seconds": _sig(float(np.percentile(wall, 10))),
        "p90_wall_seconds": _sig(float(np.percentile(wall, 90))),
        "median_cpu_seconds": _sig(float(np.median(cpu))),
        "cores_used": _sig(float(cpu.sum() / wall.sum())),  # CPU-seconds per wall second
        "total_wall_seconds": _sig(float(wall.sum())),
    }


def amdahl_fit(t1: float, t2: float) -> dict[str, float]:
    """Amdahl at c = 2: t2 / t1 = (1 - p) + p / 2, so p = 2 (1 - t2 / t1), clipped to [0, 1]."""
    p = min(max(2.0 * (1.0 - t2 / t1), 0.0), 1.0)
    return {
        "iteration_seconds_1core": _sig(t1),
        "parallel_fraction": _sig(p),
        "max_parallelism": 2.0,
        "speedup_2_threads": _sig(t1 / t2),
    }


def _sig(x: float, digits: int = 5) -> float:
    return float(f"{x:.{digits}g}")


# ----------------------------------------------------------------------------------------------
# Main


def machine() -> dict[str, Any]:
    cpu_model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "nproc": len(os.sched_getaffinity(0)),
        "cpu_count": os.cpu_count(),
        "cpu_model": cpu_model,
        "platform": platform.platform(),
        "python": platform.python_version(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--iterations", type=int, default=DEFAULT_ITERATIONS)
    parser.add_argument("--models", nargs="*", default=list(RECIPES), choices=list(RECIPES))
    args = parser.parse_args(argv)

    started = time.perf_counter()
    load_start = os.getloadavg()
    models: dict[str, Any] = {}
    for name in args.models:
        recipe = RECIPES[name]
        runs: dict[int, Run] = {}
        for threads in THREADS:
            print(f"[{time.perf_counter() - started:6.1f}s] {name}: {args.iterations} iterations"
                  f" at {threads} thread(s) ...", flush=True)  # fmt: skip
            run = train(recipe, threads=threads, iterations=args.iterations, seed=args.seed)
            runs[threads] = run
            s = timing_summary(run)
            print(f"          loss {run.losses[0]:.4g} -> {run.losses[-1]:.4g}; "
                  f"{s['median_wall_seconds'] * 1e3:.3f} ms/iteration (median wall), "
                  f"{s['cores_used']:.2f} cores used", flush=True)  # fmt: skip
        one, two = runs[1], runs[2]
        t1 = statistics.median(one.wall_seconds)
        t2 = statistics.median(two.wall_seconds)
        diff = float(np.max(np.abs(np.asarray(one.losses) - np.asarray(two.losses))))
        models[name] = {
            "description": recipe.description,
            "evaluation": recipe.evaluation,
            "hyperparameters": recipe.hyperparameters(),
            "iterations": args.iterations,
            "losses": [_sig(v) for v in one.losses[: KEEP_ITERATIONS + 1]],
            "timing": {str(t): timing_summary(runs[t]) for t in THREADS},
            "fit": amdahl_fit(t1, t2),
            "two_thread_check": {
                "final_loss": _sig(two.losses[-1]),
                "max_abs_loss_difference_vs_1_thread": _sig(diff),
            },
        }
        fit = models[name]["fit"]
        print(f"          t1 {t1 * 1e3:.3f} ms, t2 {t2 * 1e3:.3f} ms -> p = "
              f"{fit['parallel_fraction']:.3f}", flush=True)  # fmt: skip

    wall_seconds = time.perf_counter() - started
    document = {
        "format": FORMAT_VERSION,
        "generated_by": "tools/record_curves.py",
        "command": " ".join(
            ["tools/record_curves.py", *(argv if argv is not None else sys.argv[1:])]
        ),
        "recorded_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "seed": args.seed,
        "versions": {
            "torch": torch.__version__,
            "numpy": np.__version__,
            "scikit-learn": sklearn.__version__,
        },
        "machine": machine(),
        "threads": list(THREADS),
        "load_average_1min": {
            "start": round(load_start[0], 2),
            "end": round(os.getloadavg()[0], 2),
        },
        "recording_wall_seconds": round(wall_seconds, 1),
        "dataset": {
            "name": "sklearn.datasets.load_digits (bundled, no download)",
            "samples": 1797,
            "image": "8x8 grey levels 0..16, scaled to [0, 1]",
            "sampling": "mini-batches drawn uniformly with replacement, seeded",
            "sequence_models": "each image read row by row: 8 steps of 8 pixels",
            "classifier_input_noise": "fresh N(0, std^2) pixel noise per batch (augmentation)",
        },
        "loss_definition": "losses[i]: training loss of mini-batch i with the parameters after"
        " i optimizer steps (losses[0] before training)",
        "models": models,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(document, separators=(",", ":")) + "\n")
    print(f"wrote {args.out} ({args.out.stat().st_size / 1024:.1f} KiB) in {wall_seconds:.1f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
