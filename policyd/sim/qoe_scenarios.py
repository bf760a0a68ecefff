"""The qoe-* scenarios: jobs with throughput targets that equal shares cannot all meet.

Written down (and their baseline and oracle run and recorded, benchmarks/README.md "QoE
targets") before any policy ran on them, so nothing here is fitted to a policy's result.

Every job declares `policyd.io/qoe-target: steps_per_second>=R`, R being its speed at `need`
cores (its own profile, `JobSpec.rate_at`): the target is met when the job's iterations over
its completion time reach R (`policyd.sim.targets`). Needs are drawn per job around the equal
share e = cores x workers / jobs (what the baseline gives each job while all run):

* less than an equal share ("less", 20 %): need in [0.5 e, 0.9 e];
* much more ("more", 60 %): need in [1.2 e, 2.0 e], at most 1.9 cores (every job can use 2);
* impossible ("impossible", 20 %): need in [2.2, 2.8] cores, beyond the 2 any job can use.

qoe-burst-16-2w is the regime DQoES reports on (the baseline meets few): sixteen jobs within
30 s, so that they run together nearly all along, and 10/70/20 % of the classes.

The baseline is equal shares (no policy: every job weighs the same, CFS); the oracle meets the
most targets it can with every job's true speed known (`policyd.sim.qoe_oracle`). Nodes have 8
cores (the thesis scenarios' 2-core nodes hold at most two jobs: nothing to share out); every
job would take `STANDALONE_SECONDS` alone on one core, so runs overlap for most of their length.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from policyd.engine.registry import KINDS
from policyd.engine.spec import API_VERSION, PolicyDocument
from policyd.model import labels as keys
from policyd.sim.profiles import fitted_profile, load_profiles
from policyd.sim.types import JobSpec, NodeSpec, Profile, Scenario

NODE_CORES = 8.0
STANDALONE_SECONDS = 600.0
MAX_NEED_CORES = 1.9
CLASSES = ("less", "more", "impossible")
CLASS_SHARES = (0.2, 0.6, 0.2)
FAMILIES = ("vae", "cnn", "lstm", "birnn", "gru", "rnn")


def qoe_policy(name: str, spec: Mapping[str, Any] | None = None) -> PolicyDocument:
    """A QoE policy with its defaults (and `spec` over them), as a policy file gives it."""
    return KINDS["QoE"].document.model_validate({
        "apiVersion": API_VERSION, "kind": "QoE", "metadata": {"name": name},
        "spec": dict(spec or {})})


def need_of(kind: str, equal_share: float, rng: np.random.Generator) -> float:
    """Cores a job of class `kind` needs (module docstring)."""
    match kind:
        case "less":
            return float(rng.uniform(0.5, 0.9)) * equal_share
        case "more":
            return min(float(rng.uniform(1.2, 2.0)) * equal_share, MAX_NEED_CORES)
        case "impossible":
            return float(rng.uniform(2.2, 2.8))
    raise ValueError(f"unknown need class {kind!r}")


def target_job(job_id: str, profile: Profile, *, submit: float, need: float,
               node: str | None) -> JobSpec:
    """A job sized to STANDALONE_SECONDS on one core, declaring the rate it makes on `need`
    cores (above its parallelism: the rate `need` cores would give were it unlimited, which no
    allocation reaches)."""
    scale = STANDALONE_SECONDS / (profile.iterations * profile.iteration_seconds_1core)
    plain = JobSpec(id=job_id, profile=profile, submit_seconds=submit, work_scale=scale,
                    node=node)
    p = profile.parallel_fraction
    if need <= profile.max_parallelism:
        rate = plain.rate_at(need)
    else:  # Amdahl's law beyond the job's threads: faster than any allocation makes it
        rate = 1.0 / (profile.iteration_seconds_1core * scale * ((1 - p) + p / need))
    return JobSpec(id=job_id, profile=profile, submit_seconds=submit, work_scale=scale,
                   node=node, labels={keys.QOE_TARGET: f"steps_per_second>={rate:.4g}"})


def _nodes(workers: int) -> tuple[NodeSpec, ...]:
    return tuple(NodeSpec(name=f"worker-{i + 1}", cores=NODE_CORES) for i in range(workers))


def _scenario(name: str, description: str, seed: int, workers: int,
              jobs: Sequence[JobSpec]) -> Scenario:
    return Scenario(name=name, description=description, seed=seed, nodes=_nodes(workers),
                    jobs=tuple(jobs), policies=(qoe_policy(name),),
                    baseline="NA" if workers == 1 else "DS", oracle="qoe")


def fixed_8(seed: int) -> Scenario:
    """One 8-core worker, eight recorded jobs at once: one needs less than an equal share
    (1 core), five more, two cannot be met at all."""
    profiles = load_profiles()
    models = ("vae", "cnn", "lstm", "birnn", "gru", "rnn", "vae", "cnn")
    needs = (0.6, 1.3, 1.4, 1.5, 1.6, 1.7, 2.5, 2.8)
    jobs = [target_job(f"job-{i + 1}", profiles[m], submit=0.0, need=n, node="worker-1")
            for i, (m, n) in enumerate(zip(models, needs, strict=True))]
    return _scenario("qoe-fixed-8", "8 jobs at 0 s on one 8-core worker, needs 0.6-2.8 cores "
                     "(equal share 1)", seed, 1, jobs)


def random_jobs(name: str, count: int, workers: int, horizon: float,
                shares: Sequence[float] = CLASS_SHARES) -> Callable[[int], Scenario]:
    """`count` jobs of random models (fitted curves) submitted at random in [0, horizon] s on
    `workers` 8-core workers, needs drawn by class with probabilities `shares` (module
    docstring)."""
    def build(seed: int) -> Scenario:
        rng = np.random.default_rng(seed)
        equal = NODE_CORES * workers / count
        models = [str(m) for m in rng.choice(FAMILIES, size=count)]
        submits = sorted(round(float(t), 1) for t in rng.uniform(0.0, horizon, size=count))
        classes = [str(c) for c in rng.choice(CLASSES, size=count, p=list(shares))]
        jobs = []
        for i, (model, submit, kind) in enumerate(zip(models, submits, classes, strict=True)):
            profile = fitted_profile(model, rng)
            jobs.append(target_job(f"job-{i + 1}", profile, submit=submit,
                                   need=need_of(kind, equal, rng),
                                   node="worker-1" if workers == 1 else None))
        where = "one 8-core worker" if workers == 1 else f"{workers} 8-core workers"
        mix = "/".join(f"{100 * x:.0f}" for x in shares)
        return _scenario(name, f"{count} jobs at random in [0, {horizon:g}] s on {where}, "
                         f"needs {mix} % less than / more than an equal share "
                         f"({equal:.2g} cores) / impossible", seed, workers, jobs)
    return build
