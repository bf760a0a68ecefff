"""Declarations policyd cannot read become Warning Events on the pod (or the held Job), on the
fake API server with the real client: once per job and note, again when the note changes or the
job is broken anew, never for a dry-run policy, and only on the leading replica."""

from __future__ import annotations

from typing import Any

from policyd.actuators.kubernetes.declaration_events import DeclarationEvents
from policyd.daemon.ports import joined
from policyd.daemon.roles import LeaderOnlyObserver
from policyd.model import Assessment, Decision
from policyd.model.deadline import JobDeadline
from policyd.model.pending import QueuedJob
from policyd.tick import Outcome
from tests.kubernetes.world import NS, actuator_on, events, served

BAD = "policyd.io/deadline '45 parsecs': unknown unit 'parsecs' (s, m, h, d)"
WORSE = "policyd.io/deadline '2026-13-01T00:00:00Z': not an RFC 3339 time"


def outcome(*invalid: tuple[str, str], queued: tuple[str, str] | None = None,
            dry_run: bool = False) -> Outcome:
    assessments = [Assessment(container=f"{NS}/{pod}/trainer", node="w2", category=None,
                              note=note, deadline=JobDeadline(state="invalid", note=note))
                   for pod, note in invalid]
    assessments.append(Assessment(container=f"{NS}/fine/trainer", node="w2", category="NL",
                                  deadline=JobDeadline(state="none")))
    queue = () if queued is None else (QueuedJob(container=f"{NS}/{queued[0]}", position=1,
                                                 why="invalid", reason=queued[1]),)
    return Outcome(decision=Decision(policy="deadlines", kind="Deadline", time=0.0, actions=(),
                                     assessments=tuple(assessments), next_interval=10.0,
                                     dry_run=dry_run, queue=queue))


def told(server: Any) -> list[tuple[str, str, str, str]]:
    return [(e["regarding"]["kind"], e["regarding"]["name"], e["type"], e["note"])
            for e in sorted(events(server), key=lambda e: (e["eventTime"], e["regarding"]["kind"]
                                                          == "Job"))]


def test_each_unreadable_declaration_is_told_once_on_its_workload() -> None:
    with served() as (server, clock):
        observer = DeclarationEvents(actuator_on(server, clock).events, container_name=None)
        observer.on_outcome(outcome(("job-a-x1", BAD), queued=("job-b", WORSE)), clock())
        clock.sleep(10.0)
        observer.on_outcome(outcome(("job-a-x1", BAD), queued=("job-b", WORSE)), clock())
        tail = "(policy deadlines); policyd leaves this job alone until it is fixed"
        assert told(server) == [("Pod", "job-a-x1", "Warning", f"{BAD} {tail}"),
                                ("Job", "job-b", "Warning", f"{WORSE} {tail}")]
        assert {e["reason"] for e in events(server)} == {"PolicydInvalidDeclaration"}
        assert {e["regarding"]["namespace"] for e in events(server)} == {NS}
        for tick in (outcome(("job-a-x1", WORSE)),  # another mistake
                     outcome(),  # fixed ...
                     outcome(("job-a-x1", WORSE))):  # ... and broken again
            clock.sleep(10.0)  # a cycle later (an Event's name carries its time)
            observer.on_outcome(tick, clock())
        assert [(kind, name) for kind, name, _, _ in told(server)[2:]] == [
            ("Pod", "job-a-x1"), ("Pod", "job-a-x1")]


def test_a_dry_run_policy_and_a_standby_replica_write_no_event() -> None:
    class Elector:
        def __init__(self, leading: bool) -> None:
            self.is_leading = leading

        def leading(self) -> bool:
            return self.is_leading

    with served() as (server, clock):
        own = DeclarationEvents(actuator_on(server, clock).events, container_name=None)
        own.on_outcome(outcome(("job-a-x1", BAD), dry_run=True), clock())
        elector = Elector(leading=False)
        gated = joined(None, LeaderOnlyObserver(own, elector))  # type: ignore[arg-type]
        assert gated is not None
        gated.on_outcome(outcome(("job-a-x1", BAD)), clock())
        assert told(server) == []
        elector.is_leading = True
        gated.on_outcome(outcome(("job-a-x1", BAD)), clock())
        assert [name for _, name, _, _ in told(server)] == ["job-a-x1"]
