"""`ActuationError`: the one failure every actuator raises for an action it could not carry out.

The daemon counts it as a failed action and alerts on it; the message is one line that says
what failed and why (an engine's or API server's multi-line text is folded onto it).
"""

from __future__ import annotations


class ActuationError(Exception):
    """An action could not be carried out; the message is one line with the reason."""

    def __init__(self, reason: str) -> None:
        super().__init__(" ".join(reason.split()))
