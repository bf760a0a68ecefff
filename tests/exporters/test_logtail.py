"""policyd-logtail: line parsing in-process, then the real CLI on a file and on stdin."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from policyd_exporters import Identity, TrainingMetrics
from policyd_exporters.logtail import DEFAULT_PATTERN, LineReader, main
from prometheus_client.registry import CollectorRegistry

from tests.exporters.scrape import Samples, from_registry, get, parse, stop, value, wait_for_line


def reader(step_pattern: str | None = None) -> tuple[LineReader, CollectorRegistry]:
    registry = CollectorRegistry()
    metrics = TrainingMetrics(Identity(job_name="j"), registry=registry, smoothing_steps=2)
    step = re.compile(step_pattern) if step_pattern else None
    return LineReader(metrics, re.compile(DEFAULT_PATTERN), step), registry


def test_default_pattern_reads_common_formats() -> None:
    r, registry = reader()
    lines = ["Epoch 1 | loss: 2.5 | acc 0.1", "nothing here", "loss=1.5e0", "val_loss=oops"]
    assert [r.feed(line) for line in lines] == [True, False, True, False]
    samples = from_registry(registry)
    assert value(samples, "policyd_training_loss") == 2.0
    assert value(samples, "policyd_training_steps_total") == 2


def test_step_pattern_on_the_same_or_an_earlier_line_and_restarts() -> None:
    r, registry = reader(r"step[=: ]\s*(?P<step>\d+)")
    r.feed("step=10 loss=1.0")
    r.feed("step 20")
    r.feed("loss=3.0")
    assert r.metrics.step == 20
    r.feed("step=5 loss=2.0")  # the job started again
    assert value(from_registry(registry), "policyd_training_steps_total") == 5


def test_missing_job_name_exits_2_with_a_hint() -> None:
    err = io.StringIO()
    assert main(["--addr", "127.0.0.1", "--port", "0", "-"], environ={}, err=err) == 2
    assert "POLICYD_JOB_NAME" in err.getvalue()


def scrape_until(url: str, ready: Callable[[Samples], bool], timeout: float = 10.0) -> Samples:
    """Scrape until `ready(samples)` holds (the child reads the log asynchronously)."""
    deadline = time.monotonic() + timeout
    while True:
        samples = parse(get(url))
        if ready(samples):
            return samples
        if time.monotonic() > deadline:
            raise AssertionError(f"not ready: {samples}")
        time.sleep(0.05)


def start(*args: str, stdin: int | None = None) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "policyd_exporters.logtail", "--addr", "127.0.0.1", "--port", "0",
         "--job-name", "vae-1", "--container", "c1", "--smoothing-steps", "2", *args],
        stdin=stdin, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONWARNINGS": "error"},
    )
    assert proc.stderr is not None
    url = wait_for_line(proc.stderr, r"serving (http://\S+/metrics)").group(1)
    return proc, url


def steps_are(n: float) -> Callable[[Samples], bool]:
    return lambda s: s.get("policyd_training_steps_total", [({}, -1.0)])[0][1] == n


def test_cli_follows_a_growing_then_rotated_file(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_text("step=1 loss=4.0\n")
    proc, url = start("--step-pattern", r"step=(\d+)", "--poll-seconds", "0.02", str(log))
    try:
        samples = scrape_until(url, steps_are(1))
        assert samples["policyd_training_loss"] == [({"job_name": "vae-1", "container": "c1"}, 4.0)]
        with open(log, "a") as f:
            f.write("step=2 loss=2.0\n")
        assert value(scrape_until(url, steps_are(2)), "policyd_training_loss") == 3.0
        log.rename(tmp_path / "train.log.1")  # rotated: a new file at the same path
        log.write_text("step=3 loss=1.0\n")
        assert value(scrape_until(url, steps_are(3)), "policyd_training_loss") == 1.5
        proc.terminate()
        assert proc.wait(timeout=10) == 0
    finally:
        stop(proc)


def test_cli_reads_stdin_and_exits_0_at_its_end() -> None:
    proc, url = start("--pattern", r"loss: (\S+)", "-", stdin=subprocess.PIPE)
    try:
        assert proc.stdin is not None
        proc.stdin.write("loss: 0.5\nloss: nan\nloss: 1.5\n")
        proc.stdin.flush()
        samples = scrape_until(url, steps_are(3))
        assert value(samples, "policyd_training_loss") == 1.5  # the NaN is left out...
        assert value(samples, "policyd_training_invalid_values_total") == 1  # ...and counted
        proc.stdin.close()
        assert proc.wait(timeout=10) == 0
    finally:
        stop(proc)


@pytest.mark.parametrize("bad", [["--pattern", "("], ["--smoothing-steps", "0"]])
def test_bad_arguments_exit_2(bad: list[str]) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "policyd_exporters.logtail", "--addr", "127.0.0.1", "--port", "0",
         "--job-name", "j", *bad, "-"],
        input="", capture_output=True, text=True, timeout=30, check=False,
    )
    assert proc.returncode == 2, proc.stderr
