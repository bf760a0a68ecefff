"""Pods in the fake cluster: the scheduler, the kubelet, and the training process inside.

Time is the test's virtual clock (`now` passed in): a scheduled pod runs `start_seconds` after
it was bound; the kubelet reacts to a resize `resize_seconds` after the PATCH (until then the
pod keeps its old status and `observedGeneration`, and a condition of an earlier resize stays);
a deleted pod's trainer gets SIGTERM, writes its checkpoint in `checkpoint_seconds` and exits
(or is killed at the end of its grace period, with no checkpoint); the object goes once the
container has ended.

The kubelet decides a resize as the real one does: more CPU than the node's allocatable is
`Infeasible`, more than is free now `Deferred` (retried while the pod lives, so a deferred
resize may still be applied), otherwise applied (`containerStatuses[].resources` and
`observedGeneration` move, the resize conditions go). QoS classes follow Kubernetes's rule
(written here independently of policyd's own).

`Trainers` is the test's view of the training jobs: a trainer is a bare pod's name or a Job's;
each run records when and where it ran and the checkpoint it resumed from, so a test can check
that no two runs of one trainer overlapped and that the last one resumed from the last
checkpoint.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from tests.kubernetes.fake_store import Obj, Store, invalid

MILLI = 1000


def millicores(value: Any) -> int:
    text = str(value)
    return int(text[:-1]) if text.endswith("m") else round(float(text) * MILLI)


def mebibytes(value: Any) -> float:
    text = str(value)
    for suffix, factor in (("Gi", 1024.0), ("Mi", 1.0), ("Ki", 1 / 1024)):
        if text.endswith(suffix):
            return float(text[: -len(suffix)]) * factor
    return float(text) / 2**20


def qos_class(spec: Obj) -> str:
    """BestEffort (no request or limit anywhere), Guaranteed (every container: cpu and memory
    limits, requests equal), else Burstable."""
    containers = (spec.get("containers") or []) + (spec.get("initContainers") or [])
    any_set = False
    guaranteed = True
    for c in containers:
        res = c.get("resources") or {}
        req, lim = res.get("requests") or {}, res.get("limits") or {}
        any_set = any_set or bool(req) or bool(lim)
        for name, parse in (("cpu", millicores), ("memory", mebibytes)):
            if name not in lim or parse(req.get(name, lim[name])) != parse(lim[name]):
                guaranteed = False
    if not any_set:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


def cpu_request(pod: Obj, *, status: bool = False) -> int:
    items = (pod.get("status") or {}).get("containerStatuses") if status else \
        pod["spec"].get("containers")
    return sum(millicores(((c.get("resources") or {}).get("requests") or {}).get("cpu", 0))
               for c in items or [])


@dataclass
class Run:
    pod_uid: str
    node: str
    started: float
    resumed_from: float
    ended: float | None = None


@dataclass
class Trainers:
    """What each trainer did: runs and checkpoints (progress in seconds of training)."""

    runs: dict[str, list[Run]] = field(default_factory=dict)
    checkpoints: dict[str, list[float]] = field(default_factory=dict)

    def start(self, key: str, uid: str, node: str, now: float) -> None:
        last = (self.checkpoints.get(key) or [0.0])[-1]
        self.runs.setdefault(key, []).append(Run(uid, node, now, last))

    def stop(self, key: str, uid: str, now: float, *, checkpoint_at: float | None) -> None:
        for run in self.runs.get(key, []):
            if run.pod_uid == uid and run.ended is None:
                run.ended = now
                if checkpoint_at is not None:
                    progress = run.resumed_from + (checkpoint_at - run.started)
                    self.checkpoints.setdefault(key, []).append(progress)

    def running(self, key: str) -> list[Run]:
        return [r for r in self.runs.get(key, []) if r.ended is None]

    def overlaps(self, key: str) -> list[tuple[Run, Run]]:
        runs = sorted(self.runs.get(key, []), key=lambda r: r.started)
        return [(a, b) for a, b in itertools.pairwise(runs)
                if a.ended is None or a.ended > b.started]


@dataclass
class PodClock:
    """What the kubelet has yet to do for one pod (by uid)."""

    bound_at: float | None = None
    resized_at: float | None = None
    term_at: float | None = None
    grace: float = 30.0
    exited_at: float | None = None


@dataclass
class Pods:
    """The scheduler and the kubelets of every node, over the pods in `store`."""

    store: Store
    trainers: Trainers = field(default_factory=Trainers)
    start_seconds: float = 1.0
    resize_seconds: float = 1.0
    checkpoint_seconds: float = 2.0
    crashing_nodes: set[str] = field(default_factory=set)
    clocks: dict[str, PodClock] = field(default_factory=dict)

    # -- the scheduler -----------------------------------------------------------------------

    def free(self, node: str, *, but: str = "") -> int:
        used = sum(cpu_request(p) for p in self.store.items("pods")
                   if p["spec"].get("nodeName") == node and p["metadata"]["uid"] != but
                   and (p.get("status") or {}).get("phase") in ("Pending", "Running"))
        return millicores(self.store.get("nodes", "", node)["status"]["allocatable"]["cpu"]) - used

    @staticmethod
    def matches(pod: Obj, node: Obj) -> bool:
        spec, labels = pod["spec"], node["metadata"].get("labels") or {}
        if any(labels.get(k) != v for k, v in (spec.get("nodeSelector") or {}).items()):
            return False
        required = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                    .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
        terms = required.get("nodeSelectorTerms") or []
        if not terms:
            return True
        for term in terms:
            fields = all(node["metadata"]["name"] in e["values"]
                         for e in term.get("matchFields") or [])
            exprs = all(labels.get(e["key"]) in e.get("values", [])
                        for e in term.get("matchExpressions") or [])
            if fields and exprs:
                return True
        return False

    def schedule(self, pod: Obj, now: float) -> None:
        if pod["spec"].get("nodeName"):
            self.clocks[pod["metadata"]["uid"]].bound_at = now
            return
        nodes = list(self.store.items("nodes"))
        fitting = [n for n in nodes if self.matches(pod, n)]
        room = [n for n in fitting if self.free(n["metadata"]["name"]) >= cpu_request(pod)]
        conditions = [c for c in pod["status"].get("conditions") or []
                      if c["type"] != "PodScheduled"]
        if not room:
            why = []
            if len(fitting) < len(nodes):
                why.append(f"{len(nodes) - len(fitting)} node(s) didn't match Pod's node "
                           "affinity/selector")
            if fitting:
                why.append(f"{len(fitting)} Insufficient cpu")
            conditions.append({"type": "PodScheduled", "status": "False", "observedGeneration":
                               pod["metadata"]["generation"], "reason": "Unschedulable",
                               "message": f"0/{len(nodes)} nodes are available: "
                                          f"{', '.join(why)}."})
            pod["status"]["conditions"] = conditions
            return
        room.sort(key=lambda n: (-self.free(n["metadata"]["name"]), n["metadata"]["name"]))
        pod["spec"]["nodeName"] = room[0]["metadata"]["name"]
        conditions.append({"type": "PodScheduled", "status": "True"})
        pod["status"]["conditions"] = conditions
        self.clocks[pod["metadata"]["uid"]].bound_at = now

    # -- creation, deletion ------------------------------------------------------------------

    def created(self, pod: Obj, now: float) -> None:
        meta = pod["metadata"]
        meta["generation"] = 1
        pod["status"] = {"phase": "Pending", "qosClass": qos_class(pod["spec"]),
                         "conditions": []}
        self.clocks[meta["uid"]] = PodClock()
        self.schedule(pod, now)

    def delete(self, pod: Obj, grace: float, now: float) -> None:
        clock = self.clocks.setdefault(pod["metadata"]["uid"], PodClock(bound_at=now))
        meta = pod["metadata"]
        if clock.term_at is not None:  # a second delete only shortens the grace period
            clock.grace = min(clock.grace, now - clock.term_at + grace)
            return
        clock.term_at, clock.grace = now, grace
        meta["deletionTimestamp"] = "2026-11-23T20:41:00Z"
        meta["deletionGracePeriodSeconds"] = round(grace)

    # -- the kubelet ---------------------------------------------------------------------------

    @staticmethod
    def trainer(pod: Obj) -> str:
        labels = pod["metadata"].get("labels") or {}
        return f"job/{labels['job-name']}" if "job-name" in labels else pod["metadata"]["name"]

    def reconcile(self, now: float) -> None:
        for pod in list(self.store.items("pods")):
            uid = pod["metadata"]["uid"]
            clock = self.clocks.setdefault(uid, PodClock(bound_at=-1e9))
            before = repr(pod)
            self._step(pod, clock, now)
            if uid in self.clocks and repr(pod) != before and self.store.find(
                    "pods", pod["metadata"]["namespace"], pod["metadata"]["name"]) is pod:
                self.store.put("pods", pod)

    def _step(self, pod: Obj, clock: PodClock, now: float) -> None:
        status = pod["status"]
        if not pod["spec"].get("nodeName") and clock.term_at is None:
            self.schedule(pod, now)
        if clock.term_at is not None:
            self._terminate(pod, clock, now)
            return
        if (clock.bound_at is not None and status.get("phase") == "Pending"
                and now >= clock.bound_at + self.start_seconds):
            self._start(pod, now)
        if clock.resized_at is not None and now >= clock.resized_at + self.resize_seconds:
            self._resize(pod, clock)

    def _start(self, pod: Obj, now: float) -> None:
        status, node = pod["status"], pod["spec"]["nodeName"]
        crashing = node in self.crashing_nodes
        status.update(phase="Running", observedGeneration=pod["metadata"]["generation"],
                      startTime="2026-11-23T20:40:01Z", qosClass=qos_class(pod["spec"]))
        status["containerStatuses"] = [{
            "name": c["name"], "resources": dict(c.get("resources") or {}),
            "state": {"waiting": {"reason": "CrashLoopBackOff"}} if crashing
            else {"running": {"startedAt": "2026-11-23T20:40:01Z"}}}
            for c in pod["spec"]["containers"]]
        if not crashing:
            self.trainers.start(self.trainer(pod), pod["metadata"]["uid"], node, now)

    def _terminate(self, pod: Obj, clock: PodClock, now: float) -> None:
        assert clock.term_at is not None
        meta, status = pod["metadata"], pod["status"]
        running = status.get("phase") == "Running"
        graceful = self.checkpoint_seconds <= clock.grace
        ends = clock.term_at + (self.checkpoint_seconds if graceful else clock.grace)
        if clock.exited_at is None and (now >= ends or not running):
            clock.exited_at = max(ends, clock.term_at) if running else clock.term_at
            code = (143 if "job-name" in (meta.get("labels") or {}) else 0) if graceful else 137
            for s in status.get("containerStatuses") or []:
                s["state"] = {"terminated": {"exitCode": code, "reason": "Completed"
                                             if code == 0 else "Error"}}
            if running:
                self.trainers.stop(self.trainer(pod), meta["uid"], clock.exited_at,
                                   checkpoint_at=clock.term_at if graceful else None)
            status["phase"] = "Succeeded" if code == 0 else "Failed"
        if clock.exited_at is not None and now >= clock.exited_at + 0.5:
            self.store.delete("pods", meta["namespace"], meta["name"])
            del self.clocks[meta["uid"]]

    def _resize(self, pod: Obj, clock: PodClock) -> None:
        meta, status = pod["metadata"], pod["status"]
        node = pod["spec"]["nodeName"]
        asked = cpu_request(pod)
        allocatable = millicores(self.store.get("nodes", "", node)["status"]["allocatable"]
                                 ["cpu"])
        others = allocatable - self.free(node, but=meta["uid"])
        kept = [c for c in status.get("conditions") or []
                if not c["type"].startswith("PodResize")]
        if asked > allocatable or others + asked > allocatable:
            infeasible = asked > allocatable
            message = (f"Node didn't have enough capacity: cpu, requested: {asked}, capacity: "
                       f"{allocatable}" if infeasible else
                       f"Node didn't have enough resource: cpu, requested: {asked}, used: "
                       f"{others}, capacity: {allocatable}")
            kept.append({"type": "PodResizePending", "status": "True",
                         "observedGeneration": meta["generation"],
                         "reason": "Infeasible" if infeasible else "Deferred",
                         "message": message})
            status["conditions"] = kept
            status["observedGeneration"] = meta["generation"]
            if infeasible:
                clock.resized_at = None
            return
        status["conditions"] = kept
        status["observedGeneration"] = meta["generation"]
        by_name = {c["name"]: c for c in pod["spec"]["containers"]}
        for s in status.get("containerStatuses") or []:
            s["resources"] = dict(by_name[s["name"]].get("resources") or {})
        clock.resized_at = None

    # -- the resize subresource ----------------------------------------------------------------

    def resize(self, pod: Obj, patch: Obj, now: float) -> None:
        """Apply a resize PATCH (already merged into `pod`'s copy by the caller): validated,
        generation + 1, status untouched until the kubelet acts."""
        name = pod["metadata"]["name"]
        for i, c in enumerate(pod["spec"]["containers"]):
            res = c.get("resources") or {}
            req = (res.get("requests") or {}).get("cpu")
            lim = (res.get("limits") or {}).get("cpu")
            if req is not None and lim is not None and millicores(req) > millicores(lim):
                raise invalid("Pod", name, f"spec.containers[{i}].resources.requests",
                              f'Invalid value: "{req}": must be less than or equal to cpu '
                              f"limit of {lim}")
        after = qos_class(pod["spec"])
        if after != pod["status"].get("qosClass"):
            raise invalid("Pod", name, "spec", f'Invalid value: "{after}": Pod QOS Class may '
                                                "not change as a result of resizing")
        pod["metadata"]["generation"] += 1
        self.clocks.setdefault(pod["metadata"]["uid"], PodClock(bound_at=-1e9)).resized_at = now
