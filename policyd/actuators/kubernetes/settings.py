"""What the Kubernetes actuator needs to know: scope, timings, write rate.

Frozen values checked on construction (every problem reported at once); nothing here touches
the network. The annotation and label names the actuator writes are `policyd.model.labels`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from policyd.model import labels


@dataclass(frozen=True, kw_only=True)
class KubernetesSettings:
    """The Kubernetes actuator's settings (the pod source reads `namespaces`, `label_selector`
    and `container_name` too, through a structural Protocol: sources never import actuators).

    Scope: pods in `namespaces` (empty: all, which needs a ClusterRole) matching
    `label_selector`; in each pod the container named `container_name` (None: the first);
    with `node_name` (a node agent, `policyd run --node`) only the pods on that node, by a
    field selector on every list and watch.
    Connection: `host` (an API server URL, for tests and proxies) else in-cluster config, else
    `kubeconfig` (None: the default file). Writes go through a token bucket of `write_qps`
    and `write_burst`. Retries: 5xx and connection errors `retries` times, back-off
    `backoff_seconds` * 2**attempt. Resize: confirmed within `resize_timeout_seconds`, polling
    every `poll_seconds`. Migration: `grace_seconds` (SIGTERM to SIGKILL, unless the policy
    gives one), gone within `grace + delete_timeout_seconds`, running within
    `start_timeout_seconds` and still running `confirm_seconds` later. `use_eviction` deletes
    bare pods through the Eviction API (PodDisruptionBudgets honoured) instead of DELETE.
    """

    namespaces: tuple[str, ...] = ()
    label_selector: str = labels.MANAGED_SELECTOR
    container_name: str | None = None
    node_name: str | None = None
    host: str | None = None
    kubeconfig: Path | None = None
    write_qps: float = 5.0
    write_burst: int = 10
    retries: int = 3
    backoff_seconds: float = 0.5
    resize_timeout_seconds: float = 30.0
    poll_seconds: float = 1.0
    grace_seconds: float = 60.0
    delete_timeout_seconds: float = 30.0
    start_timeout_seconds: float = 120.0
    confirm_seconds: float = 5.0
    use_eviction: bool = True
    require_replacement_policy_failed: bool = True
    reporting_controller: str = "policyd.io/policyd"
    reporting_instance: str = "policyd"
    timeout_seconds: float = 30.0

    def __post_init__(self) -> None:
        problems: list[str] = []
        for what, value in (("write_qps", self.write_qps),
                            ("resize_timeout_seconds", self.resize_timeout_seconds),
                            ("poll_seconds", self.poll_seconds),
                            ("grace_seconds", self.grace_seconds),
                            ("delete_timeout_seconds", self.delete_timeout_seconds),
                            ("start_timeout_seconds", self.start_timeout_seconds),
                            ("timeout_seconds", self.timeout_seconds)):
            if not value > 0:
                problems.append(f"{what} must be positive, got {value}")
        if self.write_burst < 1:
            problems.append(f"write_burst must be at least 1, got {self.write_burst}")
        if self.retries < 0 or self.backoff_seconds < 0 or self.confirm_seconds < 0:
            problems.append("retries, backoff_seconds and confirm_seconds must be >= 0")
        if not self.label_selector:
            problems.append("label_selector must select the managed pods (e.g. "
                            "policyd.io/managed=true)")
        if not self.reporting_controller or not self.reporting_instance:
            problems.append("reporting_controller and reporting_instance must be set")
        if problems:
            raise ValueError("; ".join(problems))
        object.__setattr__(self, "namespaces", tuple(self.namespaces))
