"""The Deadline kind's arithmetic on one worker: the cores a job needs to meet its deadline,
and the split of the worker's cores among its jobs. Pure numbers, no snapshot, no policy.

`cores_for(forecast, seconds)` inverts the forecast's speed model (`policyd.engine.speed`,
Amdahl's law): with R steps left, s(c) seconds per step and T seconds to spare, the job needs
the least c with R s(c) <= T. With x = T / R:

    x >= serial + parallel        c = (serial + parallel) / x    (a share of one core)
    serial < x < serial + parallel  c = parallel / (x - serial)  (one core or more)
    x <= serial                   no number of cores is enough

`split(asks, capacity)` shares a worker's cores in three rounds, each as far as cores remain:
every job its floor; then the deadline jobs their needs, earliest deadline first; then what
is left, max-min fairly (water-filling) among the jobs in the `extra` round, each up to what it
can use; jobs of the `last` round (hopeless ones, when the policy keeps them at the floor)
share only what nobody else can use. Nobody gets more than it can use: the allocation is the
right size. The last rounds run twice: first each job up to `fill` (what it has shown it
uses), then what is still left up to `probe` (what it may grow to on trust, at most `most`),
so a core nobody is known to use is handed out rather than left idle.
`parallel_share(forecast, cores)` says how much such a core would buy: the share of a step's
time that more cores shorten. `limit_fraction` turns cores granted into the limit an action
sets, and `span` prints seconds as the kind's reasons do.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from policyd.engine.forecast_output import Forecast

EPSILON_CORES = 1e-9


def cores_for(forecast: Forecast, seconds: float) -> float:
    """The fewest cores with which the job's remaining steps take at most `seconds` (inf:
    none are enough; 0: nothing is left)."""
    steps = forecast.remaining_steps
    if steps <= 0:
        return 0.0
    if seconds <= 0:
        return math.inf
    serial, parallel = forecast.serial_seconds, forecast.parallel_seconds
    x = seconds / steps
    if x >= serial + parallel:
        return (serial + parallel) / x
    if x > serial and parallel > 0:
        return parallel / (x - serial)
    return math.inf


def parallel_share(forecast: Forecast, cores: float) -> float:
    """The share of a step's time at `cores` that more cores would shorten: parallel / c over
    serial + parallel / c (Amdahl's law); all of it below one core (time slicing) or when the
    model has no parts yet. 0.1: one more core on top of two makes the job ~5 % faster."""
    serial, parallel = forecast.serial_seconds, forecast.parallel_seconds
    if cores < 1 or not (math.isfinite(serial) and math.isfinite(parallel)):
        return 1.0
    step = serial + parallel / cores
    return parallel / cores / step if step > 0 else 1.0


@dataclass(frozen=True, kw_only=True)
class Ask:
    """One job's claim on its worker: at least `floor` cores; `need` more in the deadline
    round (0: none); at most `most` (what it can use). `order` ranks it in the deadline round
    (its deadline); `rank` is its round for the rest: "extra" or "last"."""

    floor: float
    need: float
    most: float
    order: float
    rank: str = "extra"
    fill: float | None = None
    """At most this much in the first of the last rounds (None: `most`): what the job has shown
    it uses; the second gives what is still left up to `probe`."""
    probe: float | None = None
    """At most this much in the second of the last rounds (None: `most`): what the job is given
    on trust from cores nobody else takes."""


def _water_fill(cores: list[float], members: Sequence[int], most: Sequence[float],
                left: float) -> float:
    """Raise the lowest of `members` first, each up to `most`, until `left` is spent; what is
    left over."""
    active = sorted(members, key=lambda i: cores[i])
    while left > EPSILON_CORES:
        active = [i for i in active if most[i] - cores[i] > EPSILON_CORES]
        if not active:
            break
        low = min(cores[i] for i in active)
        at_low = [i for i in active if cores[i] <= low + EPSILON_CORES]
        above = [cores[i] for i in active if cores[i] > low + EPSILON_CORES]
        step = min([most[i] - cores[i] for i in at_low]
                   + ([min(above) - low] if above else []) + [left / len(at_low)])
        for i in at_low:
            cores[i] += step
        left -= step * len(at_low)
    return max(left, 0.0)


def split(asks: Sequence[Ask], capacity: float) -> list[float]:
    """Cores per job, in `asks`' order (see the module docstring)."""
    floors = [min(a.floor, a.most) for a in asks]
    total = sum(floors)
    scale = min(1.0, capacity / total) if total > 0 else 1.0
    cores = [f * scale for f in floors]  # floors that do not fit shrink alike
    left = max(capacity - sum(cores), 0.0)
    for i in sorted(range(len(asks)), key=lambda i: asks[i].order):
        want = min(asks[i].need, asks[i].most) - cores[i]
        if want > 0 and left > EPSILON_CORES:
            given = min(want, left)
            cores[i] += given
            left -= given
    kept = [min(a.most, a.fill) if a.fill is not None else a.most for a in asks]
    extra = [i for i, a in enumerate(asks) if a.rank == "extra"]
    last = [i for i, a in enumerate(asks) if a.rank == "last"]
    trusted = [max(k, min(a.most, a.probe)) if a.probe is not None else a.most
               for k, a in zip(kept, asks, strict=True)]
    for bound in (kept, trusted):  # what each has shown it uses, then growth
        left = _water_fill(cores, extra, bound, left)
        left = _water_fill(cores, last, bound, left)
    return cores


def limit_fraction(granted: float, top: float, capacity: float, mode: str) -> float:
    """The limit that gives a job `granted` cores: in quota mode a share of its worker's
    `capacity` (a hard cap); in shares mode a weight beside `top`, the most cores a job of its
    worker is granted (that job's weight is 1)."""
    share = granted / capacity if mode == "quota" else granted / top if top > 0 else 1.0
    return min(max(share, 1e-3), 1.0)


def span(seconds: float) -> str:
    """Seconds as a reason says them: 45 s, 12 min, 2.5 h (negative: -12 min)."""
    s = abs(seconds)
    text = f"{s:.0f} s" if s < 120 else f"{s / 60:.0f} min" if s < 7200 else f"{s / 3600:.1f} h"
    return text if seconds >= 0 else f"-{text}"
