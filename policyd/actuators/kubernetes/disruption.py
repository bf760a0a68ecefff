"""PodDisruptionBudgets before a Job is moved.

A bare pod is stopped through the Eviction API, which checks its budget itself (429: not now).
A Job is stopped by suspending it, which no budget stops: the Job controller deletes its pods
directly. So before suspending, policyd lists the budgets of the Job's namespace (one call) and
refuses the move while any budget selecting the Job's pods allows no disruption
(`status.disruptionsAllowed` < 1), as the Eviction API would: "a PodDisruptionBudget forbids it
now, retried next cycle". The selection is `matches` below (pure): `matchLabels` and the
`matchExpressions` operators In, NotIn, Exists, DoesNotExist; an empty selector selects every
pod of the namespace (policy/v1).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from policyd.actuators.errors import ActuationError
from policyd.actuators.kubernetes.calls import Caller


def matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """Whether a LabelSelector selects a pod with `labels`."""
    selector = selector or {}
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for term in selector.get("matchExpressions") or []:
        key, op, values = term.get("key"), term.get("operator"), term.get("values") or []
        present = key in labels
        ok = {"In": present and labels.get(key) in values,
              "NotIn": not present or labels.get(key) not in values,
              "Exists": present, "DoesNotExist": not present}.get(str(op), False)
        if not ok:
            return False
    return True


def blocking(budgets: list[Mapping[str, Any]], labels: Mapping[str, str]) -> list[str]:
    """The names of the budgets that select `labels` and allow no disruption now."""
    return [str((b.get("metadata") or {}).get("name"))
            for b in budgets
            if matches((b.get("spec") or {}).get("selector"), labels)
            and int((b.get("status") or {}).get("disruptionsAllowed") or 0) < 1]


def check(policy_api: Any, caller: Caller, namespace: str, labels: Mapping[str, str],
          what: str) -> None:
    """ActuationError when a budget in `namespace` forbids disrupting pods with `labels`."""
    listed = caller.call(f"list disruption budgets in {namespace}",
                         policy_api.list_namespaced_pod_disruption_budget, namespace,
                         passthrough=frozenset())
    found = blocking(list(listed.get("items") or []), labels)
    if found:
        raise ActuationError(f"{what}: the PodDisruptionBudget {', '.join(found)} allows no "
                             "disruption now; PDB forbids now, retried next cycle")
