"""SetCpu as Docker's `update` arguments. Pure: no I/O.

* shares (soft, work-conserving): `cpu_shares = max(2, round(fraction * 1024))`; 1024 is
  Docker's default weight, so 1.0 means "as much as any other container", which is what
  FlowCon's limit 1 (free competition) means; 2 is the kernel's minimum. The sources read it
  back as shares / 1024 = fraction (`SourceSettings.shares_meaning="fraction"`).
* quota (hard cap, CFS): `cpu_period = 100000` us and `cpu_quota = round(fraction * cores *
  100000)`, at least 1000 us (the kernel's minimum), where `cores` is the node's `NCPU`.
  fraction 1.0 removes the cap (`cpu_quota = -1`), rather than capping at the whole node.
* switching modes: into shares, a leftover cap is removed (`cpu_quota = -1`); into quota, a
  leftover weight other than the default goes back to 1024. Zero values are never sent (the
  SDK drops them silently), nor `NanoCpus` (the SDK's update has none, and the daemon refuses
  to mix it with a quota): a container created with `--cpus` cannot be capped by quota.
"""

from __future__ import annotations

from typing import Any, Literal

PERIOD_US = 100_000
MIN_QUOTA_US = 1_000
MIN_SHARES = 2
DEFAULT_SHARES = 1024


def cpu_update(fraction: float, mode: Literal["shares", "quota"], *, cores: float,
               current_shares: int, current_quota: int) -> dict[str, Any]:
    """The keyword arguments of `Container.update` putting the container at `fraction`."""
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction must be in (0, 1], got {fraction}")
    update: dict[str, Any] = {}
    if mode == "shares":
        update["cpu_shares"] = max(MIN_SHARES, round(fraction * DEFAULT_SHARES))
        if current_quota > 0:
            update["cpu_quota"] = -1
        return update
    if 0 < current_shares != DEFAULT_SHARES:
        update["cpu_shares"] = DEFAULT_SHARES
    if fraction >= 1.0:
        update["cpu_quota"] = -1
    else:
        update["cpu_period"] = PERIOD_US
        update["cpu_quota"] = max(MIN_QUOTA_US, round(fraction * cores * PERIOD_US))
    return update
