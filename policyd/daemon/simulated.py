"""The simulated backend: the daemon's hooks observing `policyd.sim.world.World` in virtual time.

The world already is a Source, an Actuator and a clock: it calls `policyd.tick.tick` on each
policy's schedule, with FlowCon's back-off and Algorithm 2's listener (`World._instant`), and
records every tick in `World.outcomes`. So the simulated daemon does not schedule anything:
it advances the world with `run_until` in steps of virtual time and hands every new outcome
to the same hooks the real daemon uses (metrics, alerts, one printed line per tick). `speed`
is virtual seconds per wall second; None (`max` in the settings file) never sleeps.

A world holds one policy, so each configured policy gets its own world of the same scenario,
all advanced in lockstep; with no policy configured the scenario's own policy runs. At the end
every job's results are printed per world.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TextIO, assert_never

from policyd.daemon.health import Health
from policyd.daemon.metrics import DaemonMetrics
from policyd.daemon.ports import OutcomeObserver, flush_observer
from policyd.daemon.settings import SimulationSettings
from policyd.engine.spec import PolicyDocument
from policyd.model import Action, MarkMigrated, Migrate, SetCpu
from policyd.sim import scenarios
from policyd.sim.source import EPOCH_SECONDS, base_interval_seconds
from policyd.sim.types import Scenario
from policyd.sim.world import World
from policyd.tick import Outcome

LOG = logging.getLogger(__name__)

MAX_STEP_SECONDS = 60.0
"""Virtual seconds per step at `max` speed (lines still come out in virtual-time order)."""
WALL_STEP_SECONDS = 0.1
"""Wall seconds between steps at a finite speed (and the reaction time to a stop)."""
MAX_VIRTUAL_SECONDS = 1e7


class SimulationError(ValueError):
    """The simulation cannot run as configured (a policy of another kind than the scenario)."""


@dataclass(frozen=True, kw_only=True)
class _Played:
    policy: PolicyDocument
    world: World


def worlds_for(settings: SimulationSettings,
               policies: Sequence[PolicyDocument]) -> list[tuple[PolicyDocument, World]]:
    """One world of the configured scenario per policy (the scenario's policy if none)."""
    scenario = scenarios.build(settings.scenario, settings.seed)
    chosen = list(policies) or [scenario.policy]
    wrong = [p for p in chosen if p.kind != scenario.policy.kind]
    if wrong:
        raise SimulationError(
            f"scenario {scenario.name} runs {scenario.policy.kind} policies; "
            + ", ".join(f"{p.name!r} is {p.kind}" for p in wrong)
            + " (choose another simulation.scenario, or leave policies out)")
    return [(p, _world(scenario, p)) for p in chosen]


def _world(scenario: Scenario, policy: PolicyDocument) -> World:
    return World(scenarios.with_policy(scenario, policy), policy=policy)


def describe(action: Action) -> str:
    """`job-1 cpu 0.25 (shares)`, `job-3 worker-4 -> worker-2`, `job-3 stays (marked)`."""
    match action:
        case SetCpu():
            return f"{action.container} cpu {action.fraction:.3g} ({action.mode})"
        case Migrate():
            return f"{action.container} {action.from_node} -> {action.to_node}"
        case MarkMigrated():
            return f"{action.container} stays on {action.node} (marked migrated)"
        case _:
            assert_never(action)


class SimulatedRun:
    """Plays the configured scenario through the daemon's hooks; `run` returns an exit code."""

    def __init__(self, settings: SimulationSettings, policies: Sequence[PolicyDocument], *,
                 metrics: DaemonMetrics, out: TextIO, health: Health | None = None,
                 observer: OutcomeObserver | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.settings = settings
        self.played = [_Played(policy=p, world=w) for p, w in worlds_for(settings, policies)]
        self.metrics = metrics
        self.health = health or Health(simulated=True)
        self.observer = observer
        self.out = out
        self._clock = clock
        self._seen = [0] * len(self.played)
        self._once = False
        self.now = 0.0
        for played in self.played:
            metrics.set_interval(played.policy.name, base_interval_seconds(played.policy))
        self.health.policies_loaded()

    @property
    def finished(self) -> bool:
        return all(p.world.finished for p in self.played)

    def run(self, stop: threading.Event, *, once: bool = False) -> int:
        """Play to the end (or, with `once`, to each policy's first tick), unless `stop`."""
        scenario = self.played[0].world.scenario
        speed = "max" if self.settings.speed is None else f"{self.settings.speed:g}x"
        print(f"simulating {scenario.name} (seed {scenario.seed}, speed {speed}): "
              f"{scenario.description}", file=self.out, flush=True)
        self.health.running(True)
        try:
            last = self._clock()
            self._once = once
            while not self.finished and not (once and self._each_ticked()):
                if self.settings.speed is None:
                    target = self.now + (1.0 if once else MAX_STEP_SECONDS)
                    if stop.is_set():
                        break
                else:
                    if stop.wait(WALL_STEP_SECONDS):
                        break
                    wall = self._clock()
                    target = self.now + (wall - last) * self.settings.speed
                    last = wall
                self.step(target)
                self.health.beat()
                if self.now > MAX_VIRTUAL_SECONDS:
                    raise RuntimeError(f"{scenario.name}: jobs still running after "
                                       f"{MAX_VIRTUAL_SECONDS:g} virtual seconds")
            if self.finished:
                self.print_results()
            elif stop.is_set():
                print(f"stopped at t={self.now:.1f} s (virtual); jobs unfinished", file=self.out)
        finally:
            flush_observer(self.observer)
            self.health.running(False)
        return 0

    def _each_ticked(self) -> bool:
        return all(p.world.outcomes for p in self.played)

    def step(self, until: float) -> None:
        """Advance every world to virtual time `until`; report the ticks in time order."""
        new: list[tuple[float, int, Outcome]] = []
        for index, played in enumerate(self.played):
            if not played.world.finished:
                played.world.run_until(until)
            outcomes = played.world.outcomes[:1] if self._once else played.world.outcomes
            new.extend((at, index, o) for at, o in outcomes[self._seen[index]:])
            self._seen[index] = len(outcomes)
        self.now = until
        for at, index, outcome in sorted(new, key=lambda item: (item[0], item[1])):
            self.report(self.played[index].policy, at, outcome)

    def report(self, policy: PolicyDocument, at: float, outcome: Outcome) -> None:
        """The daemon's hooks for one tick: metrics, alerts, and one line."""
        decision = outcome.decision
        self.metrics.record_outcome(policy.name, outcome, dry_run=decision.dry_run)
        self.metrics.set_interval(policy.name, decision.next_interval)
        if self.observer is not None:
            try:
                self.observer.on_outcome(outcome, EPOCH_SECONDS + at)
            except Exception:
                LOG.exception("policy %s: alerting failed", policy.name)
        failed = {id(a) for a, _ in outcome.failed}
        actions = "; ".join(describe(a) + (" FAILED" if id(a) in failed else "")
                            for a in decision.actions) or "no actions"
        dry = " [dry run]" if decision.dry_run else ""
        print(f"t={at:8.1f}s  {policy.name}: {actions}; next in {decision.next_interval:g} s"
              f"{dry}", file=self.out, flush=True)

    def print_results(self) -> None:
        """Every job's results, per world."""
        for played in self.played:
            result = played.world.result("policy")
            print(f"\nresults under policy {played.policy.name}: makespan "
                  f"{result.makespan:.1f} s, average JCT {result.avg_jct:.1f} s, "
                  f"{result.migrations} migrations", file=self.out)
            print(f"{'job':8} {'model':6} {'submit':>8} {'finish':>8} {'jct':>8} "
                  f"{'quality at':>10}  nodes", file=self.out)
            for job in result.jobs:
                print(f"{job.id:8} {job.model:6} {job.submit:8.1f} {job.finish:8.1f} "
                      f"{job.jct:8.1f} {job.time_to_quality:10.1f}  {' -> '.join(job.nodes)}",
                      file=self.out)
        self.out.flush()
