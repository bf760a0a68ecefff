"""Play one scenario under one strategy: the policy, the baseline, or the oracle.

* `policy`: the scenario's policies (or the ones given) drive the world through `policyd.tick`.
* `baseline`: what the thesis compares against. For FlowCon scenarios that is NA (plain Docker:
  equal competition, no limits), for SpeCon ones DS (the Kubernetes default scheduler's
  placement, never migrated). In the simulator both are the same thing: DS placement (the
  default scheduler's scoring, `policyd.sim.kube_scheduler`) and no actions at all, so there is
  one code path. `baseline_fewest` is the same with the earlier placement rule, the node with
  the fewest jobs (a second baseline: already balanced, unlike the default scheduler).
* `oracle`: the same placement, with each node's cores given by shortest remaining processing
  time (`policyd.sim.oracle`), or for the qoe-* scenarios so that the most QoE targets are met
  (`policyd.sim.qoe_oracle`): a per-node reference without migrations. For deadline
  scenarios (`Scenario.oracle == "edf"`): earliest deadline first with perfect knowledge of
  every job's work, admitting held jobs (`policyd.sim.deadline_oracle`). Their baseline (FCFS)
  is the same no-policy world: held jobs start at once, in arrival order, with equal shares.

A scenario is fully drawn in advance (its seed made the jobs), and the world's only draws, the
default scheduler's ties, come from the seed too (or from `ties_seed`), so every strategy sees the
same jobs at the same times and a run is deterministic. The ties still part two strategies'
placements once their jobs end in different orders (benchmarks/placement_luck.py measures it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import assert_never

from policyd.engine.spec import PolicyDocument
from policyd.sim.types import RunResult, Scenario, Strategy
from policyd.sim.world import World


def run(scenario: Scenario, strategy: Strategy, *,
        policies: Sequence[PolicyDocument] = (), record_timeline: bool = False,
        ties_seed: int | None = None) -> RunResult:
    """Play `scenario` to the end under `strategy`; `policies` default to the scenario's;
    `ties_seed`, when given, draws the default scheduler's ties instead of the scenario's seed."""
    match strategy:
        case "policy":
            world = World(scenario, policies=policies or scenario.policies,
                          record_timeline=record_timeline, ties_seed=ties_seed)
        case "baseline":
            world = World(scenario, record_timeline=record_timeline, ties_seed=ties_seed)
        case "baseline_fewest":
            world = World(scenario, record_timeline=record_timeline, placement="fewest",
                          ties_seed=ties_seed)
        case "oracle":
            world = World(scenario, allocation=scenario.oracle, record_timeline=record_timeline,
                          ties_seed=ties_seed)
        case _:
            assert_never(strategy)
    world.run()
    return world.result(strategy)
