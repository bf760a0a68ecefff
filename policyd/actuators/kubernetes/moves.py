"""A migration written down on the cluster before anything is stopped: the move record.

A bare pod has no controller to recreate it: once it is evicted, the only description of it is
what policyd read. So before the eviction (and before a Job is suspended) policyd writes a
`Move` into a ConfigMap in its own namespace (`KubernetesSettings.record_namespace`), holding
everything needed to finish or undo the move without the process that started it: the pod or
Job, its uid, both nodes, the grace period, the replacement to create on the target and the
pod to create again at home (bare pods), the template annotations (Jobs), and the phase
(`moving`, or `rolling-back` once policyd gave up on the target). The record is deleted once
the move is settled; one left behind is a move a crash interrupted (`recovery`).

One ConfigMap per pod or Job (`policyd-move-<hash of namespace/kind/name>`), labelled
`policyd.io/move=true`, its JSON in `data["move.json"]`. Creating it when it exists is a 409:
a move of that workload is already pending (settle it first). Updates carry the
resourceVersion. RBAC: configmaps create, get, list, update, delete in that namespace only.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

from kubernetes.client.exceptions import ApiException  # type: ignore[import-untyped]

from policyd.actuators.errors import ActuationError
from policyd.actuators.kubernetes.calls import CONFLICT, NOT_FOUND, Caller, status_of
from policyd.model import labels as names

DATA_KEY = "move.json"
Phase = Literal["moving", "rolling-back"]
Workload = Literal["pod", "job"]


def record_name(workload: Workload, namespace: str, name: str) -> str:
    """The ConfigMap of a move of that pod or Job (a DNS name, whatever the pod's name)."""
    digest = hashlib.sha256(f"{namespace}/{workload}/{name}".encode()).hexdigest()[:16]
    return f"policyd-move-{workload}-{digest}"


@dataclass(frozen=True, kw_only=True)
class Move:
    """One move, as written on the cluster (see the module docstring)."""

    workload: Workload
    namespace: str
    name: str
    uid: str
    from_node: str
    to_node: str
    grace_seconds: float
    policy: str
    reason: str
    phase: Phase = "moving"
    why: str = ""
    """Why it is being rolled back (empty while moving)."""
    target: dict[str, Any] = field(default_factory=dict)
    """Bare pod: the replacement to create on `to_node`."""
    home: dict[str, Any] = field(default_factory=dict)
    """Bare pod: the pod to create again on `from_node` when rolling back."""
    marks: dict[str, str] = field(default_factory=dict)
    """Job: the markers to write on its template with the pin to `to_node`."""
    version: str = ""
    """The record's resourceVersion as last read or written (not part of the record)."""

    @property
    def id(self) -> str:
        return record_name(self.workload, self.namespace, self.name)

    def __str__(self) -> str:
        return f"{self.workload} {self.namespace}/{self.name} ({self.from_node} -> {self.to_node})"

    def rolling_back(self, why: str) -> Move:
        return replace(self, phase="rolling-back", why=why)

    def to_config_map(self, namespace: str) -> dict[str, Any]:
        data = {k: v for k, v in asdict(self).items() if k != "version"}
        meta: dict[str, Any] = {"name": self.id, "namespace": namespace,
                                "labels": {names.MOVE: "true"}}
        if self.version:
            meta["resourceVersion"] = self.version
        return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta,
                "data": {DATA_KEY: json.dumps(data, sort_keys=True)}}

    @classmethod
    def from_config_map(cls, obj: dict[str, Any]) -> Move:
        meta = obj.get("metadata") or {}
        try:
            data = json.loads((obj.get("data") or {})[DATA_KEY])
            return cls(**data, version=str(meta.get("resourceVersion") or ""))
        except (KeyError, TypeError, ValueError) as exc:
            raise ActuationError(f"move record {meta.get('name')} cannot be read ({exc}); "
                                 "delete it once the workload is checked by hand") from exc


@dataclass
class MoveStore:
    """The records in `namespace`, through `core` (a CoreV1Api) and `caller`."""

    core: Any
    caller: Caller
    namespace: str

    def create(self, move: Move) -> Move:
        try:
            made = self.caller.call(f"record move of {move}",
                                    self.core.create_namespaced_config_map, self.namespace,
                                    move.to_config_map(self.namespace), write=True)
        except ApiException as exc:
            if status_of(exc) == CONFLICT:
                raise ActuationError(f"a move of {move.workload} {move.namespace}/{move.name} "
                                     "is already pending; it is settled first") from exc
            raise ActuationError(f"record move of {move}: HTTP {exc.status}") from exc
        return replace(move, version=str(made["metadata"]["resourceVersion"]))

    def update(self, move: Move) -> Move:
        try:
            made = self.caller.call(f"update move of {move}",
                                    self.core.replace_namespaced_config_map, move.id,
                                    self.namespace, move.to_config_map(self.namespace),
                                    write=True)
        except ApiException as exc:
            raise ActuationError(f"update move of {move}: HTTP {exc.status} (another policyd "
                                 "is settling it?)") from exc
        return replace(move, version=str(made["metadata"]["resourceVersion"]))

    def forget(self, move: Move) -> None:
        try:
            self.caller.call(f"forget move of {move}", self.core.delete_namespaced_config_map,
                             move.id, self.namespace, write=True)
        except ApiException as exc:
            if status_of(exc) != NOT_FOUND:
                raise ActuationError(f"forget move of {move}: HTTP {exc.status}") from exc

    def pending(self) -> list[Move]:
        """Every recorded move (one list call)."""
        listed = self.caller.call("list move records", self.core.list_namespaced_config_map,
                                  self.namespace, label_selector=f"{names.MOVE}=true",
                                  passthrough=frozenset())
        return [Move.from_config_map(item) for item in listed.get("items") or []]

    def get(self, move: Move) -> Move | None:
        """The record as stored now, None when it is gone."""
        try:
            found = self.caller.call(f"read move of {move}", self.core.read_namespaced_config_map,
                                     move.id, self.namespace)
        except ApiException as exc:
            if status_of(exc) == NOT_FOUND:
                return None
            raise ActuationError(f"read move of {move}: HTTP {exc.status}") from exc
        return Move.from_config_map(found)
