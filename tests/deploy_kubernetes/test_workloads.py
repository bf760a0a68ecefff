"""The workloads: secure pod settings everywhere, the manager's high availability, the node
agent's node, the example Job's contract with policyd, and the ConfigMaps policyd reads."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from policyd.policy import validate_files
from tests.deploy_kubernetes.manifests import (
    Manifest,
    config_map_data,
    example,
    one,
    pod_templates,
    rendered,
)

TEMPLATES = list(pod_templates(rendered())) + list(pod_templates(example()))


def test_every_workload_is_covered() -> None:
    assert [name for name, _ in TEMPLATES] == [
        "Deployment/policyd-manager", "DaemonSet/policyd-node-agent", "Job/train-1"]


@pytest.mark.parametrize(("name", "pod"), TEMPLATES, ids=[n for n, _ in TEMPLATES])
def test_pods_are_locked_down(name: str, pod: Manifest) -> None:
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert not pod.get("hostNetwork") and not pod.get("hostPID") and not pod.get("hostIPC")
    for container in pod["containers"] + pod.get("initContainers", []):
        context = container["securityContext"]
        assert context["runAsNonRoot"] is True
        assert context["readOnlyRootFilesystem"] is True
        assert context["allowPrivilegeEscalation"] is False
        assert context["capabilities"] == {"drop": ["ALL"]}
        assert context["seccompProfile"] == {"type": "RuntimeDefault"}
        assert not context.get("privileged")
        for bound in ("requests", "limits"):
            assert {"cpu", "memory"} <= container["resources"][bound].keys(), (name, bound)


def test_the_manager_is_highly_available_with_one_leader() -> None:
    deployment = one(rendered(), "Deployment", "policyd-manager")
    pod = deployment["spec"]["template"]["spec"]
    assert deployment["spec"]["replicas"] == 2
    assert "--leader-elect" in pod["containers"][0]["args"]
    term = pod["affinity"]["podAntiAffinity"][
        "preferredDuringSchedulingIgnoredDuringExecution"][0]["podAffinityTerm"]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    assert term["labelSelector"]["matchLabels"] == deployment["spec"]["selector"]["matchLabels"]
    budget = one(rendered(), "PodDisruptionBudget", "policyd-manager")
    assert budget["spec"]["minAvailable"] == 1
    assert budget["spec"]["selector"] == deployment["spec"]["selector"]


def test_the_node_agent_acts_on_its_own_node() -> None:
    container = one(rendered(), "DaemonSet")["spec"]["template"]["spec"]["containers"][0]
    args = container["args"]
    assert args[args.index("--node") + 1] == "$(NODE_NAME)"
    assert {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}} \
        in container["env"]


def test_the_example_job_follows_policyds_contract() -> None:
    job = one(example(), "Job")
    pod = job["spec"]["template"]["spec"]
    (trainer,) = pod["containers"]
    assert job["spec"]["podReplacementPolicy"] == "Failed"
    assert job["spec"]["template"]["metadata"]["labels"]["policyd.io/managed"] == "true"
    assert {"resourceName": "cpu", "restartPolicy": "NotRequired"} in trainer["resizePolicy"]
    # A resize cannot change the QoS class: requests below limits keep it Burstable.
    assert trainer["resources"]["requests"] != trainer["resources"]["limits"]
    env = {e["name"]: e for e in trainer["env"]}
    assert env["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    assert env["POD_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"
    assert env["CONTAINER_NAME"]["value"] == trainer["name"]
    claim = one(example(), "PersistentVolumeClaim")["metadata"]["name"]
    volume = next(v for v in pod["volumes"] if "persistentVolumeClaim" in v)
    assert volume["persistentVolumeClaim"]["claimName"] == claim
    assert {"name": volume["name"], "mountPath": "/checkpoints"} in trainer["volumeMounts"]
    # The checkpoint stop is not a failure of the Job: the trainer exits with the code the
    # podFailurePolicy ignores (not 0, which would complete the Job).
    argv = trainer["command"] + trainer.get("args", [])
    code = int(argv[argv.index("--stop-exit-code") + 1])
    rule = job["spec"]["podFailurePolicy"]["rules"][0]
    assert rule["action"] == "Ignore" and rule["onExitCodes"]["values"] == [code] != [0]
    specon = yaml.safe_load(config_map_data("policyd-policies")["specon.yaml"])
    assert pod["terminationGracePeriodSeconds"] >= specon["spec"]["migration_grace_seconds"]
    assert job["metadata"]["namespace"] in specon["spec"]["selector"]["namespaces"]


def test_the_policies_are_valid(tmp_path: Path) -> None:
    files = []
    for name, text in config_map_data("policyd-policies").items():
        files.append(tmp_path / name)
        files[-1].write_text(text)
    policies, problems = validate_files(files)
    assert [str(p) for p in problems] == []
    assert sorted(p.kind for p in policies) == ["FlowCon", "SpeCon"]


def _mounted(kind: str) -> dict[str, str]:
    """What the component's /etc/policyd holds: path -> text, from its projected volume."""
    pod = one(rendered(), kind)["spec"]["template"]["spec"]
    (config,) = [v for v in pod["volumes"] if v["name"] == "config"]
    files: dict[str, str] = {}
    for source in config["projected"]["sources"]:
        data = config_map_data(source["configMap"]["name"])
        for item in source["configMap"]["items"]:
            files[item["path"]] = data[item["key"]]
    return files


@pytest.mark.parametrize(("kind", "policy_kind"), [("Deployment", "SpeCon"),
                                                   ("DaemonSet", "FlowCon")])
def test_each_component_reads_its_settings_and_policy(kind: str, policy_kind: str) -> None:
    files = _mounted(kind)
    container = one(rendered(), kind)["spec"]["template"]["spec"]["containers"][0]
    config = container["args"][container["args"].index("--config") + 1]
    assert config == "/etc/policyd/settings.yaml"
    mount = next(m for m in container["volumeMounts"] if m["name"] == "config")
    assert mount["mountPath"] == "/etc/policyd" and "subPath" not in mount  # hot reload
    settings: dict[str, Any] = yaml.safe_load(files["settings.yaml"])
    assert settings["backend"] == "kubernetes"
    assert settings["http"] == {"addr": "0.0.0.0", "port": 9097}
    (policy_path,) = settings["policies"]
    assert yaml.safe_load(files[policy_path])["kind"] == policy_kind


@pytest.mark.parametrize("name", ["manager.yaml", "node-agent.yaml"])
def test_the_daemon_accepts_the_settings(name: str) -> None:
    """The settings file loader itself (the kubernetes section included) accepts the file."""
    from policyd.daemon import load_settings_text  # noqa: PLC0415

    settings = load_settings_text(config_map_data("policyd-settings")[name], name,
                                  base=Path("/etc/policyd"))
    assert settings.backend == "kubernetes"
