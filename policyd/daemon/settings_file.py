"""The settings file: YAML in, `DaemonSettings` (or every problem with the file) out.

The file is one YAML mapping (docs/settings.md), validated by the `settings` models exactly as
a policy is by its kind's model: `policyd.policy.yamlpos` records the line of every key,
`policyd.policy.validate` collects every error (rules spanning sections too), and
`policyd.policy.messages` words them, so problems read like policy problems
(`FILE:LINE: FIELD: MESSAGE`, `policyd.policy.errors.Problem`). `load_settings` raises them
together, in line order, in `SettingsError`.

Read from a file, a key given as null takes its default, and relative paths (policy files,
TLS files, the state file) are resolved against the settings file's directory, so a settings
file and its policies can move together. This module reads one file; it never reads the
environment.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from policyd.clients.settings import BASE, FROM_FILE
from policyd.daemon.settings import REPAIRED, DaemonSettings
from policyd.policy import messages, yamlpos
from policyd.policy.errors import Problem
from policyd.policy.validate import every_error


class SettingsError(Exception):
    """A settings file that cannot be used; `problems` lists every reason, in line order."""

    def __init__(self, problems: Sequence[Problem]) -> None:
        if not problems:
            raise ValueError("SettingsError needs at least one problem")
        self.problems: tuple[Problem, ...] = tuple(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


def load_settings(path: str | os.PathLike[str]) -> DaemonSettings:
    """The settings in the file at `path`; `SettingsError` lists every problem if any."""
    source = os.fspath(path)
    try:
        text = Path(source).read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise SettingsError([Problem(file=source, message="no such settings file")]) from None
    except (OSError, UnicodeDecodeError) as error:
        reason = error.strerror if isinstance(error, OSError) else f"not UTF-8 ({error.reason})"
        raise SettingsError([Problem(file=source, message=f"cannot read: {reason}")]) from None
    return load_settings_text(text, source, base=Path(source).resolve().parent)


def load_settings_text(text: str, source: str = "<string>", *,
                       base: Path | None = None) -> DaemonSettings:
    """Settings from YAML `text`; relative paths are resolved against `base` (default: the
    current directory). Raises `SettingsError` listing every problem."""
    stream = yamlpos.parse(text)
    problems: list[Problem] = []
    if stream.syntax_error is not None:
        error = stream.syntax_error
        problems.append(Problem(file=source, line=error.line, column=error.column,
                                message=error.message))
    if len(stream.documents) > 1:
        problems.append(Problem(file=source, line=stream.documents[1].line,
                                message="a settings file holds one YAML document"))
    settings = DaemonSettings()
    if stream.documents and not problems:
        found, problems = _check(stream.documents[0], source, base or Path.cwd())
        settings = found or settings
    if problems:
        raise SettingsError(sorted(problems, key=lambda p: p.line or 0))
    return settings


def _check(document: yamlpos.Document, source: str, base: Path
           ) -> tuple[DaemonSettings | None, list[Problem]]:
    """The settings in `document`, or every problem with it."""
    def problem(message: str, path: yamlpos.Path = (),
                point: yamlpos.Path | None = None) -> Problem:
        return Problem(file=source, line=document.line_of(point or path),
                       field=messages.field_name(path) or None, message=message)

    problems = [Problem(file=source, line=issue.line, column=issue.column, message=issue.message,
                        field=messages.field_name(issue.path) if issue.path else None)
                for issue in document.issues]
    data = document.data
    if data is None:
        return (None if problems else DaemonSettings()), problems
    if not isinstance(data, dict):
        return None, [*problems, problem("the settings file must be a mapping of sections; "
                                         f"got {messages.show(data)}")]
    settings, errors = every_error(DaemonSettings, data,
                                   context={FROM_FILE: True, BASE: base},
                                   repaired_key=REPAIRED)
    problems.extend(problem(found.message, found.path, found.point)
                    for found in messages.explain(DaemonSettings, errors))
    return (None if problems else settings), problems
