"""Every Kubernetes API call policyd makes, as RBAC rules: the one place the Role comes from.

`CALLS` maps each client method policyd calls (CoreV1Api, BatchV1Api, EventsV1Api,
PolicyV1Api, CoordinationV1Api) to the rule it needs; `POLICY_RULES` are the rules on the
policy custom resources (CustomObjectsApi: the resource is an argument, so they are listed
per registered kind); `REQUIRED_RULES` is the set of them all. The manifests' (Cluster)Roles
must add up to it; tests run every code path against the fake API server, turn each request
into the rule the API server's authorizer checks, and check that each is in `REQUIRED_RULES`
and every rule is exercised, so the list cannot drift from the code. It covers the whole
process: the actuator (this package), the pod source's lists and the pod watch
(`policyd.sources.kubernetes_pod_facts`, `kubernetes_pod_watch`), the held Jobs' list and watch
(`policyd.sources.kubernetes_jobs`),
leader election (`policyd.daemon.leader`) and the policy resources
(`policyd.daemon.policy_resources`); those modules cannot import this one (layers),
so the test is the link. `nodes` and the policy resources are cluster-scoped: they need a
ClusterRole, as does watching pods in all namespaces (`KubernetesSettings.namespaces` empty);
the move records are ConfigMaps in policyd's own namespace: a Role there.

Pure data: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from policyd.clients.policy_resources import GROUP, resources


class Rule(NamedTuple):
    """One permission: (api group, resource, subresource, verb); "" is the core group / none."""

    group: str
    resource: str
    subresource: str
    verb: str

    @property
    def resource_path(self) -> str:
        """The RBAC `resources` entry: `pods` or `pods/resize`."""
        return f"{self.resource}/{self.subresource}" if self.subresource else self.resource


CALLS: Mapping[str, Rule] = {
    # actuator: SetCpu (in-place resize, pods/resize since 1.32, beta on by default 1.33)
    "read_namespaced_pod": Rule("", "pods", "", "get"),
    "patch_namespaced_pod_resize": Rule("", "pods", "resize", "patch"),
    "patch_namespaced_pod": Rule("", "pods", "", "patch"),  # marker annotations
    "read_node": Rule("", "nodes", "", "get"),  # allocatable cores
    # actuator: Migrate of a bare pod (checkpoint protocol)
    "create_namespaced_pod_eviction": Rule("", "pods", "eviction", "create"),
    "delete_namespaced_pod": Rule("", "pods", "", "delete"),
    "create_namespaced_pod": Rule("", "pods", "", "create"),
    # actuator: Migrate of a Job-owned pod (suspend, re-pin, resume; its pods stopped with
    # the policy's grace through delete_namespaced_pod), after its disruption budgets
    "read_namespaced_job": Rule("batch", "jobs", "", "get"),
    "patch_namespaced_job": Rule("batch", "jobs", "", "patch"),
    "list_namespaced_pod_disruption_budget": Rule("policy", "poddisruptionbudgets", "", "list"),
    # actuator: every move written down first (ConfigMaps in policyd's namespace), settled
    # and forgotten; listed at start and while one is pending
    "create_namespaced_config_map": Rule("", "configmaps", "", "create"),
    "read_namespaced_config_map": Rule("", "configmaps", "", "get"),
    "replace_namespaced_config_map": Rule("", "configmaps", "", "update"),
    "delete_namespaced_config_map": Rule("", "configmaps", "", "delete"),
    "list_namespaced_config_map": Rule("", "configmaps", "", "list"),
    # actuator: a Kubernetes Event on every action
    "create_namespaced_event": Rule("events.k8s.io", "events", "", "create"),
    # source: the pod and node watches (watch=True), whose views it reads; a pod list and a
    # node list in a cycle only while a watch does not keep its view
    "list_pod_for_all_namespaces": Rule("", "pods", "", "list"),
    "list_namespaced_pod": Rule("", "pods", "", "list"),
    "list_node": Rule("", "nodes", "", "list"),
    # source (manager only): the held Jobs waiting for admission, one Job list per cycle,
    # and the Job watch (watch=True) that wakes the admitting policies when one is submitted;
    # admission then reads the Job and patches it (pin, unsuspend): the rules above
    "list_job_for_all_namespaces": Rule("batch", "jobs", "", "list"),
    "list_namespaced_job": Rule("batch", "jobs", "", "list"),
    # leader election on a Lease
    "read_namespaced_lease": Rule("coordination.k8s.io", "leases", "", "get"),
    "create_namespaced_lease": Rule("coordination.k8s.io", "leases", "", "create"),
    "replace_namespaced_lease": Rule("coordination.k8s.io", "leases", "", "update"),
}

WATCHES: frozenset[str] = frozenset({"list_pod_for_all_namespaces", "list_namespaced_pod",
                                     "list_job_for_all_namespaces", "list_namespaced_job",
                                     "list_node"})
"""List methods that `watch.Watch().stream` calls with `watch=True` (verb `watch`)."""

POLICY_RULES: frozenset[Rule] = frozenset(
    rule for r in resources() for rule in (
        Rule(GROUP, r.plural, "", "list"), Rule(GROUP, r.plural, "", "watch"),
        Rule(GROUP, r.plural, "status", "patch")))
"""The policy custom resources (`list_cluster_custom_object`, watched, and
`patch_cluster_custom_object_status`): read and judged, the verdict written in the status."""


def rule_for(method: str, kwargs: Mapping[str, Any] | None = None) -> Rule:
    """The rule a call of `method` with `kwargs` needs; KeyError for an undeclared method."""
    rule = CALLS[method]
    if (kwargs or {}).get("watch") and method in WATCHES:
        return rule._replace(verb="watch")
    return rule


REQUIRED_RULES: frozenset[Rule] = frozenset(
    {*CALLS.values(), *(CALLS[m]._replace(verb="watch") for m in WATCHES), *POLICY_RULES})
"""Everything policyd needs; nothing more."""


def role_rules(rules: Iterable[Rule] = REQUIRED_RULES) -> list[dict[str, list[str]]]:
    """The `rules:` of an RBAC Role, one entry per (group, resource path), verbs sorted."""
    verbs: dict[tuple[str, str], set[str]] = {}
    for rule in rules:
        verbs.setdefault((rule.group, rule.resource_path), set()).add(rule.verb)
    return [{"apiGroups": [group], "resources": [path], "verbs": sorted(v)}
            for (group, path), v in sorted(verbs.items())]
