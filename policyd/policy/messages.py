"""pydantic validation errors -> plain messages that say what was given and what is allowed.

pydantic's own wording ("Input should be greater than 0", "Extra inputs are not permitted") is
rewritten here, field by field, using the model itself to find what is allowed: the keys a model
accepts (for a did-you-mean), the values of a `Literal`, the members of a union. Errors raised
by a model's own validator (`ValueError` in a `model_validator`) already speak plainly; they are
reported at the model's path (`spec`, `spec.weights`), pointing at the line of the field the
message starts with when there is one (`alpha (1.5) must be below 1 ...` -> the `alpha:` line).

A model's check that finds several problems at once, each at its own field
(`policyd.clients.settings.field_problems`, used by the settings models), becomes one problem
per field.

This module does no I/O and knows no YAML: it maps (model, errors) to `FieldProblem`s.
"""

from __future__ import annotations

import difflib
import types
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import annotated_types
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails

from policyd.clients.settings import FIELD_PROBLEMS, show
from policyd.engine.spec import API_VERSION

Loc = tuple[Hashable, ...]

__all__ = ["FieldProblem", "did_you_mean", "explain", "field_name", "number", "show",
           "unknown_key"]


@dataclass(frozen=True, kw_only=True)
class FieldProblem:
    path: Loc
    """Where the problem is, as keys into the document (`("spec", "alpha")`)."""
    message: str
    point: Loc | None = None
    """A more precise place for the line number than `path`, when one is known."""


def field_name(path: Iterable[Hashable]) -> str:
    """`spec.selector.namespaces[0]` for `("spec", "selector", "namespaces", 0)`."""
    text = ""
    for part in path:
        if isinstance(part, int) and not isinstance(part, bool):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return text


def number(value: object) -> str:
    """A bound from pydantic's context: 0.0 -> 0, 86400.0 -> 86400, 0.5 -> 0.5."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def did_you_mean(word: str, choices: Sequence[str]) -> str | None:
    """The choice `word` was probably meant to be (case-insensitively), if one is close."""
    folded = {choice.lower(): choice for choice in choices}
    close = difflib.get_close_matches(word.lower(), list(folded), n=1)
    return folded[close[0]] if close else None


def unknown_key(key: Hashable, allowed: Sequence[str]) -> str:
    """`unknown field; did you mean 'x'?`, or the allowed keys when none is close."""
    close = did_you_mean(str(key), allowed)
    if close is not None:
        return f"unknown field; did you mean '{close}'?"
    return f"unknown field; allowed: {', '.join(allowed)}"


def explain(model: type[BaseModel], errors: Sequence[ErrorDetails]) -> list[FieldProblem]:
    """One plain problem per pydantic error (one per field for union members' errors)."""
    problems: list[FieldProblem] = []
    unions_done: set[Loc] = set()
    for error in errors:
        loc: Loc = tuple(error["loc"])
        if error["type"] == FIELD_PROBLEMS:  # a model's own check, naming its fields
            problems.extend(FieldProblem(path=(*loc, *path), message=message)
                            for path, message in (error.get("ctx") or {}).get("problems", ()))
            continue
        depth, info = _locate(model, loc)
        if (info is not None and depth < len(loc) and _is_union(info.annotation)
                and _as_model(info.annotation) is None):
            # One error per union member ("literal['auto']", "int"): say it once, plainly.
            field_loc = loc[:depth]
            if field_loc not in unions_done:
                unions_done.add(field_loc)
                members = " or ".join(_describe(m) for m in get_args(info.annotation))
                problems.append(FieldProblem(
                    path=field_loc,
                    message=f"{show(error['input'])} is not allowed: must be {members}"))
            continue
        problems.append(_explain_one(model, loc, info if depth == len(loc) else None, error))
    return problems


def _explain_one(model: type[BaseModel], loc: Loc, info: FieldInfo | None,
                 error: ErrorDetails) -> FieldProblem:
    kind = error["type"]
    given = show(error["input"])
    ctx: dict[str, Any] = dict(error.get("ctx") or {})
    allowed = _literal_values(info)
    if loc == ("apiVersion",) and kind in ("missing", "literal_error"):
        head = "required field is missing" if kind == "missing" else f"{given} is not supported"
        return FieldProblem(path=loc, message=f"{head}; the supported version is {API_VERSION}")
    if kind == "invalid_key":  # a YAML key that is not a string (`1:`, `null:`)
        return FieldProblem(path=loc[:-1], point=(*loc[:-1], error["input"]),
                            message=f"key {given} is not allowed: keys must be strings")
    if loc[-1:] == ("[key]",):  # a mapping key of the wrong type, e.g. in selector.labels
        requirement = _requirement(kind, ctx, error["msg"])
        return FieldProblem(path=loc[:-2], point=loc[:-1],
                            message=f"key {given} is not allowed: {requirement}")
    if kind == "missing":
        tail = f"; one of: {', '.join(allowed)}" if allowed else ""
        return FieldProblem(path=loc, message=f"required field is missing{tail}")
    if kind == "extra_forbidden":
        owner = _model_at(model, loc[:-1])
        keys = _keys(owner) if owner is not None else []
        return FieldProblem(path=loc, message=unknown_key(loc[-1], keys))
    if kind == "literal_error":
        values = ", ".join(allowed) if allowed else str(ctx.get("expected", "?"))
        return FieldProblem(path=loc, message=f"{given} is not one of: {values}")
    if kind in ("value_error", "assertion_error"):
        return _from_validator(model, loc, str(ctx.get("error", error["msg"])))
    requirement = _requirement(kind, ctx, error["msg"])
    return FieldProblem(path=loc, message=f"{given} is not allowed: {requirement}")


_TYPES = {
    "int_parsing": "must be a whole number",
    "int_type": "must be a whole number",
    "int_from_float": "must be a whole number",
    "float_parsing": "must be a number",
    "float_type": "must be a number",
    "finite_number": "must be a finite number",
    "bool_parsing": "must be true or false",
    "bool_type": "must be true or false",
    "string_type": "must be a string",
    "model_type": "must be a mapping",
    "model_attributes_type": "must be a mapping",
    "dict_type": "must be a mapping",
    "list_type": "must be a list",
    "tuple_type": "must be a list",
    "path_type": "must be a file path",
}

_BOUNDS = {
    "greater_than": ("gt", "must be greater than"),
    "greater_than_equal": ("ge", "must be at least"),
    "less_than": ("lt", "must be less than"),
    "less_than_equal": ("le", "must be at most"),
}

_PATTERNS = {
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$": (
        "must be lowercase letters, digits and '-', starting and ending with a letter or digit "
        "(a DNS label)"
    ),
}


def _requirement(kind: str, ctx: dict[str, Any], pydantic_message: str) -> str:
    if kind in _TYPES:
        return _TYPES[kind]
    if kind in _BOUNDS:
        key, words = _BOUNDS[kind]
        return f"{words} {number(ctx.get(key))}"
    if kind == "string_too_short":
        least = ctx.get("min_length", 1)
        return "must not be empty" if least == 1 else f"must be at least {least} characters long"
    if kind == "string_too_long":
        return f"must be at most {ctx.get('max_length')} characters long"
    if kind == "string_pattern_mismatch":
        pattern = str(ctx.get("pattern"))
        return _PATTERNS.get(pattern, f"must match the regular expression {pattern}")
    return pydantic_message.replace("Input should be ", "must be ", 1)


def _from_validator(model: type[BaseModel], loc: Loc, message: str) -> FieldProblem:
    """A model validator's message, at the model's path; its line is that of the field the
    message starts with (`alpha (1.5) must ...`) when the document has one."""
    owner = _model_at(model, loc)
    point = None
    if owner is not None:
        first = message.split(" ", 1)[0]
        if first in _keys(owner):
            point = (*loc, first)
    return FieldProblem(path=loc, message=message, point=point)


# --- walking a model along a location -------------------------------------------------------


def _field(model: type[BaseModel], key: Hashable) -> FieldInfo | None:
    for name, info in model.model_fields.items():
        if key in (name, info.alias):
            return info
    return None


def _keys(model: type[BaseModel]) -> list[str]:
    """The keys a document may use for `model` (aliases where they exist)."""
    return [info.alias or name for name, info in model.model_fields.items()]


def _as_model(annotation: object) -> type[BaseModel] | None:
    """The model `annotation` names, also when it is optional (`Model | None`)."""
    if _is_union(annotation):
        members = [m for m in get_args(annotation) if m is not type(None)]
        annotation = members[0] if len(members) == 1 else None
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return None


def _locate(model: type[BaseModel], loc: Loc) -> tuple[int, FieldInfo | None]:
    """How many leading parts of `loc` name model fields, and the last such field."""
    current: type[BaseModel] | None = model
    info: FieldInfo | None = None
    for depth, part in enumerate(loc):
        found = _field(current, part) if current is not None else None
        if found is None:
            return depth, info
        info = found
        current = _as_model(found.annotation)
    return len(loc), info


def _model_at(model: type[BaseModel], loc: Loc) -> type[BaseModel] | None:
    """The model validating the mapping at `loc`, if it is one."""
    if not loc:
        return model
    depth, info = _locate(model, loc)
    if depth < len(loc) or info is None:
        return None
    return _as_model(info.annotation)


def _is_union(annotation: object) -> bool:
    return get_origin(annotation) in (Union, types.UnionType)


def _literal_values(info: FieldInfo | None) -> list[str]:
    if info is None or get_origin(info.annotation) is not Literal:
        return []
    return [str(value) for value in get_args(info.annotation)]


def _describe(member: object) -> str:
    """A union member in words: 'auto', a whole number >= 1, a number, a string."""
    bounds = ""
    if get_origin(member) is Annotated:
        member, *metadata = get_args(member)
        bounds = _bounds(metadata)
    if get_origin(member) is Literal:
        return " or ".join(repr(value) for value in get_args(member))
    words = {int: "a whole number", float: "a number", str: "a string", bool: "true or false"}
    if isinstance(member, type) and member in words:
        return words[member] + bounds
    return getattr(member, "__name__", str(member)) + bounds


def _bounds(metadata: Iterable[object]) -> str:
    items: list[object] = []
    for item in metadata:
        items.extend(item.metadata if isinstance(item, FieldInfo) else [item])
    text = ""
    for item in items:
        if isinstance(item, annotated_types.Ge):
            text += f" >= {item.ge}"
        elif isinstance(item, annotated_types.Gt):
            text += f" > {item.gt}"
        elif isinstance(item, annotated_types.Le):
            text += f" <= {item.le}"
        elif isinstance(item, annotated_types.Lt):
            text += f" < {item.lt}"
    return text
