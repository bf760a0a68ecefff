"""Deadline scenarios: jobs that declare when they must finish, handed over held, on a cluster
of 4-core workers (the setting of the QoS autoscaling framework, IJCNN 2019, DOI
10.1109/IJCNN.2019.8852319, whose abstract gives the figures beside ours).

Each job draws, from the scenario's seed: a model (the fitted family of a recorded one, as the
other random scenarios do), a submission time, its solo time (how long it takes alone on a
worker, where it uses the two cores it can: `Profile.max_parallelism`; its iteration costs are
scaled to make it so) and a tightness factor; its deadline is its submission plus its solo time
times the tightness. Workers have 4 cores, twice what one job can use, so a job given a whole
worker leaves half of it idle: what the paper's users do when they over-provision, and what
right-sizing recovers.

* `deadline-sufficient`: the cluster can meet every deadline if it orders and sizes well (the
  deadline oracle meets them all); with first come first served and equal shares it does not.
* `deadline-insufficient`: more jobs: the deadline oracle, a greedy EDF with exact knowledge,
  cannot meet them all (a better schedule may: the oracle is a reference, not an optimum).

The baseline is FCFS: every job starts at its submission, placed by the default scheduler's
rule, with equal CPU shares, no admission control. The oracle is earliest deadline first with
perfect knowledge of every job's work (`policyd.sim.deadline_oracle`). The figures of each
setting (`Setting`) were chosen by running the baseline and the oracle only
(tools/calibrate_deadlines.py prints them), before the policy ever ran on these worlds.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import numpy as np

from policyd.engine.registry import KINDS
from policyd.engine.spec import API_VERSION, PolicyDocument
from policyd.sim.profiles import fitted_profile
from policyd.sim.types import JobSpec, NodeSpec, Scenario

WORKER_CORES = 4.0
FAMILIES = ("vae", "cnn", "lstm", "birnn", "gru", "rnn")

PAPER: Mapping[str, Mapping[str, object]] = MappingProxyType({
    "deadline-sufficient": {
        "source": "IJCNN 2019 abstract (DOI 10.1109/IJCNN.2019.8852319)",
        "completion_rate_pct": 100, "allocated_cpu_used_pct": 100,
        "note": "autoscaling: completion rate 100 % when resources suffice; allocated CPUs "
                "used 100 %"},
    "deadline-insufficient": {
        "source": "IJCNN 2019 abstract (DOI 10.1109/IJCNN.2019.8852319)",
        "completion_rate_change_pct": 26, "allocated_cpu_used_pct": 100,
        "note": "scheduling: completion rate +26 % when resources are insufficient; "
                "allocated CPUs used 100 %"},
})
"""The paper's figures, printed beside ours."""


@dataclass(frozen=True, kw_only=True)
class Setting:
    """One scenario's draws: `jobs` jobs on `workers` workers, submitted uniformly in
    [0, `horizon_seconds`], solo times uniform in `solo_seconds`, tightness uniform in
    `tightness`."""

    jobs: int
    workers: int
    horizon_seconds: float
    solo_seconds: tuple[float, float]
    tightness: tuple[float, float]
    description: str


SETTINGS: Mapping[str, Setting] = MappingProxyType({
    "deadline-sufficient": Setting(
        jobs=24, workers=3, horizon_seconds=240.0, solo_seconds=(120.0, 360.0),
        tightness=(1.4, 6.0),
        description="24 jobs with deadlines (solo time x 1.4-6.0), submitted held in "
                    "[0, 240] s, on 3 workers of 4 cores"),
    "deadline-insufficient": Setting(
        jobs=40, workers=3, horizon_seconds=240.0, solo_seconds=(120.0, 360.0),
        tightness=(1.4, 6.0),
        description="40 jobs with deadlines (solo time x 1.4-6.0), submitted held in "
                    "[0, 240] s, on 3 workers of 4 cores"),
})


def deadline_policy(name: str) -> PolicyDocument:
    """The Deadline policy the scenarios run (policies/deadline.yaml's settings, a 10 s
    interval as the other simulated policies run at their scenario's pace)."""
    spec: dict[str, Any] = {"interval_seconds": 10, "margin": 0.1, "mode": "quota",
                            "hopeless": "floor", "migration_cost_seconds": 10,
                            "safety": {"max_migrations_per_cycle": 5,
                                       "max_migrations_per_node": 2}}
    return KINDS["Deadline"].document.model_validate({
        "apiVersion": API_VERSION, "kind": "Deadline", "metadata": {"name": name},
        "spec": spec})


def _build(name: str) -> Callable[[int], Scenario]:
    setting = SETTINGS[name]

    def build(seed: int) -> Scenario:
        rng = np.random.default_rng(seed)
        models = [str(m) for m in rng.choice(FAMILIES, size=setting.jobs)]
        submits = np.sort(rng.uniform(0.0, setting.horizon_seconds, size=setting.jobs))
        solos = rng.uniform(*setting.solo_seconds, size=setting.jobs)
        tight = rng.uniform(*setting.tightness, size=setting.jobs)
        jobs = []
        for i, (model, submit, solo, factor) in enumerate(
                zip(models, submits.tolist(), solos.tolist(), tight.tolist(), strict=True)):
            profile = fitted_profile(model, rng)
            cores = min(profile.max_parallelism, WORKER_CORES)
            scale = solo / (profile.iterations * profile.iteration_seconds(cores))
            submitted = round(submit, 1)
            jobs.append(JobSpec(id=f"job-{i + 1}", profile=profile, submit_seconds=submitted,
                                work_scale=scale, held=True,
                                deadline_seconds=round(submitted + factor * solo, 1)))
        return Scenario(
            name=name, description=setting.description, seed=seed,
            nodes=tuple(NodeSpec(name=f"worker-{k + 1}", cores=WORKER_CORES)
                        for k in range(setting.workers)),
            jobs=tuple(jobs), policies=(deadline_policy(name),), baseline="FCFS",
            thesis=PAPER[name], oracle="edf")

    return build


BUILDERS: Mapping[str, Callable[[int], Scenario]] = MappingProxyType(
    {name: _build(name) for name in SETTINGS})
