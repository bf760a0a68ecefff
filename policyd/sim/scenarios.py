"""The thesis's experiments as named, seeded scenarios (chapter 6), and sweeps over parameters.

Each scenario draws everything random (submission times, models, fitted curves) from its seed
when it is built, so the policy, baseline and oracle runs share every draw and the same seed
gives the same world.

Sizing. Nodes have 2 cores, like the machine the curves were recorded on, and every job can use
both (its recorded threads): as on the thesis's testbed, where PyTorch and TensorFlow use every
core, one job can fill a node and two already contend. Our recorded models are small and differ
in cost per iteration by 10x, unlike the thesis's, so every job is sized by one figure: how long
it would take alone on one core (`STANDALONE_SECONDS`; its iterations keep their recorded
relative costs across the run). That figure is chosen per scenario so that the *baseline* run
(NA or DS: no policy at all) is as long as the thesis's baseline (`CALIBRATION_TARGETS`: its
makespan, or for flowcon-fixed-3 each job's NA completion time). It is calibrated on the
baseline only, never on the policy run, so it cannot favour the policy;
`tools/calibrate_scenarios.py` recomputes it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any, Literal

import numpy as np

from policyd.engine.registry import KINDS
from policyd.engine.spec import API_VERSION, PolicyDocument
from policyd.sim import qoe_scenarios
from policyd.sim.deadline_scenarios import BUILDERS as DEADLINE_BUILDERS
from policyd.sim.profiles import fitted_profile, load_profiles
from policyd.sim.thesis import THESIS
from policyd.sim.types import JobSpec, NodeSpec, Profile, Scenario
from policyd.sim.workers import CLUSTERS, load_workers

NODE_CORES = 2.0
FAMILIES = ("vae", "cnn", "lstm", "birnn", "gru", "rnn")

CALIBRATION_TARGETS: Mapping[str, tuple[float, ...]] = MappingProxyType({
    # NA completion times of VAE, MNIST (PyTorch), MNIST (TensorFlow): makespan 394.0 s;
    # MNIST (PyTorch) active from 40 s to ~280 s (Fig. 6.6); MNIST (TensorFlow) 84.7 s (6.1.3)
    "flowcon-fixed-3": (394.0, 240.0, 84.7),
    "flowcon-random-5": (730.0,),  # NA: jobs active until ~730 s (Fig. 6.9, section 6.1.4)
    "flowcon-random-10": (1384.9,),  # NA makespan, section 6.1.5
    "flowcon-random-15": (1980.1,),  # NA makespan, section 6.1.5
    "specon-fixed-20": (1260.0,),  # DS makespan, section 6.2.2
    "specon-random-20-vae": (1260.0,),  # not stated: the VAE cluster of specon-fixed-20
    "specon-random-20": (1421.0,),  # DS makespan, section 6.2.3
    "specon-random-30": (1640.0,),  # DS makespan, section 6.2.3
    "specon-random-50-8w": (2070.0,),  # DS makespan, section 6.2.4
})
"""What each scenario's baseline is calibrated to (thesis, chapter 6): its makespan, or a
completion time per job."""

STANDALONE_SECONDS: Mapping[str, tuple[float, ...]] = MappingProxyType({
    # tools/calibrate_scenarios.py, 2026-11-22; the baseline it gave (thesis in brackets)
    "flowcon-fixed-3": (428.3, 211.8, 56.5),  # JCT 394.0, 240.0, 84.7 s (394, 240, 84.7 s)
    "flowcon-random-5": (284.8,),  # makespan 730.0 s (730 s)
    "flowcon-random-10": (273.5,),  # makespan 1384.9 s (1384.9 s)
    "flowcon-random-15": (262.8,),  # makespan 1980.1 s (1980.1 s)
    "specon-fixed-20": (359.0,),  # makespan 1205.3 s (1260 s; the nearest reachable)
    "specon-random-20-vae": (481.2,),  # makespan 1260.0 s (1260 s)
    "specon-random-20": (542.0,),  # makespan 1421.0 s (1421 s)
    "specon-random-30": (407.0,),  # makespan 1640.0 s (1640 s)
    "specon-random-50-8w": (552.3,),  # makespan 2070.0 s (2070 s)
    # FlowCon 2.0's experiments (issue 16): not calibrated (the paper's baseline figures are
    # not public); the job size of the thesis's SpeCon experiment on as many workers
    "flowcon2-4w-20": (542.0,),  # as specon-random-20 (4 workers, 20 jobs)
    "flowcon2-8w-60-hetero": (552.3,),  # as specon-random-50-8w (8 workers)
})
"""Per scenario, how long each job would take alone on one core, seconds: one figure for every
job, or one per job (see the module docstring)."""


def work_scale(profile: Profile, standalone_seconds: float) -> float:
    """The factor on `profile`'s iteration cost that makes its whole run take
    `standalone_seconds` alone on one core."""
    return standalone_seconds / (profile.iterations * profile.iteration_seconds_1core)


def policy_document(kind: str, name: str, spec: Mapping[str, Any]) -> PolicyDocument:
    """A policy of the registered `kind`, validated by its model as a policy file would be."""
    return KINDS[kind].document.model_validate({
        "apiVersion": API_VERSION, "kind": kind, "metadata": {"name": name}, "spec": spec})


def flowcon_policy(name: str, *, alpha: float, interval_seconds: float) -> PolicyDocument:
    """The thesis's FlowCon settings (beta 2, soft work-conserving limits, back-off to 320 s)."""
    return policy_document("FlowCon", name, {
        "alpha": alpha, "interval_seconds": interval_seconds, "beta": 2,
        "max_interval_seconds": max(320.0, interval_seconds), "mode": "shares"})


def specon_policy(name: str, *, alpha: float, interval_seconds: float) -> PolicyDocument:
    """The thesis's SpeCon settings (weights 2 / 1.5 / 1, rebalancing on, no extra limits)."""
    return policy_document("SpeCon", name, {
        "alpha": alpha, "interval_seconds": interval_seconds,
        "weights": {"pc": 2.0, "wc": 1.5, "cc": 1.0},
        "safety": {"max_migrations_per_cycle": 100, "max_migrations_per_node": 100}})


def _nodes(count: int) -> tuple[NodeSpec, ...]:
    return tuple(NodeSpec(name=f"worker-{i + 1}", cores=NODE_CORES) for i in range(count))


def _jobs(name: str, plan: Sequence[tuple[str, float]], *, rng: np.random.Generator,
          recorded: bool, node: str | None) -> tuple[JobSpec, ...]:
    """JobSpecs in submission order, named job-1..job-N as in the thesis's figures."""
    profiles = load_profiles()
    sizes = STANDALONE_SECONDS[name]
    ordered = sorted(plan, key=lambda item: item[1])
    jobs = []
    for i, (model, submit) in enumerate(ordered):
        profile = profiles[model] if recorded else fitted_profile(model, rng)
        seconds = sizes[i] if len(sizes) > 1 else sizes[0]
        jobs.append(JobSpec(id=f"job-{i + 1}", profile=profile,
                            submit_seconds=round(float(submit), 1),
                            work_scale=work_scale(profile, seconds), node=node))
    return tuple(jobs)


def _scenario(name: str, description: str, seed: int, nodes: int, *, policy: PolicyDocument,
              jobs: tuple[JobSpec, ...], baseline: Literal["NA", "DS"]) -> Scenario:
    """`baseline` names what the thesis compares with: NA (plain Docker, no policy) for its
    FlowCon experiments, DS (the default scheduler's placement) for SpeCon's."""
    return Scenario(
        name=name, description=description, seed=seed, nodes=_nodes(nodes), jobs=jobs,
        policies=(policy,), baseline=baseline, thesis=THESIS.get(name, {}),
    )


def _flowcon_fixed_3(seed: int) -> Scenario:
    name = "flowcon-fixed-3"
    rng = np.random.default_rng(seed)
    jobs = _jobs(name, [("vae", 0.0), ("cnn", 40.0), ("cnn", 80.0)], rng=rng, recorded=True,
                 node="worker-1")
    return _scenario(name, "VAE at 0 s, MNIST (CNN) at 40 s and 80 s on one node", seed, 1,
                     policy=flowcon_policy(name, alpha=0.05, interval_seconds=20), jobs=jobs,
                     baseline="NA")


def _flowcon_random(count: int, alpha: float, interval: float) -> Callable[[int], Scenario]:
    name = f"flowcon-random-{count}"

    def build(seed: int) -> Scenario:
        rng = np.random.default_rng(seed)
        if count == 5:  # the thesis's five: LSTM, VAE, VAE (TensorFlow), MNIST, GRU
            models: list[str] = ["lstm", "vae", "vae", "cnn", "gru"]
        else:
            models = [str(m) for m in rng.choice(FAMILIES, size=count)]
        submits = rng.uniform(0.0, 200.0, size=count)
        jobs = _jobs(name, list(zip(models, submits.tolist(), strict=True)), rng=rng,
                     recorded=False, node="worker-1")
        return _scenario(name, f"{count} jobs submitted at random in [0, 200] s on one node",
                         seed, 1,
                         policy=flowcon_policy(name, alpha=alpha, interval_seconds=interval),
                         jobs=jobs, baseline="NA")

    return build


def _specon_fixed_20(seed: int) -> Scenario:
    name = "specon-fixed-20"
    rng = np.random.default_rng(seed)
    jobs = _jobs(name, [("vae", 50.0 * i) for i in range(20)], rng=rng, recorded=False,
                 node=None)
    return _scenario(name, "20 VAE jobs, one every 50 s, on 4 workers", seed, 4,
                     policy=specon_policy(name, alpha=0.01, interval_seconds=30), jobs=jobs,
                     baseline="DS")


def _specon_random(name: str, count: int, workers: int, horizon: float,
                   single_model: bool) -> Callable[[int], Scenario]:
    def build(seed: int) -> Scenario:
        rng = np.random.default_rng(seed)
        models = (["vae"] * count if single_model
                  else [str(m) for m in rng.choice(FAMILIES, size=count)])
        submits = rng.uniform(0.0, horizon, size=count)
        jobs = _jobs(name, list(zip(models, submits.tolist(), strict=True)), rng=rng,
                     recorded=False, node=None)
        what = "VAE jobs" if single_model else "jobs of random models"
        return _scenario(name, f"{count} {what} submitted at random in [0, {horizon:g}] s on "
                         f"{workers} workers", seed, workers,
                         policy=specon_policy(name, alpha=0.01, interval_seconds=30), jobs=jobs,
                         baseline="DS")

    return build


def flowcon2_policy(name: str, order: str = "remaining") -> PolicyDocument:
    """FlowCon2 at its defaults (FlowCon's alpha 0.05, interval 20 s, beta 2, shares; moves
    when the predicted gain exceeds 30 s x 2) but its per-worker `order`: the flowcon2-*
    scenarios play `remaining`, the order policies/flowcon2.yaml ships (benchmarks/README.md,
    "flowcon2.py"); `growth` is the kind's default, FlowCon's own."""
    return policy_document("FlowCon2", name, {"order": order})


def _flowcon2(name: str, count: int, horizon: float,
              cluster: str | None) -> Callable[[int], Scenario]:
    """FlowCon 2.0's experiments: `count` jobs of random models submitted at random in
    [0, horizon] s, handed over held (the policy places them; the baselines start them at
    submission on the default scheduler's node), on `cluster`'s workers (a worker file of
    policyd/sim/data/clusters) or 4 equal 2-core workers."""
    def build(seed: int) -> Scenario:
        rng = np.random.default_rng(seed)
        models = [str(m) for m in rng.choice(FAMILIES, size=count)]
        submits = rng.uniform(0.0, horizon, size=count)
        jobs = tuple(replace(j, held=True) for j in _jobs(
            name, list(zip(models, submits.tolist(), strict=True)), rng=rng, recorded=False,
            node=None))
        nodes = load_workers(CLUSTERS / f"{cluster}.yaml") if cluster else _nodes(4)
        where = (f"{len(nodes)} unequal workers ({cluster})" if cluster
                 else f"{len(nodes)} equal workers")
        return Scenario(
            name=name, description=f"{count} held jobs of random models submitted at random "
                                   f"in [0, {horizon:g}] s on {where}",
            seed=seed, nodes=nodes, jobs=jobs, policies=(flowcon2_policy(name),),
            baseline="DS", thesis=THESIS.get(name, {}))

    return build


def _hetero(base: str, cluster: str) -> Callable[[int], Scenario]:
    """A thesis scenario played on a worker file's unequal workers."""
    def build(seed: int) -> Scenario:
        scenario = on_workers(SCENARIOS[base].build(seed),
                              load_workers(CLUSTERS / f"{cluster}.yaml"))
        return replace(scenario, name=f"{base}-hetero")

    return build


@dataclass(frozen=True, kw_only=True)
class Entry:
    build: Callable[[int], Scenario]
    seed: int
    default: bool = True


SCENARIOS: Mapping[str, Entry] = MappingProxyType({
    "flowcon-fixed-3": Entry(build=_flowcon_fixed_3, seed=1),
    "flowcon-random-5": Entry(build=_flowcon_random(5, 0.03, 30), seed=5),
    "flowcon-random-10": Entry(build=_flowcon_random(10, 0.10, 20), seed=10),
    "flowcon-random-15": Entry(build=_flowcon_random(15, 0.10, 20), seed=15),
    "specon-fixed-20": Entry(build=_specon_fixed_20, seed=20),
    "specon-random-20-vae": Entry(
        build=_specon_random("specon-random-20-vae", 20, 4, 300.0, True), seed=21),
    "specon-random-20": Entry(build=_specon_random("specon-random-20", 20, 4, 300.0, False),
                              seed=22),
    "specon-random-30": Entry(build=_specon_random("specon-random-30", 30, 4, 300.0, False),
                              seed=30),
    "specon-random-50-8w": Entry(
        build=_specon_random("specon-random-50-8w", 50, 8, 1200.0, False), seed=50),
    "deadline-sufficient": Entry(build=DEADLINE_BUILDERS["deadline-sufficient"], seed=1),
    "deadline-insufficient": Entry(build=DEADLINE_BUILDERS["deadline-insufficient"],
                                   seed=3),
    # QoE targets (`policyd.sim.qoe_scenarios`): not the thesis's, so not in the default set
    # FlowCon 2.0 (issue 16): placement on equal and unequal workers, and the thesis's SpeCon
    # scenarios on unequal ones
    "flowcon2-4w-20": Entry(build=_flowcon2("flowcon2-4w-20", 20, 300.0, None), seed=40,
                            default=False),
    "flowcon2-8w-60-hetero": Entry(
        build=_flowcon2("flowcon2-8w-60-hetero", 60, 1200.0, "8w-hetero"), seed=60,
        default=False),
    "specon-random-20-hetero": Entry(build=_hetero("specon-random-20", "4w-hetero"), seed=22,
                                     default=False),
    "specon-random-50-8w-hetero": Entry(build=_hetero("specon-random-50-8w", "8w-hetero"),
                                        seed=50, default=False),
    "qoe-fixed-8": Entry(build=qoe_scenarios.fixed_8, seed=8, default=False),
    "qoe-random-12": Entry(build=qoe_scenarios.random_jobs("qoe-random-12", 12, 1, 120.0),
                           seed=12, default=False),
    "qoe-random-32-4w": Entry(
        build=qoe_scenarios.random_jobs("qoe-random-32-4w", 32, 4, 240.0), seed=32,
        default=False),
    "qoe-burst-16-2w": Entry(
        build=qoe_scenarios.random_jobs("qoe-burst-16-2w", 16, 2, 30.0, (0.1, 0.7, 0.2)),
        seed=16, default=False),
})
"""Every named scenario, its builder and default seed."""


@dataclass(frozen=True, kw_only=True)
class Sweep:
    """A scenario run under several policy settings (one figure of the thesis)."""

    base: str
    figure: str
    field: str
    values: tuple[float, ...]
    fixed: Mapping[str, float]


SWEEPS: Mapping[str, Sweep] = MappingProxyType({
    "sweep-flowcon-interval-a5": Sweep(base="flowcon-fixed-3", figure="Fig. 6.1",
                                       field="interval_seconds", values=(20, 30, 40, 50, 60),
                                       fixed={"alpha": 0.05}),
    "sweep-flowcon-interval": Sweep(base="flowcon-fixed-3", figure="Fig. 6.2",
                                    field="interval_seconds", values=(20, 30, 40, 50, 60),
                                    fixed={"alpha": 0.10}),
    "sweep-flowcon-alpha": Sweep(base="flowcon-fixed-3", figure="Fig. 6.3", field="alpha",
                                 values=(0.01, 0.03, 0.05, 0.10, 0.15),
                                 fixed={"interval_seconds": 20}),
    "sweep-flowcon-alpha-i30": Sweep(base="flowcon-fixed-3", figure="Fig. 6.4", field="alpha",
                                     values=(0.01, 0.03, 0.05, 0.10, 0.15),
                                     fixed={"interval_seconds": 30}),
    "sweep-specon-interval": Sweep(base="specon-random-20-vae", figure="Fig. 6.17",
                                   field="interval_seconds", values=(20, 25, 30),
                                   fixed={"alpha": 0.05}),
    "sweep-specon-alpha": Sweep(base="specon-random-20-vae", figure="Fig. 6.18", field="alpha",
                                values=(0.01, 0.05, 0.10), fixed={"interval_seconds": 30}),
})
"""Parameter sweeps like the thesis's Figs. 6.1-6.4, 6.17 and 6.18."""


def build(name: str, seed: int | None = None) -> Scenario:
    """The named scenario, drawn from `seed` (default: the scenario's own)."""
    entry = SCENARIOS[name]
    return entry.build(entry.seed if seed is None else seed)


def with_policies(scenario: Scenario, policies: Sequence[PolicyDocument]) -> Scenario:
    """The same world (jobs, nodes, baseline) under other policies, of any kinds: they run
    together, as the daemon runs every policy of its files."""
    return replace(scenario, policies=tuple(policies))


def on_workers(scenario: Scenario, nodes: Sequence[NodeSpec]) -> Scenario:
    """The same jobs and policies on other workers (a worker file's): a job pinned to a node
    that is not among them is placed by the default scheduler instead."""
    names = {n.name for n in nodes}
    jobs = tuple(j if j.node is None or j.node in names else replace(j, node=None)
                 for j in scenario.jobs)
    return replace(scenario, nodes=tuple(nodes), jobs=jobs,
                   description=f"{scenario.description}; on {len(nodes)} unequal workers")


def sweep_variants(name: str, seed: int | None = None) -> list[tuple[str, Scenario]]:
    """(label, scenario) for every setting of the sweep, sharing one world."""
    sweep = SWEEPS[name]
    base = build(sweep.base, seed)
    variants = []
    for value in sweep.values:
        settings: dict[str, Any] = {**sweep.fixed, sweep.field: value}
        label = f"alpha={settings['alpha']:g} interval={settings['interval_seconds']:g}s"
        spec = {**base.policy.spec.model_dump(mode="json"), **settings}
        policy = policy_document(base.policy.kind, base.policy.name, spec)
        variants.append((label, with_policies(base, [policy])))
    return variants
