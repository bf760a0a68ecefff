"""The one table of policy kinds. Adding a kind = one module (its document model and its
`plan`) + one line here. No discovery by import side effects.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from policyd.engine import flowcon, specon
from policyd.engine.spec import PolicyDocument
from policyd.model import Decision, Snapshot


@dataclass(frozen=True, kw_only=True)
class Kind:
    """A policy kind: the pydantic model of its documents and its pure planner."""

    document: type[PolicyDocument]
    plan: Callable[[PolicyDocument, Snapshot], Decision]


KINDS: Mapping[str, Kind] = MappingProxyType({
    "FlowCon": Kind(document=flowcon.FlowConPolicy, plan=flowcon.plan),
    "SpeCon": Kind(document=specon.SpeConPolicy, plan=specon.plan),
})
