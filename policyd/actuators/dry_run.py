"""The dry-run actuator: records every action and logs it, changes nothing.

Dry-run is an actuator, not a flag threaded through calls (STYLE.md): the daemon hands a policy
marked `dry_run: true` this actuator instead of the real one, and `policyd plan` uses it too.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from policyd.model import Action, Decision
from policyd.model.codec import action_to_dict

LOG = logging.getLogger(__name__)


@dataclass
class DryRunActuator:
    """Keeps `(decision policy, action)` pairs in `applied`, newest last, up to `keep`."""

    keep: int = 10_000
    applied: list[Action] = field(default_factory=list)

    def apply(self, action: Action, decision: Decision) -> None:
        LOG.info("dry run, not applied: %s", action_to_dict(action))
        self.applied.append(action)
        if len(self.applied) > self.keep:
            del self.applied[: len(self.applied) - self.keep]
