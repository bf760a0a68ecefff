"""From tick outcomes to Alertmanager: which alerts to send, re-send and resolve, and when.

Theory of operation. The daemon hands every tick's `Outcome` to `Alerter.on_outcome(outcome,
now)`, which updates the state below, queues what must be posted, and posts the queue as one
batch (one `POST /api/v2/alerts`). A batch that cannot be delivered stays queued and goes out
with the next call (`on_outcome` or `flush`); nothing is ever raised into the daemon.

* Migrations are events. Each `Migrate` of the decision that did not fail is posted once, as
  `PolicydMigration` with `startsAt=now` and `endsAt=now + 3 x resend_interval_seconds`
  (3 minutes by default): Alertmanager notifies, shows it for that long, then resolves it by
  itself. It is never re-sent. (Delivered later than its `endsAt`, after an outage, Alertmanager
  records it as already resolved and does not notify.)
* Failures are states. A failed action (policy, job, kind) fires `PolicydActionFailed` from its
  first failure. While the next ticks of that policy fail the same way it stays firing: re-sent
  when the failure text changes or when `resend_interval_seconds` have passed since the last
  send, each time with `endsAt = now + hold`, hold = 3 x max(resend interval, the policy's next
  interval), so it outlives up to two missed ticks or re-sends but ends by itself if policyd
  stops. The first tick of that policy in which the job's action no longer fails (it succeeds,
  or the engine no longer asks for it) posts it again with `endsAt=now`: resolved.
* `flush()` posts the queue and re-sends firing alerts whose last send is older than the resend
  interval, unchanged (their `endsAt` still comes from the last tick that confirmed the failure):
  this restores them in an Alertmanager that restarted without its state, and never keeps alive
  a failure no tick confirms. Failure alerts whose `endsAt` has passed are forgotten.
* Deadlines (`deadlines`): a job at risk is a state like a failure (fires, re-sent, resolved
  when its policy's next decision no longer says so); a missed deadline an event like a
  migration.
* Delivered jobs are seen again every tick while they last (a job at its target loss or
  converged, `Assessment.delivery`, under any response): `PolicydJobDelivered` is posted when a
  tick first finds the job so, and again once `resend_interval_seconds` have passed, each time
  with `endsAt = now + hold`; a stopped job is gone from the next ticks, so it ends by itself.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import requests

from policyd.alerts.client import AlertmanagerClient
from policyd.alerts.deadlines import DeadlineAlerts
from policyd.alerts.payload import (
    Alert,
    AlertKey,
    delivered_alert,
    failure_alert,
    migration_alert,
    resolved,
    to_json,
)
from policyd.alerts.settings import AlertSettings
from policyd.model.decision import Migrate
from policyd.tick import Outcome

log = logging.getLogger(__name__)

MAX_PENDING = 1000
"""Default for how many queued alerts are kept while Alertmanager is unreachable; the oldest
are dropped beyond it."""

EVENT_RESENDS = 3
"""How many resend intervals an event (a migration) and a confirmed failure stay visible."""

FailureKey = tuple[str, str, str]  # (policy, job, kind)


@dataclass
class _Firing:
    alert: Alert
    last_sent: float


class Alerter:
    """Sends policyd's own alerts (migrations, failed actions) to Alertmanager."""

    def __init__(self, settings: AlertSettings, *, session: requests.Session | None = None,
                 clock: Callable[[], float] = time.time,
                 max_pending: int = MAX_PENDING) -> None:
        self.settings = settings
        self.max_pending = max_pending
        self.client = AlertmanagerClient(settings.url, timeout_seconds=settings.timeout_seconds,
                                         retries=settings.retries, session=session,
                                         access=settings.access())
        self._clock = clock
        self._lock = threading.Lock()
        self._pending: dict[AlertKey, Alert] = {}
        self._firing: dict[FailureKey, _Firing] = {}
        self._deadlines = DeadlineAlerts()
        self._delivered: dict[AlertKey, float] = {}  # when each delivery was last sent
        self.dropped_total = 0
        """Queued alerts dropped because the queue was full."""

    @property
    def errors_total(self) -> int:
        """Posts that did not deliver their batch (network errors, 5xx, rejections)."""
        return self.client.errors_total

    @property
    def pending(self) -> tuple[Alert, ...]:
        """What the next post would send (a copy, for inspection)."""
        with self._lock:
            return tuple(self._pending.values())

    @property
    def firing(self) -> tuple[Alert, ...]:
        """The failure alerts currently firing, as last sent or queued."""
        with self._lock:
            return tuple(f.alert for f in self._firing.values())

    def on_outcome(self, outcome: Outcome, now: float) -> None:
        """Queue the alerts of one tick (see the module docstring) and post them."""
        decision = outcome.decision
        failed_actions = [action for action, _ in outcome.failed]
        visible = EVENT_RESENDS * self.settings.resend_interval_seconds
        hold = EVENT_RESENDS * max(self.settings.resend_interval_seconds,
                                   decision.next_interval)
        with self._lock:
            for action in decision.actions:
                if isinstance(action, Migrate) and action not in failed_actions:
                    self._queue(migration_alert(
                        action, dry_run=decision.dry_run, now=now, visible_seconds=visible,
                        generator_url=self.settings.generator_url))
            self._deliveries(outcome, now, hold)
            still_failing: set[FailureKey] = set()
            for action, failure in outcome.failed:
                key: FailureKey = (action.policy, action.container, action.kind)
                still_failing.add(key)
                before = self._firing.get(key)
                alert = failure_alert(
                    action, failure, dry_run=decision.dry_run,
                    starts_at=before.alert.starts_at if before else now, ends_at=now + hold,
                    generator_url=self.settings.generator_url)
                if before is not None and before.alert.key != alert.key:  # dry_run toggled
                    self._queue(resolved(before.alert, now))
                    before = None
                if (before is None or before.alert.annotations != alert.annotations
                        or now - before.last_sent >= self.settings.resend_interval_seconds):
                    self._queue(alert)
                    self._firing[key] = _Firing(alert=alert, last_sent=now)
            for gone in [k for k in self._firing
                         if k[0] == decision.policy and k not in still_failing]:
                self._queue(resolved(self._firing.pop(gone).alert, now))
            for alert in self._deadlines.update(
                    decision, now, hold_seconds=hold, visible_seconds=visible,
                    resend_seconds=self.settings.resend_interval_seconds,
                    generator_url=self.settings.generator_url):
                self._queue(alert)
            self._post()

    def _deliveries(self, outcome: Outcome, now: float, hold: float) -> None:
        decision = outcome.decision
        for a in decision.assessments:
            if a.delivery is None:
                continue
            alert = delivered_alert(decision.policy, a, dry_run=decision.dry_run, now=now,
                                    ends_at=now + hold,
                                    generator_url=self.settings.generator_url)
            sent = self._delivered.get(alert.key)
            if sent is None or now - sent >= self.settings.resend_interval_seconds:
                self._queue(alert)
                self._delivered[alert.key] = now
        for key in [k for k, sent in self._delivered.items() if now - sent > hold]:
            del self._delivered[key]  # ended by itself

    def retire(self, policy: str, now: float) -> None:
        """Resolve every failure alert of `policy` (call when a policy is removed)."""
        with self._lock:
            for key in [k for k in self._firing if k[0] == policy]:
                self._queue(resolved(self._firing.pop(key).alert, now))
            for alert in self._deadlines.retire(policy, now):
                self._queue(alert)
            self._post()

    def flush(self) -> None:
        """Post what is queued, with due re-sends of firing alerts (see the module docstring)."""
        now = self._clock()
        with self._lock:
            for key, firing in list(self._firing.items()):
                if firing.alert.ends_at <= now:
                    del self._firing[key]  # ended by itself: no tick confirmed it in time
                elif now - firing.last_sent >= self.settings.resend_interval_seconds:
                    self._queue(firing.alert)
                    firing.last_sent = now
            self._post()

    def close(self) -> None:
        """Try once more to deliver the queue, then close the HTTP session."""
        self.flush()
        self.client.close()

    def _queue(self, alert: Alert) -> None:
        self._pending.pop(alert.key, None)  # the latest version of an alert replaces older ones
        self._pending[alert.key] = alert
        while len(self._pending) > self.max_pending:
            oldest = next(iter(self._pending))
            log.warning("alert queue full: dropping %s", self._pending.pop(oldest).name)
            self.dropped_total += 1

    def _post(self) -> None:
        if not self._pending:
            return
        batch = list(self._pending.values())
        if self.client.post(to_json(batch)) != "unreachable":
            for alert in batch:  # sent, or rejected for good: either way, done with it
                if self._pending.get(alert.key) is alert:
                    del self._pending[alert.key]
