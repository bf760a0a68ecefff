"""A Kubernetes Event (events.k8s.io/v1) for every action, done or failed.

`reason` is `Policyd<Action>` (PolicydSetCpu, PolicydMigrate, PolicydMarkMigrated), `action`
the action kind, `note` the action's own reason (which names the policy and the numbers), with
the error appended for a failure (type Warning), cut to 1024 *bytes* of UTF-8 (the API
server counts bytes, and refuses a longer note with 422: the Event would be lost). The Event
regards the pod (the replacement after a migration, or the Job for a Job-owned pod's).
Creating an Event never fails an action: a refusal is logged. Events are created, never
listed (listing events.k8s.io/v1 Events with a null eventTime fails validation in client 37).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from policyd.actuators.errors import ActuationError
from policyd.actuators.kubernetes.calls import Caller

LOG = logging.getLogger(__name__)
NOTE_MAX_BYTES = 1024
"""The API server's limit on `note`, in bytes of UTF-8 (not characters)."""
ELLIPSIS = "..."


def micro_time(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def event_body(*, regarding: Mapping[str, Any], action: str, note: str, warning: bool,
               now: float, controller: str, instance: str) -> dict[str, Any]:
    """The Event object (pure). Its name follows client-go: `<object>.<hex nanoseconds>`."""
    return {
        "apiVersion": "events.k8s.io/v1", "kind": "Event",
        "metadata": {"name": f"{regarding.get('name')}.{int(now * 1e9):x}",
                     "namespace": regarding.get("namespace")},
        "eventTime": micro_time(now),
        "reportingController": controller,
        "reportingInstance": instance,
        "action": action,
        "reason": f"Policyd{action}",
        "regarding": dict(regarding),
        "note": cut_note(note),
        "type": "Warning" if warning else "Normal",
    }


def cut_note(note: str, limit_bytes: int = NOTE_MAX_BYTES) -> str:
    """`note`, or as much of it as fits in `limit_bytes` of UTF-8 with "..." (never half a
    character)."""
    data = note.encode()
    if len(data) <= limit_bytes:
        return note
    return data[: limit_bytes - len(ELLIPSIS)].decode(errors="ignore") + ELLIPSIS


def regarding_of(obj: Mapping[str, Any], *, api_version: str = "v1", kind: str = "Pod"
                 ) -> dict[str, Any]:
    meta = obj.get("metadata") or {}
    out = {"apiVersion": api_version, "kind": kind, "namespace": meta.get("namespace"),
           "name": meta.get("name")}
    if meta.get("uid"):
        out["uid"] = meta["uid"]
    return out


def regarding_pod(namespace: str, name: str) -> dict[str, Any]:
    """An Event's `regarding` for a pod known by its name only."""
    return {"apiVersion": "v1", "kind": "Pod", "namespace": namespace, "name": name}


def regarding_held_job(container: str) -> dict[str, Any]:
    """An Event's `regarding` for a held Job, named `namespace/name` as a pending job is."""
    namespace, _, name = container.partition("/")
    return {"apiVersion": "batch/v1", "kind": "Job", "namespace": namespace, "name": name}


@dataclass
class EventRecorder:
    """Creates the Events through `api` (an EventsV1Api)."""

    api: Any
    caller: Caller
    clock: Callable[[], float]
    controller: str
    instance: str

    def record(self, regarding: Mapping[str, Any], action: str, note: str, *,
               warning: bool = False) -> None:
        body = event_body(regarding=regarding, action=action, note=note, warning=warning,
                          now=self.clock(), controller=self.controller,
                          instance=self.instance)
        try:
            self.caller.call(f"create event {body['metadata']['name']}",
                             self.api.create_namespaced_event, regarding.get("namespace"),
                             body, write=True, passthrough=frozenset())
        except ActuationError as exc:
            LOG.warning("kubernetes: event not recorded: %s", str(exc))
