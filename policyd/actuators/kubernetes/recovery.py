"""How a recorded move goes on from what the cluster shows: the recovery table. Pure data.

A move (`moves.Move`) is settled by looking at the workload, classifying what is seen, and
taking the row's steps (`mover.Mover` runs them). The same rows drive a live migration after
its first step (the eviction, or the suspension) and the recovery of a move a crash
interrupted, at start-up and whenever a move is pending; so a crash at any point leaves a
state that some row finishes (or undoes), with one trainer at the end. Two pods of one name
cannot exist at once, so a bare pod's replacement can only be created once the old pod is
gone; a Job has `podReplacementPolicy: Failed` (checked before it is moved) and is suspended
while its template changes: never two trainers at once.

Bare pods: the pod of that name is `old-running` (the pod the move started from, not being
deleted), `old-stopping` (it, being deleted), `gone`, `target` / `home` (a pod policyd created
in this move, annotated `policyd.io/move`, on or pinned to the target / the home node), or
`other` (a pod of that name policyd did not create: not ours to touch).

| phase        | pod          | steps                                                    |
|--------------|--------------|----------------------------------------------------------|
| moving       | old-running  | forget (the eviction never happened)                     |
| moving       | old-stopping | wait-gone, create-target, confirm-target, forget         |
| moving       | gone         | create-target, confirm-target, forget                    |
| moving       | target       | confirm-target, forget                                   |
| moving       | home         | confirm-home, forget                                     |
| rolling-back | old-running  | forget (nothing was stopped)                             |
| rolling-back | old-stopping | wait-gone, create-home, confirm-home, forget             |
| rolling-back | gone         | create-home, confirm-home, forget                        |
| rolling-back | target       | remove, wait-gone, create-home, confirm-home, forget     |
| rolling-back | home         | confirm-home, forget                                     |
| either       | other        | forget (someone else's pod has the name: not touched)    |

Jobs: seen as (suspended, where the template's required node affinity pins it: `target`,
`home`, or `other`, e.g. the user's own affinity), or `gone`.

| phase        | suspended | pinned        | steps                                           |
|--------------|-----------|---------------|-------------------------------------------------|
| moving       | no        | home, other   | forget (never suspended, or resumed unchanged)  |
| moving       | yes       | home, other   | stop-pods, pin-target, resume, confirm-target,  |
|              |           |               | forget                                          |
| moving       | yes       | target        | stop-pods, resume, confirm-target, forget       |
| moving       | no        | target        | confirm-target, forget                          |
| rolling-back | no        | target, other | suspend, stop-pods, pin-home, resume,           |
|              |           |               | confirm-home, forget                            |
| rolling-back | yes       | any           | stop-pods, pin-home, resume, confirm-home,      |
|              |           |               | forget                                          |
| rolling-back | no        | home          | confirm-home, forget                            |
| either       | (gone)    |               | forget                                          |

`confirm-target` failing (the replacement does not run on the target: unschedulable, crash
looping, not running in time) and `wait-gone` seeing a non-zero exit code while moving (no
checkpoint was written) turn the move into `rolling-back` (written on the record), and the
table is read again.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from policyd.actuators.kubernetes import pods
from policyd.actuators.kubernetes.moves import Move, Phase
from policyd.model import labels as names

PodSeen = Literal["old-running", "old-stopping", "gone", "target", "home", "other"]
Pin = Literal["target", "home", "other"]
JobSeen = tuple[bool, Pin] | Literal["gone"]
Step = Literal["wait-gone", "create-target", "confirm-target", "remove", "create-home",
               "confirm-home", "suspend", "stop-pods", "pin-target", "pin-home", "resume",
               "forget"]

_MOVE_ON: tuple[Step, ...] = ("create-target", "confirm-target", "forget")
_GO_HOME: tuple[Step, ...] = ("create-home", "confirm-home", "forget")

POD_RULES: Mapping[tuple[Phase, PodSeen], tuple[Step, ...]] = {
    ("moving", "old-running"): ("forget",),
    ("moving", "old-stopping"): ("wait-gone", *_MOVE_ON),
    ("moving", "gone"): _MOVE_ON,
    ("moving", "target"): ("confirm-target", "forget"),
    ("moving", "home"): ("confirm-home", "forget"),
    ("moving", "other"): ("forget",),
    ("rolling-back", "old-running"): ("forget",),
    ("rolling-back", "old-stopping"): ("wait-gone", *_GO_HOME),
    ("rolling-back", "gone"): _GO_HOME,
    ("rolling-back", "target"): ("remove", "wait-gone", *_GO_HOME),
    ("rolling-back", "home"): ("confirm-home", "forget"),
    ("rolling-back", "other"): ("forget",),
}
"""The bare-pod table of the module docstring."""

_PIN_AND_GO: tuple[Step, ...] = ("stop-pods", "pin-target", "resume", "confirm-target", "forget")
_BACK: tuple[Step, ...] = ("stop-pods", "pin-home", "resume", "confirm-home", "forget")

JOB_RULES: Mapping[tuple[Phase, JobSeen], tuple[Step, ...]] = {
    ("moving", (False, "home")): ("forget",),
    ("moving", (False, "other")): ("forget",),
    ("moving", (True, "home")): _PIN_AND_GO,
    ("moving", (True, "other")): _PIN_AND_GO,
    ("moving", (True, "target")): ("stop-pods", "resume", "confirm-target", "forget"),
    ("moving", (False, "target")): ("confirm-target", "forget"),
    ("moving", "gone"): ("forget",),
    ("rolling-back", (False, "target")): ("suspend", *_BACK),
    ("rolling-back", (False, "other")): ("suspend", *_BACK),
    ("rolling-back", (True, "target")): _BACK,
    ("rolling-back", (True, "home")): _BACK,
    ("rolling-back", (True, "other")): _BACK,
    ("rolling-back", (False, "home")): ("confirm-home", "forget"),
    ("rolling-back", "gone"): ("forget",),
}
"""The Job table of the module docstring."""


def seen_pod(move: Move, pod: Mapping[str, Any] | None) -> PodSeen:
    """What the pod named in a bare-pod move is now (see the module docstring)."""
    if pod is None:
        return "gone"
    meta = pod.get("metadata") or {}
    if meta.get("uid") == move.uid:
        return "old-stopping" if meta.get("deletionTimestamp") else "old-running"
    if (meta.get("annotations") or {}).get(names.MOVE) != move.id:
        return "other"
    spec = pod.get("spec") or {}
    node = spec.get("nodeName") or pods.pinned_node(spec.get("affinity"))
    if node == move.to_node:
        return "target"
    return "home" if node == move.from_node else "other"


def seen_job(move: Move, job: Mapping[str, Any] | None) -> JobSeen:
    """Whether the Job of a move is suspended, and where its template pins it."""
    if job is None:
        return "gone"
    spec = job.get("spec") or {}
    node = pods.pinned_node(((spec.get("template") or {}).get("spec") or {}).get("affinity"))
    pin: Pin = ("target" if node == move.to_node else "home" if node == move.from_node
                else "other")
    return bool(spec.get("suspend")), pin


def steps_for(move: Move, seen: PodSeen | JobSeen) -> tuple[Step, ...]:
    """The row of the move's table for what was seen."""
    if move.workload == "pod":
        return POD_RULES[(move.phase, seen)]  # type: ignore[index]
    return JOB_RULES[(move.phase, seen)]  # type: ignore[index]
