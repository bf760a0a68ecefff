"""The Kubernetes actuator: FlowCon's CPU (in-place pod resize) and SpeCon's migrations.

Layout: `settings` (scope, write rate, timings), `rbac` (every API call as an RBAC rule: the
Role is rendered from it), `calls` (the client, the token bucket, the retry policy), `cpu`
(resize bodies and progress, pure) and `qos` (the QoS class a resize must keep, pure), `pods`
(pod JSON: names, markers, the replacement, pure), `events` (an Event per action),
`migration` (bare pods: evict and recreate; Job-owned pods: suspend, re-pin, resume), built on
`moves` (the record of a move, written on the cluster first), `recovery` (the table that
finishes or rolls back a recorded move, pure data), `mover` (runs its steps), `workloads`
(the API calls on pods and Jobs) and `disruption` (PodDisruptionBudgets before a Job moves),
`actuator` (`KubernetesActuator`). Imports no source, simulator, daemon or CLI.

The settings values are imported here eagerly and load no Kubernetes client, so the daemon's
settings file can hold them without it (the simulated and Docker backends never need it);
everything that talks to an API server is loaded on first use (PEP 562).

Kubernetes versions: in-place resize through `pods/resize` needs 1.33 (beta, on by default;
1.32 behind the InPlacePodVerticalScaling gate; GA 1.35) and client >= 32; the resize
conditions PodResizePending / PodResizeInProgress are 1.33+. Re-pinning a suspended Job that
already ran needs 1.36 (MutableSchedulingDirectivesForSuspendedJobs); `podReplacementPolicy`
is 1.29+ (beta, on by default). events.k8s.io/v1 and policy/v1 Eviction: 1.19 / 1.22+.
"""

from typing import TYPE_CHECKING, Any

from policyd.actuators.errors import ActuationError
from policyd.actuators.kubernetes.settings import KubernetesScope, KubernetesSettings

if TYPE_CHECKING:
    from policyd.actuators.kubernetes.actuator import KubernetesActuator
    from policyd.actuators.kubernetes.mover import Settled
    from policyd.actuators.kubernetes.rbac import REQUIRED_RULES, Rule, role_rules
    from policyd.actuators.kubernetes.recovery import JOB_RULES, POD_RULES

__all__ = ["JOB_RULES", "POD_RULES", "REQUIRED_RULES", "ActuationError", "KubernetesActuator",
           "KubernetesScope", "KubernetesSettings", "Rule", "Settled", "role_rules"]

_LAZY = {"KubernetesActuator": "actuator", "REQUIRED_RULES": "rbac", "Rule": "rbac",
         "role_rules": "rbac", "POD_RULES": "recovery", "JOB_RULES": "recovery",
         "Settled": "mover"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module  # noqa: PLC0415

    return getattr(import_module(f"{__name__}.{module}"), name)
