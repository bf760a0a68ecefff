"""A small, real PyTorch training job instrumented for policyd: TrainingMetrics + Checkpointer.

It trains an MLP on scikit-learn's bundled 8x8 digits (1797 images, nothing downloaded), or on
generated 10-class data when scikit-learn is missing, exposes its loss at --addr:--port, and on
SIGTERM writes a checkpoint and exits 0 (--stop-exit-code); started again with the same
--checkpoint-dir it resumes (same step count, same smoothing window, same model and optimizer:
the loss goes on from where it was). Batches are drawn from (--seed, step), so a resumed run
sees the batches an uninterrupted one would have.

    python exporters/examples/train_mnist_like.py --addr 127.0.0.1 --port 0 --steps 2000 \
        --checkpoint-dir /tmp/ckpt --threads 1 --step-sleep 0.01

Stable CLI (integration tests and containers depend on it):
  --addr ADDR            listen address (required: 0.0.0.0 in a pod/container, else 127.0.0.1)
  --port PORT            metrics port, 0 for any free one (default 9108)
  --steps N              stop after N optimizer steps in total, counting resumed ones (2000)
  --checkpoint-dir DIR   checkpoint here and resume from here (default: no checkpoints)
  --checkpoint-every N   also checkpoint every N steps (default 500; 0: only on SIGTERM/at the end)
  --threads N            torch.set_num_threads (default 1)
  --step-sleep SECONDS   sleep after each step, to make a slow job (default 0)
  --job-name NAME        job_name label (default $POLICYD_JOB_NAME, else "train-mnist-like")
  --smoothing-steps N    the loss window (default 100), --seed S (default 0),
  --print-every N        progress line every N steps (default 50)
  --grace-seconds S      the orchestrator's grace period, for the log (default 30)
  --stop-exit-code N     exit status after SIGTERM's checkpoint (default 0; 143 in a Kubernetes
                         Job, whose podFailurePolicy ignores it: a Job reads 0 as "done")
  --stop-save-seconds S  the checkpoint on SIGTERM takes S seconds more, as a large model's
                         write would (default 0; the chaos test's policyd is back meanwhile)

Output on stdout, one line each, flushed (parse these, they are stable):
  metrics: http://ADDR:PORT/metrics
  resumed: step=N from=PATH          (or "fresh start")
  step=N loss=X.XXXXXX mean=Y.YYYYYY  (every --print-every steps; matches policyd-logtail's default)
  checkpoint: step=N path=PATH       (on SIGTERM, then exit --stop-exit-code)
  done: step=N                       (after --steps, with a final checkpoint)
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from policyd_exporters import Checkpointer, Identity, TrainingMetrics, catch_stop_signals, serve

if TYPE_CHECKING:
    import torch


def load_data(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Digits scaled to [0, 1], or 10 gaussian blobs in 64 dimensions without scikit-learn."""
    import torch  # noqa: PLC0415 (imported by main() after the SIGTERM handler)
    try:
        from sklearn.datasets import load_digits  # noqa: PLC0415 (optional)
    except ImportError:
        g = torch.Generator().manual_seed(seed)
        centres = torch.randn(10, 64, generator=g)
        y = torch.randint(0, 10, (1800,), generator=g)
        x = centres[y] + 1.5 * torch.randn(1800, 64, generator=g)
        return x, y
    digits = load_digits()
    x = torch.tensor(digits.data, dtype=torch.float32) / 16.0
    return x, torch.tensor(digits.target, dtype=torch.long)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--addr", required=True)
    p.add_argument("--port", type=int, default=9108)
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--checkpoint-dir", type=Path, default=None)
    p.add_argument("--checkpoint-every", type=int, default=500)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--step-sleep", type=float, default=0.0)
    p.add_argument("--job-name", default=None)
    p.add_argument("--smoothing-steps", type=int, default=100)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--print-every", type=int, default=50)
    p.add_argument("--grace-seconds", type=float, default=30.0)
    p.add_argument("--stop-exit-code", type=int, default=0,
                   help="exit status after SIGTERM's checkpoint: 0 (the protocol), 143 in a "
                        "Kubernetes Job whose podFailurePolicy ignores it")
    p.add_argument("--stop-save-seconds", type=float, default=0.0)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=0.02)
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    # SIGTERM first (exporters/README.md): from here on a SIGTERM is a stop request, kept
    # while torch is imported, the data loaded and the checkpoint read, and honoured with a
    # checkpoint at the first step boundary. Installed later, a SIGTERM in that window would
    # kill the job without one (or, as PID 1 in a container without an init, be ignored).
    stop_requested = catch_stop_signals()
    args = parse_args(argv)
    try:
        import torch  # noqa: PLC0415
        from torch import nn  # noqa: PLC0415
    except ImportError:  # pragma: no cover - depends on the environment
        sys.exit("train_mnist_like.py needs PyTorch: pip install torch (CPU wheels are enough)")
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    x, y = load_data(args.seed)
    model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.5)
    loss_fn = nn.CrossEntropyLoss()

    identity = Identity.from_env(os.environ, job_name=args.job_name
                                 or os.environ.get("POLICYD_JOB_NAME") or "train-mnist-like")
    metrics = TrainingMetrics(identity, smoothing_steps=args.smoothing_steps,
                              total_steps=args.steps)
    server = serve(args.port, addr=args.addr)
    print(f"metrics: {server.url}", flush=True)

    def save(path: Path) -> None:
        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                    "metrics": metrics.state_dict()}, path)

    def load(path: Path) -> dict[str, Any]:
        state: dict[str, Any] = torch.load(path, weights_only=True)
        return state

    checkpointer = None
    if args.checkpoint_dir is not None:
        checkpointer = Checkpointer(args.checkpoint_dir, save=save, load=load,
                                    every_steps=args.checkpoint_every or None,
                                    grace_seconds=args.grace_seconds,
                                    stop_exit_code=args.stop_exit_code,
                                    stop_requested=stop_requested)
        resumed = checkpointer.resume()
        if resumed is not None:
            model.load_state_dict(resumed.state["model"])
            optimizer.load_state_dict(resumed.state["optimizer"])
            metrics.load_state_dict(resumed.state["metrics"])
            print(f"resumed: step={resumed.step} from={resumed.path}", flush=True)
        else:
            print("fresh start", flush=True)

    step = metrics.step
    while step < args.steps:
        g = torch.Generator().manual_seed(args.seed * 1_000_003 + step)
        idx = torch.randint(0, x.shape[0], (args.batch_size,), generator=g)
        optimizer.zero_grad()
        loss = loss_fn(model(x[idx]), y[idx])
        loss.backward()
        optimizer.step()
        step += 1
        metrics.observe(loss.item(), step=step)
        if step % args.print_every == 0:
            mean = metrics.value
            shown = "none" if mean is None else f"{mean:.6f}"
            print(f"step={step} loss={loss.item():.6f} mean={shown}", flush=True)
        if checkpointer is None and stop_requested.is_set():  # nothing to save: leave as agreed
            server.close()
            return int(args.stop_exit_code)
        if checkpointer is not None:
            if checkpointer.should_stop():
                time.sleep(args.stop_save_seconds)  # before the write: `latest` is older
                path = checkpointer.save(step)
                print(f"checkpoint: step={step} path={path}", flush=True)
                server.close()
                return checkpointer.stop_exit_code
            checkpointer.step(step)  # the periodic checkpoints
        if args.step_sleep:
            time.sleep(args.step_sleep)
    if checkpointer is not None:
        checkpointer.save(step)
    # Done and saved: a stop from here on has nothing left to save. Ignored, so that it cannot
    # turn this exit 0 into a death by the signal (143) while the interpreter shuts down, which
    # puts the default handler back before it unloads torch (a CI run saw the race).
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    print(f"done: step={step}", flush=True)
    server.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
