"""The simulated backend: the daemon's hooks observing `policyd.sim.world.World` in virtual time.

The world already is a Source, an Actuator and a clock: it calls `policyd.tick.tick` on each
policy's schedule (`policyd.engine.schedule`, the rule the real daemon follows: back-off,
the listener's resets), and records every tick in `World.outcomes`. So the simulated daemon
does not schedule anything: it advances the world with `run_until` in steps of virtual time
and hands every new outcome to the same hooks the real daemon uses (metrics, with each tick's
duration, alerts, one printed line per tick). `speed` is virtual seconds per wall second; None
(`max` in the settings file) never sleeps.

Every configured policy runs in one world of the scenario, together, as the real daemon runs
every policy of its files (a container two policies select is acted on by its owner only);
with no policy configured the scenario's own policy runs. At the end every job's results are
printed.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import TextIO, assert_never

from policyd.daemon.health import Health
from policyd.daemon.metrics import DaemonMetrics
from policyd.daemon.ports import OutcomeObserver, flush_observer
from policyd.daemon.settings import SimulationSettings
from policyd.engine.schedule import base_interval_seconds
from policyd.engine.spec import PolicyDocument
from policyd.model import Action, Admit, MarkMigrated, Migrate, SetCpu, Stop
from policyd.sim import scenarios
from policyd.sim.source import EPOCH_SECONDS
from policyd.sim.world import World
from policyd.tick import Outcome

LOG = logging.getLogger(__name__)

MAX_STEP_SECONDS = 60.0
"""Virtual seconds per step at `max` speed (lines still come out in virtual-time order)."""
WALL_STEP_SECONDS = 0.1
"""Wall seconds between steps at a finite speed (and the reaction time to a stop)."""
MAX_VIRTUAL_SECONDS = 1e7


class SimulationError(ValueError):
    """The simulation cannot run as configured."""


def world_for(settings: SimulationSettings, policies: Sequence[PolicyDocument]) -> World:
    """One world of the configured scenario running `policies` (the scenario's if none)."""
    scenario = scenarios.build(settings.scenario, settings.seed)
    if policies:
        scenario = scenarios.with_policies(scenario, policies)
    return World(scenario, policies=scenario.policies, forecast_decisions=True)


def describe(action: Action) -> str:
    """`job-1 cpu 0.25 (shares)`, `job-3 worker-4 -> worker-2`, `job-3 stays (marked)`."""
    match action:
        case SetCpu():
            return f"{action.container} cpu {action.fraction:.3g} ({action.mode})"
        case Migrate():
            return f"{action.container} {action.from_node} -> {action.to_node}"
        case MarkMigrated():
            return f"{action.container} stays on {action.node} (marked migrated)"
        case Stop():
            return f"{action.container} stopped on {action.node} ({action.event})"
        case Admit():
            return f"{action.container} admitted on {action.node}"
        case _:
            assert_never(action)


class SimulatedRun:
    """Plays the configured scenario through the daemon's hooks; `run` returns an exit code."""

    def __init__(self, settings: SimulationSettings, policies: Sequence[PolicyDocument], *,
                 metrics: DaemonMetrics, out: TextIO, health: Health | None = None,
                 observer: OutcomeObserver | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.settings = settings
        self.world = world_for(settings, policies)
        self.metrics = metrics
        self.health = health or Health(simulated=True)
        self.observer = observer
        self.out = out
        self._clock = clock
        self._seen = 0
        self._once = False
        self._reported_once: set[str] = set()  # with `once`: the policies reported so far
        self.now = 0.0
        for policy in self.world.policies:
            metrics.set_interval(policy.name, base_interval_seconds(policy))
        self.health.policies_loaded()

    @property
    def finished(self) -> bool:
        return self.world.finished

    def run(self, stop: threading.Event, *, once: bool = False) -> int:
        """Play to the end (or, with `once`, to each policy's first tick), unless `stop`."""
        scenario = self.world.scenario
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

    def _ticked(self) -> set[str]:
        return {outcome.decision.policy for _, outcome in self.world.outcomes}

    def _each_ticked(self) -> bool:
        return self._ticked() >= {p.name for p in self.world.policies}

    def step(self, until: float) -> None:
        """Advance the world to virtual time `until`; report its new ticks in time order (with
        `once`, only each policy's first)."""
        if not self.world.finished:
            self.world.run_until(until)
        self.now = until
        world = self.world
        fresh = range(self._seen, len(world.outcomes))
        self._seen = len(world.outcomes)
        for index in fresh:
            at, outcome = world.outcomes[index]
            if self._once:
                if outcome.decision.policy in self._reported_once:
                    continue
                self._reported_once.add(outcome.decision.policy)
            self.report(at, outcome, duration_seconds=world.tick_seconds[index])

    def report(self, at: float, outcome: Outcome, *, duration_seconds: float | None = None
               ) -> None:
        """The daemon's hooks for one tick: metrics, alerts, and one line."""
        decision = outcome.decision
        name = decision.policy
        self.metrics.record_outcome(name, outcome, dry_run=decision.dry_run,
                                    duration_seconds=duration_seconds)
        self.metrics.set_interval(name, decision.next_interval)
        if self.observer is not None:
            try:
                self.observer.on_outcome(outcome, EPOCH_SECONDS + at)
            except Exception:
                LOG.exception("policy %s: alerting failed", name)
        failed = {id(a) for a, _ in outcome.failed}
        actions = "; ".join(describe(a) + (" FAILED" if id(a) in failed else "")
                            for a in decision.actions) or "no actions"
        dry = " [dry run]" if decision.dry_run else ""
        print(f"t={at:8.1f}s  {name}: {actions}; next in {decision.next_interval:g} s"
              f"{dry}", file=self.out, flush=True)

    def print_results(self) -> None:
        """Every job's results."""
        result = self.world.result("policy")
        names = ", ".join(p.name for p in self.world.policies)
        noun = "policy" if len(self.world.policies) == 1 else "policies"
        print(f"\nresults under {noun} {names}: makespan "
              f"{result.makespan:.1f} s, average JCT {result.avg_jct:.1f} s, "
              f"{result.migrations} migrations", file=self.out)
        print(f"{'job':8} {'model':6} {'submit':>8} {'finish':>8} {'jct':>8} "
              f"{'quality at':>10}  nodes", file=self.out)
        for job in result.jobs:
            print(f"{job.id:8} {job.model:6} {job.submit:8.1f} {job.finish:8.1f} "
                  f"{job.jct:8.1f} {job.time_to_quality:10.1f}  {' -> '.join(job.nodes)}",
                  file=self.out)
        self.out.flush()
