"""A node's `policyd.io/speed` as the operator states it: on a Kubernetes Node's labels, or as a
Docker engine's `dockerd --label`. Pure.

The value is how fast one of the node's cores trains relative to an average core (1.0 average,
1.5 a step in two thirds of the time). Anything but a positive finite number means "not
stated", with a warning saying where and what: the engine treats such a node as average
(`policyd.engine.node_speed`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from policyd.model import labels as keys


def parse_speed(text: str, where: str) -> tuple[float | None, str]:
    """(speed, "") for a positive number; (None, why) otherwise; `where` names the label's
    owner in the warning (an engine, a node)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if math.isfinite(value) and value > 0:
        return value, ""
    return None, (f"{where} label {keys.SPEED}={text!r} is not a positive number; its speed "
                  "counts as not stated")


def node_speeds(nodes: Mapping[str, Mapping[str, str]]) -> tuple[dict[str, float], list[str]]:
    """Node name -> its stated speed, from each node's labels; and the warnings."""
    speeds: dict[str, float] = {}
    warnings: list[str] = []
    for name, node_labels in sorted(nodes.items()):
        text = node_labels.get(keys.SPEED)
        if text is None:
            continue
        value, problem = parse_speed(text, f"node {name}")
        if value is not None:
            speeds[name] = value
        if problem:
            warnings.append(problem)
    return speeds, warnings


def engine_speed(labels: Sequence[str]) -> tuple[float | None, str]:
    """The engine's `policyd.io/speed=X` label (`dockerd --label`), and what is wrong with it
    ("" when nothing): not a positive number means not stated."""
    prefix = keys.SPEED + "="
    for label in labels:
        if isinstance(label, str) and label.startswith(prefix):
            return parse_speed(label[len(prefix):], "engine")
    return None, ""
