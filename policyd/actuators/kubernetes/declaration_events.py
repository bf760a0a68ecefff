"""A Warning Event on each workload whose policyd declaration cannot be read.

A malformed `policyd.io/deadline` (or min/max CPU) is a decision note and no action for that
job (`policyd.model.deadline`, state `invalid`; a held Job's queue entry, why `invalid`); on
Kubernetes the job's owner also gets it where they look: `kubectl describe` / `kubectl events`
on the pod (or the held Job) shows a Warning `PolicydInvalidDeclaration` with the note. Told
once per job and note: the same note is not repeated every cycle; a changed note, or a job
that was fixed and broken again, is told again. Dry-run policies write nothing.

An `OutcomeObserver` (policyd.daemon.ports), fed every tick's decision; it knows no kind, only
the deadline states and queue reasons of the offline contract.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from policyd.actuators.errors import ActuationError
from policyd.actuators.kubernetes.events import (
    EventRecorder,
    regarding_held_job,
    regarding_pod,
)
from policyd.actuators.kubernetes.pods import PodRef
from policyd.tick import Outcome

LOG = logging.getLogger(__name__)
ACTION = "InvalidDeclaration"


class DeclarationEvents:
    """Records the Events through the actuator's `EventRecorder` (see the module docstring)."""

    def __init__(self, recorder: EventRecorder, *, container_name: str | None) -> None:
        self._recorder = recorder
        self._container_name = container_name
        self._told: dict[str, dict[str, str]] = {}  # policy -> job -> note told

    def on_outcome(self, outcome: Outcome, now: float) -> None:
        decision = outcome.decision
        if decision.dry_run:
            return
        found: dict[str, tuple[Mapping[str, Any], str]] = {}
        for a in decision.assessments:
            if a.deadline is not None and a.deadline.state == "invalid":
                try:
                    ref = PodRef.parse(a.container, self._container_name)
                except ActuationError as exc:
                    LOG.warning("kubernetes: no Event for %s: %s", a.container, exc)
                    continue
                found[a.container] = (regarding_pod(ref.namespace, ref.name), a.deadline.note)
        for q in decision.queue:
            if q.why == "invalid":
                found[q.container] = (regarding_held_job(q.container), q.reason)
        told = self._told.get(decision.policy, {})
        for job, (regarding, note) in found.items():
            if told.get(job) != note:
                self._recorder.record(regarding, ACTION, f"{note} (policy {decision.policy}); "
                                      "policyd leaves this job alone until it is fixed",
                                      warning=True)
        self._told[decision.policy] = {job: note for job, (_, note) in found.items()}

    def flush(self) -> None:
        """Nothing is pending: every Event is created when its tick ends."""
