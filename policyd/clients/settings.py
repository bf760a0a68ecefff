"""What every settings model shares: one strict base, the common field types, one error shape.

The daemon's settings file (`policyd.daemon.settings`) is a tree of these models, and the
Docker, Kubernetes and Alertmanager settings are built on its sections, so each field, its
default and its check are written once, in the section that owns it. The models live in
their own layers (the actuators' and alerts' settings may not import the daemon); this module
sits below all of them.

* `SettingsModel`: frozen, unknown keys rejected, no NaN or infinity. Read from a settings
  file (validation context `FROM_FILE`), a key given as null (or with no value) takes the
  field's default, as an empty section or a commented-out list does.
* `SettingsPath`: a file path; read from a settings file it is resolved against that file's
  directory (validation context `BASE`), so a settings file and its files move together.
* `HttpUrl`: an http:// or https:// URL; `ReadOnly`: makes a mapping field read-only.
* `show`: a value quoted as the user wrote it, for messages.
* `field_problems`: how a model's own check (one spanning several fields) reports several
  problems at once, each at its own field; `policyd.policy.messages` turns it into one
  problem per field, with that field's line.

No I/O here: paths are only joined (and `~` expanded), never opened.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationInfo,
    model_validator,
)
from pydantic_core import PydanticCustomError

FROM_FILE = "from_file"
"""Validation context key: True when the data was read from a settings file."""
BASE = "base"
"""Validation context key: the directory relative paths are resolved against."""
FIELD_PROBLEMS = "field_problems"
"""The pydantic error type of `field_problems`."""


class SettingsModel(BaseModel):
    """Base of every settings model (see the module docstring)."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False,
                              validate_default=True)

    @model_validator(mode="before")
    @classmethod
    def _null_is_default(cls, data: Any, info: ValidationInfo) -> Any:
        if not (info.context or {}).get(FROM_FILE) or not isinstance(data, dict):
            return data
        known = {info_.alias or name for name, info_ in cls.model_fields.items()}
        return {k: v for k, v in data.items() if v is not None or k not in known}


def show(value: object) -> str:
    """A value as the user wrote it, short: 'soft', 1.5, true, null, a list (every message
    about a user's file quotes values this way: `policyd.policy.messages`)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return repr(value if len(value) <= 40 else value[:37] + "...")
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return str(value)


def field_problems(problems: Sequence[tuple[tuple[str, ...], str]]) -> PydanticCustomError:
    """A model validator's error for several problems at once: (field path inside the model,
    message) each. Raise it from a `model_validator(mode="after")`."""
    summary = "; ".join(f"{'.'.join(path)}: {message}" if path else message
                        for path, message in problems)
    return PydanticCustomError(FIELD_PROBLEMS, "{summary}",
                               {"summary": summary, "problems": tuple(problems)})


def _http_url(url: str) -> str:
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"{show(url)} must start with http:// or https://")
    return url


def _a_path(value: Any) -> Any:
    if isinstance(value, str) and not value:
        raise ValueError("'' is not allowed: must be a file path")
    return value


def _resolved(path: Path, info: ValidationInfo) -> Path:
    base = (info.context or {}).get(BASE)
    if base is None:
        return path
    try:
        path = path.expanduser()
    except RuntimeError:  # `~user` of a user this machine does not know
        raise ValueError(f"{str(path)!r}: no such user's home directory") from None
    return path if path.is_absolute() else Path(os.path.normpath(Path(base) / path))


HttpUrl = Annotated[str, AfterValidator(_http_url)]
"""An http:// or https:// URL (a base URL: the client adds the API paths)."""

SettingsPath = Annotated[Path, BeforeValidator(_a_path), AfterValidator(_resolved)]
"""A file; relative to the settings file's directory when read from one."""

NonEmptyStr = Annotated[str, Field(min_length=1)]


def _read_only(value: Mapping[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType(dict(value))


ReadOnly = AfterValidator(_read_only)
"""`Annotated[Mapping[str, V], ReadOnly]`: a mapping nobody can change once validated."""
