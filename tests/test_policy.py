"""Policy loading and validation: the shipped examples load, every broken document in
tests/policy_cases/ gives exactly the expected lines, and the shipped JSON Schema is current."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import yaml

from policyd.engine.registry import KINDS
from policyd.engine.spec import API_VERSION, PolicyDocument
from policyd.policy import (
    PolicyError,
    Problem,
    json_schema,
    json_schema_text,
    load_policies,
    load_policies_text,
    summary,
    validate_files,
)

ROOT = Path(__file__).resolve().parent.parent
POLICIES = ROOT / "policies"
CASES = Path(__file__).resolve().parent / "policy_cases"
EXAMPLES = sorted(POLICIES.glob("*.yaml"))

REGENERATE = "policyd schema > policies/policy.schema.json"


# --- the shipped examples ---------------------------------------------------------------------


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_example_policy_is_valid(path: Path) -> None:
    policies = load_policies(path)
    assert policies
    assert all(isinstance(p, PolicyDocument) for p in policies)


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_example_policy_points_editors_at_the_schema(path: Path) -> None:
    first = path.read_text(encoding="utf-8").splitlines()[0]
    assert first == "# yaml-language-server: $schema=./policy.schema.json"


def test_examples_are_valid_together_with_unique_names() -> None:
    policies, problems = validate_files(EXAMPLES)
    assert [str(p) for p in problems] == []
    assert len({p.name for p in policies}) == len(policies)
    assert {p.kind for p in policies} == set(KINDS)


def test_thesis_examples_hold_the_thesis_values() -> None:
    [flowcon] = load_policies(POLICIES / "thesis-flowcon.yaml")
    [specon] = load_policies(POLICIES / "thesis-specon.yaml")
    assert (flowcon.kind, flowcon.spec.alpha, flowcon.spec.interval_seconds) == (  # type: ignore[attr-defined]
        "FlowCon", 0.05, 20)
    assert (specon.kind, specon.spec.alpha, specon.spec.interval_seconds) == (  # type: ignore[attr-defined]
        "SpeCon", 0.01, 30)
    weights = specon.spec.weights  # type: ignore[attr-defined]
    assert (weights.pc, weights.wc, weights.cc) == (2, 1.5, 1)


def test_readme_documents_every_field() -> None:
    readme = (POLICIES / "README.md").read_text(encoding="utf-8")

    def paths(model: type, prefix: str = "") -> set[str]:
        found = set()
        for name, info in model.model_fields.items():  # type: ignore[attr-defined]
            path = prefix + (info.alias or name)
            found.add(path)
            if isinstance(info.annotation, type) and hasattr(info.annotation, "model_fields"):
                found |= paths(info.annotation, path + ".")
        return found

    every = set().union(*(paths(kind.document) for kind in KINDS.values()))
    documented = {path.removeprefix("spec.") for path in every}
    missing = sorted(path for path in documented if f"| `{path}` |" not in readme)
    assert missing == [], f"policies/README.md does not document: {', '.join(missing)}"


# --- broken documents: exact messages ---------------------------------------------------------

CASE_TABLE: list[tuple[str, list[str], list[str]]] = [
    ("range", ["range.yaml"], [
        'range.yaml:7: policy "flowcon-range": spec.alpha: 0 is not allowed: '
        "must be greater than 0",
        'range.yaml:8: policy "flowcon-range": spec.interval_seconds: 100000 is not allowed: '
        "must be at most 86400",
        'range.yaml:9: policy "flowcon-range": spec.max_interval_seconds: 100000 is not allowed: '
        "must be at most 86400",
        'range.yaml:10: policy "flowcon-range": spec.beta: 0.5 is not allowed: must be at least 1',
        'range.yaml:11: policy "flowcon-range": spec.window_intervals: 1 is not allowed: '
        "must be at least 2",
        'range.yaml:13: policy "flowcon-range": spec.safety.cooldown_seconds: -1 is not allowed: '
        "must be at least 0",
    ]),
    ("enum", ["enum.yaml"], [
        "enum.yaml:6: policy \"flowcon-enum\": spec.mode: 'soft' is not one of: shares, quota",
        "enum.yaml:8: policy \"flowcon-enum\": spec.evaluation.direction: 'down' is not one of: "
        "minimize, maximize",
    ]),
    ("weights-order", ["weights-order.yaml"], [
        'weights-order.yaml:8: policy "specon-weights": spec.weights: '
        "pc (1) must be greater than wc (1.5)",
    ]),
    ("unknown-field", ["unknown-field.yaml"], [
        'unknown-field.yaml:6: policy "flowcon-typo": spec.intervl_seconds: unknown field; '
        "did you mean 'interval_seconds'?",
        'unknown-field.yaml:7: policy "flowcon-typo": spec.colour: unknown field; allowed: '
        "evaluation, selector, dry_run, safety, window_intervals, priority, on_target, "
        "on_converged, converged_below, stop_grace_seconds, alpha, "
        "interval_seconds, max_interval_seconds, beta, mode",
        'unknown-field.yaml:14: policy "specon-typo": metadata.labels: unknown field; '
        "allowed: name",
        'unknown-field.yaml:16: policy "specon-typo": spec.beta: unknown field; allowed: '
        "evaluation, selector, dry_run, safety, window_intervals, priority, on_target, "
        "on_converged, converged_below, stop_grace_seconds, migration_grace_seconds, alpha, "
        "interval_seconds, weights, balance_factor, rebalance, request_scope",
    ]),
    ("unknown-kind", ["unknown-kind.yaml"], [
        "unknown-kind.yaml:2: policy \"kind-case\": kind: 'Flowcon' is not one of: "
        "FlowCon, SpeCon, Predictive, Deadline, QoE, FlowCon2; did you mean 'FlowCon'?",
        "unknown-kind.yaml:8: policy \"Not_A_Name\": kind: 'Deployment' is not one of: "
        "FlowCon, SpeCon, Predictive, Deadline, QoE, FlowCon2",
        "unknown-kind.yaml:10: policy \"Not_A_Name\": metadata.name: 'Not_A_Name' is not "
        "allowed: must be lowercase letters, digits and '-', starting and ending with a letter "
        "or digit (a DNS label)",
        'unknown-kind.yaml:13: policy "kind-missing": kind: required field is missing; '
        "one of: FlowCon, SpeCon, Predictive, Deadline, QoE, FlowCon2",
    ]),
    ("api-version", ["api-version.yaml"], [
        "api-version.yaml:1: policy \"api-wrong\": apiVersion: 'policyd.io/v1' is not "
        f"supported; the supported version is {API_VERSION}",
        'api-version.yaml:7: policy "api-missing": apiVersion: required field is missing; '
        f"the supported version is {API_VERSION}",
        'api-version.yaml:12: policy "api-snake-case": apiVersion: required field is missing; '
        f"the supported version is {API_VERSION}",
        'api-version.yaml:12: policy "api-snake-case": api_version: unknown field; '
        "did you mean 'apiVersion'?",
    ]),
    ("syntax", ["syntax.yaml"], [
        "syntax.yaml:4:15: YAML syntax error: mapping values are not allowed here",
    ]),
    ("syntax-after-a-good-document", ["syntax-later.yaml"], [
        'syntax-later.yaml:7: policy "before-the-error": spec.alpha: -1 is not allowed: '
        "must be greater than 0",
        "syntax-later.yaml:13:1: YAML syntax error: expected ',' or ']', but got '<stream end>' "
        "(while parsing a flow sequence that starts on line 12)",
    ]),
    ("yaml-tag", ["yaml-tag.yaml"], [
        "yaml-tag.yaml:6:10: document 1: YAML error: could not determine a constructor for "
        "the tag '!percent'",
    ]),
    ("empty", ["empty.yaml"], [
        "empty.yaml: no policy documents (the file is empty or only comments)",
    ]),
    ("comments-only", ["comments-only.yaml"], [
        "comments-only.yaml: no policy documents (the file is empty or only comments)",
    ]),
    ("not-mapping", ["not-mapping.yaml"], [
        "not-mapping.yaml:1: document 1: a policy document must be a mapping with apiVersion, "
        "kind, metadata and spec; got a list",
        "not-mapping.yaml:4: document 2: a policy document must be a mapping with apiVersion, "
        "kind, metadata and spec; got 'just a string'",
    ]),
    ("duplicate-name", ["duplicate-name-a.yaml", "duplicate-name-b.yaml"], [
        'duplicate-name-b.yaml:10: policy "shared-name": metadata.name: duplicate policy name; '
        "first defined at duplicate-name-a.yaml:4",
    ]),
    ("duplicate-key", ["duplicate-key.yaml"], [
        'duplicate-key.yaml:8: policy "flowcon-dup-key": spec.alpha: given twice '
        "(lines 6 and 8); YAML would silently keep the last one",
    ]),
    ("keys-not-strings", ["keys.yaml"], [
        'keys.yaml:7: policy "flowcon-keys": spec: key 1 is not allowed: keys must be strings',
        'keys.yaml:10: policy "flowcon-keys": spec.selector.labels: key 3 is not allowed: '
        "must be a string",
    ]),
    ("metadata", ["metadata.yaml"], [
        "metadata.yaml:3: document 1: metadata.name: required field is missing",
        "metadata.yaml:6: document 2: spec: required field is missing",
        "metadata.yaml:9: document 2: metadata.name: '' is not allowed: must not be empty",
        'metadata.yaml:14: policy "a-policy-name-that-goes-on-and-on-well-past-the-sixty-three-'
        "character-limit\": metadata.name: 'a-policy-name-that-goes-on-and-on-wel...' is not "
        "allowed: must be at most 63 characters long",
        "metadata.yaml:19: document 4: metadata: null is not allowed: must be a mapping",
        "metadata.yaml:20: document 4: spec: a list is not allowed: must be a mapping",
    ]),
    ("model-validators", ["relative-alpha.yaml"], [
        'relative-alpha.yaml:9: policy "flowcon-percent": spec: alpha (5) must be below 1 with '
        "relative normalization: it is a fraction (0.05 = 5%)",
        'relative-alpha.yaml:17: policy "flowcon-interval-cap": spec: max_interval_seconds (30) '
        "must be at least interval_seconds (60)",
    ]),
    ("balance-factor", ["balance-factor.yaml"], [
        "balance-factor.yaml:6: policy \"specon-bf-word\": spec.balance_factor: 'fast' is not "
        "allowed: must be 'auto' or a whole number >= 1",
        'balance-factor.yaml:13: policy "specon-bf-fraction": spec.balance_factor: 1.5 is not '
        "allowed: must be 'auto' or a whole number >= 1",
        'balance-factor.yaml:20: policy "specon-bf-zero": spec.balance_factor: 0 is not '
        "allowed: must be 'auto' or a whole number >= 1",
    ]),
    ("types", ["types.yaml"], [
        "types.yaml:6: policy \"specon-types\": spec.interval_seconds: '30s' is not allowed: "
        "must be a number",
        "types.yaml:7: policy \"specon-types\": spec.window_intervals: 'ten' is not allowed: "
        "must be a whole number",
        "types.yaml:8: policy \"specon-types\": spec.dry_run: 'maybe' is not allowed: "
        "must be true or false",
        'types.yaml:9: policy "specon-types": spec.rebalance: a list is not allowed: '
        "must be true or false",
        "types.yaml:10: policy \"specon-types\": spec.evaluation: 'minimize' is not allowed: "
        "must be a mapping",
        'types.yaml:12: policy "specon-types": spec.selector.namespaces[1]: 42 is not allowed: '
        "must be a string",
        'types.yaml:14: policy "specon-types": spec.selector.labels.team: 7 is not allowed: '
        "must be a string",
    ]),
    ("many-problems-at-once", ["many-problems.yaml"], [
        'many-problems.yaml:7: policy "flowcon-many": spec.alpha: 0 is not allowed: '
        "must be greater than 0",
        'many-problems.yaml:9: policy "flowcon-many": spec.max_interval_seconds: 100000 is not '
        "allowed: must be at most 86400",
        "many-problems.yaml:10: policy \"flowcon-many\": spec.mode: 'hard' is not one of: "
        "shares, quota",
        'many-problems.yaml:12: policy "flowcon-many": spec.selector.namespace: unknown field; '
        "did you mean 'namespaces'?",
        'many-problems.yaml:20: policy "specon-many": spec.weights: pc (2) must be greater '
        "than wc (2)",
        "many-problems.yaml:22: policy \"specon-many\": spec.balance_factor: 'some' is not "
        "allowed: must be 'auto' or a whole number >= 1",
        'many-problems.yaml:24: policy "specon-many": spec.safety.max_migrations_per_cycle: -1 '
        "is not allowed: must be at least 0",
        'many-problems.yaml:25: policy "specon-many": spec.safety.cooldown_secs: unknown field; '
        "did you mean 'cooldown_seconds'?",
        "many-problems.yaml:27: policy \"specon-many-2\": apiVersion: 'policyd.io/v1alpha2' is "
        f"not supported; the supported version is {API_VERSION}",
        'many-problems.yaml:32: policy "specon-many-2": spec.migration_grace_seconds: 7200 is '
        "not allowed: must be at most 3600",
    ]),
]


@pytest.mark.parametrize(("files", "expected"), [(f, e) for _, f, e in CASE_TABLE],
                         ids=[case_id for case_id, _, _ in CASE_TABLE])
def test_broken_documents_report_exact_lines(
    files: list[str], expected: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(CASES)
    _, problems = validate_files(files)
    assert [str(p) for p in problems] == expected


def test_every_case_file_is_in_the_table() -> None:
    used = {name for _, files, _ in CASE_TABLE for name in files}
    assert sorted(p.name for p in CASES.glob("*.yaml")) == sorted(used)


def test_valid_documents_of_a_file_with_problems_are_still_returned(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(CASES)
    policies, problems = validate_files(["duplicate-name-a.yaml", "duplicate-name-b.yaml"])
    assert [p.name for p in policies] == ["shared-name", "other-name", "shared-name"]
    assert len(problems) == 1


# --- files that cannot be read ----------------------------------------------------------------


def test_missing_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    _, problems = validate_files(["nope.yaml"])
    assert [str(p) for p in problems] == ["nope.yaml: no such file"]


def test_directory(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "policies").mkdir()
    monkeypatch.chdir(tmp_path)
    _, problems = validate_files(["policies"])
    assert [str(p) for p in problems] == ["policies: is a directory, not a policy file"]


def test_not_utf8(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "latin1.yaml").write_bytes(b"kind: Fl\xf6wCon\n")
    monkeypatch.chdir(tmp_path)
    _, problems = validate_files(["latin1.yaml"])
    assert [str(p) for p in problems] == [
        "latin1.yaml: not UTF-8 text (byte 8: invalid start byte)"]


def test_a_directory_is_not_a_policy_file(monkeypatch: pytest.MonkeyPatch,
                                          tmp_path: Path) -> None:
    (tmp_path / "policies.d").mkdir()
    monkeypatch.chdir(tmp_path)
    _, problems = validate_files(["policies.d"])
    assert [str(p) for p in problems] == ["policies.d: is a directory, not a policy file"]


def test_every_file_is_checked_even_after_one_fails(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(CASES)
    _, problems = validate_files(["nope.yaml", "enum.yaml", "weights-order.yaml"])
    assert [p.file for p in problems] == [
        "nope.yaml", "enum.yaml", "enum.yaml", "weights-order.yaml"]


# --- the loaders' API -------------------------------------------------------------------------

GOOD = """\
apiVersion: policyd.io/v1alpha1
kind: FlowCon
metadata: {name: flowcon-a}
spec: {alpha: 0.1}
---
apiVersion: policyd.io/v1alpha1
kind: SpeCon
metadata: {name: specon-a}
spec: {}
"""


def test_load_text_returns_each_kinds_model() -> None:
    policies = load_policies_text(GOOD, "inline.yaml")
    assert [type(p) for p in policies] == [KINDS["FlowCon"].document, KINDS["SpeCon"].document]
    assert policies[0].spec.alpha == 0.1  # type: ignore[attr-defined]


def test_loaders_raise_policy_error_with_every_problem() -> None:
    text = GOOD.replace("alpha: 0.1", "alpha: 0").replace("spec: {}", "spec: {beta: 2}")
    with pytest.raises(PolicyError) as caught:
        load_policies_text(text, "inline.yaml")
    assert [p.field for p in caught.value.problems] == ["spec.alpha", "spec.beta"]
    assert str(caught.value).splitlines() == [str(p) for p in caught.value.problems]


def test_load_text_rejects_a_name_used_twice() -> None:
    with pytest.raises(PolicyError) as caught:
        load_policies_text(GOOD.replace("specon-a", "flowcon-a"), "inline.yaml")
    assert [str(p) for p in caught.value.problems] == [
        'inline.yaml:8: policy "flowcon-a": metadata.name: duplicate policy name; '
        "first defined at inline.yaml:3"]


def test_a_character_yaml_forbids_is_a_syntax_error() -> None:
    with pytest.raises(PolicyError) as caught:
        load_policies_text(GOOD.replace("spec: {}", "spec: {}\x00"), "inline.yaml")
    assert [str(p) for p in caught.value.problems] == [
        "inline.yaml:9:9: YAML syntax error: character #x0000 is not allowed "
        "(special characters are not allowed)"]


def test_load_policies_raises_for_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(PolicyError) as caught:
        load_policies(tmp_path / "missing.yaml")
    assert caught.value.problems[0].message == "no such file"


@pytest.mark.parametrize(("problem", "line"), [
    (Problem(file="a.yaml", message="no such file"), "a.yaml: no such file"),
    (Problem(file="a.yaml", line=4, column=7, message="YAML syntax error: x"),
     "a.yaml:4:7: YAML syntax error: x"),
    (Problem(file="a.yaml", line=3, document=2, field="spec", message="m"),
     "a.yaml:3: document 2: spec: m"),
    (Problem(file="a.yaml", line=3, policy="p", document=2, field="spec.alpha", message="m"),
     'a.yaml:3: policy "p": spec.alpha: m'),
], ids=["file", "syntax", "unnamed-document", "named-policy"])
def test_problem_format(problem: Problem, line: str) -> None:
    assert str(problem) == line


def test_problem_rejects_a_column_without_a_line() -> None:
    with pytest.raises(ValueError, match="column"):
        Problem(file="a.yaml", column=3, message="m")


@pytest.mark.parametrize(("kinds", "files", "line"), [
    (["FlowCon", "FlowCon", "SpeCon"], 2,
     "3 policies in 2 files are valid (FlowCon: 2, SpeCon: 1)"),
    (["SpeCon"], 1, "1 policy in 1 file is valid (SpeCon: 1)"),
], ids=["plural", "singular"])
def test_summary(kinds: list[str], files: int, line: str) -> None:
    policies = [
        KINDS[kind].document.model_validate({
            "apiVersion": API_VERSION, "kind": kind, "metadata": {"name": f"p{i}"}, "spec": {}})
        for i, kind in enumerate(kinds)
    ]
    assert summary(policies, [f"f{i}.yaml" for i in range(files)]) == line


# --- the JSON Schema --------------------------------------------------------------------------


def test_shipped_schema_is_current() -> None:
    shipped = (POLICIES / "policy.schema.json").read_text(encoding="utf-8")
    assert shipped == json_schema_text(), (
        f"policies/policy.schema.json is stale; regenerate it with: {REGENERATE}")


def test_schema_structure() -> None:
    schema = json_schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["title"]
    assert "$id" not in schema
    assert schema["discriminator"]["propertyName"] == "kind"
    refs = [variant["$ref"].removeprefix("#/$defs/") for variant in schema["oneOf"]]
    assert refs == [kind.document.__name__ for kind in KINDS.values()]
    for kind_name, ref in zip(KINDS, refs, strict=True):
        document = schema["$defs"][ref]
        assert document["properties"]["apiVersion"]["const"] == API_VERSION
        assert document["properties"]["kind"]["const"] == kind_name
        assert set(document["required"]) == {"apiVersion", "kind", "metadata", "spec"}
        assert document["additionalProperties"] is False
    assert schema["$defs"]["Metadata"]["required"] == ["name"]


def test_schema_accepts_the_examples() -> None:
    validator = jsonschema.Draft202012Validator(json_schema())
    for path in EXAMPLES:
        for document in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            validator.validate(json.loads(json.dumps(document)))
