"""Held Kubernetes Jobs as pending jobs (`policyd.model.pending`), and as they are submitted.

A held job on Kubernetes is a Job created with `spec.suspend: true` that matches policyd's
label selector: it waits until a policy that admits (the Deadline kind) emits an `Admit`, which
the actuator carries out by pinning its pod template to a node and unsuspending it
(`policyd.actuators.kubernetes.admission`). A cycle of a policy that admits reads them from
the manager's Job watch (below) or, before its first list, from one Job list (all namespaces,
or one per configured namespace, with the label selector), whatever the number of Jobs.

A suspended Job that carries `policyd.io/migrating` is being moved by policyd, not held; a
Job suspended with pods still live is not held either (someone else suspended a running Job);
nor is a Job that carries `policyd.io/delivered`: policyd stopped it at its target or
convergence, and suspended it because its trainer did not exit 0 (`actuators.kubernetes.stop`),
so that it never runs again; offered for admission, it would be started again.
Its id is `namespace/name`; its submission its `creationTimestamp`; its labels are the Job's,
its annotations the pod template's overlaid with the Job's own (a deadline is declared on
either). A node agent (`node_name`) lists no Jobs: admission is the manager's.

`JobWatch` (the manager's, beside `PodWatch`) reports each Job that becomes held as a
"submitted" `ContainerEvent`, so that the admitting kinds tick at once rather than up to an
interval later, as Docker's "create" does (`docker_events`); and it keeps the Jobs held now
(`held_now`), which the manager's source reads instead of listing every managed Job each cycle
(at 100,000 Jobs that list is ~350 MB of JSON and ~23 CPU seconds to decode: benchmarks/README.md)
while the watch runs; until its first list, after it lost the API server, and when it watches
several namespaces in turn (too stale then, as the pod watch's view: `ListWatch.view`), the
source lists. Its container is the id above (the
`Admit` names it) and its node the pending job's (none: "", a suspended Job is held nowhere).
It is `kubernetes_list_watch.ListWatch` on the same list calls (`watch=True`), a Job reported
once each time it becomes held (by uid); the Jobs held at the first list are not submissions
(the first cycle sees them), those held after a relist (410 Gone) and not before are.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any, Protocol, Unpack

from policyd.clients.kubernetes_follow import Listing
from policyd.model import PendingJob
from policyd.model import labels as keys
from policyd.sources.kubernetes_list_watch import ListWatch, Tracked, WatchOptions

LOG = logging.getLogger(__name__)


class JobScope(Protocol):
    """Which Jobs (the actuator's KubernetesSettings has these fields)."""

    @property
    def namespaces(self) -> tuple[str, ...]: ...
    @property
    def label_selector(self) -> str: ...


def job_listing(batch: Any, scope: JobScope) -> Listing:
    """The managed Jobs' list calls: all namespaces, or one per configured namespace."""
    return Listing.scoped(every=batch.list_job_for_all_namespaces,
                          namespaced=batch.list_namespaced_job, namespaces=scope.namespaces,
                          selectors={"label_selector": scope.label_selector})


def list_jobs(batch: Any, scope: JobScope) -> list[dict[str, Any]]:
    """The Jobs matching the label selector: one call (or one per namespace)."""
    items, _ = job_listing(batch, scope).list()
    return items


def _seconds(text: str) -> float | None:
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def held_job(job: Mapping[str, Any], warnings: list[str]) -> PendingJob | None:
    """`job` as a pending job when it is held (see the module docstring), else None. Pure."""
    meta, spec = job.get("metadata") or {}, job.get("spec") or {}
    status = job.get("status") or {}
    job_labels = dict(meta.get("labels") or {})
    if not spec.get("suspend") or job_labels.get(keys.MIGRATING) or status.get("active") \
            or keys.DELIVERED in (meta.get("annotations") or {}):
        return None
    where = f"job {meta.get('namespace')}/{meta.get('name')}"
    submitted = _seconds(str(meta.get("creationTimestamp") or ""))
    if submitted is None:
        warnings.append(f"{where}: no readable creationTimestamp; not offered for admission")
        return None
    template = (spec.get("template") or {}).get("metadata") or {}
    annotations = {**(template.get("annotations") or {}), **(meta.get("annotations") or {})}
    return PendingJob(id=f"{meta['namespace']}/{meta['name']}", name=str(meta["name"]),
                      namespace=str(meta["namespace"]), submitted_at=submitted,
                      labels=job_labels, annotations=annotations)


def held_jobs(items: Iterable[Mapping[str, Any]], warnings: list[str]
              ) -> tuple[PendingJob, ...]:
    """The held Jobs among `items`, by id. Pure."""
    found = (held_job(job, warnings) for job in items)
    return tuple(sorted((p for p in found if p is not None), key=lambda p: p.id))


def held(job: Mapping[str, Any], warnings: list[str] | None = None) -> Tracked | None:
    """A held Job as `JobWatch` tracks it: its uid, its pending job's id and node, and the
    pending job itself. Pure (an unreadable Job's note goes to `warnings`)."""
    pending = held_job(job, warnings if warnings is not None else [])
    if pending is None:
        return None
    return Tracked(uid=str((job.get("metadata") or {}).get("uid", "")), container=pending.id,
                   node=pending.node or "", item=pending)


class JobWatch(ListWatch):
    """Jobs submitted held, as they are (see the module docstring; `policyd.tick.EventSource`),
    and the Jobs held now (`held_now`)."""

    def __init__(self, batch: Any, scope: JobScope, **options: Unpack[WatchOptions]) -> None:
        self.batch, self.scope = batch, scope
        super().__init__(job_listing(batch, scope), self._held, entered="submitted", left=None,
                         name="job", **options)

    @staticmethod
    def _held(job: Mapping[str, Any]) -> Tracked | None:
        warnings: list[str] = []
        tracked = held(job, warnings)
        for line in warnings:
            LOG.warning("kubernetes job watch: %s", line)
        return tracked

    def held_now(self) -> tuple[PendingJob, ...] | None:
        """The Jobs held now, by id, as the watch has seen them (the manager's source reads
        them instead of listing every Job: `KubernetesPodSource`); None while the watch does
        not run, has not listed yet or has lost the API server since, or when several watch
        calls share it, one per namespace (`ListWatch.view`): the source lists then."""
        tracked = self.view()
        if tracked is None:
            return None
        return tuple(sorted((t.item for t in tracked), key=lambda p: p.id))
