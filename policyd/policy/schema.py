"""The JSON Schema (draft 2020-12) of policy documents, derived from the registry's models.

Editors use it (`# yaml-language-server: $schema=./policy.schema.json`) for completion and
inline checks; `policies/policy.schema.json` is this schema, written by
`policyd schema > policies/policy.schema.json` (a test keeps it from going stale). The models
stay the one source of truth: the validator and the schema cannot disagree on a field.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Union

from pydantic import Field, TypeAdapter

from policyd.engine.registry import KINDS

DIALECT = "https://json-schema.org/draft/2020-12/schema"


def document_type() -> Any:
    """`Annotated[Union[<every kind's document model>], Field(discriminator="kind")]`."""
    models = tuple(kind.document for kind in KINDS.values())
    if len(models) == 1:
        return models[0]
    return Annotated[Union[models], Field(discriminator="kind")]  # noqa: UP007


def json_schema() -> dict[str, Any]:
    """The schema of one policy document (any registered kind)."""
    schema = TypeAdapter(document_type()).json_schema(by_alias=True, mode="validation")
    return {
        "$schema": DIALECT,
        "title": "policyd policy document",
        "description": (
            "One policyd policy (a YAML document: apiVersion, kind, metadata, spec). "
            "Generated from policyd's models; see policies/README.md for every field."
        ),
        **schema,
    }


def json_schema_text() -> str:
    """`json_schema()` as written to policies/policy.schema.json: indented, sorted keys."""
    return json.dumps(json_schema(), indent=2, sort_keys=True) + "\n"
