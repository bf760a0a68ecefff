"""A policy custom resource (`kubectl apply -f policies/flowcon.yaml`), checked as a file is.

`check_resource(obj)` takes the object as the API server returns it, keeps what a policy file
holds (apiVersion, kind, `metadata.name`, spec; not the server's metadata nor the status) and
validates it with the loader's own checks (`loader.check_data`), so a resource and a file
are judged by the same rules and worded the same way. The source of its problems is the
resource's `plural/name` (`flowcons/flowcon-default`); they carry no line (there is no text).
`summary` says what was wrong in one line, for a status condition.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from policyd.policy.errors import Problem
from policyd.policy.loader import Checked, check_data


def document_of(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The policy document inside a custom resource."""
    meta = obj.get("metadata") or {}
    out: dict[str, Any] = {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"),
                           "metadata": {"name": meta.get("name")}}
    if "spec" in obj:
        out["spec"] = obj["spec"]
    return out


def check_resource(obj: Mapping[str, Any], source: str) -> Checked:
    """Every problem (and warning) with the policy a custom resource holds."""
    return check_data(document_of(obj), source)


def summary(problems: Sequence[Problem]) -> str:
    """`spec.alpha: ...; spec.weights: ...` (each problem's field and message)."""
    return "; ".join(f"{p.field}: {p.message}" if p.field else p.message for p in problems)
