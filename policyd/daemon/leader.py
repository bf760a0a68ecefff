"""Leader election on a coordination.k8s.io/v1 Lease: two policyd replicas, one acting.

Why not `kubernetes.leaderelection`: it calls `sys.exit()` on a bad configuration, its
`run()` blocks until leadership is lost, and client 36 ships only a ConfigMap lock. This is
client-go's algorithm, small, on the Lease API (get, create, update with the resourceVersion,
so two candidates racing get one 409):

* a candidate reads the Lease every `retry_period_seconds`. Free (no holder), held by itself,
  or expired -> it writes itself as holder with a new `renewTime`. Expiry is measured on the
  candidate's own monotonic clock: a record that has not changed for `lease_duration_seconds`
  since the candidate first saw it is expired (no comparison of two machines' clocks);
* the holder counts as leader while its last successful renewal is younger than
  `renew_deadline_seconds` (< lease duration): `leading()` checks that at the moment of
  acting, so a holder whose renewals fail (API unreachable, a stalled thread) stops acting
  before anyone else can take over. `is_leader` (a `threading.Event`) mirrors it for the
  daemon's health and metrics.
* a clean stop releases the Lease (`release`), so the standby leads within one retry period
  rather than one lease duration.

`LeaderOnly` wraps an actuator: actions are applied only while `leading()`; a standby logs
and skips them (not a failure). Requires lease > renew deadline > 1.2 x retry period
(`LeaseSection`: checked on construction with a ValueError, never `sys.exit`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import urllib3
from kubernetes.client.exceptions import ApiException  # type: ignore[import-untyped]

from policyd.clients.kubernetes_json import body
from policyd.clients.settings import NonEmptyStr
from policyd.daemon.settings import LeaseSection
from policyd.model import Action, Decision
from policyd.tick import Actuator

LOG = logging.getLogger(__name__)


class LeaseSettings(LeaseSection):
    """The Lease one candidate competes for, as `identity`: the settings file's Lease (name,
    namespace, timings and their rule: `LeaseSection`) plus who this replica is (built by
    `roles.lease_settings`)."""

    identity: NonEmptyStr

    @property
    def name(self) -> str:
        """The Lease's name (`lease_name`)."""
        return self.lease_name


def micro_time(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    """One candidate (see the module docstring). `api` is a CoordinationV1Api; `clock` is
    monotonic (expiry, deadlines), `wall` writes the Lease's times."""

    def __init__(self, settings: LeaseSettings, api: Any, *,
                 clock: Callable[[], float] = time.monotonic,
                 wall: Callable[[], float] = time.time) -> None:
        self.settings, self.api, self.clock, self.wall = settings, api, clock, wall
        self.is_leader = threading.Event()
        self._renewed_at: float | None = None
        self._observed: tuple[Any, ...] | None = None
        self._observed_at = 0.0

    def leading(self) -> bool:
        """True while the last renewal is younger than the renew deadline."""
        at = self._renewed_at
        if at is None or self.clock() - at >= self.settings.renew_deadline_seconds:
            if self.is_leader.is_set():
                LOG.warning("leader: %s lost the lease (no renewal for %.0f s)",
                            self.settings.identity, self.settings.renew_deadline_seconds)
            self.is_leader.clear()
            return False
        return True

    def step(self) -> bool:
        """One try to acquire or renew; whether this candidate leads afterwards."""
        try:
            ok = self._try()
        except (ApiException, urllib3.exceptions.HTTPError, OSError) as exc:
            LOG.warning("leader: lease %s/%s: %s", self.settings.namespace,
                        self.settings.lease_name,
                        getattr(exc, "status", None) or exc)
            ok = False
        if ok:
            self._renewed_at = self.clock()
            if not self.is_leader.is_set():
                LOG.info("leader: %s leads", self.settings.identity)
            self.is_leader.set()
        return self.leading()

    def _try(self) -> bool:
        s, now = self.settings, self.clock()
        try:
            lease = body(self.api.read_namespaced_lease(s.lease_name, s.namespace,
                                                         _preload_content=False))
        except ApiException as exc:
            if exc.status != 404:
                raise
            self.api.create_namespaced_lease(s.namespace, self._lease(None, 0),
                                             _preload_content=False)
            return True
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity") or ""
        record = (holder, spec.get("renewTime"), spec.get("leaseTransitions"))
        if record != self._observed:
            self._observed, self._observed_at = record, now
        duration = float(spec.get("leaseDurationSeconds") or s.lease_duration_seconds)
        if holder and holder != s.identity and now < self._observed_at + duration:
            self.is_leader.clear()
            return False
        transitions = int(spec.get("leaseTransitions") or 0) + (holder != s.identity)
        changed = self._lease(lease, transitions, keep_acquire=holder == s.identity)
        try:
            self.api.replace_namespaced_lease(s.lease_name, s.namespace, changed,
                                              _preload_content=False)
        except ApiException as exc:
            if exc.status == 409:  # another candidate wrote first
                return False
            raise
        return True

    def _lease(self, current: dict[str, Any] | None, transitions: int, *,
               keep_acquire: bool = False) -> dict[str, Any]:
        s, now = self.settings, micro_time(self.wall())
        meta: dict[str, Any] = {"name": s.lease_name, "namespace": s.namespace}
        if current is not None:
            meta["resourceVersion"] = (current.get("metadata") or {}).get("resourceVersion")
        old = (current or {}).get("spec") or {}
        return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta,
                "spec": {"holderIdentity": s.identity,
                         "leaseDurationSeconds": round(s.lease_duration_seconds),
                         "acquireTime": old.get("acquireTime") if keep_acquire else now,
                         "renewTime": now, "leaseTransitions": transitions}}

    def run(self, stop: threading.Event,
            on_acquired: Callable[[], None] | None = None) -> None:
        """Try every retry period until `stop` (on its own thread); leadership ends with it.
        `on_acquired` is called each time this candidate starts leading (it must not block:
        renewals wait for it)."""
        while not stop.is_set():
            was = self.is_leader.is_set()
            if self.step() and not was and on_acquired is not None:
                try:
                    on_acquired()
                except Exception:
                    LOG.exception("leader: on_acquired failed")
            stop.wait(self.settings.retry_period_seconds)
        self.release()

    def release(self) -> bool:
        """Stop leading and, if this candidate holds the Lease, give it up (client-go's
        ReleaseOnCancel): holder cleared, duration 1 s, so a standby takes over at its next
        retry instead of waiting out the lease. Called when the daemon stops, after its last
        tick; leadership is dropped *before* the write, so nothing acts on a released Lease.
        Whether the Lease was released. An API error is logged: the Lease then simply
        expires."""
        held = self._renewed_at is not None
        self.is_leader.clear()
        self._renewed_at = None
        if not held:
            return False
        s = self.settings
        try:
            lease = body(self.api.read_namespaced_lease(s.lease_name, s.namespace,
                                                         _preload_content=False))
            spec = lease.get("spec") or {}
            if spec.get("holderIdentity") != s.identity:
                return False
            now = micro_time(self.wall())
            self.api.replace_namespaced_lease(s.lease_name, s.namespace, {
                "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": s.lease_name, "namespace": s.namespace,
                             "resourceVersion": (lease.get("metadata") or {}).get(
                                 "resourceVersion")},
                "spec": {"holderIdentity": "", "leaseDurationSeconds": 1,
                         "acquireTime": now, "renewTime": now,
                         "leaseTransitions": int(spec.get("leaseTransitions") or 0)},
            }, _preload_content=False)
        except (ApiException, urllib3.exceptions.HTTPError, OSError) as exc:
            LOG.warning("leader: could not release lease %s/%s (it will expire): %s",
                        s.namespace, s.lease_name, getattr(exc, "status", None) or exc)
            return False
        LOG.info("leader: %s released lease %s/%s", s.identity, s.namespace, s.lease_name)
        return True


class LeaderOnly:
    """An actuator that acts only while `elector.leading()` (policyd.tick.Actuator)."""

    def __init__(self, actuator: Actuator, elector: LeaderElector) -> None:
        self.actuator, self.elector = actuator, elector
        self.skipped = 0

    def apply(self, action: Action, decision: Decision) -> None:
        if not self.elector.leading():
            self.skipped += 1
            LOG.info("leader: standby, not applied: %s %s", action.kind, action.container)
            return
        self.actuator.apply(action, decision)
