"""Deadline's held jobs ranked for admission (`policyd.engine.admission.place`): earliest
deadline first, then jobs without a deadline by submission, a job whose deadline passed while
it waited last; one whose declaration cannot be read, or that opted out, waits with why. The
same ranking whether the manager decides from one snapshot or from its node agents' reports.
Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from policyd.engine.admission import Candidate
from policyd.engine.deadline_cores import span
from policyd.engine.declarations import declared
from policyd.model import JobDeadline, PendingJob

if TYPE_CHECKING:  # the kind's module imports this one
    from policyd.engine.deadline import DeadlineSpec


def candidates(pending: Sequence[PendingJob], spec: DeadlineSpec,
               now: float) -> list[Candidate]:
    """The held jobs `spec` selects, ranked (module docstring)."""
    out = []
    for p in pending:
        if not spec.selector.selects(p):
            continue
        d = declared(p.labels, p.annotations, submitted_at=p.submitted_at)
        cores = d.min_cores if d.min_cores is not None else spec.admission_cores
        if d.problems:
            note = "; ".join(d.problems)
            out.append(Candidate(job=p, key=(2.0, p.submitted_at), cores=cores, about=note,
                                 blocked=f"not admitted: {note}", blocked_why="invalid",
                                 deadline=JobDeadline(state="invalid", note=note)))
            continue
        if spec.selector.opted_out(p):
            out.append(Candidate(job=p, key=(2.0, p.submitted_at), cores=cores, about="",
                                 blocked=f"opted out ({spec.selector.opt_out_key}=true)"))
            continue
        if d.deadline_at is None:
            out.append(Candidate(job=p, key=(1.0, p.submitted_at), cores=cores,
                                 about="no deadline: after the jobs with one, in arrival order",
                                 deadline=JobDeadline(state="none")))
        elif now >= d.deadline_at:
            out.append(Candidate(
                job=p, key=(d.deadline_at, p.submitted_at), cores=cores, last=True,
                about=f"deadline passed {span(now - d.deadline_at)} ago while it waited",
                deadline=JobDeadline(state="missed", deadline_at=d.deadline_at)))
        else:
            out.append(Candidate(
                job=p, key=(0.0, d.deadline_at, p.submitted_at), cores=cores,
                about=f"earliest deadline first: deadline in {span(d.deadline_at - now)}",
                deadline=JobDeadline(state="unknown", deadline_at=d.deadline_at)))
    return out
