"""Builders for the sources' tests: policies, and Prometheus `data.result` lists in the shape
the HTTP API returns them (values as strings)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from policyd.engine.deadline import DeadlinePolicy
from policyd.engine.flowcon import FlowConPolicy
from policyd.engine.spec import API_VERSION
from policyd.engine.specon import SpeConPolicy
from policyd.sources.promql import CycleQueries, build_queries
from policyd.sources.settings import SourceSettings

NOW = 1_700_000_400.0
INTERVAL = 20.0
WINDOW = 5


def flowcon(name: str = "fc", **spec: Any) -> FlowConPolicy:
    body = {"interval_seconds": INTERVAL, "window_intervals": WINDOW, **spec}
    return FlowConPolicy.model_validate({"apiVersion": API_VERSION, "kind": "FlowCon",
                                         "metadata": {"name": name}, "spec": body})


def specon(name: str = "sc", **spec: Any) -> SpeConPolicy:
    body = {"interval_seconds": INTERVAL, "window_intervals": WINDOW, **spec}
    return SpeConPolicy.model_validate({"apiVersion": API_VERSION, "kind": "SpeCon",
                                        "metadata": {"name": name}, "spec": body})


def deadline(name: str = "dl", **spec: Any) -> DeadlinePolicy:
    """A Deadline policy: one that starts held jobs (acts on admission)."""
    body = {"interval_seconds": INTERVAL, "window_intervals": WINDOW, **spec}
    return DeadlinePolicy.model_validate({"apiVersion": API_VERSION, "kind": "Deadline",
                                          "metadata": {"name": name}, "spec": body})


def queries(settings: SourceSettings, **spec: Any) -> CycleQueries:
    return build_queries([flowcon(**spec)], settings, now_seconds=NOW)


def steps(count: int = WINDOW + 1, *, end: float = NOW, step: float = INTERVAL) -> list[float]:
    return [end - step * k for k in range(count - 1, -1, -1)]


def series(metric: Mapping[str, str], values: Sequence[float | str],
           times: Sequence[float] | None = None) -> dict[str, Any]:
    """One range result entry; values are written as Prometheus writes them ("NaN", "+Inf")."""
    times = list(times) if times is not None else steps(len(values))
    def text(v: float | str) -> str:
        if isinstance(v, str):
            return v
        if math.isnan(v):
            return "NaN"
        return {math.inf: "+Inf", -math.inf: "-Inf"}.get(v, repr(v))
    return {"metric": dict(metric), "values": [[t, text(v)] for t, v in zip(times, values,
                                                                            strict=True)]}


Fact = tuple[str, dict[str, Any]]


def fact(kind: str, metric: Mapping[str, str], value: float, *, at: float = NOW) -> Fact:
    """One sample of the query of fact `kind` (`promql.FACTS`), as its instant result holds
    it."""
    return kind, {"metric": dict(metric), "value": [at, repr(float(value))]}


def facts(*samples: Fact) -> dict[str, list[dict[str, Any]]]:
    """The answers of a cycle's fact queries: fact -> its instant `data.result`."""
    out: dict[str, list[dict[str, Any]]] = {}
    for kind, sample in samples:
        out.setdefault(kind, []).append(sample)
    return out


def envelope(result: list[dict[str, Any]], result_type: str = "matrix") -> dict[str, Any]:
    return {"status": "success", "data": {"resultType": result_type, "result": result}}
