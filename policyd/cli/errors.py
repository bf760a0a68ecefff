"""The CLI's one error type: a problem with the user's input, worded for the terminal."""

from __future__ import annotations

from collections.abc import Sequence


class InputError(Exception):
    """A problem with the user's input, already worded for the terminal (one line each).

    Lines that start with a file location (`FILE:LINE: ...`) are printed bare so that editors
    and CI logs can link them; `summary` (if any) follows, prefixed with the command's name.
    """

    def __init__(self, lines: Sequence[str], summary: str = "") -> None:
        self.lines = list(lines)
        self.summary = summary
        super().__init__("\n".join([*self.lines, summary]))
