"""What a policy problem is and how it reads on one line.

A `Problem` locates one thing wrong with the user's policies (file, line, the policy, the field)
and says what was given and what is allowed; the daemon's settings file reports its problems
with the same value (without a policy). Loaders collect every problem before giving up and
raise them together in a `PolicyError`; nothing in this package lets a traceback reach the user
for a mistake in their YAML.

The line format, one problem per line:

    FILE[:LINE[:COLUMN]]: [policy "NAME": | document N: ][FIELD: ]MESSAGE

* LINE is 1-based: the line of the field's key (or of the nearest enclosing key that exists, for a
  missing field). COLUMN (1-based) is given only for YAML-level errors (syntax, unknown tags),
  where there is no field path to say where on the line the parser stopped.
* FILE is the path as it was given; a problem with the whole file (missing, unreadable, empty)
  has no line.
* The policy is named by its `metadata.name`; a document without a usable name is `document N`
  (its 1-based position in the file).
* FIELD is the dotted path inside the document (`spec.weights.pc`, `spec.selector.namespaces[0]`).

A warning (`severity="warning"`) has the same form with `warning: ` before the message: the
policy is valid and runs, but something in it probably does not do what its author meant.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True, kw_only=True)
class Problem:
    """One thing wrong with a policy file, scoped as narrowly as it can be."""

    file: str
    message: str
    line: int | None = None
    column: int | None = None
    policy: str | None = None
    """The document's `metadata.name` when it has a usable one."""
    document: int | None = None
    """The document's 1-based position in its file (used when `policy` is unknown)."""
    field: str | None = None
    severity: Literal["error", "warning"] = "error"

    def __post_init__(self) -> None:
        # One problem, one line, whatever a library's message held.
        object.__setattr__(self, "message", " ".join(self.message.split()))
        if self.column is not None and self.line is None:
            raise ValueError("a problem with a column must have a line")

    @property
    def where(self) -> str:
        """`FILE:LINE:COLUMN`, as far as known."""
        parts = [self.file]
        if self.line is not None:
            parts.append(str(self.line))
            if self.column is not None:
                parts.append(str(self.column))
        return ":".join(parts)

    @property
    def subject(self) -> str | None:
        """`policy "NAME"` or `document N`, when the problem belongs to one document."""
        if self.policy is not None:
            return f'policy "{self.policy}"'
        if self.document is not None:
            return f"document {self.document}"
        return None

    def __str__(self) -> str:
        message = f"warning: {self.message}" if self.severity == "warning" else self.message
        parts = [self.where, self.subject, self.field, message]
        return ": ".join(part for part in parts if part is not None)


class PolicyError(Exception):
    """Policies that cannot be used; `problems` lists every reason, in file and line order."""

    def __init__(self, problems: Sequence[Problem]) -> None:
        if not problems:
            raise ValueError("PolicyError needs at least one problem")
        self.problems: tuple[Problem, ...] = tuple(problems)
        super().__init__("\n".join(str(p) for p in self.problems))
