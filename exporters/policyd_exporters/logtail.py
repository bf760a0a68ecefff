"""`policyd-logtail` (`python -m policyd_exporters.logtail`): export a loss read from a log.

For jobs whose code cannot be changed: it reads the job's log (a file it follows like `tail -F`,
e.g. on a volume shared with a sidecar container, or its stdin in a pipe), takes the loss (and
optionally the step) out of each line with regular expressions, and serves the same metrics as
`TrainingMetrics` — the job then looks to policyd exactly like an instrumented one.

    policyd-logtail --job-name vae-1 --addr 0.0.0.0 --port 9108 \\
        --pattern 'loss[=:]\\s*(?P<loss>[-+0-9.eE]+)' \\
        --step-pattern 'step[=: ]\\s*(?P<step>\\d+)' \\
        /logs/train.log

Lines: a `--pattern` match is one observation (group `loss`, else group 1, else the whole match).
The step is the last number `--step-pattern` matched, on that line or an earlier one (group
`step`, else 1); without it each observation counts one step. A step lower than the count so far
means the job started again: the count follows it. Exits 0 on SIGTERM/SIGINT, or at the end of
stdin.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import signal
import sys
import threading
from collections.abc import Iterable, Mapping, Sequence
from types import FrameType
from typing import TextIO

from prometheus_client.registry import CollectorRegistry

from policyd_exporters.follow import follow
from policyd_exporters.identity import Identity
from policyd_exporters.metrics import TrainingMetrics
from policyd_exporters.server import serve
from policyd_exporters.window import DEFAULT_SMOOTHING_STEPS

DEFAULT_PATTERN = r"loss[=:]\s*(?P<loss>[-+0-9.eE]+)"


def _group(pattern: re.Pattern[str], name: str) -> str | int:
    """The group that holds the number: the named one, else the first, else the whole match."""
    if name in pattern.groupindex:
        return name
    return 1 if pattern.groups else 0


class LineReader:
    """Turns log lines into observations of `metrics`."""

    def __init__(
        self,
        metrics: TrainingMetrics,
        loss: re.Pattern[str],
        step: re.Pattern[str] | None = None,
    ) -> None:
        self.metrics = metrics
        self._loss, self._loss_group = loss, _group(loss, "loss")
        self._step = step
        self._step_group = _group(step, "step") if step is not None else 0
        self._last_step: int | None = None

    def feed(self, line: str) -> bool:
        """Read one line; True when it held a loss."""
        if self._step is not None and (s := self._step.search(line)):
            with contextlib.suppress(ValueError):  # a pattern that matched a non-number
                self._last_step = int(s.group(self._step_group))
        m = self._loss.search(line)
        if m is None:
            return False
        try:
            value = float(m.group(self._loss_group))
        except ValueError:
            return False
        step = self._last_step
        if step is not None and step < self.metrics.step:
            self.metrics.set_step(step)  # the job started again (from scratch or a checkpoint)
        self.metrics.observe(value, step=step)
        return True

    def feed_all(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.feed(line)


def _regex(text: str) -> re.Pattern[str]:
    try:
        return re.compile(text)
    except re.error as exc:
        raise argparse.ArgumentTypeError(f"not a regular expression: {exc}") from exc


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="policyd-logtail",
        description="Export a training job's loss, read from its log, for policyd.",
    )
    p.add_argument("file", metavar="FILE|-", help="log file to follow (like tail -F), - for stdin")
    p.add_argument("--pattern", type=_regex, default=DEFAULT_PATTERN,
                   help="regex finding the loss (group 'loss', else group 1); default: %(default)s")
    p.add_argument("--step-pattern", type=_regex, default=None,
                   help="regex finding the step (group 'step', else group 1); default: count lines")
    p.add_argument("--addr", required=True,
                   help="listen address: 0.0.0.0 in a pod/container to be scraped, else 127.0.0.1")
    p.add_argument("--port", type=int, default=9108, help="listen port, 0 for any (default 9108)")
    p.add_argument("--job-name", default=None, help="job_name label (default: $POLICYD_JOB_NAME)")
    p.add_argument("--container", default=None,
                   help="container label (default: from the environment, see the README)")
    p.add_argument("--smoothing-steps", type=int, default=DEFAULT_SMOOTHING_STEPS,
                   help="values averaged in policyd_training_loss (default %(default)s)")
    p.add_argument("--total-steps", type=int, default=None, help="for the progress ratio")
    p.add_argument("--poll-seconds", type=float, default=0.5,
                   help="how often to look for new lines (default %(default)s)")
    return p.parse_args(argv)


def main(
    argv: Sequence[str] | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    stdin: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    args = parse_args(argv)
    err = err or sys.stderr
    env = os.environ if environ is None else environ
    try:
        identity = Identity.from_env(env, job_name=args.job_name, container=args.container)
    except ValueError as exc:
        print(f"policyd-logtail: {exc} (or --job-name)", file=err)
        return 2
    registry = CollectorRegistry()
    try:
        metrics = TrainingMetrics(
            identity, registry=registry, smoothing_steps=args.smoothing_steps,
            total_steps=args.total_steps,
        )
    except ValueError as exc:
        print(f"policyd-logtail: {exc}", file=err)
        return 2
    reader = LineReader(metrics, args.pattern, args.step_pattern)
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()
        raise SystemExit(0)  # also interrupts a blocking read of stdin

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, on_signal)
    try:
        server = serve(args.port, addr=args.addr, registry=registry)
    except OSError as exc:
        print(f"policyd-logtail: cannot listen on {args.addr}:{args.port}: {exc}", file=err)
        return 1
    source = "stdin" if args.file == "-" else args.file
    print(f"policyd-logtail: serving {server.url} for job {identity.job_name}, reading {source}",
          file=err, flush=True)
    try:
        if args.file == "-":
            reader.feed_all(line.rstrip("\r\n") for line in (stdin or sys.stdin))
        else:
            reader.feed_all(follow(args.file, stop=stop, poll_seconds=args.poll_seconds))
    finally:
        server.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
