"""The CustomResourceDefinitions of the policy kinds: current with the models, structural, and
agreeing with policyd's own validation on the shipped policies and on what they refuse.

`deploy/kubernetes/crds/policies.yaml` is generated (`policyd crds`); the API server's checks
on a CRD's schema (the structural-schema rules of apiextensions.k8s.io/v1) are checked here in
`structural_problems`; a policy is validated against its CRD's schema as the API server does
(OpenAPI v3 value validations: JSON Schema draft 4, with `kubectl apply`'s strict field
validation refusing unknown fields).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from policyd.clients.policy_resources import CATEGORY, resources
from policyd.policy.crd import crds, crds_yaml
from policyd.policy.resource import check_resource
from tests.deploy_kubernetes.manifests import DEPLOY, ROOT, rendered

SHIPPED = DEPLOY / "crds" / "policies.yaml"
POLICY_FILES = sorted((ROOT / "policies").glob("*.yaml")) + sorted(
    (DEPLOY / "policies").glob("*.yaml"))

# apiextensions.k8s.io/v1 JSONSchemaProps: what a CRD schema node may hold.
PROPS = frozenset({
    "type", "description", "enum", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
    "minLength", "maxLength", "pattern", "minItems", "maxItems", "required", "format",
    "properties", "items", "additionalProperties", "nullable", "anyOf", "allOf", "oneOf",
    "not", "x-kubernetes-int-or-string", "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-list-type", "x-kubernetes-list-map-keys", "x-kubernetes-validations",
    "multipleOf", "uniqueItems", "maxProperties", "minProperties", "title", "default",
    "example", "externalDocs", "x-kubernetes-embedded-resource", "x-kubernetes-map-type"})
IN_JUNCTORS_FORBIDDEN = ("description", "type", "default", "additionalProperties", "nullable")


def structural_problems(node: dict[str, Any], at: str = "", *, typed: bool = True
                        ) -> Iterator[str]:
    """What the API server would refuse in a CRD schema node (and the nodes below it)."""
    unknown = set(node) - PROPS
    if unknown:
        yield f"{at or '/'}: not a CRD schema field: {sorted(unknown)}"
    int_or_string = node.get("x-kubernetes-int-or-string") is True
    if typed and not node.get("type") and not int_or_string and \
            not node.get("x-kubernetes-preserve-unknown-fields"):
        yield f"{at or '/'}: no type"
    if node.get("additionalProperties") is False:
        yield f"{at}: additionalProperties: false is not allowed"
    if "properties" in node and isinstance(node.get("additionalProperties"), dict):
        yield f"{at}: properties and additionalProperties together"
    for bound in ("exclusiveMinimum", "exclusiveMaximum"):
        if bound in node and not isinstance(node[bound], bool):
            yield f"{at}: {bound} must be a boolean"
    if "default" in node:
        yield f"{at}: a default (policyd applies its own)"
    for junctor in ("anyOf", "allOf", "oneOf"):
        for i, branch in enumerate(node.get(junctor) or []):
            exact = int_or_string and junctor == "anyOf" and branch in (
                {"type": "integer"}, {"type": "string"})
            for key in IN_JUNCTORS_FORBIDDEN:
                if key in branch and not exact:
                    yield f"{at}.{junctor}[{i}]: {key} inside a junctor"
    for name, sub in (node.get("properties") or {}).items():
        yield from structural_problems(sub, f"{at}.{name}")
    if isinstance(node.get("items"), dict):
        yield from structural_problems(node["items"], f"{at}[]")
    if isinstance(node.get("additionalProperties"), dict):
        yield from structural_problems(node["additionalProperties"], f"{at}{{}}")


def schema_of(kind: str) -> dict[str, Any]:
    (crd,) = [c for c in crds() if c["spec"]["names"]["kind"] == kind]
    schema: dict[str, Any] = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def strict(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` refusing unknown fields, as `kubectl apply`'s strict field validation does
    (metadata excepted: the server adds to it)."""
    out = copy.deepcopy(schema)

    def close(node: dict[str, Any], at: str) -> None:
        if "properties" in node and at != ".metadata":
            node["additionalProperties"] = False
        for name, sub in (node.get("properties") or {}).items():
            close(sub, f"{at}.{name}")
        if isinstance(node.get("items"), dict):
            close(node["items"], f"{at}[]")
    close(out, "")
    return out


def api_accepts(document: dict[str, Any]) -> bool:
    try:
        jsonschema.Draft4Validator(strict(schema_of(document["kind"]))).validate(document)
    except jsonschema.ValidationError:
        return False
    return True


def documents(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d is not None]


# --- the shipped file ---------------------------------------------------------------------------

def test_the_shipped_crds_are_the_generated_ones() -> None:
    assert SHIPPED.read_text() == crds_yaml(), (
        "deploy/kubernetes/crds/policies.yaml is stale: policyd crds > "
        "deploy/kubernetes/crds/policies.yaml")


def test_every_policy_kind_has_its_crd_in_the_kustomization() -> None:
    installed = {d["metadata"]["name"]: d for d in rendered()
                 if d["kind"] == "CustomResourceDefinition"}
    assert sorted(installed) == sorted(r.crd_name for r in resources())
    for res in resources():
        crd = installed[res.crd_name]
        spec = crd["spec"]
        assert spec["scope"] == "Cluster"
        assert spec["names"]["plural"] == res.plural  # kubectl get flowcons
        assert spec["names"]["categories"] == [CATEGORY]  # kubectl get policyd
        (version,) = spec["versions"]
        assert (version["name"], version["served"], version["storage"]) == (
            "v1alpha1", True, True)
        assert version["subresources"] == {"status": {}}


@pytest.mark.parametrize("version", ["1.33.0", kubernetes_validate.latest_version()])
@pytest.mark.parametrize("crd", crds(), ids=lambda c: c["metadata"]["name"])
def test_the_crds_validate_as_kubernetes_objects(crd: dict[str, Any], version: str) -> None:
    kubernetes_validate.validate(crd, version, strict=True)


@pytest.mark.parametrize("crd", crds(), ids=lambda c: c["metadata"]["name"])
def test_the_schemas_are_structural(crd: dict[str, Any]) -> None:
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    assert list(structural_problems(schema)) == []
    metadata = schema["properties"]["metadata"]
    assert set(metadata.get("properties") or {}) <= {"name", "generateName"}


def test_the_structural_check_finds_what_the_server_refuses() -> None:
    broken = {"type": "object", "properties": {
        "a": {"description": "no type"},
        "b": {"type": "object", "properties": {"x": {"type": "string"}},
              "additionalProperties": False},
        "c": {"type": "number", "exclusiveMinimum": 0},
        "d": {"anyOf": [{"type": "string", "description": "inside"}, {"type": "integer"}]},
        "e": {"$ref": "#/$defs/E", "type": "object"}}}
    assert {p.split(":")[0] for p in structural_problems(broken)} == {
        ".a", ".b", ".c", ".d", ".d.anyOf[0]", ".d.anyOf[1]", ".e"}


@pytest.mark.parametrize("crd", crds(), ids=lambda c: c["metadata"]["name"])
def test_the_printer_columns_show_fields_of_the_schema(crd: dict[str, Any]) -> None:
    (version,) = crd["spec"]["versions"]
    spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    columns = version["additionalPrinterColumns"]
    for column in columns:
        path = column["jsonPath"]
        if path.startswith(".spec."):
            assert path.removeprefix(".spec.") in spec
    names = [c["name"] for c in columns]
    assert names[-4:] == ["dry_run", "Accepted", "Reason", "Age"]
    assert "interval_seconds" in names
    assert ("alpha" in names) == ("alpha" in spec)  # the kind's own settings, alpha if it has one


# --- the API server and policyd agree -------------------------------------------------------------

@pytest.mark.parametrize("path", POLICY_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_policy_files_are_valid_resources(path: Path) -> None:
    """`kubectl apply -f policies/flowcon.yaml` works unchanged."""
    for document in documents(path):
        assert api_accepts(document), document["metadata"]["name"]
        assert not check_resource(document, str(path)).problems


BASE = {"apiVersion": "policyd.io/v1alpha1", "metadata": {"name": "p"}}
REFUSED_BY_BOTH = [
    ("FlowCon", {"alpha": 0}),
    ("FlowCon", {"alpha": -1}),
    ("FlowCon", {"mode": "share"}),
    ("FlowCon", {"alpah": 0.1}),
    ("FlowCon", {"interval_seconds": 0.5}),
    ("FlowCon", {"selector": {"namespaces": "ml"}}),
    ("SpeCon", {"balance_factor": 0}),
    ("SpeCon", {"balance_factor": "often"}),
    ("SpeCon", {"weights": {"pc": 2, "wc": 1.5, "cc": 0}}),
    ("SpeCon", {"request_scope": "everywhere"}),
    ("SpeCon", {"migration_grace_seconds": 4000}),
]
REFUSED_BY_POLICYD_ONLY = [  # rules across fields: no OpenAPI schema says them
    ("FlowCon", {"alpha": 1.5}),
    ("FlowCon", {"interval_seconds": 60, "max_interval_seconds": 30}),
    ("SpeCon", {"weights": {"pc": 1, "wc": 2, "cc": 1}}),
]
ACCEPTED_BY_BOTH = [
    ("FlowCon", {}),
    ("FlowCon", {"alpha": 2, "evaluation": {"normalization": "absolute"}}),
    ("SpeCon", {"balance_factor": 3}),
    ("SpeCon", {"balance_factor": "auto", "rebalance": False}),
]


def resource(kind: str, spec: dict[str, Any], name: str = "p") -> dict[str, Any]:
    return {**BASE, "kind": kind, "metadata": {"name": name}, "spec": spec}


@pytest.mark.parametrize(("kind", "spec"), REFUSED_BY_BOTH, ids=str)
def test_what_policyd_refuses_the_api_server_refuses(kind: str, spec: dict[str, Any]) -> None:
    document = resource(kind, spec)
    assert check_resource(document, "p").problems
    assert not api_accepts(document)


@pytest.mark.parametrize(("kind", "spec"), REFUSED_BY_POLICYD_ONLY, ids=str)
def test_cross_field_rules_are_policyds(kind: str, spec: dict[str, Any]) -> None:
    """Accepted by the API server; policyd refuses it and says why in the status."""
    document = resource(kind, spec)
    assert api_accepts(document)
    assert check_resource(document, "p").problems


@pytest.mark.parametrize(("kind", "spec"), ACCEPTED_BY_BOTH, ids=str)
def test_what_policyd_accepts_the_api_server_accepts(kind: str, spec: dict[str, Any]) -> None:
    document = resource(kind, spec)
    assert api_accepts(document)
    assert not check_resource(document, "p").problems


@pytest.mark.parametrize("name", ["Upper", "a" * 64, "dots.in.it"])
def test_names_policyd_refuses_the_api_server_refuses(name: str) -> None:
    document = resource("FlowCon", {}, name)
    assert check_resource(document, "p").problems
    assert not api_accepts(document)
