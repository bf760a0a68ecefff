"""Adding label matchers to a user's query when, and only when, it is one plain selector.

A node agent asks only for its own node's loss: `policyd_training_loss` becomes
`policyd_training_loss{node="w1"}` and `loss{job="x"}` becomes `loss{job="x",node="w1"}`. A
query that is anything else (a function, an operator, a subquery, a range) is left alone:
`narrowed` returns None and the caller asks the whole query (the parser then keeps the node's
series). Recognising the one shape is exact; rewriting every selector of any expression would
need PromQL's whole grammar, and a mistake there would silently change what a policy reads.
Pure: no I/O.
"""

from __future__ import annotations

import re

_NAME = re.compile(r"\s*([a-zA-Z_:][a-zA-Z0-9_:]*)?\s*")
_STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\'|`[^`]*`', re.DOTALL)
_MATCHER = re.compile(r"\s*[a-zA-Z_][a-zA-Z0-9_]*\s*(?:=~|!~|!=|=)\s*")
_KEYWORDS = frozenset({"and", "or", "unless", "by", "without", "on", "ignoring", "group_left",
                       "group_right", "offset", "bool", "inf", "nan"})
_SPACE = " \t\n\r"


def _skip_space(expr: str, pos: int) -> int:
    while pos < len(expr) and expr[pos] in _SPACE:
        pos += 1
    return pos


def _matchers_end(expr: str, at: int) -> int | None:
    """Where the `{...}` opening at `expr[at]` ends (the index after `}`), or None when it is
    not a list of label matchers."""
    pos = at + 1
    while True:
        pos = _skip_space(expr, pos)
        if pos < len(expr) and expr[pos] == "}":
            return pos + 1
        matcher = _MATCHER.match(expr, pos)
        string = _STRING.match(expr, matcher.end()) if matcher else None
        if string is None:
            return None
        pos = _skip_space(expr, string.end())
        if pos < len(expr) and expr[pos] == ",":
            pos += 1
        elif pos >= len(expr) or expr[pos] != "}":
            return None


def narrowed(expr: str, matchers: str) -> str | None:
    """`expr` with `matchers` (rendered matchers without braces, `node="w1"`) added when it is
    one plain vector selector; None otherwise (see the module docstring)."""
    name = _NAME.match(expr)
    assert name is not None  # the pattern matches the empty string
    metric, pos = name.group(1), name.end()
    if metric is not None and metric.lower() in _KEYWORDS:
        return None
    if pos == len(expr):
        return f"{metric}{{{matchers}}}" if metric else None
    if expr[pos] != "{":
        return None
    end = _matchers_end(expr, pos)
    if end is None or expr[end:].strip():
        return None
    inner = expr[pos + 1:end - 1].strip().rstrip(",").strip()
    joined = f"{inner},{matchers}" if inner else matchers
    return f"{metric or ''}{{{joined}}}"
