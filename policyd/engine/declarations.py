"""What a job declares about its deadline, read from its labels and annotations, purely.

Keys (`policyd.model.labels`): `policyd.io/deadline`, an RFC 3339 time with its zone
(`2026-11-24T18:00:00Z`, `2026-11-24T19:00:00+01:00`) or a duration counted from the job's
submission (`45m`, `2h`, `1h30m`, `90s`, `1d`; units d, h, m, s); `policyd.io/min-cpu` and
`policyd.io/max-cpu`, cores (`0.5`, `2`, or Kubernetes millicores `500m`). An annotation wins
over a label of the same key. The submission is `policyd.io/submitted-at` (epoch seconds,
written by policyd when it admits or re-creates a workload), else the workload's own
submission time as its source saw it (a Docker container's creation), else when it started.

A value that cannot be read is a problem for that job, worded for its owner: the engine then
takes no action on it (it does not guess). So is a deadline at or before the submission (a
deadline "in the past" when the job was handed over). A deadline that passes while the job
runs is not a problem here: the job has missed it (`policyd.model.deadline`).

Pure: parses strings; `datetime` is used for its calendar arithmetic only (no clock).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from policyd.model import labels as keys

_DURATION = re.compile(r"^(?:(?P<d>\d+(?:\.\d+)?)d)?(?:(?P<h>\d+(?:\.\d+)?)h)?"
                       r"(?:(?P<m>\d+(?:\.\d+)?)m)?(?:(?P<s>\d+(?:\.\d+)?)s)?$")
_UNIT_SECONDS = {"d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0}
_CORES = re.compile(r"^(?P<value>\d+(?:\.\d+)?|\.\d+)(?P<milli>m)?$")
MAX_SHOWN = 40
"""A bad value is quoted up to this many characters in its note."""


def declared_value(workload_labels: Mapping[str, str], annotations: Mapping[str, str],
                   key: str) -> str | None:
    """What a workload declares under `key`, stripped: the annotation, else the label; None
    when neither holds anything but blanks."""
    text = annotations.get(key, workload_labels.get(key))
    return None if text is None or not text.strip() else text.strip()


def duration_seconds(text: str) -> tuple[float | None, str]:
    """`45m` -> 2700.0; None and why for anything else (a bare number, an unknown unit)."""
    found = _DURATION.match(text)
    if found is None or not any(found.groupdict().values()):
        if not re.search(r"\d", text):
            return None, ("neither a duration (e.g. 45m, 2h, 1h30m) nor an RFC 3339 time "
                          "(e.g. 2026-11-24T18:00:00Z)")
        if re.fullmatch(r"\d+(\.\d+)?", text):
            return None, "a duration needs a unit: s, m, h or d (e.g. 45m, 2h, 1h30m)"
        unit = re.sub(r"[\d.\s]", "", text)[:10]
        return None, (f"unknown unit {unit!r}: use s, m, h or d (e.g. 45m, 2h, 1h30m), "
                      "or an RFC 3339 time such as 2026-11-24T18:00:00Z")
    seconds = sum(float(v) * _UNIT_SECONDS[u] for u, v in found.groupdict().items() if v)
    if not seconds > 0:
        return None, "a duration must be longer than zero"
    return seconds, ""


def rfc3339_seconds(text: str) -> tuple[float | None, str]:
    """`2026-11-24T18:00:00Z` -> epoch seconds; None and why otherwise (no zone, no time)."""
    if "t" not in text.lower():
        return None, "an RFC 3339 time needs a date and a time: 2026-11-24T18:00:00Z"
    try:
        when = datetime.fromisoformat(text.replace("z", "Z"))
    except ValueError:
        return None, "not an RFC 3339 time (e.g. 2026-11-24T18:00:00Z) nor a duration (45m)"
    if when.tzinfo is None:
        return None, "an RFC 3339 time needs its zone: add Z (UTC) or an offset such as +01:00"
    return when.timestamp(), ""


def _cores(text: str) -> tuple[float | None, str]:
    found = _CORES.match(text)
    if found is None:
        return None, "not a number of cores (e.g. 0.5, 2, or 500m)"
    value = float(found["value"]) / (1000.0 if found["milli"] else 1.0)
    if not (value > 0 and math.isfinite(value)):
        return None, "must be more than zero cores"
    return value, ""


@dataclass(frozen=True, kw_only=True)
class Declared:
    """A job's readable declarations (None: not declared) and its problems, one per bad key
    (an empty tuple: all is well)."""

    deadline_at: float | None = None
    min_cores: float | None = None
    max_cores: float | None = None
    submitted_at: float | None = None
    problems: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.problems


def _shown(text: str) -> str:
    return repr(text[:MAX_SHOWN] + ("..." if len(text) > MAX_SHOWN else ""))


def declared(labels: Mapping[str, str], annotations: Mapping[str, str], *,
             submitted_at: float) -> Declared:
    """Every declaration of one workload (see the module docstring); `submitted_at` is its
    submission as the source saw it, overridden by `policyd.io/submitted-at`."""
    problems: list[str] = []
    submitted = submitted_at
    text = declared_value(labels, annotations, keys.SUBMITTED_AT)
    if text is not None:
        try:
            written = float(text)
        except ValueError:
            written = math.nan
        if math.isfinite(written):
            submitted = written
        else:
            problems.append(f"{keys.SUBMITTED_AT}={_shown(text)}: not an epoch time")
    deadline = None
    text = declared_value(labels, annotations, keys.DEADLINE)
    if text is not None:
        if text[0].isdigit() and len(text) >= 10 and text[4:5] == "-":
            deadline, why = rfc3339_seconds(text)
        else:
            seconds, why = duration_seconds(text)
            deadline = None if seconds is None else submitted + seconds
        if deadline is None:
            problems.append(f"{keys.DEADLINE}={_shown(text)}: {why}")
        elif deadline <= submitted:
            problems.append(f"{keys.DEADLINE}={_shown(text)} is {submitted - deadline:.0f} s "
                            "before the job was submitted: a deadline in the past")
            deadline = None
    bounds: dict[str, float | None] = {}
    for key in (keys.MIN_CPU, keys.MAX_CPU):
        text = declared_value(labels, annotations, key)
        bounds[key] = None
        if text is not None:
            bounds[key], why = _cores(text)
            if bounds[key] is None:
                problems.append(f"{key}={_shown(text)}: {why}")
    low, high = bounds[keys.MIN_CPU], bounds[keys.MAX_CPU]
    if low is not None and high is not None and low > high:
        problems.append(f"{keys.MIN_CPU} ({low:g}) is more than {keys.MAX_CPU} ({high:g})")
    return Declared(deadline_at=deadline, min_cores=low, max_cores=high, submitted_at=submitted,
                    problems=tuple(problems))
