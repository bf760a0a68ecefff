"""The end-to-end proofs run real engines, servers and trainers: every test here is slow.

`one_core_lab` is one engine as a one-core host (`lab(cpus="0")`) with its Prometheus, for the
tests that run jobs on a single engine: starting engines, building the trainer image and
starting Prometheus is done once. The remaining-work and deadline comparisons use it;
FlowCon's proof still starts its own lab on an engine of every core (its recorded figures were
taken there), and the lab keeps ports for FlowCon's jobs so that it can move here once it has
been run on one core.

The lab is stopped after the package's last test (package scope, not session): its event and
share logs poll the engine through requests, and a later test's mocked HTTP (`responses`
patches every requests adapter, docker-py's too) took their calls for its own: two CI
failures, a recorded answer used up and a call counted twice."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.e2e import deadlines
from tests.e2e.harness import FLOWCON_JOBS, Lab, lab
from tests.e2e.remaining_work import all_job_names


@pytest.fixture(scope="package")
def one_core_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    with lab(tmp_path_factory.mktemp("one-core"), engines=1, cpus="0",
             jobs=[*FLOWCON_JOBS, *all_job_names(),
                   *deadlines.NAMES.every(deadlines.CI_ATTEMPTS)]) as world:
        yield world
