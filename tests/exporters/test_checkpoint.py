"""Checkpointer in-process: atomic files, the latest pointer, pruning, resume, stopping."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
from policyd_exporters import Checkpointer, CheckpointError, catch_stop_signals


class State:
    """A stand-in for a model: one number, saved as JSON."""

    def __init__(self) -> None:
        self.value = 0

    def save(self, path: Path) -> None:
        path.write_text(json.dumps({"value": self.value}))

    @staticmethod
    def load(path: Path) -> dict[str, int]:
        loaded: dict[str, int] = json.loads(path.read_text())
        return loaded


def make(directory: Path, state: State, **kwargs: object) -> Checkpointer[dict[str, int]]:
    return Checkpointer(directory, save=state.save, load=State.load, signals=(), **kwargs)  # type: ignore[arg-type]


def names(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def test_save_writes_step_file_and_latest_pointer(tmp_path: Path) -> None:
    s = State()
    c = make(tmp_path / "ckpt", s)
    s.value = 7
    path = c.save(12)
    assert path == tmp_path / "ckpt" / "step-12.ckpt"
    assert names(tmp_path / "ckpt") == ["latest", "step-12.ckpt"]
    assert (tmp_path / "ckpt" / "latest").read_text() == "step-12.ckpt\n"
    resumed = make(tmp_path / "ckpt", State()).resume()
    assert resumed is not None
    assert (resumed.step, resumed.state) == (12, {"value": 7})


def test_fresh_directory_resumes_nothing(tmp_path: Path) -> None:
    assert make(tmp_path, State()).resume() is None


def test_keeps_the_last_k_and_removes_dead_writers_temp_files(tmp_path: Path) -> None:
    c = make(tmp_path, State(), keep=2)
    (tmp_path / ".step-99.ckpt.0123abcd.tmp").write_text("half written")
    for step in (1, 2, 3, 4):
        c.save(step)
    assert names(tmp_path) == ["latest", "step-3.ckpt", "step-4.ckpt"]


def test_the_checkpoint_just_written_is_never_pruned(tmp_path: Path) -> None:
    c = make(tmp_path, State(), keep=1)
    c.save(10)
    c.save(5)  # resumed from an older one: lower step, but the newest write
    assert names(tmp_path) == ["latest", "step-10.ckpt", "step-5.ckpt"]
    assert (tmp_path / "latest").read_text() == "step-5.ckpt\n"


def test_resume_ignores_partial_temp_files(tmp_path: Path) -> None:
    s = State()
    s.value = 3
    make(tmp_path, s).save(30)
    (tmp_path / ".step-40.ckpt.deadbeef.tmp").write_text("{trunc")  # killed mid-save
    resumed = make(tmp_path, State()).resume()
    assert resumed is not None
    assert resumed.step == 30


def test_a_failed_save_leaves_the_previous_checkpoint_alone(tmp_path: Path) -> None:
    s = State()
    make(tmp_path, s).save(1)

    def broken(path: Path) -> None:
        path.write_text("{half")
        raise OSError("disk full")

    c = Checkpointer(tmp_path, save=broken, load=State.load, signals=())
    with pytest.raises(OSError, match="disk full"):
        c.save(2)
    assert names(tmp_path) == ["latest", "step-1.ckpt"]


def test_save_must_write_its_file(tmp_path: Path) -> None:
    c = Checkpointer(tmp_path, save=lambda path: None, load=State.load, signals=())
    with pytest.raises(CheckpointError, match="without writing"):
        c.save(1)


def test_an_unloadable_checkpoint_is_set_aside_and_an_older_one_used(tmp_path: Path) -> None:
    c = make(tmp_path, State())
    c.save(1)
    (tmp_path / "step-2.ckpt").write_text("{not json")
    resumed = make(tmp_path, State()).resume()
    assert resumed is not None
    assert resumed.step == 1
    assert "step-2.ckpt.unloadable" in names(tmp_path)


def test_none_loadable_is_an_error_not_a_fresh_start(tmp_path: Path) -> None:
    (tmp_path / "step-2.ckpt").write_text("{not json")
    with pytest.raises(CheckpointError, match=r"step-2\.ckpt"):
        make(tmp_path, State()).resume()


def test_step_saves_periodically_and_on_stop_then_exits_0(tmp_path: Path) -> None:
    now = [100.0]
    c = make(tmp_path, State(), every_steps=10, clock=lambda: now[0], grace_seconds=30.0)
    for step in range(1, 21):
        c.step(step)
    assert names(tmp_path) == ["latest", "step-10.ckpt", "step-20.ckpt"]
    assert c.remaining_seconds() is None
    c.request_stop()
    assert c.should_stop()
    now[0] = 103.0
    with pytest.raises(SystemExit) as exited:
        c.step(23)
    assert exited.value.code == 0
    assert "step-23.ckpt" in names(tmp_path)
    assert c.remaining_seconds() == 27.0


def test_a_job_in_a_kubernetes_job_exits_143_after_its_checkpoint(tmp_path: Path) -> None:
    c = make(tmp_path, State(), stop_exit_code=143)
    c.request_stop()
    with pytest.raises(SystemExit) as exited:
        c.step(7)
    assert exited.value.code == 143 and "step-7.ckpt" in names(tmp_path)


def test_sigterm_sets_the_flag_and_close_restores_the_handler(tmp_path: Path) -> None:
    before = signal.getsignal(signal.SIGTERM)
    with Checkpointer(tmp_path, save=State().save, load=State.load) as c:
        assert not c.should_stop()
        os.kill(os.getpid(), signal.SIGTERM)
        assert c.should_stop()
    assert signal.getsignal(signal.SIGTERM) == before


def test_a_sigterm_caught_before_the_checkpointer_existed_is_a_stop(tmp_path: Path) -> None:
    before = signal.getsignal(signal.SIGTERM)
    try:
        early = catch_stop_signals()  # the job's first line
        os.kill(os.getpid(), signal.SIGTERM)  # arrives while the job still loads
        clock = iter([100.0])
        c = make(tmp_path, State(), stop_requested=early, grace_seconds=30,
                 clock=lambda: next(clock, 104.0))
        assert c.should_stop()
        assert c.remaining_seconds() == 26.0  # counted from when the Checkpointer saw it
        with pytest.raises(SystemExit) as stopped:
            c.step(1)
        assert stopped.value.code == 0 and (tmp_path / "step-1.ckpt").is_file()
    finally:
        signal.signal(signal.SIGTERM, before)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"keep": 0}, "keep"), ({"every_steps": 0}, "every_steps"), ({"grace_seconds": 0}, "grace"),
     ({"stop_exit_code": 256}, "stop_exit_code"), ({"stop_exit_code": -1}, "stop_exit_code")],
)
def test_invalid_settings(tmp_path: Path, kwargs: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make(tmp_path, State(), **kwargs)
