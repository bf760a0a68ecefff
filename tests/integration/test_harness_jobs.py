"""The e2e harness's `run_job` against a recording stand-in for an engine's client: a job is
started (`containers.run`) or, held, only created (`containers.create`) with the same
arguments, for a policy that admits to start. No engine is started."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.e2e.harness import JobSpec, run_job


class Recorder:
    """`client().containers.run/create`: each call kept as (method, image, kwargs)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, dict[str, Any]]] = []
        self.containers = self

    def client(self) -> Recorder:
        return self

    def run(self, image: str, command: list[str], **kwargs: Any) -> str:
        self.calls.append(("run", image, kwargs))
        return "started"

    def create(self, image: str, command: list[str], **kwargs: Any) -> str:
        self.calls.append(("create", image, kwargs))
        return "created"


@pytest.mark.parametrize(("held", "method"), [(False, "run"), (True, "create")],
                         ids=["started", "held"])
def test_a_held_job_is_created_with_the_arguments_a_started_one_runs_with(
        tmp_path: Path, held: bool, method: str) -> None:
    engine = Recorder()
    spec = JobSpec("job-1", steps=100, cpuset="0")
    got = run_job(engine, spec, 9100, tmp_path, labels={"x": "1"},  # type: ignore[arg-type]
                  held=held)
    ((called, _, kwargs),) = engine.calls
    assert (called, got) == (method, "started" if method == "run" else "created")
    assert kwargs["name"] == "job-1" and kwargs["cpuset_cpus"] == "0"
    assert kwargs["labels"] == {"policyd.io/managed": "true", "app": "train", "x": "1"}
    assert (tmp_path / "job-1").is_dir()
