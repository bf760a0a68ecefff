"""The object store of the fake cluster: what etcd and the API server's watch cache do.

Objects are plain JSON keyed by (resource, namespace, name) ("" for cluster-scoped ones). Every
write takes the next `resourceVersion` (one counter for the whole store, as etcd's revision)
and is appended to the watch log; a watch from a version older than the log keeps answers
410 Expired, as the real server did for `resourceVersion=1`. `Status` bodies have the real
server's shape (reason, message, details, code), with the wording of the recorded ones.

Also here: label and field selectors (the subset policyd uses) and the strategic-merge patch
of the objects policyd patches (maps merged, `null` deletes a key, lists replaced; containers
merged by name).
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

Obj = dict[str, Any]
Key = tuple[str, str, str]

KINDS = {"pods": ("v1", "Pod"), "nodes": ("v1", "Node"), "events": ("events.k8s.io/v1", "Event"),
         "jobs": ("batch/v1", "Job"), "leases": ("coordination.k8s.io/v1", "Lease"),
         "configmaps": ("v1", "ConfigMap"),
         "poddisruptionbudgets": ("policy/v1", "PodDisruptionBudget")}


class ApiError(Exception):
    """An answer other than 2xx: the status and the Status body."""

    def __init__(self, code: int, reason: str, message: str, **details: Any) -> None:
        super().__init__(message)
        self.code = code
        self.body: Obj = {"kind": "Status", "apiVersion": "v1", "metadata": {},
                          "status": "Failure", "message": message, "reason": reason,
                          "details": details, "code": code}


def not_found(resource: str, name: str) -> ApiError:
    return ApiError(404, "NotFound", f'{resource} "{name}" not found', name=name, kind=resource)


def conflict(resource: str, name: str) -> ApiError:
    return ApiError(409, "Conflict", f'Operation cannot be fulfilled on {resource} "{name}": the '
                    "object has been modified; please apply your changes to the latest version "
                    "and try again", name=name, kind=resource)


def exists(resource: str, name: str) -> ApiError:
    return ApiError(409, "AlreadyExists", f'{resource} "{name}" already exists', name=name,
                    kind=resource)


def invalid(kind: str, name: str, field_path: str, message: str) -> ApiError:
    return ApiError(422, "Invalid", f'{kind} "{name}" is invalid: {field_path}: {message}',
                    name=name, kind=kind, causes=[{"reason": "FieldValueInvalid",
                                                   "message": message, "field": field_path}])


@dataclass
class Store:
    """Objects, the resourceVersion counter and the watch log."""

    version: int = 1000
    objects: dict[Key, Obj] = field(default_factory=dict)
    log: list[tuple[int, str, Key, Obj]] = field(default_factory=list)
    oldest: int = 600
    """Watches from a version below this are 410 Expired (the watch cache's window)."""

    def get(self, resource: str, namespace: str, name: str) -> Obj:
        found = self.objects.get((resource, namespace, name))
        if found is None:
            raise not_found(resource, name)
        return found

    def find(self, resource: str, namespace: str, name: str) -> Obj | None:
        return self.objects.get((resource, namespace, name))

    def items(self, resource: str, namespace: str | None = None) -> Iterator[Obj]:
        for (res, ns, _), obj in sorted(self.objects.items()):
            if res == resource and (namespace is None or ns == namespace):
                yield obj

    def put(self, resource: str, obj: Obj, *, event: str | None = None) -> Obj:
        """Store `obj` (created when new) with the next resourceVersion; logs the event."""
        meta = obj.setdefault("metadata", {})
        key = (resource, str(meta.get("namespace") or ""), str(meta["name"]))
        self.version += 1
        meta["resourceVersion"] = str(self.version)
        meta.setdefault("uid", str(uuid.uuid4()))
        meta.setdefault("creationTimestamp", "2026-11-23T20:40:00Z")
        kind = event or ("MODIFIED" if key in self.objects else "ADDED")
        self.objects[key] = obj
        self.log.append((self.version, kind, key, copy.deepcopy(obj)))
        return obj

    def delete(self, resource: str, namespace: str, name: str) -> Obj:
        obj = self.objects.pop((resource, namespace, name))
        self.version += 1
        obj["metadata"]["resourceVersion"] = str(self.version)
        self.log.append((self.version, "DELETED", (resource, namespace, name),
                         copy.deepcopy(obj)))
        return obj

    def events_after(self, resource: str, namespace: str | None, since: int
                     ) -> list[tuple[int, str, Obj]]:
        if since < self.oldest:
            raise ApiError(410, "Expired", f"too old resource version: {since} ({self.oldest})")
        return [(v, kind, obj) for v, kind, (res, ns, _), obj in self.log
                if v > since and res == resource and (namespace is None or ns == namespace)]

    def listing(self, resource: str, items: list[Obj], api_version: str, kind: str) -> Obj:
        """A List as the real server sends it: items without their own kind/apiVersion."""
        bare = [{k: v for k, v in copy.deepcopy(i).items() if k not in ("kind", "apiVersion")}
                for i in items]
        return {"kind": kind, "apiVersion": api_version,
                "metadata": {"resourceVersion": str(self.version)}, "items": bare}


def selects(obj: Mapping[str, Any], label_selector: str | None,
            field_selector: str | None = None) -> bool:
    """Equality label selectors (`a=b,c!=d,e`) and the field selectors policyd sends
    (`spec.nodeName=`, `metadata.name=`)."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    for term in filter(None, (label_selector or "").split(",")):
        if "!=" in term:
            key, value = term.split("!=", 1)
            if labels.get(key) == value:
                return False
        elif "=" in term:
            key, value = term.split("=", 1)
            if labels.get(key) != value:
                return False
        elif term not in labels:
            return False
    for term in filter(None, (field_selector or "").split(",")):
        path, value = term.split("=", 1)
        node: Any = obj
        for part in path.split("."):
            node = (node or {}).get(part) if isinstance(node, dict) else None
        if str(node or "") != value:
            return False
    return True


def merge_patch(target: Obj, patch: Mapping[str, Any], *, by_name: frozenset[str] = frozenset()
                ) -> Obj:
    """`patch` merged into `target` in place: maps merge, None deletes, lists are replaced
    except those keyed `by_name` (containers), whose items merge by their `name`."""
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif key in by_name and isinstance(value, list):
            current = {c.get("name"): c for c in target.get(key) or []}
            for item in value:
                if item.get("name") in current:
                    merge_patch(current[item["name"]], item)
                else:
                    target.setdefault(key, []).append(copy.deepcopy(item))
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            merge_patch(target[key], value, by_name=by_name)
        else:
            target[key] = copy.deepcopy(value)
    return target
