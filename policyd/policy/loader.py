"""Load policy files: read, parse, dispatch on `kind`, validate, and collect every problem.

Each document is validated by the model its `kind` names in `policyd.engine.registry.KINDS`, so
errors speak only of the variant the user meant. A document whose kind is missing or unknown
still has its envelope (apiVersion, metadata, top-level keys) checked. Problems from every
document of every file are collected; policy names must be unique across all files given.

Warnings (`check_files`) point at valid policies that probably do not do what their author
meant: `evaluation.direction` set while `evaluation.gain` is `magnitude` (the thesis's gain
reads no direction), and two policies whose selectors can meet on one container for the same
class of action (`policyd.engine.ownership`: the owner is named).

The loaders raise `PolicyError` (never a traceback) for anything wrong in the user's files.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from pydantic import ValidationError

from policyd.engine.ownership import overlaps
from policyd.engine.registry import KINDS
from policyd.engine.spec import PolicyDocument
from policyd.policy import messages, yamlpos
from policyd.policy.errors import PolicyError, Problem

_ENVELOPE = "a mapping with apiVersion, kind, metadata and spec"


def load_policies(path: str | os.PathLike[str]) -> list[PolicyDocument]:
    """Every policy in the file at `path`; `PolicyError` lists every problem if any."""
    policies, problems = validate_files([path])
    if problems:
        raise PolicyError(problems)
    return policies


def load_policies_text(text: str, source_name: str = "<string>") -> list[PolicyDocument]:
    """Every policy in `text` (YAML, one or more documents); `source_name` names it in
    problems. Raises `PolicyError` listing every problem if any."""
    policies, problems = _collect([_check_text(text, source_name)])
    if problems:
        raise PolicyError(problems)
    return policies


@dataclass(frozen=True, kw_only=True)
class Checked:
    """What checking a set of policy files found: the valid policies (usable only when there
    are no problems), every problem, and warnings about valid policies."""

    policies: tuple[PolicyDocument, ...]
    problems: tuple[Problem, ...]
    warnings: tuple[Problem, ...]


def check_files(paths: Iterable[str | os.PathLike[str]]) -> Checked:
    """Check every file; problems and warnings in file order (within a file, line order)."""
    checked: list[_File] = []
    for path in paths:
        source = os.fspath(path)
        text = _read(source)
        if isinstance(text, Problem):
            checked.append(_File(source=source, problems=[text]))
        else:
            checked.append(_check_text(text, source))
    policies, problems = _collect(checked)
    warnings = [w for c in checked for w in c.warnings]
    if not problems:
        warnings.extend(_overlap_warnings(checked))
    order = {c.source: i for i, c in reversed(list(enumerate(checked)))}
    warnings.sort(key=lambda p: (order[p.file], p.line or 0))
    return Checked(policies=tuple(policies), problems=tuple(problems),
                   warnings=tuple(warnings))


def check_data(data: object, source: str) -> Checked:
    """Check one policy document given as data, not text (a custom resource read from the
    API): the same checks as a file's document; problems carry no line."""
    checked = _File(source=source)
    _check_document(yamlpos.Document(index=1, line=0, data=data, lines={}), checked)
    policies, problems = _collect([checked])
    return Checked(policies=tuple(policies),
                   problems=tuple(replace(p, line=None, document=None) for p in problems),
                   warnings=tuple(replace(w, line=None, document=None)
                                  for w in checked.warnings))


def validate_files(
    paths: Iterable[str | os.PathLike[str]],
) -> tuple[list[PolicyDocument], list[Problem]]:
    """Check every file; return the valid policies and every problem found, in file order
    (within a file, in line order). Policies are usable only when there are no problems."""
    checked = check_files(paths)
    return list(checked.policies), list(checked.problems)


def summary(policies: Sequence[PolicyDocument], files: Collection[object]) -> str:
    """`3 policies in 2 files are valid (FlowCon: 2, SpeCon: 1)`."""
    counts = [(kind, sum(p.kind == kind for p in policies)) for kind in KINDS]
    by_kind = ", ".join(f"{kind}: {n}" for kind, n in counts if n)
    noun = "policy" if len(policies) == 1 else "policies"
    file_noun = "file" if len(files) == 1 else "files"
    verb = "is" if len(policies) == 1 else "are"
    line = f"{len(policies)} {noun} in {len(files)} {file_noun} {verb} valid"
    return f"{line} ({by_kind})" if by_kind else line


@dataclass(frozen=True, kw_only=True)
class _Named:
    """Where a policy name was given, to find names used twice."""

    name: str
    source: str
    line: int
    document: int


@dataclass(kw_only=True)
class _File:
    """What checking one file found."""

    source: str
    policies: list[PolicyDocument] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)
    names: list[_Named] = field(default_factory=list)


@dataclass(frozen=True, kw_only=True)
class _At:
    """Builds the problems of one document: its file, name and lines."""

    source: str
    document: yamlpos.Document
    name: str | None

    def problem(self, message: str, path: yamlpos.Path = (),
                point: yamlpos.Path | None = None, *, warning: bool = False) -> Problem:
        return Problem(file=self.source, line=self.document.line_of(point or path),
                       policy=self.name, document=self.document.index,
                       field=messages.field_name(path) or None, message=message,
                       severity="warning" if warning else "error")


def _collect(checked: Sequence[_File]) -> tuple[list[PolicyDocument], list[Problem]]:
    """All policies, and all problems (names used twice too) in file order, then line order."""
    problems = [p for c in checked for p in c.problems]
    problems.extend(_duplicates(checked))
    order = {c.source: i for i, c in reversed(list(enumerate(checked)))}
    problems.sort(key=lambda p: (order[p.file], p.line or 0))
    return [p for c in checked for p in c.policies], problems


def _read(source: str) -> str | Problem:
    try:
        return Path(source).read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        reason = "no such file"
    except IsADirectoryError:
        reason = "is a directory, not a policy file"
    except PermissionError:
        reason = "cannot read the file: permission denied"
    except UnicodeDecodeError as error:
        reason = f"not UTF-8 text (byte {error.start}: {error.reason})"
    except OSError as error:
        reason = f"cannot read the file: {error.strerror or error}"
    return Problem(file=source, message=reason)


def _check_text(text: str, source: str) -> _File:
    stream = yamlpos.parse(text)
    checked = _File(source=source)
    for document in stream.documents:
        _check_document(document, checked)
    if stream.syntax_error is not None:
        error = stream.syntax_error
        checked.problems.append(Problem(file=source, line=error.line, column=error.column,
                                        message=error.message))
    elif not stream.documents:
        checked.problems.append(Problem(
            file=source, message="no policy documents (the file is empty or only comments)"))
    return checked


def _check_document(document: yamlpos.Document, checked: _File) -> None:
    data = document.data
    at = _At(source=checked.source, document=document, name=_name_of(data))
    if at.name is not None:
        checked.names.append(_Named(name=at.name, source=checked.source,
                                    line=document.line_of(("metadata", "name")),
                                    document=document.index))
    for issue in document.issues:
        checked.problems.append(Problem(
            file=checked.source, line=issue.line, column=issue.column, policy=at.name,
            document=document.index, message=issue.message,
            field=messages.field_name(issue.path) if issue.path else None))
    if data is None and document.issues:
        return  # construction failed: already reported
    if not isinstance(data, dict):
        checked.problems.append(at.problem(
            f"a policy document must be {_ENVELOPE}; got {messages.show(data)}"))
        return

    kind_problem = _kind_problem(data)
    if kind_problem is None:
        model: type[PolicyDocument] = KINDS[data["kind"]].document
    else:
        # Still check the envelope; the spec cannot be checked without knowing the kind.
        checked.problems.append(at.problem(kind_problem, ("kind",)))
        model = PolicyDocument
        data = {**data, "kind": "?"} | ({"spec": {}} if "spec" in data else {})
    try:
        policy = model.model_validate(data, by_alias=True, by_name=False)
    except ValidationError as error:
        for found in messages.explain(model, error.errors()):
            checked.problems.append(at.problem(found.message, found.path, found.point))
        return
    if kind_problem is None:
        checked.policies.append(policy)
        checked.warnings.extend(_document_warnings(policy, at))


def _document_warnings(policy: PolicyDocument, at: _At) -> list[Problem]:
    """What is valid in one policy but probably not meant."""
    evaluation = policy.spec.evaluation
    if "direction" in evaluation.model_fields_set and evaluation.gain == "magnitude":
        return [at.problem(
            f"direction ({evaluation.direction}) has no effect with gain: magnitude (the "
            "thesis's gain |E(t_m) - E(t_m-1)| counts a change either way); set gain: "
            "improvement to count only changes in that direction",
            ("spec", "evaluation", "direction"), warning=True)]
    return []


def _overlap_warnings(checked: Sequence[_File]) -> list[Problem]:
    """Pairs of policies that can meet on one container for the same class of action."""
    where = {n.name: n for c in checked for n in c.names}
    policies = [p for c in checked for p in c.policies]
    found = []
    for overlap in overlaps(policies):
        first, second = where[overlap.first.name], where[overlap.second.name]
        owner = overlap.owner
        tie = overlap.first.spec.priority == overlap.second.spec.priority
        found.append(Problem(
            file=second.source, line=second.line, policy=overlap.second.name,
            document=second.document, field="spec.selector", severity="warning",
            message=(f"can select the same containers as policy {overlap.first.name} "
                     f"({first.source}:{first.line}) for {' and '.join(overlap.actions)}: "
                     f"policy {owner.name} owns them (priority {owner.spec.priority}"
                     f"{', then name' if tie else ''}); the other leaves them alone. Give the "
                     "selectors disjoint namespaces or labels, or set spec.priority to "
                     "choose")))
    return found


def _kind_problem(data: dict[object, object]) -> str | None:
    """Why `kind` names no registered kind, or None when it does."""
    kinds = list(KINDS)
    if "kind" not in data:
        return f"required field is missing; one of: {', '.join(kinds)}"
    kind = data["kind"]
    if isinstance(kind, str) and kind in KINDS:
        return None
    message = f"{messages.show(kind)} is not one of: {', '.join(kinds)}"
    close = messages.did_you_mean(kind, kinds) if isinstance(kind, str) else None
    return f"{message}; did you mean '{close}'?" if close else message


def _name_of(data: object) -> str | None:
    if isinstance(data, dict):
        metadata = data.get("metadata")
        if isinstance(metadata, dict):
            name = metadata.get("name")
            if isinstance(name, str) and name:
                return name
    return None


def _duplicates(checked: Iterable[_File]) -> list[Problem]:
    first: dict[str, _Named] = {}
    problems = []
    for named in (n for c in checked for n in c.names):
        if named.name in first:
            earlier = first[named.name]
            problems.append(Problem(
                file=named.source, line=named.line, policy=named.name, document=named.document,
                field="metadata.name",
                message=f"duplicate policy name; first defined at {earlier.source}:{earlier.line}"))
        else:
            first[named.name] = named
    return problems
