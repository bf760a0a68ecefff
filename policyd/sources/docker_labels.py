"""The Docker labels that hold policyd's markers, read into `Markers`. Pure: no I/O.

The Docker actuator writes `policyd.io/migrated`, `policyd.io/rebalanced`,
`policyd.io/converged_at` and `policyd.io/last_action_at` on the containers it recreates; the
sources that read Docker labels as written (docker-stats from the engines, cadvisor-rest from
cAdvisor's `spec.labels`) read them back here. (Through Prometheus, cAdvisor exposes the same
labels as `container_label_policyd_io_*`: `settings.DOCKER_MARKERS`.)
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from policyd.model import Markers
from policyd.model import labels as keys
from policyd.sources import facts


def label_markers(labels: Mapping[str, str], extra: Markers | None,
                  warnings: list[str], where: str) -> Markers:
    """Markers from Docker labels, merged with the actuator's recorded ones (`extra`):
    flags are or-ed, converged_at from the labels first, last_action_at the later of both;
    failed moves are only ever recorded (a label cannot change on the container that stays)."""
    def flag(name: str) -> bool:
        return labels.get(name, "").strip().lower() in facts.TRUE_WORDS

    def when(name: str) -> float | None:
        text = labels.get(name)
        if not text:
            return None
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not math.isfinite(value):
            warnings.append(f"{where}: label {name}={text[:200]!r} is not an epoch time; ignored")
            return None
        return value

    extra = extra or Markers()
    last = [t for t in (when(keys.LAST_ACTION_AT), extra.last_action_at) if t is not None]
    converged = when(keys.CONVERGED_AT)
    return Markers(migrated=flag(keys.MIGRATED) or extra.migrated,
                   rebalanced=flag(keys.REBALANCED) or extra.rebalanced,
                   converged_at=converged if converged is not None else extra.converged_at,
                   last_action_at=max(last) if last else None,
                   move_failures=extra.move_failures, move_failed_at=extra.move_failed_at)
