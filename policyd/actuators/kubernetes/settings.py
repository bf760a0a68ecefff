"""What the Kubernetes actuator needs to know: scope, write rate, timings.

`KubernetesScope` is the part of the settings file's `kubernetes` section (docs/settings.md)
the actuator reads: which pods, and how fast it may write. `KubernetesSettings` is that scope
plus what only code sets (node agent, connection, retries, timings), so each field is
declared, defaulted and checked here once; the daemon's `KubernetesSection` adds its own
fields (the Lease) to the same scope. Frozen pydantic models
(`policyd.clients.settings.SettingsModel`); nothing here touches the network. The annotation
and label names the actuator writes are `policyd.model.labels`.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, Field, NonNegativeFloat, NonNegativeInt, PositiveFloat

from policyd.clients.settings import NonEmptyStr, SettingsModel, SettingsPath, show
from policyd.model import labels


def _label_selector(value: str) -> str:
    if not value or value.startswith(("=", ",")):
        raise ValueError(f"{show(value)} must be a label selector (key, key=value, key!=value, "
                         "comma-separated)")
    return value


LabelSelector = Annotated[str, AfterValidator(_label_selector)]


class KubernetesScope(SettingsModel):
    """Which pods policyd manages and how fast it writes to the API server.

    Pods in `namespaces` (empty: all, which needs a ClusterRole) matching `label_selector`.
    Writes go through a token bucket: `qps` a second, `burst` at once above it (a cycle with
    many actions is spread out, never dropped).
    """

    namespaces: tuple[NonEmptyStr, ...] = ()
    label_selector: LabelSelector = labels.MANAGED_SELECTOR
    qps: PositiveFloat = 5.0
    burst: Annotated[int, Field(ge=1)] = 10


class KubernetesSettings(KubernetesScope):
    """The Kubernetes actuator's settings (the pod source reads `namespaces`, `label_selector`,
    `container_name` and `node_name` too, through a structural Protocol: sources never import
    actuators). Built from the settings file by `from_scope`.

    In each pod the container named `container_name` (None: the first); with `node_name` (a
    node agent, `policyd run --node`) only the pods on that node, by a field selector on every
    list and watch. Connection: `host` (an API server URL, for tests and proxies) else
    in-cluster config, else `kubeconfig` (None: the default file). Retries: 5xx and connection
    errors `retries` times, back-off `backoff_seconds` * 2**attempt. Resize: confirmed within
    `resize_timeout_seconds`, polling every `poll_seconds`. Migration: `grace_seconds` (SIGTERM
    to SIGKILL, unless the policy gives one: `policyd.actuators.grace`), gone within
    `grace + delete_timeout_seconds`, running within `start_timeout_seconds` and still running
    `confirm_seconds` later. `use_eviction` deletes bare pods through the Eviction API
    (PodDisruptionBudgets honoured) instead of DELETE. Moves are written down in
    `record_namespace` (policyd's own: the settings file's `kubernetes.namespace`) before they
    start (`moves`); a half-done one is settled at the first action and then retried every
    `pending_retry_seconds` while it stays pending. A node agent (`node_name` set) makes no
    moves and settles none.
    """

    container_name: NonEmptyStr | None = None
    node_name: NonEmptyStr | None = None
    host: NonEmptyStr | None = None
    kubeconfig: SettingsPath | None = None
    retries: NonNegativeInt = 3
    backoff_seconds: NonNegativeFloat = 0.5
    resize_timeout_seconds: PositiveFloat = 30.0
    poll_seconds: PositiveFloat = 1.0
    grace_seconds: PositiveFloat = 60.0
    delete_timeout_seconds: PositiveFloat = 30.0
    start_timeout_seconds: PositiveFloat = 120.0
    confirm_seconds: NonNegativeFloat = 5.0
    use_eviction: bool = True
    record_namespace: NonEmptyStr = "policyd"
    pending_retry_seconds: PositiveFloat = 30.0
    require_replacement_policy_failed: bool = True
    reporting_controller: NonEmptyStr = "policyd.io/policyd"
    reporting_instance: NonEmptyStr = "policyd"
    timeout_seconds: PositiveFloat = 30.0

    @classmethod
    def from_scope(cls, scope: KubernetesScope, **knobs: Any) -> KubernetesSettings:
        """The actuator's settings for the file's scope (and `knobs`, e.g. `node_name`)."""
        return cls(**{name: getattr(scope, name) for name in KubernetesScope.model_fields},
                   **knobs)

