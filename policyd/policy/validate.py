"""Validate a document with a pydantic model and get every error at once, cross-field ones too.

pydantic runs a model's own checks (its `model_validator(mode="after")`: rules that span
fields or sections) only once every field of that model is valid, so a file with a bad port
and a backend that lacks what it needs would show the second problem only after the first is
fixed. `every_error` validates again without what was wrong: each field at fault is left out
(its default stands in; a required one takes its enclosing mapping with it, a bad list item its
list; a model check's error, the fields it names), and the document is checked again until the
document's own checks have run or nothing more can be left out. The first pass's errors are
all kept; later passes add only errors elsewhere (not under a path left out, and not on a
model that already had an error), so nothing is reported twice or about a value the user did
not write. The paths left out are passed to the model's checks in the validation context
(`repaired_key`), so that a rule does not also say "missing" about a value that was given but
invalid.

Pure: data in, errors out; knows no YAML and no files.
"""

from __future__ import annotations

import copy
from collections.abc import Hashable, Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from policyd.clients.settings import FIELD_PROBLEMS

Loc = tuple[Hashable, ...]
M = TypeVar("M", bound=BaseModel)

MAX_PASSES = 8
"""Each pass leaves out at least one key; settings nest four deep, so this is plenty."""


def every_error(model: type[M], data: Any, *, context: Mapping[str, Any] | None = None,
                repaired_key: str | None = None) -> tuple[M | None, list[ErrorDetails]]:
    """`(instance, [])` when `data` is valid, else `(None, every error)` (see the module
    docstring). `context` is passed to the validators; with `repaired_key` the paths left out
    so far are added to it under that key (a set of tuples of keys)."""
    current = copy.deepcopy(data)
    found: list[ErrorDetails] = []
    left_out: list[Loc] = []
    failed_at: set[Loc] = set()
    for _ in range(MAX_PASSES):
        extra = {repaired_key: frozenset(left_out)} if repaired_key else {}
        try:
            instance = model.model_validate(current, context={**(context or {}), **extra})
        except ValidationError as error:
            errors = error.errors()
        else:
            return (instance, []) if not found else (None, found)
        new = [e for e in errors if not _under(tuple(e["loc"]), left_out)
               and tuple(e["loc"]) not in failed_at]
        found.extend(new)
        failed_at.update(tuple(e["loc"]) for e in errors)
        cuts = {cut for e in errors for at in _faults(e)
                if (cut := _cut(current, at)) is not None}
        if not cuts:
            break
        for cut in sorted(cuts, key=len, reverse=True):
            _remove(current, cut)
        left_out.extend(cuts)
    return None, found


def _faults(error: ErrorDetails) -> list[Loc]:
    """Where the error's causes are: its location, or each field a model's check names. None
    for the document's own check: it ran, so every field was valid and nothing is left to
    find."""
    loc = tuple(error["loc"])
    if not loc:
        return []
    if error["type"] == FIELD_PROBLEMS:
        return [(*loc, *path) for path, _ in (error.get("ctx") or {}).get("problems", ())]
    return [loc]


def _under(loc: Loc, paths: list[Loc]) -> bool:
    return any(loc[:len(path)] == path for path in paths)


def _cut(data: Any, loc: Loc) -> Loc | None:
    """The path to leave out for an error at `loc`: the deepest part of it that is in
    `data`, or the list holding it; None for the document itself."""
    node: Any = data
    path: Loc = ()
    for part in loc:
        if isinstance(node, list):
            return path or None  # leave the whole list out: indices must not shift
        if not isinstance(node, dict) or part not in node:
            break
        node, path = node[part], (*path, part)
    return path or None


def _remove(data: Any, path: Loc) -> None:
    node = data
    for part in path[:-1]:
        node = node.get(part) if isinstance(node, dict) else None
    if isinstance(node, dict):
        node.pop(path[-1], None)
