"""Half-done Job migrations, finished from what the cluster holds (no state file).

A Job that policyd is moving carries the label `policyd.io/migrating=true` and the annotation
`policyd.io/migrating-to=<node>` from the moment it is suspended until it is resumed. After a
crash, `recover()` finds such Jobs with one list call (per namespace, or cluster-wide) and:

| suspended | steps            | why                                                      |
|-----------|------------------|----------------------------------------------------------|
| true      | pin, resume      | stopped mid-way: the template may lack the target yet    |
| false     | clear            | resumed already; only the intent is left                 |

Pinning again is harmless (the same patch). The markers written by `pin` here carry no
converged_at (the action that knew it is gone); the next MarkMigrated/Migrate sets it.
Bare pods keep no intent on the cluster: a crash between their removal and the replacement's
creation loses the pod object (its checkpoint stays on the shared volume): a known gap, to
be closed by an intent object on the cluster (e.g. a ConfigMap holding the replacement).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Literal

from policyd.actuators.errors import ActuationError
from policyd.actuators.kubernetes import pods
from policyd.actuators.kubernetes.migration import Migration
from policyd.model import labels as names

LOG = logging.getLogger(__name__)

Step = Literal["pin", "resume", "clear"]
RULES: dict[bool, tuple[Step, ...]] = {True: ("pin", "resume"), False: ("clear",)}


@dataclass(frozen=True, kw_only=True)
class Recovered:
    namespace: str
    job: str
    to_node: str
    steps: tuple[Step, ...]


def recover(migration: Migration) -> list[Recovered]:
    """Settle every Job left mid-migration; problems are collected and raised together."""
    selector = f"{names.MIGRATING}=true"
    caller, batch = migration.caller, migration.batch
    spaces = migration.settings.namespaces
    if spaces:
        jobs = [j for ns in spaces for j in caller.call(
            f"list jobs in {ns}", batch.list_namespaced_job, ns,
            label_selector=selector).get("items") or []]
    else:
        jobs = list(caller.call("list jobs", batch.list_job_for_all_namespaces,
                                label_selector=selector).get("items") or [])
    done: list[Recovered] = []
    errors: list[str] = []
    for job in jobs:
        meta, spec = job.get("metadata") or {}, job.get("spec") or {}
        ns, name = str(meta.get("namespace")), str(meta.get("name"))
        target = str((meta.get("annotations") or {}).get(names.MIGRATING_TO) or "")
        steps = RULES[bool(spec.get("suspend"))] if target else ("clear",)
        LOG.warning("kubernetes: job %s/%s was left mid-migration to %s: %s", ns, name,
                    target or "(unknown)", ", ".join(steps))
        try:
            for step in steps:
                if step == "pin":
                    marks = pods.marker_annotations(now=migration.clock(), migrated=True)
                    migration.pin(job, target, marks)
                else:  # resume and clear are the same patch (suspend false, intent removed)
                    migration.resume(ns, name)
        except ActuationError as exc:
            errors.append(str(exc))
            continue
        done.append(Recovered(namespace=ns, job=name, to_node=target, steps=steps))
    if errors:
        raise ActuationError(f"recovery: {len(errors)} problems: " + "; ".join(errors))
    return done
