"""The fake cluster behind `fake_apiserver`: the API server's answers and its controllers.

`FakeCluster.handle(method, path, query, body)` answers one request as the real server does for
the calls policyd makes (the real answers are in `recorded/`; their README lists what the
server did): pods (with `fake_pods`: scheduling, the kubelet, resize), evictions under
PodDisruptionBudgets, Jobs and their controller, nodes, Events (note limited to 1024 bytes),
Leases and ConfigMaps (409 on a stale `resourceVersion`), and policyd's policy custom resources
(cluster-scoped, with a status subresource and `metadata.generation`). Every request first
lets the controllers and kubelets catch up with the virtual clock (`reconcile`).

The Job controller: a suspended Job's active pods are deleted (with their own
`terminationGracePeriodSeconds`); a running Job with no pod left (`podReplacementPolicy:
Failed`: not even a terminating one) gets a new one from its template. The template's
scheduling directives may change only while the Job is suspended.
"""

from __future__ import annotations

import copy
import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

from tests.kubernetes.fake_pods import Pods
from tests.kubernetes.fake_store import (
    KINDS,
    ApiError,
    Obj,
    Store,
    conflict,
    exists,
    invalid,
    merge_patch,
    selects,
)

RECORDED = Path(__file__).parent / "recorded"
POLICY_GROUP = "policyd.io"
POLICY_VERSION = "v1alpha1"


class Request(NamedTuple):
    method: str
    query: dict[str, str]
    body: Any


def recorded(name: str) -> Obj:
    """One recorded exchange: {"request", "status", "response"}."""
    loaded: Obj = json.loads((RECORDED / name).read_text())
    return loaded


def response(name: str) -> Obj:
    """The server's body of a recorded exchange (a fresh copy)."""
    body: Obj = recorded(name)["response"]
    return body


class FakeCluster:
    """The state and the semantics (see the module docstring). `clock()` is virtual time."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.store = Store()
        self.pods = Pods(self.store)
        self.policy_plurals: dict[str, str] = {}
        """Installed policy CRDs: plural -> kind (empty: none installed)."""
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)
        self.job_pods = 0
        self.before_1_36 = False
        """A server before 1.36: a Job's scheduling directives never change once it ran."""

    # -- seeding -------------------------------------------------------------------------------

    def add(self, resource: str, obj: Obj) -> Obj:
        """Store a copy of `obj` (a recorded object, or one built by a test)."""
        with self.lock:
            obj = copy.deepcopy(obj)
            version, kind = KINDS.get(resource, (f"{POLICY_GROUP}/{POLICY_VERSION}", ""))
            obj.setdefault("apiVersion", version)
            if kind:
                obj.setdefault("kind", kind)
            self.store.put(resource, obj)
            if resource == "pods" and (obj.get("status") or {}).get("phase") == "Running":
                self.pods.trainers.start(self.pods.trainer(obj), obj["metadata"]["uid"],
                                         obj["spec"]["nodeName"], self.clock())
            self.changed.notify_all()
            return obj

    def node(self, name: str, cpu: str = "7910m", labels: dict[str, str] | None = None) -> Obj:
        """A node shaped like the recorded `w2`, with `cpu` allocatable."""
        node = response("node_get.json")
        node["metadata"].update(name=name, labels={"kubernetes.io/hostname": name,
                                                    "kubernetes.io/os": "linux",
                                                    **(labels or {})})
        node["metadata"].pop("managedFields", None)
        node["metadata"].pop("uid", None)  # each node its own, as the API server gives them
        node["status"]["allocatable"]["cpu"] = cpu
        node["status"]["capacity"]["cpu"] = cpu
        return self.add("nodes", node)

    def get(self, resource: str, namespace: str, name: str) -> Obj | None:
        with self.lock:
            self.reconcile()
            found = self.store.find(resource, namespace, name)
            return copy.deepcopy(found) if found is not None else None

    def items(self, resource: str, namespace: str | None = None) -> list[Obj]:
        with self.lock:
            self.reconcile()
            return copy.deepcopy(list(self.store.items(resource, namespace)))

    def advance(self, seconds: float, clock: Any) -> None:
        """Let `seconds` of virtual time pass (on the test's FakeClock), in small steps."""
        end = clock.now + seconds
        while clock.now < end:
            clock.now = min(end, clock.now + 0.5)
            with self.lock:
                self.reconcile()

    # -- controllers ---------------------------------------------------------------------------

    def reconcile(self) -> None:
        now = self.clock()
        before = self.store.version
        self.pods.reconcile(now)
        for job in list(self.store.items("jobs")):
            self._job(job, now)
        if self.store.version != before:
            self.changed.notify_all()

    def _pods_of(self, job: Obj) -> list[Obj]:
        name = job["metadata"]["name"]
        return [p for p in self.store.items("pods", job["metadata"]["namespace"])
                if (p["metadata"].get("labels") or {}).get("job-name") == name]

    def _job(self, job: Obj, now: float) -> None:
        spec = job["spec"]
        pods = self._pods_of(job)
        live = [p for p in pods if p["status"].get("phase") in ("Pending", "Running")
                and not p["metadata"].get("deletionTimestamp")]
        status = job.setdefault("status", {})
        if spec.get("suspend"):
            for pod in live:
                grace = float(pod["spec"].get("terminationGracePeriodSeconds", 30))
                self.pods.delete(pod, grace, now)
                self.store.put("pods", pod)
            live = []
        elif not status.get("succeeded"):
            # Failed: a replacement only once the old pod is gone; otherwise as soon as it
            # is terminating (two trainers at once).
            waiting = pods if spec.get("podReplacementPolicy") == "Failed" else live
            if not waiting:
                self._job_pod(job, now)
                live = [p for p in self._pods_of(job) if not p["metadata"].get(
                    "deletionTimestamp")]
        wanted = {"active": len(live), "terminating": len(self._pods_of(job)) - len(live)}
        if {k: status.get(k) for k in wanted} != wanted:
            status.update(wanted)
            self.store.put("jobs", job)

    def _job_pod(self, job: Obj, now: float) -> None:
        self.job_pods += 1
        template = copy.deepcopy(job["spec"]["template"])
        meta = template.setdefault("metadata", {})
        name = job["metadata"]["name"]
        meta.update(name=f"{name}-{self.job_pods:05d}", namespace=job["metadata"]["namespace"])
        meta["labels"] = {**(meta.get("labels") or {}), "job-name": name}
        meta["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": name,
                                    "uid": job["metadata"]["uid"], "controller": True,
                                    "blockOwnerDeletion": True}]
        pod = {"apiVersion": "v1", "kind": "Pod", **template}
        self.store.put("pods", pod)
        self.pods.created(pod, now)
        self.store.put("pods", pod)

    # -- the API -------------------------------------------------------------------------------

    def handle(self, method: str, path: str, query: dict[str, str], body: Any
               ) -> tuple[int, Obj]:
        """(status, body) for one request; ApiErrors become their Status."""
        with self.lock:
            self.reconcile()
            try:
                status, out = self._route(method, path.strip("/").split("/"), query, body)
            except ApiError as error:
                return error.code, error.body
            self.reconcile()
            self.changed.notify_all()
            return status, copy.deepcopy(out)

    def _route(self, method: str, parts: list[str], query: dict[str, str], body: Any
               ) -> tuple[int, Obj]:
        # /api/v1/... or /apis/<group>/<version>/...
        rest = parts[2:] if parts[0] == "api" else parts[3:]
        group = "" if parts[0] == "api" else parts[1]
        namespace = ""
        if rest[:1] == ["namespaces"] and len(rest) > 2:
            namespace, rest = rest[1], rest[2:]
        resource, name = rest[0], (rest[1] if len(rest) > 1 else "")
        sub = rest[2] if len(rest) > 2 else ""
        if group == POLICY_GROUP:
            return self._policy(Request(method, query, body), resource, name, sub)
        if resource == "pods" and sub:
            return self._pod_sub(method, namespace, name, sub, body)
        if resource == "pods" and method == "POST":
            return self._create_pod(namespace, body)
        if resource == "pods" and method == "DELETE":
            return self._delete_pod(namespace, name, body)
        if resource == "jobs" and method == "PATCH":
            return self._patch_job(namespace, name, body)
        if resource == "events" and method == "POST":
            note = str(body.get("note") or "")
            if len(note.encode()) > 1024:
                raise invalid("Event", body["metadata"]["name"], "message",
                              'Invalid value: "": can have at most 1024 characters')
        return self._generic(Request(method, query, body), resource, namespace, name)

    def _generic(self, request: Request, resource: str, namespace: str, name: str
                 ) -> tuple[int, Obj]:
        method, query, body = request
        api_version, kind = KINDS[resource]
        if method == "GET" and not name:
            items = [o for o in self.store.items(resource, namespace or None)
                     if selects(o, query.get("labelSelector"), query.get("fieldSelector"))]
            return 200, self.store.listing(resource, items, api_version, f"{kind}List")
        if method == "GET":
            return 200, self.store.get(resource, namespace, name)
        if method == "POST":
            meta = body["metadata"]
            if self.store.find(resource, namespace, meta["name"]) is not None:
                raise exists(resource, meta["name"])
            meta["namespace"] = namespace or meta.get("namespace")
            return 201, self.store.put(resource, copy.deepcopy(body))
        current = self.store.get(resource, namespace, name)
        given = (body or {}).get("metadata", {}).get("resourceVersion") if isinstance(
            body, dict) else None
        if given and given != current["metadata"]["resourceVersion"]:
            raise conflict(f"{resource}.{api_version.split('/')[0]}"
                           if "/" in api_version else resource, name)
        if method == "PUT":
            return 200, self.store.put(resource, copy.deepcopy(body))
        if method == "PATCH":
            return 200, self.store.put(resource, merge_patch(copy.deepcopy(current), body))
        if method == "DELETE":
            uid = ((body or {}).get("preconditions") or {}).get("uid")
            if uid and uid != current["metadata"]["uid"]:
                raise conflict(resource, name)
            return 200, self.store.delete(resource, namespace, name)
        raise ApiError(405, "MethodNotAllowed", f"{method} is not allowed")

    # -- pods ----------------------------------------------------------------------------------

    def _create_pod(self, namespace: str, body: Obj) -> tuple[int, Obj]:
        name = body["metadata"]["name"]
        if self.store.find("pods", namespace, name) is not None:
            raise exists("pods", name)
        pod = copy.deepcopy(body)
        pod["metadata"]["namespace"] = namespace
        self.store.put("pods", pod)
        self.pods.created(pod, self.clock())
        return 201, self.store.put("pods", pod)

    def _delete_pod(self, namespace: str, name: str, options: Obj | None) -> tuple[int, Obj]:
        pod = self.store.get("pods", namespace, name)
        options = options or {}
        uid = (options.get("preconditions") or {}).get("uid")
        if uid and uid != pod["metadata"]["uid"]:
            raise ApiError(409, "Conflict", f"Precondition failed: UID in precondition: {uid}, "
                           f"UID in object meta: {pod['metadata']['uid']}", name=name,
                           kind="pods")
        grace = options.get("gracePeriodSeconds",
                            pod["spec"].get("terminationGracePeriodSeconds", 30))
        self.pods.delete(pod, float(grace), self.clock())
        return 200, self.store.put("pods", pod)

    def _pod_sub(self, method: str, namespace: str, name: str, sub: str, body: Obj
                 ) -> tuple[int, Obj]:
        pod = self.store.get("pods", namespace, name)
        if sub == "eviction":
            return self._evict(pod, body)
        if sub != "resize" or method != "PATCH":
            raise ApiError(405, "MethodNotAllowed", f"{method} {sub}")
        given = (body.get("metadata") or {}).get("resourceVersion")
        if given and given != pod["metadata"]["resourceVersion"]:
            raise conflict("pods", name)
        changed = merge_patch(copy.deepcopy(pod), {"spec": body.get("spec") or {}},
                              by_name=frozenset({"containers"}))
        if changed["spec"] == pod["spec"]:
            return 200, pod  # nothing changes: no new generation
        self.pods.resize(changed, body, self.clock())
        return 200, self.store.put("pods", changed)

    def _evict(self, pod: Obj, body: Obj) -> tuple[int, Obj]:
        meta = pod["metadata"]
        options = body.get("deleteOptions") or {}
        uid = (options.get("preconditions") or {}).get("uid")
        if uid and uid != meta["uid"]:
            raise ApiError(409, "Conflict", f"Precondition failed: UID in precondition: {uid}, "
                           f"UID in object meta: {meta['uid']}", name=meta["name"], kind="pods")
        if not meta.get("deletionTimestamp"):
            budgets = [b for b in self.store.items("poddisruptionbudgets", meta["namespace"])
                       if selects(pod, ",".join(f"{k}={v}" for k, v in (
                           b["spec"].get("selector") or {}).get("matchLabels", {}).items()))]
            if len(budgets) > 1:
                raise ApiError(500, "InternalError", "This pod has more than one "
                               "PodDisruptionBudget, which the eviction subresource does not "
                               "support.")
            if budgets and budgets[0]["status"].get("disruptionsAllowed", 0) < 1:
                refused = ApiError(429, "TooManyRequests", "")
                refused.body = response("eviction_429_hollow-1.json")
                raise refused
            for budget in budgets:
                budget["status"]["disruptionsAllowed"] -= 1
                self.store.put("poddisruptionbudgets", budget)
            self._delete_pod(meta["namespace"], meta["name"], options)
        return 201, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                     "code": 201}

    # -- jobs ----------------------------------------------------------------------------------

    def _patch_job(self, namespace: str, name: str, body: Obj) -> tuple[int, Obj]:
        job = self.store.get("jobs", namespace, name)
        changed = merge_patch(copy.deepcopy(job), body)
        directives = ("affinity", "nodeSelector", "tolerations", "schedulingGates")
        old_t, new_t = job["spec"]["template"], changed["spec"]["template"]
        moved = [k for k in directives if old_t["spec"].get(k) != new_t["spec"].get(k)]
        suspended = job["spec"].get("suspend") and changed["spec"].get("suspend")
        if moved and (not suspended or self.before_1_36):
            raise invalid("Job", name, "spec.template", "Invalid value: field is immutable")
        if changed["spec"] != job["spec"]:
            changed["metadata"]["generation"] = job["metadata"].get("generation", 1) + 1
        return 200, self.store.put("jobs", changed)

    # -- policy custom resources ---------------------------------------------------------------

    def _policy(self, request: Request, plural: str, name: str, sub: str) -> tuple[int, Obj]:
        method, _, body = request
        kind = self.policy_plurals.get(plural)
        if kind is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if method == "GET" and not name:
            listed = self.store.listing(plural, list(self.store.items(plural)),
                                        f"{POLICY_GROUP}/{POLICY_VERSION}", f"{kind}List")
            for item, obj in zip(listed["items"], self.store.items(plural), strict=True):
                item.update(apiVersion=obj["apiVersion"], kind=obj["kind"])  # CRs keep theirs
            return 200, listed
        current = self.store.get(plural, "", name)
        if method == "GET":
            return 200, current
        if method == "PATCH" and sub == "status":
            updated = merge_patch(copy.deepcopy(current), {"status": body.get("status")})
            return 200, self.store.put(plural, updated)
        raise ApiError(405, "MethodNotAllowed", f"{method} {plural}")

    def put_policy(self, plural: str, obj: Obj) -> Obj:
        """Create or update a policy custom resource as `kubectl apply` would."""
        with self.lock:
            meta = obj["metadata"]
            current = self.store.find(plural, "", meta["name"])
            obj = copy.deepcopy(obj)
            if current is None:
                meta = obj["metadata"]
                meta["generation"] = 1
            else:
                obj["metadata"] = {**current["metadata"], **obj["metadata"]}
                obj["metadata"]["generation"] = current["metadata"]["generation"] + (
                    obj.get("spec") != current.get("spec"))
                obj["status"] = current.get("status") or {}
            self.store.put(plural, obj)
            self.changed.notify_all()
            return copy.deepcopy(obj)

    def delete_policy(self, plural: str, name: str) -> None:
        with self.lock:
            self.store.delete(plural, "", name)
            self.changed.notify_all()

    # -- watch ---------------------------------------------------------------------------------

    def watch(self, path: str, query: dict[str, str], stop: threading.Event,
              timeout_seconds: float) -> Iterator[bytes]:
        """The lines of a watch stream: events after `resourceVersion`, then new ones as they
        happen, until `timeoutSeconds` (real time), `stop`, or 410 Expired."""
        parts = path.strip("/").split("/")
        rest = parts[2:] if parts[0] == "api" else parts[3:]
        namespace = rest[1] if rest[:1] == ["namespaces"] else None
        resource = rest[-1]
        since = int(query.get("resourceVersion") or 0)
        deadline = threading.Event()
        timer = threading.Timer(timeout_seconds, deadline.set)
        timer.daemon = True
        timer.start()
        try:
            while not (stop.is_set() or deadline.is_set()):
                with self.lock:
                    self.reconcile()
                    try:
                        found = self.store.events_after(resource, namespace, since)
                    except ApiError as gone:
                        yield json.dumps({"type": "ERROR", "object": gone.body}).encode() + b"\n"
                        return
                    lines = []
                    for version, kind, obj in found:
                        since = version
                        if selects(obj, query.get("labelSelector"),
                                   query.get("fieldSelector")):
                            lines.append(json.dumps({"type": kind, "object": obj}).encode()
                                         + b"\n")
                    if not lines:
                        self.changed.wait(0.05)
                yield from lines
        finally:
            timer.cancel()
