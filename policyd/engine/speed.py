"""Training speed as a function of cores: Amdahl's law fitted per container, all at once.

Theory of operation. One optimizer step costs, on c cores,

    s(c) = serial + parallel / c       for c >= 1  (Amdahl's law, p = parallel / s(1))
    s(c) = (serial + parallel) / c     for c < 1   (a fraction of one core: time slicing)

seconds, and a job never runs faster than on `cap` cores (its own threads). This is the model the
simulator's jobs follow (`policyd.sim.types.Profile.iteration_seconds`).

Each interval j between two samples gives dsteps_j steps in dt_j seconds at c_j mean cores used,
an observation s_j = dt_j / dsteps_j. Both unknowns enter linearly, s = serial * u(c) +
parallel * v(c) with u = 1 (c >= 1) or 1/c (c < 1) and v = 1/c, so the fit is a weighted
least-squares solve of 2 x 2 normal equations, for every container at once:

    min  sum_j w_j (s_j - serial u_j - parallel v_j)^2
         + lambda W (parallel (1 - p0) - serial p0)^2

with w_j = dsteps_j (one allocation then gives exactly total seconds / total steps) and W their
sum. The second term is a prior: it is zero when the parallel fraction is p0. A job that has only
ever run on one allocation says nothing about p, and the prior fixes it at p0; a job whose cores
varied (1 and 2 cores: var(1/c) ~ 0.06) outweighs the prior (lambda = 0.02) several times over.
A negative serial or parallel part (noise) is refitted with that part at 0.

Prior p0 = 0.5: the six models the simulator's profiles were measured on have p between 0.28 and
0.73 (median 0.57, policyd/sim/data/README.md), and PyTorch on CPUs parallelises the large
matrix products of a step but not the Python and optimizer overhead around them. 0.5 is the middle
of that range: it predicts a speed-up of 1.33 on 2 cores where the measured ones were 1.16-1.57,
so a job seen on one allocation is mispredicted by at most ~18 % at twice the cores.

Drift. Besides the scatter of single intervals (`spread`), the fit measures how the level of
the job's step time about the model wanders over its window (`drift`, `_drift`): the diffusion
of a random walk on log step time, read off the differences between DRIFT_BLOCKS consecutive
blocks of the window. The forecast's range reads it; nothing else does.

Must not: read the snapshot (callers pass plain arrays), do I/O, or loop over containers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from policyd.model.snapshot import FloatArray

PRIOR_PARALLEL_FRACTION = 0.5
PRIOR_WEIGHT = 0.02
UNUSED_SHARE = 0.9
"""A job using less than this share of its allocation in its last interval, while its node had
cores to spare, is held back by its own parallelism: it is taken to go on using the mean cores
it used (time-weighted over its intervals), and to get no faster with more. While the node was
busy (`busy`), using less is the others' doing (CPU shares are weights, not caps) and says
nothing of the job's threads."""

MIN_MEASURED_CORES = 1e-3
"""An interval whose mean CPU is below a thousandth of a core says nothing of the job's speed:
it is a measurement's artefact (a rate read across a container's restart, a counter sampled
twice in one tick), not steps made on no CPU. Left out, as an interval without a CPU figure is:
at 1e-9 cores the normal equations' terms reach 1e18 and their solution was NaN."""

DRIFT_BLOCKS = 6
"""Blocks the window is cut into to measure how the speed's level wanders (`_drift`): chosen
from 2, 3, 4 and 6 on the first three held-out sets by the rule written down before
(benchmarks/README.md, "a range for drifting speed"): the narrowest range (median (high - low)
/ remaining 0.670; 3 blocks 0.676) with the truth in it in at least 80 % of their 72
known-total cases (60 of 72)."""

BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True, kw_only=True, eq=False)
class SpeedModel:
    """Per container (arrays of shape (N,)): seconds per step s(c) = serial + parallel / c, at
    most `cap_cores` usable cores, and `spread` the relative dispersion of the observed step
    times around the model (what one interval's speed may differ by)."""

    serial_seconds: FloatArray
    parallel_seconds: FloatArray
    cap_cores: FloatArray
    spread: FloatArray
    usable: BoolArray  # False: no interval with both steps and a CPU figure
    mean_cores: FloatArray  # the cores it used, time-weighted over its intervals
    drift: FloatArray
    """How fast the level of the job's log step time (about the model) wanders, per second: the
    diffusion of a random walk measured on `DRIFT_BLOCKS` blocks of its window (`_drift`); 0
    when the window shows none (or is too short to say)."""
    window_seconds: FloatArray  # the seconds of the intervals the fit used

    @property
    def parallel_fraction(self) -> FloatArray:
        total = self.serial_seconds + self.parallel_seconds
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(total > 0, self.parallel_seconds / total, np.nan)

    def seconds_per_step(self, cores: npt.ArrayLike) -> FloatArray:
        """s(c) for c of shape (N,) or (N, K); inf at 0 cores."""
        c = np.asarray(cores, dtype=np.float64)
        extra = (slice(None),) + (None,) * (c.ndim - 1)
        serial, parallel = self.serial_seconds[extra], self.parallel_seconds[extra]
        c = np.minimum(c, self.cap_cores[extra])
        with np.errstate(divide="ignore", invalid="ignore"):
            amdahl = serial + parallel / c
            sliced = (serial + parallel) / c
            return np.where(c >= 1.0, amdahl, np.where(c > 0, sliced, np.inf))

    def cores_now(self, allocation_cores: FloatArray) -> FloatArray:
        """What each job gets now: its allocation, at most what it can use, and less when it
        got less over its window (the others' shares on a busy node)."""
        cores = np.minimum(allocation_cores, self.cap_cores)
        got = self.mean_cores
        return np.where(np.isfinite(got) & (got > 0) & (got < UNUSED_SHARE * cores), got, cores)

    def steps_per_second(self, cores: npt.ArrayLike) -> FloatArray:
        """Speed at c cores, the inverse of `seconds_per_step`."""
        with np.errstate(divide="ignore"):
            return 1.0 / self.seconds_per_step(cores)


def _design(cores: FloatArray) -> tuple[FloatArray, FloatArray]:
    """u(c), v(c) of the linear form s = serial * u + parallel * v."""
    with np.errstate(divide="ignore", invalid="ignore"):
        inverse = 1.0 / cores
    return np.where(cores >= 1.0, 1.0, inverse), inverse


def fit_speed(
    *,
    steps_made: FloatArray,
    seconds: FloatArray,
    cores: FloatArray,
    allocation_cores: FloatArray,
    max_cores: FloatArray,
    busy: FloatArray | None = None,
) -> SpeedModel:
    """Fit the model to N containers' intervals, arrays of shape (N, K) (NaN where absent).

    `steps_made`, `seconds` and `cores`: per interval the steps done, its length and the mean
    cores used; `busy` whether the node was all in use then (None: never); `allocation_cores`
    (N,) the current allocation, `max_cores` (N,) the most the node could give. Intervals
    without steps, without a finite CPU figure of at least MIN_MEASURED_CORES or of no length
    are left out.
    """
    good = (np.isfinite(steps_made) & (steps_made > 0) & np.isfinite(seconds) & (seconds > 0)
            & np.isfinite(cores) & (cores >= MIN_MEASURED_CORES))
    w = np.where(good, steps_made, 0.0)
    safe_cores = np.where(good, cores, 1.0)
    s = np.where(good, seconds / np.where(good, steps_made, 1.0), 0.0)
    u, v = _design(safe_cores)
    total = w.sum(axis=1)
    p0, ridge = PRIOR_PARALLEL_FRACTION, PRIOR_WEIGHT * total
    # Normal equations of the penalised least squares (module docstring).
    wu, wv = w * u, w * v
    suu = (wu * u).sum(axis=1) + ridge * p0 * p0
    svv = (wv * v).sum(axis=1) + ridge * (1 - p0) ** 2
    suv = (wu * v).sum(axis=1) - ridge * p0 * (1 - p0)
    sus, svs = (wu * s).sum(axis=1), (wv * s).sum(axis=1)
    det = suu * svv - suv * suv
    with np.errstate(divide="ignore", invalid="ignore"):
        serial = (svv * sus - suv * svs) / det
        parallel = (suu * svs - suv * sus) / det
        only_parallel = svs / svv
        only_serial = sus / suu
    serial, parallel = (np.where(serial < 0, 0.0, np.where(parallel < 0, only_serial, serial)),
                        np.where(serial < 0, only_parallel, np.where(parallel < 0, 0.0, parallel)))
    usable = total > 0
    serial = np.where(usable, serial, np.nan)
    parallel = np.where(usable, parallel, np.nan)

    # A job that left part of its allocation unused in its last interval, while its node had
    # cores to spare, is held back by its own threads: it is taken to go on using what it
    # used, on average over its intervals. On a busy node using less is the others' doing.
    idle = np.ones_like(good) if busy is None else ~(busy > 0.5)
    last = _last_valid(np.where(good, cores, np.nan))
    last_idle = _last_valid(np.where(good, idle.astype(np.float64), np.nan)) > 0.5
    span = np.where(good, seconds, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        used = (span * np.where(good, cores, 0.0)).sum(axis=1) / span.sum(axis=1)
    held_back = np.isfinite(last) & (last < UNUSED_SHARE * allocation_cores) & last_idle
    cap = np.where(held_back, used, max_cores)

    with np.errstate(divide="ignore", invalid="ignore"):
        model_s = serial[:, None] * u + parallel[:, None] * v
        ratio = np.where(good, s / model_s - 1.0, 0.0)
        spread = np.sqrt((w * ratio * ratio).sum(axis=1) / total)
    drift, window = _drift(good, seconds=seconds, steps=w, model_s=model_s)
    return SpeedModel(serial_seconds=serial, parallel_seconds=parallel, cap_cores=cap,
                      spread=np.where(usable, spread, np.nan), usable=usable, mean_cores=used,
                      drift=np.where(usable, drift, 0.0), window_seconds=window)


def _drift(good: BoolArray, *, seconds: FloatArray, steps: FloatArray,
           model_s: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Per container, (q, T): the diffusion q (per second) of a random walk on the level of the
    log step time about the model, and T the seconds of the fit's intervals.

    The window (its good intervals, back to back: T seconds) is cut into DRIFT_BLOCKS blocks of
    T / B seconds (an interval belongs to the block of its midpoint); m_b = log(the block's
    seconds / the seconds the model gives its steps). For a random walk of diffusion q, plus
    independent noise of variance sigma^2 per interval, E[(m_{b+1} - m_b)^2] = 2 q (T / B) / 3 +
    sigma^2 (1 / n_b + 1 / n_{b+1}), n_b the intervals of block b; sigma^2 is read off
    neighbouring intervals, half the mean of (x_{j+1} - x_j)^2 with x_j the interval's log step
    time about the model (a random walk adds only q dt to it). q = max(mean squared block
    difference - its noise, 0) / (2 T / (3 B)); 0 with fewer than two neighbouring non-empty
    blocks. No loop over containers or blocks."""
    blocks = DRIFT_BLOCKS
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        model_seconds = steps * model_s
        ok = good & np.isfinite(model_seconds) & (model_seconds > 0)
        dt = np.where(ok, seconds, 0.0)
        expected = np.where(ok, model_seconds, 0.0)
        window = dt.sum(axis=1)
        mid = np.cumsum(dt, axis=1) - dt / 2
        block = np.minimum(np.floor(blocks * mid / np.where(window > 0, window, 1.0)[:, None]),
                           blocks - 1)
        x = np.where(ok, np.log(np.where(ok, dt / np.where(ok, expected, 1.0), 1.0)), np.nan)
        step = np.diff(x, axis=1)
        pairs = np.isfinite(step)
        count = pairs.sum(axis=1)
        noise = np.where(count > 0, np.where(pairs, step * step, 0.0).sum(axis=1)
                         / np.maximum(count, 1) / 2, 0.0)
        # Each block's intervals, seconds and model seconds, all rows at once: one bin per
        # (row, block); an empty block's level is NaN (0 / 0).
        n = good.shape[0]
        bins = (np.arange(n)[:, None] * blocks + block.astype(np.int64))[ok]
        size = np.bincount(bins, minlength=n * blocks).reshape(n, blocks).astype(np.float64)
        level = np.log(np.bincount(bins, weights=dt[ok], minlength=n * blocks)
                       / np.bincount(bins, weights=expected[ok], minlength=n * blocks)
                       ).reshape(n, blocks)
        change = np.diff(level, axis=1)
        both = np.isfinite(change)
        excess = change * change - noise[:, None] * (1 / size[:, 1:] + 1 / size[:, :-1])
        differences = both.sum(axis=1)
        mean_excess = np.where(both, excess, 0.0).sum(axis=1) / np.maximum(differences, 1)
        q = np.maximum(mean_excess, 0.0) / (2 * window / (3 * blocks))
    q = np.where((differences > 0) & np.isfinite(q), q, 0.0)
    return q, window


def _last_valid(values: FloatArray) -> FloatArray:
    """Per row, the last finite value (NaN when none)."""
    n, k = values.shape
    if k == 0:
        return np.full(n, np.nan)
    finite = np.isfinite(values)
    index = k - 1 - np.argmax(finite[:, ::-1], axis=1)
    return np.where(finite.any(axis=1), values[np.arange(n), index], np.nan)
