"""The Kubernetes actuator: FlowCon's CPU (in-place pod resize) and SpeCon's migrations.

Layout: `settings` (scope, timings, write rate), `rbac`
(every API call as an RBAC rule: the Role is rendered from it), `calls` (the client, the
token bucket, the retry policy), `cpu` (resize bodies and progress, pure), `pods` (pod JSON:
names, markers, the replacement, pure), `events` (an Event per action), `migration` (bare
pods: evict and recreate; Job-owned pods: suspend, re-pin, resume), `recovery` (Jobs left
mid-migration), `actuator` (`KubernetesActuator`). Imports no source, simulator, daemon or CLI.

Kubernetes versions: in-place resize through `pods/resize` needs 1.33 (beta, on by default;
1.32 behind the InPlacePodVerticalScaling gate; GA 1.35) and client >= 32; the resize
conditions PodResizePending / PodResizeInProgress are 1.33+. Re-pinning a suspended Job that
already ran needs 1.36 (MutableSchedulingDirectivesForSuspendedJobs); `podReplacementPolicy`
is 1.29+ (beta, on by default). events.k8s.io/v1 and policy/v1 Eviction: 1.19 / 1.22+.
"""

from policyd.actuators.errors import ActuationError
from policyd.actuators.kubernetes.actuator import KubernetesActuator
from policyd.actuators.kubernetes.rbac import REQUIRED_RULES, Rule, role_rules
from policyd.actuators.kubernetes.recovery import RULES, Recovered
from policyd.actuators.kubernetes.settings import KubernetesSettings

__all__ = ["REQUIRED_RULES", "RULES", "ActuationError", "KubernetesActuator",
           "KubernetesSettings", "Recovered", "Rule", "role_rules"]
