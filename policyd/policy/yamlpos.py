"""YAML text -> plain documents, each with the line of every key and list item.

PyYAML's `compose_all` keeps a start mark on every node; we walk the node tree once to record
the 1-based line of each path (`("spec", "weights", "pc")`, `("spec", "selector",
"namespaces", 0)`), then let PyYAML's safe constructor build the plain data. A pydantic error
location is a path into that data, so `Document.line_of` turns it into the line of the deepest
node that exists (for a missing field: the key of the mapping it is missing from).

This module knows YAML and nothing about policies. Syntax errors stop the stream (PyYAML cannot
resume), but documents composed before the error are kept so they are still checked. Two things
PyYAML accepts silently are reported as issues: a key given twice in one mapping (PyYAML keeps
the last), and a tag no safe constructor knows.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field

import yaml
from yaml.constructor import SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

Path = tuple[Hashable, ...]

_MERGE_TAG = "tag:yaml.org,2002:merge"
_NULL_TAG = "tag:yaml.org,2002:null"


@dataclass(frozen=True, kw_only=True)
class Issue:
    """Something wrong at the YAML level: a message at a line (and column, for syntax)."""

    message: str
    line: int | None
    column: int | None = None
    path: Path | None = None


@dataclass(frozen=True, kw_only=True)
class Document:
    """One non-empty YAML document: its data, where its keys are, and YAML-level issues."""

    index: int
    """1-based position in the stream (empty documents count too)."""
    line: int
    data: object
    """The constructed data; None when construction failed (see `issues`)."""
    lines: Mapping[Path, int] = field(repr=False)
    issues: tuple[Issue, ...] = ()

    def line_of(self, path: Path) -> int:
        """The line of `path`, or of its deepest prefix that exists in the document."""
        for depth in range(len(path), 0, -1):
            line = self.lines.get(path[:depth])
            if line is not None:
                return line
        return self.line


@dataclass(frozen=True, kw_only=True)
class Stream:
    documents: tuple[Document, ...]
    syntax_error: Issue | None


def parse(text: str) -> Stream:
    """Every document of `text` up to the first syntax error, and that error if any."""
    documents: list[Document] = []
    nodes = yaml.compose_all(text, Loader=yaml.SafeLoader)
    index = 0
    while True:
        try:
            node = next(nodes)
        except StopIteration:
            return Stream(documents=tuple(documents), syntax_error=None)
        except yaml.YAMLError as error:
            return Stream(documents=tuple(documents),
                          syntax_error=_marked_issue(error, "YAML syntax error", text))
        index += 1
        if isinstance(node, ScalarNode) and node.tag == _NULL_TAG and node.value == "":
            continue  # an empty document, e.g. after a trailing `---`
        documents.append(_document(node, index))


def _document(node: Node, index: int) -> Document:
    lines: dict[Path, int] = {}
    issues: list[Issue] = []
    _walk(node, (), lines, issues, on_path=set())
    data: object = None
    try:
        data = SafeConstructor().construct_document(node)
    except yaml.MarkedYAMLError as error:
        issues.append(_marked_issue(error, "YAML error"))
    except (yaml.YAMLError, RecursionError) as error:
        issues.append(Issue(message=f"YAML error: {error}", line=node.start_mark.line + 1))
    return Document(index=index, line=node.start_mark.line + 1, data=data, lines=lines,
                    issues=tuple(issues))


def _walk(node: Node, path: Path, lines: dict[Path, int], issues: list[Issue],
          on_path: set[int]) -> None:
    """Record the line of every key and item under `node`; report keys given twice."""
    if id(node) in on_path:  # a recursive alias: the constructor will report it
        return
    on_path = on_path | {id(node)}
    if isinstance(node, MappingNode):
        first_line: dict[Hashable, int] = {}
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE_TAG or not isinstance(key_node, ScalarNode):
                continue  # `<<: *base` and complex keys: their lines fall back to the parent
            key = _scalar(key_node)
            line = key_node.start_mark.line + 1
            if key in first_line:
                issues.append(Issue(
                    message=f"given twice (lines {first_line[key]} and {line}); "
                    "YAML would silently keep the last one",
                    line=line, path=(*path, key)))
            else:
                first_line[key] = line
            lines[(*path, key)] = line
            _walk(value_node, (*path, key), lines, issues, on_path)
    elif isinstance(node, SequenceNode):
        for position, item in enumerate(node.value):
            lines[(*path, position)] = item.start_mark.line + 1
            _walk(item, (*path, position), lines, issues, on_path)


def _scalar(node: ScalarNode) -> Hashable:
    try:
        value: object = SafeConstructor().construct_object(node)
    except yaml.YAMLError:
        return str(node.value)
    return value if isinstance(value, Hashable) else str(node.value)


def _marked_issue(error: yaml.YAMLError, label: str, text: str = "") -> Issue:
    """`label: problem (context)` at the problem's line and column."""
    if isinstance(error, yaml.reader.ReaderError) and isinstance(error.character, int):
        # A character YAML does not allow; its position is an offset into `text`.
        start = text.rfind("\n", 0, error.position) + 1
        return Issue(message=f"{label}: character #x{error.character:04x} is not allowed "
                     f"({error.reason})", line=text.count("\n", 0, error.position) + 1,
                     column=error.position - start + 1)
    if not isinstance(error, yaml.MarkedYAMLError) or error.problem_mark is None:
        return Issue(message=f"{label}: {' '.join(str(error).split())}", line=None)
    mark = error.problem_mark
    message = f"{label}: {error.problem}"
    if error.context:
        context_mark = error.context_mark
        if context_mark is not None and context_mark.line != mark.line:
            message += f" ({error.context} that starts on line {context_mark.line + 1})"
        else:
            message += f" ({error.context})"
    return Issue(message=message, line=mark.line + 1, column=mark.column + 1)
