"""Jobs that have reached their quality target or converged: the step every kind shares.

Theory of operation. A job's CPU is worth spending only while the job still improves. After a
kind's plan (`policyd.engine.decide`), this step looks at every job the policy assessed and asks
two questions, both from the snapshot alone:

* target: the job declares the loss it is trained to reach (`policyd.io/target-loss`, label or
  annotation) and its latest evaluation sample (fresh: at most two intervals old) is at or
  below it (at or above it when the policy's evaluation is `maximize`);
* converged: the forecast (`policyd.engine.forecasting`, with `Settings.improvement`) says the
  loss will still fall by less than `converged_below` of today's loss over the whole rest of
  the run (to its total steps when it reports them, else to where its fitted curve turns
  converged). One slow interval is not enough: the fitted curve has to agree. Nor is a job
  that has not started to learn: while its history reaches back to its first steps and its
  loss has fallen by less than `converged_below` since then, it is on its initial plateau,
  where every curve reads flat, and it is not judged (`not_started`).

The policy's response (`on_target`, `on_converged`) decides what happens:

* `notify` (the default): the assessment carries a `Delivery` and its note says so; the
  daemon's alerter posts it and its metrics count it. No action: policyd never stops a job
  unless a policy asks it to.
* `deprioritize`: the job's CPU drops to the kind's floor (`Kind.floor`); the kind's own CPU
  action on it, if any, is replaced.
* `stop`: a `Stop` action (the actuators checkpoint, keep the checkpoint and mark the job
  delivered), and every other action of this policy on the job is dropped.

Both actions respect the shared guards (opt-out, minimum age, cooldown: `guards`), and
ownership applies afterwards (`Kind.acts_on_of` adds "stop" and "cpu" for these responses).
A target reached comes before convergence when both hold. Pure: no I/O, no clock.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import replace
from typing import NamedTuple

from policyd.engine.forecasting import settings_of, with_forecasts
from policyd.engine.guards import action_blocked
from policyd.engine.registry import KINDS
from policyd.engine.snapshot_histories import declares_target, target_loss
from policyd.engine.spec import PolicyDocument
from policyd.model import (
    Action,
    Container,
    Decision,
    JobForecast,
    SetCpu,
    Snapshot,
    Stop,
)
from policyd.model import labels as keys
from policyd.model.qoe import Delivery, DeliveryEvent, Response

STOPPED = "stopped (checkpoint kept, delivered)"
"""What a stopped job's assessment says was done (`policyd.engine.reported_stops` words it
otherwise where an agent only reports the stop)."""
REPORTED = "stop reported to the manager, which stops it"
"""What an agent's assessment says of a stop it reported instead of making."""

STALE_INTERVALS = 2.0
"""A loss sample older than this many of the policy's intervals says nothing about now."""


class _Found(NamedTuple):
    """What a job reached and the policy's response. A tuple, not a frozen dataclass: made for
    every job that converged (7,425 of 10,000 in `benchmarks/forecast_scale.py`), and a
    tuple is made in half the time."""

    event: DeliveryEvent
    response: Response
    why: str


def target_reached(container: Container, policy: PolicyDocument, now: float,
                   interval_seconds: float) -> str | None:
    """Why the job has reached its declared target loss, or None (no target, not yet, or no
    fresh finite sample)."""
    target, _ = target_loss(container)
    series = container.evaluation
    if target is None or len(series) == 0:
        return None
    t, value = float(series.times_seconds[-1]), float(series.values[-1])
    if not math.isfinite(value) or now - t > STALE_INTERVALS * interval_seconds:
        return None
    maximize = policy.spec.evaluation.direction == "maximize"
    if (value >= target) if maximize else (value <= target):
        return (f"reached its target loss: {value:.4g} {'>=' if maximize else '<='} "
                f"{target:g} ({keys.TARGET_LOSS})")
    return None


def not_started(container: Container, threshold: float) -> bool:
    """Whether the job's history reaches back to its first steps (the steps counted at its
    first sample are no more than it made between its first two: a job seen mid-run, or
    resumed from a checkpoint, counts far more) and its loss has since improved by less than
    `threshold` of today's: a job still on its initial plateau, whose convergence cannot be
    judged yet (module docstring)."""
    steps, loss = container.steps, container.evaluation
    if len(steps) < 2 or len(loss) < 2:
        return False
    s0, s1 = steps.values[:2].tolist()
    if not 0 <= s0 <= s1 - s0:
        return False
    first, last = float(loss.values[0]), float(loss.values[-1])
    return math.isfinite(first - last) and first - last < threshold * abs(last)


def _converged(f: JobForecast, improvement: float, threshold: float) -> str:
    """Why a job whose forecast's remaining `improvement` is under `threshold` has converged."""
    to = "its total steps" if f.total_steps is not None else "where its fitted curve converges"
    return (f"converged: the forecast has the loss falling by only "
            f"{100 * improvement:.2f} % more up to {to} "
            f"({f.remaining_steps:.0f} steps left), under converged_below "
            f"{100 * threshold:g} %")


def _finds(decision: Decision, policy: PolicyDocument, snapshot: Snapshot,
           by_id: dict[str, Container]) -> dict[str, _Found]:
    """What each categorised assessment's job reached, by container: its target, else its
    convergence (the policy's figures read once, not once per assessment)."""
    spec = policy.spec
    interval = snapshot.interval_seconds(policy.name,
                                         KINDS.of(policy).intervals(policy).base_seconds)
    now, threshold = snapshot.time, spec.converged_below
    on_target, on_converged = spec.on_target, spec.on_converged
    found: dict[str, _Found] = {}
    for a in decision.assessments:
        c = by_id.get(a.container)
        if c is None or a.category is None:
            continue
        if declares_target(c):  # most jobs declare none: not `target_reached`'s reading
            why = target_reached(c, policy, now, interval)
            if why is not None:
                found[c.id] = _Found("target", on_target, why)
                continue
        f = a.forecast
        gain = None if f is None else f.remaining_improvement
        if f is not None and gain is not None and gain < threshold and \
                not not_started(c, threshold):
            found[c.id] = _Found("converged", on_converged, _converged(f, gain, threshold))
    return found


def deliver(decision: Decision, policy: PolicyDocument, snapshot: Snapshot, *,
            forecasts: bool) -> Decision:
    """`decision` with the policy's responses to jobs that reached their target or converged
    (module docstring). Convergence reads the forecasts `decision` carries (`decide` attaches
    every assessment's first). `forecasts=False` (a caller that reads only the actions, and
    so a decision without forecasts) skips what changes no action: convergence is judged only
    when its response acts, on the categorised jobs' forecasts made here."""
    spec = policy.spec
    acting = {spec.on_target, spec.on_converged} - {"notify"}
    if not forecasts and not acting:
        return decision
    if not forecasts and spec.on_converged != "notify":
        # the remaining improvement is what convergence reads
        kind = KINDS.of(policy)
        settings = settings_of(policy, snapshot, alpha=kind.convergence_alpha(policy),
                               interval_seconds=kind.intervals(policy).base_seconds)
        decision = with_forecasts(decision, settings, snapshot, categorised_only=True)
    by_id = {c.id: c for c in snapshot.containers}
    found = _finds(decision, policy, snapshot, by_id)
    if not found:
        return decision
    kind = KINDS.of(policy)
    # the jobs per node, for the floor of a job deprioritized (one pass over 10,000, saved
    # when the policy deprioritizes none)
    per_node = (Counter(by_id[a.container].node for a in decision.assessments
                        if a.container in by_id)
                if "deprioritize" in {spec.on_target, spec.on_converged} else Counter[str]())
    actions: list[Action] = [a for a in decision.actions
                             if a.container not in found or (
                                 found[a.container].response == "notify"
                                 or (found[a.container].response == "deprioritize"
                                     and not isinstance(a, SetCpu)))]
    assessments = []
    for a in decision.assessments:
        hit = found.get(a.container)
        if hit is None:
            assessments.append(a)
            continue
        reason, next_fraction = hit.why, a.cpu_fraction_next
        if hit.response == "notify":  # most hits (a whole cluster converging): no lookups
            reason = f"{hit.why}: notified"
        else:
            c = by_id[a.container]
            blocked = action_blocked(c, spec, snapshot.time, disrupts=hit.response == "stop")
            if blocked is not None:
                reason = f"{hit.why}; {hit.response}: no action ({blocked})"
            elif hit.response == "stop":
                actions.append(Stop(policy=policy.name, container=c.id, node=c.node,
                                    event=hit.event, reason=hit.why,
                                    grace_seconds=spec.stop_grace_seconds))
                reason = f"{hit.why}: {STOPPED}"
            else:  # deprioritize
                floor = kind.floor(policy, per_node[c.node])
                next_fraction = floor
                if abs(c.cpu_allocation - floor) > 1e-9:
                    actions.append(SetCpu(policy=policy.name, container=c.id, node=c.node,
                                          fraction=floor, mode=kind.cpu_mode(policy) or "shares",
                                          reason=f"{hit.why}: deprioritized to the floor "
                                                 f"{floor:.3g}"))
                reason = f"{hit.why}: deprioritized to the floor {floor:.3g}"
        assessments.append(a.but(
            delivery=Delivery(event=hit.event, response=hit.response, reason=reason),
            cpu_fraction_next=next_fraction, note=f"{reason}; {a.note}" if a.note else reason))
    pairs = Counter((hit.event, hit.response) for hit in found.values())
    events = {f"{event} -> {response}": n for (event, response), n in pairs.items()}
    note = "delivered: " + ", ".join(f"{n} {what}" for what, n in sorted(events.items()))
    return replace(decision, actions=tuple(actions), assessments=tuple(assessments),
                   notes=(*decision.notes, note))
