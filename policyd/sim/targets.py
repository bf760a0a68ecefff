"""The targets a simulated job declares, and how it did against them: the simulator's scoring.

A job declares its targets as a real one does, in its container's labels (`JobSpec.labels`):
`policyd.io/qoe-target` (the simulator scores `steps_per_second>=R` targets: R iterations per
second) and `policyd.io/target-loss`. Scoring reads the job's whole run, never the policy:

* a QoE target is met when the job's throughput over its whole run, iterations done over its
  completion time, reaches R (a relative 1e-9 is allowed for floating-point rounding: the
  oracle runs a job at exactly R); `time_satisfied` is the share of its scrape intervals
  (weighted by their length) whose own rate reached R: what an operator watching it would see;
* a target loss is met when the loss it ends with is at or below the target;
* `direction_changes` counts how often the policy's CPU limit on the job reversed direction
  (up then down, or down then up) after the job's first minute; `limit_changes` every change.

Pure: it reads the job's record, it changes nothing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from policyd.engine.qoe_target import STEPS_PER_SECOND, Target, read_target
from policyd.model import labels as keys
from policyd.sim.job import SimJob
from policyd.sim.types import JobSpec, TargetResult

SETTLE_SECONDS = 60.0
"""Direction changes of a job's CPU limit are counted after its first minute."""
RELATIVE_TOLERANCE = 1e-9


@dataclass(frozen=True, kw_only=True)
class Declared:
    """What a job declares: a steps-per-second target and/or a target loss."""

    qoe: Target | None = None
    loss: float | None = None

    @property
    def rate(self) -> float | None:
        """The iterations per second the QoE target asks for (None: no such target)."""
        return self.qoe.value if self.qoe is not None else None


def declared(spec: JobSpec) -> Declared:
    """Read `spec`'s labels (a declaration the simulator cannot score is an error: scenarios
    are ours)."""
    text = spec.labels.get(keys.QOE_TARGET)
    qoe = None
    if text is not None:
        found = read_target(text, {STEPS_PER_SECOND})
        if isinstance(found, str) or found.comparison != ">=":
            raise ValueError(f"job {spec.id}: the simulator scores {STEPS_PER_SECOND}>=R "
                             f"targets only: {found if isinstance(found, str) else text}")
        qoe = found
    loss_text = spec.labels.get(keys.TARGET_LOSS)
    loss = float(loss_text) if loss_text is not None else None
    return Declared(qoe=qoe, loss=loss)


def direction_changes(limits: list[tuple[float, float]], *, since: float,
                      initial: float = 1.0) -> int:
    """Reversals of a limit's direction among its changes after `since` (`limits`: (time,
    value) as set, the value before the first being `initial`)."""
    value, last_sign, flips = initial, 0, 0
    for at, new in limits:
        delta = new - value
        value = new
        if at < since or abs(delta) <= 1e-12:
            continue
        sign = 1 if delta > 0 else -1
        if last_sign and sign != last_sign:
            flips += 1
        last_sign = sign
    return flips


def score(job: SimJob, target: Declared, *, final_loss: float) -> TargetResult | None:
    """How `job` (done) did against `target`."""
    assert job.finish_at is not None
    submit = job.spec.submit_seconds
    if target.qoe is not None:
        seconds = job.finish_at - submit
        achieved = job.progress / seconds if seconds > 0 else math.inf
        return TargetResult(
            kind="qoe", declared=target.qoe.text, value=target.qoe.value, achieved=achieved,
            met=achieved >= target.qoe.value * (1.0 - RELATIVE_TOLERANCE),
            time_satisfied=(job.rate_met_seconds / job.rate_seconds if job.rate_seconds > 0
                            else None),
            direction_changes=direction_changes(job.limits, since=submit + SETTLE_SECONDS),
            limit_changes=len(job.limits))
    if target.loss is not None:
        return TargetResult(kind="loss", declared=f"{keys.TARGET_LOSS}={target.loss:g}",
                            value=target.loss, achieved=final_loss,
                            met=final_loss <= target.loss)
    return None
