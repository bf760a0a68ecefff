"""Which CPUs each of the integration tests' engines runs on (`docker_engines.per_engine`):
one CPU list for all engines, or one per engine (two hosts of unequal cores). No engine is
started."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.docker_engines import Engine, EngineCpus, per_engine


@pytest.mark.parametrize(("cpus", "count", "expected"), [
    pytest.param(None, 2, [None, None], id="none-every-cpu"),
    pytest.param("0", 3, ["0", "0", "0"], id="one-list-for-all"),
    pytest.param(("0", "0-1"), 2, ["0", "0-1"], id="one-per-engine-unequal"),
    pytest.param(["1", None], 2, ["1", None], id="one-pinned-one-free"),
])
def test_each_engine_gets_its_cpu_list(cpus: EngineCpus, count: int,
                                       expected: list[str | None]) -> None:
    assert per_engine(cpus, count) == expected


@pytest.mark.parametrize("cpus", [("0",), ("0", "1", "0-1")], ids=["too-few", "too-many"])
def test_a_sequence_must_name_one_list_per_engine(cpus: tuple[str, ...]) -> None:
    with pytest.raises(ValueError, match=f"names {len(cpus)} CPU lists for 2 engines"):
        per_engine(cpus, 2)


def test_an_engine_on_its_own_cpus_is_started_under_taskset(tmp_path: Path) -> None:
    engines = [Engine(name=f"e{i}", base=tmp_path, log=tmp_path / "log", cpus=c)
               for i, c in enumerate(per_engine(("0", "0-1"), 2), start=1)]
    commands = [e.command() for e in engines]
    assert [c[:3] for c in commands] == [["taskset", "-c", "0"], ["taskset", "-c", "0-1"]]
