"""Held Kubernetes Jobs as pending jobs (`policyd.model.pending`).

A held job on Kubernetes is a Job created with `spec.suspend: true` that matches policyd's
label selector: it waits until a policy that admits (the Deadline kind) emits an `Admit`, which
the actuator carries out by pinning its pod template to a node and unsuspending it
(`policyd.actuators.kubernetes.admission`). Per cycle one Job list (all namespaces, or one per
configured namespace, with the label selector), whatever the number of Jobs.

A suspended Job that carries `policyd.io/migrating` is being moved by policyd, not held; a
Job suspended with pods still live is not held either (someone else suspended a running Job).
Its id is `namespace/name`; its submission its `creationTimestamp`; its labels are the Job's,
its annotations the pod template's overlaid with the Job's own (a deadline is declared on
either). A node agent (`node_name`) lists no Jobs: admission is the manager's.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any, Protocol, cast

from policyd.model import PendingJob
from policyd.model import labels as keys


class JobScope(Protocol):
    """Which Jobs (the actuator's KubernetesSettings has these fields)."""

    @property
    def namespaces(self) -> tuple[str, ...]: ...
    @property
    def label_selector(self) -> str: ...


def _body(resp: Any) -> dict[str, Any]:
    data = getattr(resp, "data", resp)
    return cast(dict[str, Any], json.loads(data) if isinstance(data, bytes | str) else data)


def list_jobs(batch: Any, scope: JobScope) -> list[dict[str, Any]]:
    """The Jobs matching the label selector: one call (or one per namespace)."""
    if not scope.namespaces:
        got = _body(batch.list_job_for_all_namespaces(label_selector=scope.label_selector,
                                                      _preload_content=False))
        return list(got.get("items") or [])
    items: list[dict[str, Any]] = []
    for ns in scope.namespaces:
        got = _body(batch.list_namespaced_job(ns, label_selector=scope.label_selector,
                                              _preload_content=False))
        items.extend(got.get("items") or [])
    return items


def _seconds(text: str) -> float | None:
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def held_jobs(items: Iterable[Mapping[str, Any]], warnings: list[str]
              ) -> tuple[PendingJob, ...]:
    """The held Jobs among `items` (see the module docstring), by id. Pure."""
    out = []
    for job in items:
        meta, spec = job.get("metadata") or {}, job.get("spec") or {}
        status = job.get("status") or {}
        job_labels = dict(meta.get("labels") or {})
        if not spec.get("suspend") or job_labels.get(keys.MIGRATING) or status.get("active"):
            continue
        where = f"job {meta.get('namespace')}/{meta.get('name')}"
        submitted = _seconds(str(meta.get("creationTimestamp") or ""))
        if submitted is None:
            warnings.append(f"{where}: no readable creationTimestamp; not offered for "
                            "admission")
            continue
        template = (spec.get("template") or {}).get("metadata") or {}
        annotations = {**(template.get("annotations") or {}), **(meta.get("annotations") or {})}
        out.append(PendingJob(id=f"{meta['namespace']}/{meta['name']}", name=str(meta["name"]),
                              namespace=str(meta["namespace"]), submitted_at=submitted,
                              labels=job_labels, annotations=annotations))
    return tuple(sorted(out, key=lambda p: p.id))
