"""The RBAC of deploy/kubernetes grants exactly the API calls policyd makes.

`REQUIRED_RULES` (policyd/actuators/kubernetes/rbac.py) is the code's own list of its calls. The
union of the (Cluster)Roles must equal it: a missing rule is a 403 in production, an extra one
is privilege nobody uses. The split between the components is checked here too: the node
agents (one on every node) cannot evict, create or delete pods, touch Jobs, budgets, Leases or
move records; the manager cannot resize. Each reads the policy resources of the kinds it runs
(`policyd.daemon.roles.watched_kinds`) and writes their status.
"""

from __future__ import annotations

import yaml

from policyd.actuators.kubernetes.rbac import REQUIRED_RULES
from policyd.clients.policy_resources import resource
from policyd.daemon.roles import watched_kinds
from tests.deploy_kubernetes.manifests import Manifest, config_map_data, one, rendered

# (api group, resource or resource/subresource, verb)
Triple = tuple[str, str, str]


def grants(role: Manifest) -> set[Triple]:
    return {(group, resource, verb)
            for rule in role["rules"]
            for group in rule["apiGroups"]
            for resource in rule["resources"]
            for verb in rule["verbs"]}


def roles() -> list[Manifest]:
    return [d for d in rendered() if d["kind"] in {"Role", "ClusterRole"}]


def bound_to(service_account: str) -> set[Triple]:
    """Everything the ServiceAccount may do, through the bindings that name it."""
    found: set[Triple] = set()
    for binding in rendered():
        if binding["kind"] not in {"RoleBinding", "ClusterRoleBinding"}:
            continue
        if {"kind": "ServiceAccount", "name": service_account, "namespace": "policyd"} \
                not in binding["subjects"]:
            continue
        found |= grants(one(rendered(), binding["roleRef"]["kind"], binding["roleRef"]["name"]))
    return found


def test_the_roles_grant_exactly_the_required_rules() -> None:
    required = {(r.group, r.resource_path, r.verb) for r in REQUIRED_RULES}
    granted = set().union(*(grants(role) for role in roles()))
    assert sorted(granted - required) == [], "granted but never used"
    assert sorted(required - granted) == [], "used by policyd but not granted"


def test_no_wildcards_and_names_only_on_the_lease() -> None:
    for role in roles():
        for rule in role["rules"]:
            for field in ("apiGroups", "resources", "verbs"):
                assert "*" not in rule[field], (role["metadata"]["name"], rule)
            if "resourceNames" in rule:
                assert rule["resources"] == ["leases"]
                assert "create" not in rule["verbs"]  # a name cannot restrict create


def test_the_lease_the_role_names_is_the_one_the_manager_uses() -> None:
    lease_rules = [r for r in one(rendered(), "Role")["rules"] if "resourceNames" in r]
    settings = yaml.safe_load(config_map_data("policyd-settings")["manager.yaml"])
    assert [r["resourceNames"] for r in lease_rules] == [[settings["kubernetes"]["lease_name"]]]
    assert one(rendered(), "Role")["metadata"]["namespace"] == settings["kubernetes"]["namespace"]


def test_each_component_gets_only_its_share() -> None:
    manager, agent = bound_to("policyd-manager"), bound_to("policyd-node-agent")
    assert manager | agent == {(r.group, r.resource_path, r.verb) for r in REQUIRED_RULES}
    assert ("", "pods/resize", "patch") in agent
    # The manager resizes only for a cluster-wide kind that sets CPU (Predictive, migrate).
    assert ("", "pods/resize", "patch") in manager
    for dangerous in [("", "pods/eviction", "create"), ("", "pods", "delete"),
                      ("", "pods", "create"), ("batch", "jobs", "patch"),
                      ("", "configmaps", "create"), ("policy", "poddisruptionbudgets", "list")]:
        assert dangerous in manager
        assert dangerous not in agent
    assert not {t for t in agent if t[1] in ("leases", "configmaps")}
    assert {t for t in manager if t[1] == "leases"} == {
        ("coordination.k8s.io", "leases", verb) for verb in ("create", "get", "update")}
    for role, grants_of, node in (("manager", manager, None), ("node agent", agent, "n")):
        kinds = watched_kinds(node, leader=role == "manager")
        policy = {t for t in grants_of if t[0] == "policyd.io"}
        assert policy == {("policyd.io", resource(k).plural + sub, verb) for k in kinds
                          for sub, verb in (("", "list"), ("", "watch"), ("/status", "patch"))}


def test_the_move_records_are_in_policyds_namespace_only() -> None:
    """ConfigMaps are read and written in the namespace the records live in, not cluster-wide."""
    settings = yaml.safe_load(config_map_data("policyd-settings")["manager.yaml"])
    for role in (d for d in roles() if d["kind"] == "ClusterRole"):
        assert not [r for r in role["rules"] if "configmaps" in r["resources"]]
    assert one(rendered(), "Role")["metadata"]["namespace"] == settings["kubernetes"]["namespace"]


def test_the_workloads_run_as_their_service_accounts() -> None:
    deployment = one(rendered(), "Deployment", "policyd-manager")
    daemonset = one(rendered(), "DaemonSet", "policyd-node-agent")
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == "policyd-manager"
    assert daemonset["spec"]["template"]["spec"]["serviceAccountName"] == "policyd-node-agent"
