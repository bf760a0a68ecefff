"""The checkpoint protocol with real frameworks, as processes: SIGTERM during training -> a
checkpoint through the framework's own mechanism -> exit 0 -> the next start on the same
directory resumes at the step it stopped at, and the exporter's counter goes on from there.

Lightning: its own SIGTERM handling (an exception at the next batch end) with
`OnExceptionCheckpoint`, resumed by `fit(ckpt_path=)`. Hugging Face: a SIGTERM handler setting
an Event, `huggingface_stop_callback` making the Trainer save `checkpoint-N` and stop, resumed by
`train(resume_from_checkpoint=)`. The jobs are tests/frameworks/*_job.py.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.exporters.scrape import get, parse, stop, value, wait_for_line

pytestmark = pytest.mark.slow  # four framework processes, each importing torch and the framework

ROOT = Path(__file__).resolve().parents[2]
STEPS = 30


def launch(job: str, directory: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", f"tests.frameworks.{job}", str(directory), str(STEPS)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})


def steps_printed(text: str) -> list[int]:
    return [int(s) for s in re.findall(r"^step=(\d+)$", text, flags=re.MULTILINE)]


@pytest.mark.parametrize("job", ["lightning_job", "huggingface_job"])
def test_sigterm_checkpoints_exits_0_and_the_next_start_resumes_there(
    job: str, tmp_path: Path
) -> None:
    first = launch(job, tmp_path)
    try:
        assert first.stdout is not None
        url = wait_for_line(first.stdout, r"metrics: (\S+)", timeout=120).group(1)
        wait_for_line(first.stdout, r"train start: step=0 exported=0", timeout=120)
        wait_for_line(first.stdout, r"^step=5$", timeout=60)
        assert value(parse(get(url)), "policyd_training_steps_total") >= 5
        first.send_signal(signal.SIGTERM)
        out, err = first.communicate(timeout=60)
    finally:
        stop(first)
    assert first.returncode == 0, err[-3000:]
    stopped_at = steps_printed(out)[-1]
    assert 5 < stopped_at < STEPS
    if job == "lightning_job":
        assert (tmp_path / "stopped.ckpt").is_file()
    else:
        assert f"stopped: step={stopped_at}" in out
        assert (tmp_path / f"checkpoint-{stopped_at}").is_dir()

    second = launch(job, tmp_path)
    try:
        assert second.stdout is not None
        url = wait_for_line(second.stdout, r"metrics: (\S+)", timeout=120).group(1)
        start = wait_for_line(second.stdout, r"train start: step=(\d+) exported=(\d+)(.*)",
                              timeout=120)
        # resumed at the step it stopped at, and the exporter says so before the first batch
        assert (int(start.group(1)), int(start.group(2))) == (stopped_at, stopped_at)
        if job == "lightning_job":  # the loss window came back with Lightning's checkpoint
            assert "loss=None" not in start.group(3), start.string
        assert int(wait_for_line(second.stdout, r"^step=(\d+)$").group(1)) == stopped_at + 1
        assert value(parse(get(url)), "policyd_training_steps_total") > stopped_at
        out, err = second.communicate(timeout=120)
    finally:
        stop(second)
    assert second.returncode == 0, err[-3000:]
    assert f"done: step={STEPS}" in out
