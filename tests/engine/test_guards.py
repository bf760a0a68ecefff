"""The guards a job back from a restart and a job whose moves failed meet (engine.guards)."""

from __future__ import annotations

import pytest

from policyd.engine.guards import action_blocked, move_backoff, not_back_yet
from policyd.model import Container, Markers, Series

from .specon_builders import NOW, policy


def container(*, started_at: float, samples: tuple[float, ...] = (NOW - 60, NOW - 30),
              failures: int = 0, failed_at: float | None = None) -> Container:
    return Container(id="x", name="x", node="w1", started_at=started_at,
                     evaluation=Series.of(samples, [1.0] * len(samples)),
                     cpu_usage=Series.empty(),
                     markers=Markers(move_failures=failures, move_failed_at=failed_at))


@pytest.mark.parametrize(("started_at", "samples", "blocked"), [
    pytest.param(NOW - 600, (NOW - 60, NOW - 30), False, id="running-and-scraped"),
    pytest.param(NOW - 10, (NOW - 60, NOW - 30), True, id="restarted-after-the-last-scrape"),
    pytest.param(NOW - 40, (NOW - 60, NOW - 30), False, id="restarted-and-scraped-since"),
    pytest.param(NOW - 10, (), False, id="new-job-never-scraped-is-min-age-business"),
])
def test_a_restarted_job_waits_for_its_exporter(started_at: float, samples: tuple[float, ...],
                                                blocked: bool) -> None:
    c = container(started_at=started_at, samples=samples)
    found = not_back_yet(c, NOW)
    assert (found is not None) == blocked
    spec = policy().spec
    assert (action_blocked(c, spec, NOW, disrupts=True) == found)
    assert action_blocked(c, spec, NOW, disrupts=False) is None  # a CPU change may go ahead
    if blocked:
        assert found == "(re)started 10 s ago and its exporter not scraped since: not ready " \
                        "for a SIGTERM yet"


@pytest.mark.parametrize(("failures", "ago", "base", "blocked"), [
    pytest.param(0, 1.0, 60.0, False, id="never-failed"),
    pytest.param(1, 59.0, 60.0, True, id="one-failure-within-base"),
    pytest.param(1, 60.0, 60.0, False, id="one-failure-base-over"),
    pytest.param(3, 239.0, 60.0, True, id="three-failures-four-times-base"),
    pytest.param(3, 240.0, 60.0, False, id="three-failures-over"),
    pytest.param(20, 64 * 60.0 - 1, 60.0, True, id="capped-at-64-times"),
    pytest.param(20, 64 * 60.0, 60.0, False, id="cap-over"),
    pytest.param(5, 1.0, 0.0, False, id="backoff-off"),
])
def test_failed_moves_back_off_doubling(failures: int, ago: float, base: float,
                                        blocked: bool) -> None:
    c = container(started_at=NOW - 600, failures=failures, failed_at=NOW - ago)
    spec = policy(safety={"move_backoff_seconds": base}).spec
    assert (move_backoff(c, spec, NOW) is not None) == blocked
    assert (action_blocked(c, spec, NOW, disrupts=True) is not None) == blocked
    assert action_blocked(c, spec, NOW, disrupts=False) is None  # a CPU change may go ahead
