"""Worker files: unequal machines for the simulator, and every bad entry named."""

from __future__ import annotations

from pathlib import Path

import pytest

from policyd.sim.types import NodeSpec
from policyd.sim.workers import CLUSTERS, WorkersFileError, load_workers


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "workers.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_good_file_gives_cores_speed_and_memory(tmp_path: Path) -> None:
    path = write(tmp_path, "workers:\n  - {name: f, cores: 4, speed: 1.5}\n"
                           "  - {name: s, cores: 2, memory_gib: 3}\n")
    assert load_workers(path) == (NodeSpec(name="f", cores=4.0, speed=1.5),
                                  NodeSpec(name="s", cores=2.0, memory_gib=3.0))


def test_an_unlabelled_worker_runs_at_its_speed_but_its_snapshot_leaves_it_out(
        tmp_path: Path) -> None:
    (node,) = load_workers(write(tmp_path, "workers:\n"
                                 "  - {name: o, cores: 2, speed: 0.7, labelled: false}\n"))
    assert node == NodeSpec(name="o", cores=2.0, speed=0.7, labelled=False)
    assert node.core_speed == 0.7 and node.stated_speed is None


@pytest.mark.parametrize(("entry", "message"), [
    ("{name: w, cores: 2, speed: 1, labelled: no-way}",
     "workers[1] (w): labelled must be true or false, got 'no-way'"),
    ("{name: w, cores: 2, labelled: false}", "workers[1] (w): labelled: false needs a speed"),
    ("{name: w, cores: 0}", "workers[1] (w): cores must be a positive number, got 0"),
    ("{name: w, cores: 2, speed: -1}", "workers[1] (w): speed must be a positive number"),
    ("{name: w, cores: 2, speed: fast}", "workers[1] (w): speed must be a positive number"),
    ("{name: w}", "workers[1] (w): cores is missing"),
    ("{cores: 2}", "workers[1]: name must be a non-empty string"),
    ("{name: w, cores: 2, cpu: 3}", "workers[1] (w): unknown field(s) cpu"),
    ("{name: a, cores: 2}", "workers[1] (a): name repeats"),
    ("just-a-name", "workers[1]: expected a mapping"),
])
def test_a_bad_entry_is_named_with_the_file_and_the_reason(tmp_path: Path, entry: str,
                                                           message: str) -> None:
    path = write(tmp_path, f"workers:\n  - {{name: a, cores: 2}}\n  - {entry}\n")
    with pytest.raises(WorkersFileError) as caught:
        load_workers(path)
    assert any(p.startswith(f"{path}: ") and message in p for p in caught.value.problems), \
        caught.value.problems


def test_every_problem_is_named_at_once(tmp_path: Path) -> None:
    path = write(tmp_path, "workers:\n  - {name: a, cores: -1}\n  - {name: b, speed: 0}\n")
    with pytest.raises(WorkersFileError) as caught:
        load_workers(path)
    assert len(caught.value.problems) == 3


@pytest.mark.parametrize("text", ["[]", "workers: []", "workers: {a: 1}", ": :"])
def test_a_file_without_workers_is_refused(tmp_path: Path, text: str) -> None:
    with pytest.raises(WorkersFileError, match=str(tmp_path)):
        load_workers(write(tmp_path, text))


def test_the_shipped_cluster_files_load() -> None:
    for path in sorted(CLUSTERS.glob("*.yaml")):
        assert load_workers(path)
