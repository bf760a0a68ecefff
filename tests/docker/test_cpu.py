"""SetCpu -> Docker update arguments (pure)."""

from __future__ import annotations

from typing import Any

import pytest

from policyd.actuators.docker.cpu import cpu_update

CASES: list[tuple[str, float, str, int, int, int, dict[str, Any]]] = [
    # id, fraction, mode, cores, current shares, current quota, expected
    ("shares-quarter", 0.25, "shares", 4, 0, 0, {"cpu_shares": 256}),
    ("shares-full", 1.0, "shares", 4, 256, 0, {"cpu_shares": 1024}),
    ("shares-tiny-is-2", 0.0001, "shares", 4, 0, 0, {"cpu_shares": 2}),
    ("shares-rounds", 0.3, "shares", 4, 0, 0, {"cpu_shares": 307}),
    ("quota-to-shares-lifts-cap", 0.5, "shares", 4, 0, 200_000,
     {"cpu_shares": 512, "cpu_quota": -1}),
    ("quota-half-of-4", 0.5, "quota", 4, 0, 0, {"cpu_period": 100_000, "cpu_quota": 200_000}),
    ("quota-quarter-of-2", 0.25, "quota", 2, 1024, 0,
     {"cpu_period": 100_000, "cpu_quota": 50_000}),
    ("quota-full-lifts-cap", 1.0, "quota", 4, 0, 200_000, {"cpu_quota": -1}),
    ("quota-min-1ms", 0.001, "quota", 1, 0, 0, {"cpu_period": 100_000, "cpu_quota": 1000}),
    ("shares-to-quota-resets-weight", 0.5, "quota", 2, 256, 0,
     {"cpu_shares": 1024, "cpu_period": 100_000, "cpu_quota": 100_000}),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_cpu_update(case: tuple[str, float, str, int, int, int, dict[str, Any]]) -> None:
    _, fraction, mode, cores, shares, quota, expected = case
    got = cpu_update(fraction, mode, cores=cores,  # type: ignore[arg-type]
                     current_shares=shares, current_quota=quota)
    assert got == expected
    assert "nano_cpus" not in got and 0 not in got.values()


@pytest.mark.parametrize("fraction", [0.0, -0.1, 1.5])
def test_fraction_out_of_range_is_refused(fraction: float) -> None:
    with pytest.raises(ValueError, match="fraction"):
        cpu_update(fraction, "shares", cores=1, current_shares=0, current_quota=0)
