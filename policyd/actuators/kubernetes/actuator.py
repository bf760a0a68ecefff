"""`KubernetesActuator`: SetCpu, Migrate, MarkMigrated, Stop and Admit on a Kubernetes cluster
(policyd.tick.Actuator; Stop: `stop`).

Only pods matching `settings.label_selector` (and not labelled or annotated
`policyd.io/opt-out=true`, the policies' default opt-out key) are touched. Every failure
raises `ActuationError` with a one-line reason, after a Warning Event; every change leaves a
Normal Event (`events`); an action that changes nothing (the pod already asks for that CPU,
the Job was admitted already) sends nothing and leaves no Event. Markers are pod annotations
(on the Job's template for a Job-owned pod's migration). API calls go through `calls.Caller`
(rate limit, retries). SetCpu is an in-place resize (`cpu`), confirmed by polling the pod for
the generation the resize made. Admit pins a held (suspended) Job to its node and unsuspends
it (`admission`). Migrations are recorded on the cluster before they start (`migration`);
`recover()` settles every recorded move (at the first action, and again every
`pending_retry_seconds` before an action while one stays pending; the elected manager also
calls it on each acquisition).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, assert_never

from kubernetes import client as k8s  # type: ignore[import-untyped]
from kubernetes.client.exceptions import ApiException  # type: ignore[import-untyped]

from policyd.actuators.errors import ActuationError
from policyd.actuators.grace import grace_seconds
from policyd.actuators.kubernetes import cpu, pods
from policyd.actuators.kubernetes.admission import JobAdmission
from policyd.actuators.kubernetes.calls import Caller, TokenBucket, api_client, status_of
from policyd.actuators.kubernetes.events import (
    EventRecorder,
    regarding_held_job,
    regarding_of,
    regarding_pod,
)
from policyd.actuators.kubernetes.migration import Migration
from policyd.actuators.kubernetes.mover import Settled
from policyd.actuators.kubernetes.pods import PodRef
from policyd.actuators.kubernetes.settings import KubernetesSettings
from policyd.actuators.kubernetes.stop import Stopper
from policyd.actuators.opt_out import OptOutKeys
from policyd.model import Action, Admit, Decision, MarkMigrated, Migrate, SetCpu, Stop

LOG = logging.getLogger(__name__)

ALLOCATABLE_TTL_SECONDS = 300.0
NEVER = math.inf
"""How long a node's allocatable CPU is reused before it is read again."""


class KubernetesActuator:
    """Acts through `core` (CoreV1Api), `batch` (BatchV1Api) and `events_api` (EventsV1Api);
    None builds them from `settings` (the seams tests fill with autospec'd APIs).
    A migration's grace period is the action's `grace_seconds` (its policy's
    `migration_grace_seconds`), else `settings.grace_seconds` (`policyd.actuators.grace`)."""

    def __init__(self, settings: KubernetesSettings, *, core: Any = None, batch: Any = None,
                 events_api: Any = None, policy_api: Any = None,
                 clock: Callable[[], float] = time.time,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.settings = settings
        if core is None or batch is None or events_api is None or policy_api is None:
            shared = api_client(settings)
            core = core if core is not None else k8s.CoreV1Api(shared)
            batch = batch if batch is not None else k8s.BatchV1Api(shared)
            events_api = events_api if events_api is not None else k8s.EventsV1Api(shared)
            policy_api = policy_api if policy_api is not None else k8s.PolicyV1Api(shared)
        self.core, self.batch = core, batch
        self.clock, self.sleep = clock, sleep
        self.bucket = TokenBucket(settings.qps, settings.burst, clock=clock,
                                  sleep=sleep)
        self.caller = Caller(settings.retries, settings.backoff_seconds, self.bucket,
                             timeout_seconds=settings.timeout_seconds, sleep=sleep)
        self.events = EventRecorder(events_api, self.caller, clock,
                                    settings.reporting_controller, settings.reporting_instance)
        self.opt_out = OptOutKeys()
        """What opts a workload out of the decision being applied (`apply`)."""
        self.migration = Migration(core, batch, policy_api, self.caller, settings, clock=clock,
                                   sleep=sleep, opt_out=self.opt_out)
        self.stopper = Stopper(core, batch, self.caller, settings, clock=clock, sleep=sleep)
        self.admission = JobAdmission(batch, self.caller, settings.label_selector, clock=clock,
                                      opt_out=self.opt_out)
        self._allocatable: dict[str, tuple[float, int]] = {}
        self._settle_at = NEVER if settings.node_name is not None else -NEVER
        """When to look for pending moves next (never on a node agent: it makes none)."""
        self._lock = threading.Lock()

    # -- the Actuator protocol ---------------------------------------------------------------

    def apply(self, action: Action, decision: Decision) -> None:
        with self._lock:
            if self.clock() >= self._settle_at:
                try:
                    self.recover()
                except ActuationError as exc:
                    LOG.error("kubernetes: %s", str(exc))
            with self.opt_out.during(decision):
                self._apply(action)

    def _apply(self, action: Action) -> None:
        match action:
            case SetCpu():
                self._reported(action, lambda: self.set_cpu(action))
            case Migrate():
                self._reported(action, lambda: self.migrate(action))
            case MarkMigrated():
                self._reported(action, lambda: self.mark_migrated(action))
            case Stop():
                self._reported(action, lambda: self.stop(action))
            case Admit():
                self._reported(action, lambda: self.admit(action))
            case _:
                assert_never(action)

    def recover(self) -> list[Settled]:
        """Settle every recorded move (finish it or roll it back: `recovery`); problems are
        collected and raised together, and the moves they leave are tried again after
        `pending_retry_seconds`."""
        self._settle_at = self.clock() + self.settings.pending_retry_seconds
        done: list[Settled] = []
        errors: list[str] = []
        for move in self.migration.store.pending():
            LOG.warning("kubernetes: a move was left half-done: %s [%s]", move, move.phase)
            try:
                settled = self.migration.mover.settle(move)
            except ActuationError as exc:
                errors.append(str(exc))
                continue
            done.append(settled)
            self._recovered_event(settled)
        if errors:
            raise ActuationError(f"recovery: {len(errors)} moves still pending: "
                                 + "; ".join(errors))
        self._settle_at = NEVER
        return done

    def _recovered_event(self, settled: Settled) -> None:
        move = settled.move
        where = {"moved": f"finished on node {move.to_node}",
                 "home": f"rolled back to node {move.from_node} ({move.why})",
                 "untouched": "nothing had been changed"}[settled.outcome]
        kind = "Job" if move.workload == "job" else "Pod"
        regarding = (regarding_of(settled.obj, api_version="batch/v1" if kind == "Job"
                                  else "v1", kind=kind) if settled.obj.get("metadata") else
                     {"apiVersion": "v1", "kind": kind, "namespace": move.namespace,
                      "name": move.name})
        self.events.record(regarding, "Migrate", f"{move.reason} (policy {move.policy}); a "
                           f"move left half-done ({move.from_node} -> {move.to_node}) was "
                           f"settled: {where}", warning=settled.outcome == "home")

    def _reported(self, action: Action, run: Callable[[], Done | None]) -> None:
        """Run the action; an Event either way (Warning with the error on failure), none
        when nothing had to change."""
        verb = {"set_cpu": "SetCpu", "migrate": "Migrate", "mark_migrated": "MarkMigrated",
                "stop": "Stop", "admit": "Admit"}[action.kind]
        regarding: Mapping[str, Any]
        if isinstance(action, Admit):  # a held Job, named namespace/name
            regarding = regarding_held_job(action.container)
        else:
            ref = PodRef.parse(action.container, self.settings.container_name)
            regarding = regarding_pod(ref.namespace, ref.name)
        try:
            done = run()
        except ActuationError as exc:
            self.events.record(regarding, verb, f"{action.reason} (policy {action.policy}); "
                               f"failed: {exc}", warning=True)
            raise
        if done is None:
            return
        obj = done.obj
        kind = str(obj.get("kind") or ("Job" if isinstance(action, Admit) else "Pod"))
        regarding = regarding_of(obj, api_version="batch/v1" if kind == "Job" else "v1",
                                 kind=kind) if obj.get("metadata") else regarding
        self.events.record(regarding, verb, f"{action.reason} (policy {action.policy})"
                           + (f"; {done.note}" if done.note else ""))

    # -- SetCpu ------------------------------------------------------------------------------

    def allocatable_millicores(self, node: str) -> int:
        now = self.clock()
        cached = self._allocatable.get(node)
        if cached is not None and now - cached[0] < ALLOCATABLE_TTL_SECONDS:
            return cached[1]
        try:
            found = self.caller.call(f"read node {node}", self.core.read_node, node)
        except ApiException as exc:
            raise ActuationError(f"node {node}: HTTP {exc.status}") from exc
        value = cpu.millicores(((found.get("status") or {}).get("allocatable") or {}).get("cpu"))
        if not value:
            raise ActuationError(f"node {node} reports no allocatable CPU")
        self._allocatable[node] = (now, value)
        return value

    def _pod(self, ref: PodRef) -> dict[str, Any]:
        pod = self.migration.work.get_pod(ref.namespace, ref.name)
        if pod is None:
            raise ActuationError(f"pod {ref} is gone")
        pods.check_managed(pod, self.settings.label_selector, self.opt_out)
        return pod

    def set_cpu(self, action: SetCpu) -> Done | None:
        """Resize in place (requests in shares mode, limits in quota mode) and confirm; None
        when the pod's spec already asks for that CPU and the kubelet has it or is on it."""
        ref = PodRef.parse(action.container, self.settings.container_name)
        wanted: dict[str, cpu.Desired] = {}

        def write(pod: dict[str, Any]) -> Any:
            node = str((pod.get("spec") or {}).get("nodeName") or action.node)
            desired = cpu.desired_cpu(pod, ref.container, action.fraction, action.mode,
                                      self.allocatable_millicores(node))
            wanted["cpu"] = desired
            if cpu.unchanged(pod, ref.container, desired):
                return None  # nothing changes: nothing is sent
            return self.caller.call(f"resize pod {ref}", self.core.patch_namespaced_pod_resize,
                                    ref.name, ref.namespace,
                                    cpu.resize_body(pod, ref.container, desired), write=True)

        try:
            answer = self.caller.read_modify_write(f"resize pod {ref}", lambda: self._pod(ref),
                                                   write)
        except ApiException as exc:
            raise ActuationError(f"resize pod {ref}: HTTP {exc.status}" + (
                " (gone)" if status_of(exc) == 404 else "")) from exc
        if answer is None:
            pod = self._pod(ref)
            step = cpu.progress(pod, ref.container, wanted["cpu"])
            if step.state in ("infeasible", "error"):
                raise ActuationError(f"pod {ref}: resize to CPU {_shown(wanted['cpu'])} asked "
                                     f"earlier is not done: {step.detail}")
            LOG.debug("kubernetes: pod %s already asks for CPU %s (%s)", ref,
                      _shown(wanted["cpu"]), step.state)
            return None
        generation = (answer.get("metadata") or {}).get("generation")
        pod, note = self.confirm_resize(ref, wanted["cpu"],
                                        int(generation) if generation is not None else None)
        self.annotate(ref, pods.marker_annotations(now=self.clock()))
        return Done(pod, note)

    def confirm_resize(self, ref: PodRef, desired: cpu.Desired, generation: int | None
                       ) -> tuple[dict[str, Any], str]:
        """Poll the pod until the kubelet has applied `generation` of its spec: (the pod, a
        note); a Deferred resize is accepted with a note (the kubelet applies it when the
        node has room); Infeasible, an error or no answer in time raise ActuationError."""
        deadline = self.clock() + self.settings.resize_timeout_seconds
        shown = _shown(desired)
        while True:
            pod = self._pod(ref)
            step = cpu.progress(pod, ref.container, desired, generation)
            if step.state == "done":
                return pod, ""
            if step.state == "deferred":
                return pod, (f"deferred by the kubelet ({step.detail}); it applies CPU "
                             f"{shown} when the node has room")
            if step.state in ("infeasible", "error"):
                raise ActuationError(f"pod {ref}: resize to CPU {shown} not done: "
                                     f"{step.detail}")
            if self.clock() >= deadline:
                raise ActuationError(f"pod {ref}: resize to CPU {shown} not confirmed within "
                                     f"{self.settings.resize_timeout_seconds:g} s "
                                     f"({step.detail})")
            self.sleep(self.settings.poll_seconds)

    # -- markers and Migrate -----------------------------------------------------------------

    def annotate(self, ref: PodRef, annotations: Mapping[str, str]) -> None:
        try:
            self.caller.call(f"annotate pod {ref}", self.core.patch_namespaced_pod, ref.name,
                             ref.namespace, {"metadata": {"annotations": dict(annotations)}},
                             write=True)
        except ApiException as exc:
            raise ActuationError(f"annotate pod {ref}: HTTP {exc.status}") from exc

    def mark_migrated(self, action: MarkMigrated) -> Done:
        ref = PodRef.parse(action.container, self.settings.container_name)
        pod = self._pod(ref)
        self.annotate(ref, pods.marker_annotations(now=self.clock(), migrated=True,
                                                   converged_at=action.converged_at))
        return Done(pod)

    def stop(self, action: Stop) -> Done | None:
        """Deliver a job: checkpoint and stop it for good (`stop.Stopper`); the Event regards
        the Job, or the pod. None (nothing done, no Event) when it is stopped already: its pod
        gone, or carrying policyd's delivery mark and no longer running (terminating, or
        ended). A manager deciding from node reports may ask again before the agent's next
        report says the job is gone; that is not a failed action."""
        ref = PodRef.parse(action.container, self.settings.container_name)
        pod = self.migration.work.get_pod(ref.namespace, ref.name)
        if pod is None or (pods.delivered(pod) and not pods.is_running(pod)):
            LOG.info("kubernetes: stop of %s: %s already, nothing to do", ref,
                     "gone" if pod is None else "stopped")
            return None
        pods.check_managed(pod, self.settings.label_selector, self.opt_out)  # as `_pod` does
        return Done(self.stopper.run(
            action, pod, grace_seconds=grace_seconds(action, self.settings.grace_seconds)))

    def admit(self, action: Admit) -> Done | None:
        """Admit a held Job (`admission.JobAdmission`); the Event regards the Job. None (no
        Event) when an earlier attempt admitted it already."""
        job = self.admission.run(action)
        return None if job is None else Done(job)

    def migrate(self, action: Migrate) -> Done:
        """Move the pod; the Event regards what runs afterwards (the replacement pod, or the
        Job). A failure may leave the move pending: pending moves are looked for again."""
        try:
            return Done(self.migration.run(
                action, grace_seconds=grace_seconds(action, self.settings.grace_seconds)))
        except ActuationError:
            self._settle_at = min(self._settle_at,
                                  self.clock() + self.settings.pending_retry_seconds)
            raise


def _shown(desired: cpu.Desired) -> str:
    return ", ".join(f"{k} {v}m" for k, v in desired.items())


@dataclass(frozen=True)
class Done:
    """What an action changed: the object its Event regards, and a note for the Event."""

    obj: Mapping[str, Any]
    note: str = ""
