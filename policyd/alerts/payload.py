"""Alerts as plain values, and their JSON form for Alertmanager's `POST /api/v2/alerts`.

Pure: no I/O, no clock (every time is an argument, in epoch seconds). `alerter` decides *when*
an alert is sent or resolved; this module only says *what* it looks like:

* `PolicydMigration` (severity info): a migration that was carried out (or, in dry-run, would
  have been). Labels `policy, job, from, to`; annotations `summary`, `reason` (the engine's).
* `PolicydActionFailed` (severity warning): an action the actuator could not carry out. Labels
  `policy, job, kind`; annotations `summary`, `reason` (the failure), `action_reason` (why the
  engine wanted the action).

Dry-run decisions add the label `dry_run="true"`, so routes can silence them. Labels are an
alert's identity in Alertmanager: re-sending the same labels updates one alert, and posting it
with `endsAt` in the past (or now) resolves it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any

from policyd.model import Action, Assessment
from policyd.model.action_text import describe
from policyd.model.decision import Migrate

MIGRATION = "PolicydMigration"
ACTION_FAILED = "PolicydActionFailed"
DELIVERED = "PolicydJobDelivered"

AlertKey = frozenset[tuple[str, str]]


@dataclass(frozen=True, kw_only=True)
class Alert:
    """One alert as Alertmanager sees it; times are epoch seconds."""

    labels: Mapping[str, str]
    annotations: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    starts_at: float
    ends_at: float
    generator_url: str | None = None

    def __post_init__(self) -> None:
        if not self.labels.get("alertname"):
            raise ValueError("an alert needs an alertname label")
        if self.ends_at < self.starts_at:
            raise ValueError(f"ends_at {self.ends_at} is before starts_at {self.starts_at}")
        object.__setattr__(self, "labels", MappingProxyType(dict(self.labels)))
        object.__setattr__(self, "annotations", MappingProxyType(dict(self.annotations)))

    @property
    def key(self) -> AlertKey:
        """The alert's identity: its label set."""
        return frozenset(self.labels.items())

    @property
    def name(self) -> str:
        return self.labels["alertname"]


def rfc3339(seconds: float) -> str:
    """Epoch seconds as RFC 3339 in UTC with milliseconds: `2023-11-14T22:13:20.000Z`."""
    text = datetime.fromtimestamp(seconds, UTC).isoformat(timespec="milliseconds")
    return text.replace("+00:00", "Z")


def _dry_run(dry_run: bool) -> dict[str, str]:
    return {"dry_run": "true"} if dry_run else {}


def migration_alert(action: Migrate, *, dry_run: bool, now: float, visible_seconds: float,
                    generator_url: str | None = None) -> Alert:
    """A migration as an event: starts now and resolves by itself `visible_seconds` later."""
    moved = "would move" if dry_run else "moved"
    return Alert(
        labels={"alertname": MIGRATION, "policy": action.policy, "job": action.container,
                "from": action.from_node, "to": action.to_node, "severity": "info",
                **_dry_run(dry_run)},
        annotations={
            "summary": f"job {action.container} {moved} from {action.from_node} "
                       f"to {action.to_node}",
            "reason": action.reason,
        },
        starts_at=now, ends_at=now + visible_seconds, generator_url=generator_url,
    )


def delivered_alert(policy: str, assessment: Assessment, *, dry_run: bool, now: float,
                    ends_at: float, generator_url: str | None = None) -> Alert:
    """A job at its target loss or converged (`assessment.delivery`), and what the policy does
    about it: firing while ticks keep finding it so, ended by itself `ends_at`."""
    delivery = assessment.delivery
    assert delivery is not None
    done = "reached its target loss" if delivery.event == "target" else "converged"
    return Alert(
        labels={"alertname": DELIVERED, "policy": policy, "job": assessment.container,
                "node": assessment.node, "event": delivery.event,
                "response": delivery.response, "severity": "info", **_dry_run(dry_run)},
        annotations={"summary": f"job {assessment.container} {done} ({delivery.response})",
                     "reason": delivery.reason},
        starts_at=now, ends_at=ends_at, generator_url=generator_url,
    )


def failure_alert(action: Action, failure: str, *, dry_run: bool, starts_at: float,
                  ends_at: float, generator_url: str | None = None) -> Alert:
    """A failed action as a firing alert from `starts_at` (its first failure) to `ends_at`."""
    return Alert(
        labels={"alertname": ACTION_FAILED, "policy": action.policy, "job": action.container,
                "kind": action.kind, "severity": "warning", **_dry_run(dry_run)},
        annotations={"summary": f"{describe(action)} failed", "reason": failure,
                     "action_reason": action.reason},
        starts_at=starts_at, ends_at=ends_at, generator_url=generator_url,
    )


def resolved(alert: Alert, now: float) -> Alert:
    """The same alert, ended now (posting it resolves it in Alertmanager)."""
    return replace(alert, ends_at=max(now, alert.starts_at))


def to_json(alerts: Sequence[Alert]) -> list[dict[str, Any]]:
    """The body of one `POST /api/v2/alerts`."""
    body = []
    for alert in alerts:
        item: dict[str, Any] = {
            "labels": dict(alert.labels), "annotations": dict(alert.annotations),
            "startsAt": rfc3339(alert.starts_at), "endsAt": rfc3339(alert.ends_at),
        }
        if alert.generator_url is not None:
            item["generatorURL"] = alert.generator_url
        body.append(item)
    return body
