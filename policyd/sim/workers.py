"""Worker files: the simulated cluster's machines, each with its cores and speed.

A worker file is YAML (or JSON):

    workers:
      - {name: fast-1, cores: 4, speed: 1.5}
      - {name: slow-1, cores: 2, speed: 0.6, memory_gib: 8}
      - {name: new-1, cores: 2}            # speed not stated: runs at 1.0, policies judge it
      - {name: old-1, cores: 2, speed: 0.7, labelled: false}  # runs at 0.7, judged

`cores` is a positive number; `speed` (optional) how fast one core trains relative to an
average core, a positive number; `labelled` (optional, default true) whether the snapshot
states that speed, as a node's `policyd.io/speed` label would: false plays a machine whose
operator did not label it, so that policies must judge its speed from the jobs' step times;
`memory_gib` (optional; default 4 GiB per core) only the default scheduler's scores read.
The heterogeneous scenarios read theirs from policyd/sim/data/clusters/, and
`policyd simulate --workers FILE` runs any scenario on the file's workers. A bad entry is
refused with the file, the entry and the reason, all of them at once.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import yaml

from policyd.sim.types import NodeSpec

CLUSTERS = Path(__file__).parent / "data" / "clusters"
"""The worker files the built-in heterogeneous scenarios use."""
FIELDS = ("name", "cores", "speed", "labelled", "memory_gib")


class WorkersFileError(ValueError):
    """A worker file that cannot be used; `problems` names each one."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


def load_workers(path: Path) -> tuple[NodeSpec, ...]:
    """The workers of the file at `path`; raises WorkersFileError naming every problem."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise WorkersFileError([f"{path}: cannot read the worker file: {exc.strerror}"]) from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise WorkersFileError([f"{path}: not YAML: {exc}"]) from None
    return parse_workers(raw, str(path))


def parse_workers(raw: Any, where: str) -> tuple[NodeSpec, ...]:
    """The workers of a parsed file (`where` names it in messages)."""
    entries = raw.get("workers") if isinstance(raw, dict) else None
    if not isinstance(entries, list) or not entries:
        raise WorkersFileError([f"{where}: expected a mapping with a non-empty list `workers`"])
    problems: list[str] = []
    nodes: list[NodeSpec] = []
    for i, entry in enumerate(entries):
        node = _worker(entry, f"{where}: workers[{i}]", problems)
        if node is not None:
            nodes.append(node)
    seen: set[str] = set()
    for i, node in enumerate(nodes):
        if node.name in seen:
            problems.append(f"{where}: workers[{i}] ({node.name}): name repeats an earlier "
                            f"worker's")
        seen.add(node.name)
    if problems:
        raise WorkersFileError(problems)
    return tuple(nodes)


def _worker(entry: Any, at: str, problems: list[str]) -> NodeSpec | None:
    if not isinstance(entry, dict):
        problems.append(f"{at}: expected a mapping with name, cores and optional speed, "
                        f"got {entry!r}")
        return None
    name = entry.get("name")
    label = f"{at} ({name})" if isinstance(name, str) and name else at
    before = len(problems)
    unknown = sorted(str(k) for k in entry if k not in FIELDS)
    if unknown:
        problems.append(f"{label}: unknown field(s) {', '.join(unknown)}; known: "
                        f"{', '.join(FIELDS)}")
    if not isinstance(name, str) or not name:
        problems.append(f"{label}: name must be a non-empty string, got {name!r}")
    cores = _positive(entry, "cores", label, problems, required=True)
    speed = _positive(entry, "speed", label, problems, required=False)
    memory = _positive(entry, "memory_gib", label, problems, required=False)
    labelled = entry.get("labelled", True)
    if not isinstance(labelled, bool):
        problems.append(f"{label}: labelled must be true or false, got {labelled!r}")
    elif not labelled and speed is None:
        problems.append(f"{label}: labelled: false needs a speed (the machine's true speed, "
                        "which its snapshot then leaves out)")
    if len(problems) > before or cores is None:
        return None
    return NodeSpec(name=str(name), cores=cores, speed=speed, memory_gib=memory,
                    labelled=bool(labelled))


def _positive(entry: dict[str, Any], key: str, label: str, problems: list[str], *,
              required: bool) -> float | None:
    value = entry.get(key)
    if value is None:
        if required:
            problems.append(f"{label}: {key} is missing (a positive number)")
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) \
            or not math.isfinite(value) or value <= 0:
        problems.append(f"{label}: {key} must be a positive number, got {value!r}")
        return None
    return float(value)
