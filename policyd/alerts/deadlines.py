"""Deadline alerts: a job that goes at risk, and a deadline missed. Pure: no I/O, no clock.

* `PolicydDeadlineAtRisk` (severity warning) is a state, like a failed action: it fires while a
  job's decision says `at_risk` or `hopeless` (its worker cannot give it what its deadline
  needs, or nothing can), re-sent when its annotations change (the state, or the forecast moves
  by a whole minute) or each resend interval, with `endsAt` a hold ahead, and resolved by the
  first decision of its policy in which the job is on track again, has missed its deadline, or
  is gone. Labels `policy, job`; annotations `summary`, `state`, `deadline`, `eta`, `slack`,
  `needed_cores`, `reason` (the engine's note for the job).
* `PolicydDeadlineMissed` (severity warning) is an event, like a migration: posted once when a
  job is first seen past its deadline, visible for a while, then resolved by Alertmanager.
  Labels `policy, job`; annotations `summary`, `deadline`, `eta`.

Dry-run decisions add `dry_run="true"`, as policyd's other alerts do (`payload`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from policyd.alerts.payload import Alert, resolved, rfc3339
from policyd.model import Assessment, Decision

AT_RISK = "PolicydDeadlineAtRisk"
MISSED = "PolicydDeadlineMissed"
RISKY = ("at_risk", "hopeless")


def _when(seconds: float | None) -> str:
    """A time to the minute (a forecast that moves by seconds is not news)."""
    return "unknown" if seconds is None else rfc3339(round(seconds / 60) * 60)


def _slack(seconds: float | None) -> str:
    return "unknown" if seconds is None else f"{seconds / 60:+.0f} min"


def at_risk_alert(policy: str, a: Assessment, *, dry_run: bool, starts_at: float,
                  ends_at: float, generator_url: str | None = None) -> Alert:
    """A job at risk (or hopeless) as a firing alert."""
    d = a.deadline
    assert d is not None
    needed = "unknown" if d.needed_cores is None else f"{d.needed_cores:.2f}"
    return Alert(
        labels={"alertname": AT_RISK, "policy": policy, "job": a.container,
                "severity": "warning", **({"dry_run": "true"} if dry_run else {})},
        annotations={
            "summary": f"job {a.container} on {a.node} is {d.state.replace('_', ' ')}: "
                       f"predicted {_slack(d.slack_seconds)} before its deadline",
            "state": d.state, "deadline": _when(d.deadline_at), "eta": _when(d.eta_at),
            "slack": _slack(d.slack_seconds), "needed_cores": needed, "reason": a.note},
        starts_at=starts_at, ends_at=ends_at, generator_url=generator_url)


def missed_alert(policy: str, a: Assessment, *, dry_run: bool, now: float,
                 visible_seconds: float, generator_url: str | None = None) -> Alert:
    """A missed deadline as an event: starts now, resolves by itself."""
    d = a.deadline
    assert d is not None
    return Alert(
        labels={"alertname": MISSED, "policy": policy, "job": a.container,
                "severity": "warning", **({"dry_run": "true"} if dry_run else {})},
        annotations={"summary": f"job {a.container} on {a.node} missed its deadline "
                                f"{_when(d.deadline_at)}",
                     "deadline": _when(d.deadline_at), "eta": _when(d.eta_at)},
        starts_at=now, ends_at=now + visible_seconds, generator_url=generator_url)


@dataclass
class DeadlineAlerts:
    """Which deadline alerts one decision fires, keeps, resolves or posts once."""

    firing: dict[tuple[str, str], tuple[Alert, float]] = field(default_factory=dict)
    missed: set[tuple[str, str]] = field(default_factory=set)

    def update(self, decision: Decision, now: float, *, hold_seconds: float,
               visible_seconds: float, resend_seconds: float,
               generator_url: str | None = None) -> list[Alert]:
        """The alerts to post after `decision` (module docstring)."""
        out: list[Alert] = []
        policy, seen = decision.policy, set()
        for a in decision.assessments:
            d = a.deadline
            if d is None:
                continue
            key = (policy, a.container)
            if d.state == "missed" and key not in self.missed:
                self.missed.add(key)
                out.append(missed_alert(policy, a, dry_run=decision.dry_run, now=now,
                                        visible_seconds=visible_seconds,
                                        generator_url=generator_url))
            if d.state not in RISKY:
                continue
            seen.add(key)
            before = self.firing.get(key)
            alert = at_risk_alert(policy, a, dry_run=decision.dry_run,
                                  starts_at=before[0].starts_at if before else now,
                                  ends_at=now + hold_seconds, generator_url=generator_url)
            if before is not None and before[0].key != alert.key:  # dry-run toggled
                out.append(resolved(before[0], now))
                before = None
            if (before is None or before[0].annotations != alert.annotations
                    or now - before[1] >= resend_seconds):
                out.append(alert)
                self.firing[key] = (alert, now)
        for key in [k for k in self.firing if k[0] == policy and k not in seen]:
            out.append(resolved(self.firing.pop(key)[0], now))
        present = {(policy, a.container) for a in decision.assessments}
        self.missed = {k for k in self.missed if k[0] != policy or k in present}
        return out

    def retire(self, policy: str, now: float) -> list[Alert]:
        """Resolve every at-risk alert of `policy` (a policy removed)."""
        gone = [k for k in self.firing if k[0] == policy]
        self.missed = {k for k in self.missed if k[0] != policy}
        return [resolved(self.firing.pop(k)[0], now) for k in gone]
