"""Admission: which held jobs start now, and on which node. A shared part: a kind that admits
(`Kind.acts_on` holds "admission") ranks its held jobs and says how many cores each needs;
this module places them.

Theory of operation. Held jobs (`policyd.model.pending`) wait until a policy admits them. The
kind turns each into a `Candidate`: a sort key (its admission order: the Deadline kind's is
earliest deadline first), the cores it needs free on a node to start, whether it goes `last`
(it cannot reach its goal anywhere: admitted only when no other job waits, so it is never
starved), and what blocks it now, if anything (a declaration that cannot be read, a guard).
Given each node's free cores (the kind's figure: capacity minus what its running jobs need),
`place` walks the candidates in order:

1. a blocked candidate stays in the queue, with why;
2. one that is not `last` starts on the node with the most free cores among those with at
   least the cores it needs (ties: the node it is held on, then by name); those cores are
   then taken. A candidate that fits nowhere waits (`no_fit`, naming the freest node), and
   later ones that do fit are still admitted: a small job is not held up behind a big one
   (backfilling without reservations);
3. `last` candidates start only when every other candidate has started, each on the node
   with the most free cores, whether or not the cores are free (they run on what is left).

Every admission carries its reason; every job left waiting its position (1 = next) and why.
Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from policyd.engine.roomiest import Roomiest
from policyd.model import Admit, JobDeadline, PendingJob, QueuedJob
from policyd.model.pending import Why

FIT_TOLERANCE_CORES = 1e-9


@dataclass(frozen=True, kw_only=True)
class Candidate:
    """One held job as the kind ranks it (see the module docstring). `about` heads every
    reason (e.g. "deadline in 25 min"); `deadline` travels to the queue entry."""

    job: PendingJob
    key: tuple[float, ...]
    cores: float
    about: str
    last: bool = False
    blocked: str = ""
    blocked_why: Why = "blocked"
    deadline: JobDeadline | None = None

    def __post_init__(self) -> None:
        if not self.cores >= 0:
            raise ValueError(f"cores must be >= 0, got {self.cores}")


@dataclass(frozen=True, kw_only=True)
class Placement:
    """What `place` decided: admissions in order, the queue, and each node's free cores
    after the admissions."""

    admits: tuple[Admit, ...]
    queue: tuple[QueuedJob, ...]
    free: Mapping[str, float] = field(default_factory=dict)


def place(candidates: Sequence[Candidate], free_cores: Mapping[str, float], *,
          policy: str) -> Placement:
    """Admit what fits, in order (see the module docstring). The workers are kept sorted by
    free cores (`policyd.engine.roomiest`): a candidate fits somewhere exactly when it fits
    on the freest, which is where it goes, so a candidate costs no pass over every worker."""
    free = Roomiest(free_cores)
    order = sorted(candidates, key=lambda c: (c.last, c.key, c.job.id))
    admits: list[Admit] = []
    waiting: list[tuple[Candidate, Why, str]] = []
    for c in order:
        if c.last:
            continue
        if c.blocked:
            waiting.append((c, c.blocked_why, c.blocked))
            continue
        node = free.first(c.job.node)
        if node is None or free.cores[node] + FIT_TOLERANCE_CORES < c.cores:
            most = (f"most free: {node} with {free.cores[node]:.2f}" if node is not None
                    else "no nodes")
            waiting.append((c, "no_fit", f"{c.about}; needs {c.cores:.2f} free cores, no node "
                                         f"has them ({most})"))
            continue
        admits.append(Admit(policy=policy, container=c.job.id, node=node, held_on=c.job.node,
                            reason=f"{c.about}; {c.cores:.2f} cores needed, "
                                   f"{free.cores[node]:.2f} free on {node}"))
        free.change(node, -c.cores)
    others_wait = bool(waiting)
    for c in order:
        if not c.last:
            continue
        if c.blocked:
            waiting.append((c, c.blocked_why, c.blocked))
        elif others_wait or (node := free.first(c.job.node)) is None:
            waiting.append((c, "hopeless", f"{c.about}; admitted when no other job waits"))
        else:
            admits.append(Admit(policy=policy, container=c.job.id, node=node,
                                held_on=c.job.node,
                                reason=f"{c.about}; no other job waits: admitted on {node} "
                                       f"({max(free.cores[node], 0.0):.2f} cores free)"))
            free.change(node, -c.cores)
    queue = tuple(QueuedJob(container=c.job.id, position=i, why=why, reason=reason,
                            deadline=c.deadline)
                  for i, (c, why, reason) in enumerate(waiting, start=1))
    return Placement(admits=tuple(admits), queue=queue, free=free.cores)
