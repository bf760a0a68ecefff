"""deploy/kubernetes renders with kustomize, and every object is valid for Kubernetes 1.33+.

Built-in kinds are validated with kubernetes-validate in strict mode (unknown fields are errors)
against the schemas of 1.33 (the first release with in-place pod resize on by default) and of
the newest release it ships: the CustomResourceDefinitions of the policy kinds among them
(test_crds.py checks their schemas further). The Prometheus Operator's custom resources are not
in those schemas: they are validated against crd_schemas.py.
"""

from __future__ import annotations

import jsonschema
import kubernetes_validate
import pytest

from tests.deploy_kubernetes.crd_schemas import SCHEMAS
from tests.deploy_kubernetes.manifests import Manifest, example, one, rendered

VERSIONS = ("1.33.0", kubernetes_validate.latest_version())


def _id(doc: Manifest) -> str:
    return f"{doc['kind']}/{doc['metadata']['name']}"


def _built_in(docs: list[Manifest]) -> list[Manifest]:
    return [d for d in docs if d["kind"] not in SCHEMAS]


def test_the_kustomization_renders_the_whole_deployment() -> None:
    kinds = sorted(f"{d['kind']}/{d['metadata']['name']}" for d in rendered())
    assert kinds == sorted([
        "Namespace/policyd",
        "ServiceAccount/policyd-manager", "ServiceAccount/policyd-node-agent",
        "ClusterRole/policyd-manager", "ClusterRole/policyd-node-agent",
        "ClusterRoleBinding/policyd-manager", "ClusterRoleBinding/policyd-node-agent",
        "Role/policyd-manager", "RoleBinding/policyd-manager",
        "CustomResourceDefinition/deadlines.policyd.io",
        "CustomResourceDefinition/flowcons.policyd.io",
        "CustomResourceDefinition/specons.policyd.io",
        "CustomResourceDefinition/predictives.policyd.io",
        "CustomResourceDefinition/qoes.policyd.io",
        *(f"ConfigMap/{d['metadata']['name']}" for d in rendered() if d["kind"] == "ConfigMap"),
        "Deployment/policyd-manager", "PodDisruptionBudget/policyd-manager",
        "DaemonSet/policyd-node-agent", "Service/policyd",
        "ServiceMonitor/policyd", "PodMonitor/policyd-training", "PrometheusRule/policyd",
    ])
    assert len([d for d in rendered() if d["kind"] == "ConfigMap"]) == 3
    namespaced = [d for d in rendered() if d["kind"] not in
                  {"Namespace", "ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition"}]
    assert {d["metadata"].get("namespace") for d in namespaced} == {"policyd"}


def test_the_example_is_not_part_of_the_kustomization() -> None:
    assert not [d for d in rendered() if d["kind"] in {"Job", "PersistentVolumeClaim"}]
    assert {d["kind"] for d in example()} == {"Namespace", "PersistentVolumeClaim", "Job"}


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("doc", _built_in(rendered()) + example(), ids=_id)
def test_built_in_objects_validate_against_the_kubernetes_schema(doc: Manifest,
                                                                 version: str) -> None:
    try:
        kubernetes_validate.validate(doc, version, strict=True)
    except kubernetes_validate.ValidationError as error:
        path = ".".join(str(p) for p in error.path)
        pytest.fail(f"{_id(doc)} is invalid for Kubernetes {version}: {path}: {error.message}")


@pytest.mark.parametrize("doc", [d for d in rendered() if d["kind"] in SCHEMAS], ids=_id)
def test_prometheus_operator_objects_validate_against_their_crd_fields(doc: Manifest) -> None:
    jsonschema.validate(doc, SCHEMAS[doc["kind"]])


def test_the_crd_schemas_reject_a_misspelt_field() -> None:
    monitor = one(rendered(), "ServiceMonitor")
    broken = {**monitor, "spec": {**monitor["spec"], "podTargetLabel": ["x"]}}
    with pytest.raises(jsonschema.ValidationError, match="podTargetLabel"):
        jsonschema.validate(broken, SCHEMAS["ServiceMonitor"])
