"""Held Docker containers as pending jobs (`policyd.model.pending`). Pure: no I/O.

A held job on Docker is a container created but never started (`docker create`) that carries
policyd's managed label: it waits for a policy that admits (the Deadline kind), which the
Docker actuator carries out by starting it (`policyd.actuators.docker.admission`). The engines'
list API, asked with `all=True` and the filters `label=<managed>` and `status=created`, gives
each one's names, creation time and labels: one call per host and cycle, whatever the number.

Its creation is its submission (a deadline given as a duration counts from it) unless it
carries `policyd.io/submitted-at`, which the declarations read. A held container whose name
also runs (a copy started on another host, its held original not yet removed) is not pending;
two held containers of one name on two hosts: the older is kept, with a warning.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from policyd.model import PendingJob

HELD_STATUS = "created"


@dataclass(frozen=True, kw_only=True)
class HeldFacts:
    """One held container as its engine's list shows it."""

    name: str
    node: str
    created_at: float
    labels: Mapping[str, str]


def listed_name(listed: Mapping[str, Any]) -> str:
    """A container's name in an entry of the list API (its first `Names`, else its id)."""
    names = listed.get("Names") or [str(listed.get("Id", ""))]
    return str(names[0]).lstrip("/")


def held_of(listed: Mapping[str, Any], node: str) -> HeldFacts:
    """One entry of the list API (`Names`, `Created` in epoch seconds, `Labels`)."""
    return HeldFacts(name=listed_name(listed), node=node,
                     created_at=float(listed.get("Created") or 0.0),
                     labels=dict(listed.get("Labels") or {}))


def pending_jobs(held: Sequence[HeldFacts], running: Collection[str],
                 warnings: list[str]) -> tuple[PendingJob, ...]:
    """The held containers as pending jobs, by name, leaving out names that run."""
    chosen: dict[str, HeldFacts] = {}
    for h in sorted(held, key=lambda h: (h.created_at, h.node)):
        if h.name in running:
            continue
        other = chosen.get(h.name)
        if other is not None:
            warnings.append(f"held container {h.name} is on {other.node} and {h.node}; "
                            f"admitting the older, on {other.node}")
            continue
        chosen[h.name] = h
    return tuple(PendingJob(id=h.name, name=h.name, node=h.node, submitted_at=h.created_at,
                            labels=h.labels) for h in sorted(chosen.values(),
                                                             key=lambda h: h.name))
