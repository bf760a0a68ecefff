"""Policy files: YAML in, validated policy documents (or every problem with them) out.

Theory of operation. A policy file holds one or more YAML documents (`---`), each
`apiVersion: policyd.io/v1alpha1`, a `kind` from `policyd.engine.registry.KINDS`, `metadata.name`
and a `spec`. `yamlpos` parses the text and records the line of every key; `loader` picks the
document model by `kind` (so errors speak only of that kind) and validates; `messages` rewrites
pydantic's errors plainly (value given, what is allowed, did-you-mean); `errors` holds the
`Problem` value and its one-line format. `schema` derives the JSON Schema editors use from the
same models, so the schema cannot disagree with the validator.

The same parts check the daemon's settings file (`policyd.daemon.settings_file`): `validate`
collects every error of a document, cross-field ones too, and the problems read the same.

This package reads files and parses YAML; it never reads the environment, the clock or the
network, and it imports nothing from policyd but `engine`, `model` and `clients.settings`.
"""

from policyd.policy.errors import PolicyError, Problem
from policyd.policy.loader import (
    Checked,
    check_files,
    load_policies,
    load_policies_text,
    summary,
    validate_files,
)
from policyd.policy.schema import json_schema, json_schema_text

__all__ = [
    "Checked",
    "PolicyError",
    "Problem",
    "check_files",
    "json_schema",
    "json_schema_text",
    "load_policies",
    "load_policies_text",
    "summary",
    "validate_files",
]
