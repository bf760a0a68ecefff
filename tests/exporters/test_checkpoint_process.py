"""The checkpoint protocol with real processes: SIGTERM -> checkpoint, exit 0 -> resume.

One tiny job (no framework, fast) and the PyTorch example (`exporters/examples/`), each
stopped with SIGTERM mid-training and started again on the same checkpoint directory.
"""

from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.exporters.scrape import get, parse, stop, value, wait_for_line

HERE = Path(__file__).resolve().parent
EXAMPLE = HERE.parents[1] / "exporters" / "examples" / "train_mnist_like.py"


def launch(*argv: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONWARNINGS": "error"},
    )


def terminate_after(proc: subprocess.Popen[str], step_line: str) -> tuple[int, str]:
    """Wait for a progress line, SIGTERM the job, return (exit code, the rest of stdout)."""
    assert proc.stdout is not None
    m = wait_for_line(proc.stdout, step_line)
    proc.send_signal(signal.SIGTERM)
    rest, _ = proc.communicate(timeout=20)
    return proc.returncode, m.string + rest


def test_tiny_job_stops_with_a_checkpoint_and_resumes(tmp_path: Path) -> None:
    ckpt = tmp_path / "ckpt"
    first = launch(str(HERE / "checkpoint_job.py"), str(ckpt))
    try:
        assert first.stdout is not None
        url = wait_for_line(first.stdout, r"metrics: (\S+)").group(1)
        wait_for_line(first.stdout, r"fresh start")
        wait_for_line(first.stdout, r"step=10 ")
        before = parse(get(url))
        assert value(before, "policyd_training_steps_total") >= 10
        code, out = terminate_after(first, r"step=20 ")
    finally:
        stop(first)
    assert code == 0
    last_step, last_loss = [
        (int(s), float(x)) for s, x in (line[5:].split(" loss=") for line in out.splitlines()
                                       if line.startswith("step="))
    ][-1]
    saved = sorted(p.name for p in ckpt.iterdir())
    assert f"step-{last_step}.ckpt" in saved
    assert (ckpt / "latest").read_text() == f"step-{last_step}.ckpt\n"
    assert not [n for n in saved if n.endswith(".tmp")]

    second = launch(str(HERE / "checkpoint_job.py"), str(ckpt))
    try:
        assert second.stdout is not None
        url = wait_for_line(second.stdout, r"metrics: (\S+)").group(1)
        assert wait_for_line(second.stdout, r"resumed: step=(\d+)").group(1) == str(last_step)
        m = wait_for_line(second.stdout, r"step=(\d+) loss=(\S+)")
        assert int(m.group(1)) == last_step + 1  # the step count continues
        assert float(m.group(2)) == pytest.approx(last_loss * 0.98, rel=1e-4)  # so does the loss
        samples = parse(get(url))
        assert value(samples, "policyd_training_steps_total") > last_step
        # The window was restored: the mean of recent losses, not of a restart at 1.0.
        assert value(samples, "policyd_training_loss") < 0.98 ** (last_step - 10)
    finally:
        stop(second)


def example_args(ckpt: Path, *extra: str) -> list[str]:
    """The PyTorch example on a free port, checkpointing to `ckpt`, a line every 10 steps."""
    return [str(EXAMPLE), "--addr", "127.0.0.1", "--port", "0", "--steps", "100000",
            "--checkpoint-dir", str(ckpt), "--threads", "1", "--print-every", "10", *extra]


def test_pytorch_example_sigterm_checkpoint_resume(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    ckpt = tmp_path / "ckpt"
    args = example_args(ckpt, "--job-name", "mnist-like")
    first = launch(*args)
    try:
        assert first.stdout is not None
        url = wait_for_line(first.stdout, r"metrics: (\S+)").group(1)
        wait_for_line(first.stdout, r"fresh start")
        early = float(wait_for_line(first.stdout, r"step=100 loss=\S+ mean=(\S+)").group(1))
        samples = parse(get(url))
        ((labels, _),) = samples["policyd_training_loss"]
        assert labels["job_name"] == "mnist-like"
        assert value(samples, "policyd_training_progress_ratio") > 0
        code, out = terminate_after(first, r"step=300 ")
    finally:
        stop(first)
    assert code == 0
    stopped_at = int(re.findall(r"checkpoint: step=(\d+)", out)[-1])
    assert (ckpt / f"step-{stopped_at}.ckpt").is_file()
    late = float(re.findall(r"mean=(\S+)", out)[-1])  # the last mean printed before SIGTERM
    assert late < 0.8 * early  # it did learn something

    second = launch(*args)
    try:
        assert second.stdout is not None
        wait_for_line(second.stdout, r"metrics: ")
        assert wait_for_line(second.stdout, r"resumed: step=(\d+)").group(1) == str(stopped_at)
        m = wait_for_line(second.stdout, r"step=(\d+) loss=\S+ mean=(\S+)")
        assert stopped_at < int(m.group(1)) <= stopped_at + 10
        # The loss goes on from where it was (~the last mean), far below a fresh start's ~2.3.
        assert float(m.group(2)) == pytest.approx(late, rel=0.15)
        assert float(m.group(2)) < 0.8 * early
    finally:
        stop(second)


def test_pytorch_example_exits_143_after_its_checkpoint_when_asked(tmp_path: Path) -> None:
    """`--stop-exit-code 143` (a trainer in a Kubernetes Job): the checkpoint is written as
    usual, and the exit status is the one the Job's podFailurePolicy ignores."""
    pytest.importorskip("torch")
    ckpt = tmp_path / "ckpt"
    job = launch(*example_args(ckpt, "--stop-exit-code", "143"))
    try:
        code, out = terminate_after(job, r"step=50 ")
    finally:
        stop(job)
    assert code == 143
    stopped_at = int(re.findall(r"checkpoint: step=(\d+)", out)[-1])
    assert (ckpt / f"step-{stopped_at}.ckpt").is_file()
    assert (ckpt / "latest").read_text().strip() == f"step-{stopped_at}.ckpt"


def catches_sigterm(pid: int) -> bool:
    """Whether process `pid` has a handler for SIGTERM (the SigCgt mask of /proc/PID/status)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigCgt:"):
            return bool(int(line.split()[1], 16) & (1 << (signal.SIGTERM - 1)))
    return False


def test_pytorch_example_catches_sigterm_before_its_slow_start(tmp_path: Path) -> None:
    """SIGTERM first: the handler is there before torch is imported and the checkpoint read,
    so a SIGTERM in that window (a job moved again right after a rollback) still ends with a
    checkpoint and exit 0, resumed from the newest one, instead of a death without one."""
    pytest.importorskip("torch")
    ckpt = tmp_path / "ckpt"
    args = example_args(ckpt, "--checkpoint-every", "0")
    first = launch(*args)
    try:
        code, out = terminate_after(first, r"step=50 ")
    finally:
        stop(first)
    assert code == 0
    saved = int(re.findall(r"checkpoint: step=(\d+)", out)[-1])

    second = launch(*args)
    try:
        deadline = time.monotonic() + 20
        while not catches_sigterm(second.pid):
            assert second.poll() is None and time.monotonic() < deadline, "no SIGTERM handler"
            time.sleep(0.001)
        assert second.stdout is not None
        printed, _, _ = select.select([second.stdout], [], [], 0)
        assert not printed, "the handler came only after the job's start-up"
        second.send_signal(signal.SIGTERM)  # long before "metrics:" (torch is still loading)
        out, err = second.communicate(timeout=60)
    finally:
        stop(second)
    assert second.returncode == 0, err
    lines = out.splitlines()
    assert lines[1] == f"resumed: step={saved} from={ckpt / f'step-{saved}.ckpt'}", out
    # one step after the resume, at the first step boundary, then out: nothing lost
    assert f"checkpoint: step={saved + 1} " in out, out
    assert (ckpt / "latest").read_text() == f"step-{saved + 1}.ckpt\n"


def test_pytorch_example_stopped_as_it_finishes_still_exits_0(tmp_path: Path) -> None:
    """SIGTERM last: a stop sent right after the job's last step and save (a CI run's FlowCon
    proof stopped a job that had just finished) meets a job whose interpreter is shutting down,
    which has put the default handler back; the example ignores the signal by then, so the
    complete job exits 0, not 143. Stops are sent every millisecond until it has exited, so
    one lands in the shutdown."""
    pytest.importorskip("torch")
    job = launch(*example_args(tmp_path / "ckpt", "--steps", "200"))
    try:
        assert job.stdout is not None
        wait_for_line(job.stdout, r"done: step=200")
        deadline = time.monotonic() + 60
        while job.poll() is None and time.monotonic() < deadline:  # through its shutdown
            job.send_signal(signal.SIGTERM)
            time.sleep(0.001)
        _, err = job.communicate(timeout=60)
    finally:
        stop(job)
    assert job.returncode == 0, err
