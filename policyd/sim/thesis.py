"""The thesis's own figures for each simulated scenario (its chapter 6; docs/design.md, "The
thesis", cites it).

Printed beside ours by `policyd simulate`, so a reader sees at once where the simulation agrees
with the testbed and where it does not. Only numbers the text states are here; each entry says
where it comes from. Times are seconds; `*_change_pct` are the thesis's reductions (positive =
the policy is faster).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

THESIS: Mapping[str, Mapping[str, object]] = MappingProxyType({
    "flowcon-fixed-3": {
        "source": "section 6.1.3, Figs. 6.1-6.6, Table 6.2",
        "setting": "alpha 5%, itval 20 s; VAE at 0 s, MNIST at 40 s, MNIST at 80 s",
        "baseline_makespan": 394.0,
        "policy_makespan": 386.1,
        "makespan_change_pct": 2.0,
        "note": "MNIST (third job) completes 21.4% faster (Table 6.2, alpha 5%, itval 20); "
                "VAE limited to 0.25 when MNIST starts",
    },
    "flowcon-random-5": {
        "source": "section 6.1.4, Fig. 6.7",
        "setting": "alpha 3%, itval 30 s; 5 jobs submitted in [0, 200] s",
        "makespan_change_pct": "1 to 5",
        "jobs_faster": "4 of 5",
        "note": "Job-5 489.4 s -> 401.6 s (17.9%); Job-3 42.1% faster; Job-4 +2.1 s",
    },
    "flowcon-random-10": {
        "source": "section 6.1.5, Fig. 6.10",
        "setting": "alpha 10%, itval 20 s; 10 jobs submitted in [0, 200] s",
        "baseline_makespan": 1384.9,
        "policy_makespan": 1350.7,
        "makespan_change_pct": 2.5,
        "jobs_faster": "9 of 10",
        "note": "Job-10 188.3 s -> 110.8 s (41.2%); Job-2 +15.4 s (1.1%)",
    },
    "flowcon-random-15": {
        "source": "section 6.1.5, Fig. 6.15",
        "setting": "alpha 10%, itval 20 s; 15 jobs submitted in [0, 200] s",
        "baseline_makespan": 1980.1,
        "policy_makespan": 1950.9,
        "makespan_change_pct": 1.5,
        "jobs_faster": "11 of 15",
        "note": "Job-10 308.1 s -> 271.4 s (11.9%); Job-5 +5.7% (the largest loss)",
    },
    "specon-fixed-20": {
        "source": "section 6.2.2, Fig. 6.16",
        "setting": "20 VAE jobs every 50 s, 4 workers, alpha 0.01, interval 30 s",
        "baseline_avg_jct": 275.2,
        "policy_avg_jct": 234.7,
        "avg_jct_change_pct": 14.7,
        "baseline_makespan": 1260.0,
        "policy_makespan": 1190.0,
        "jobs_faster": "11 of 20",
        "note": "Job-17 348.7 s -> 217.6 s (37.6%)",
    },
    "specon-random-20-vae": {
        "source": "section 6.2.3, Fig. 6.18",
        "setting": "20 VAE jobs in [0, 300] s, 4 workers, alpha 0.01, interval 30 s",
        "avg_jct_change_pct": 7.2,
        "note": "alpha 0.05: 3.2%, alpha 0.1: 9.5% (Fig. 6.18); interval 20/25/30 s at alpha "
                "0.05: 1.1%/5.2%/8.0% (Fig. 6.17)",
    },
    "specon-random-20": {
        "source": "section 6.2.3, Fig. 6.19",
        "setting": "20 random jobs in [0, 300] s, 4 workers, alpha 0.01, interval 30 s",
        "avg_jct_change_pct": 13.6,
        "baseline_makespan": 1421.0,
        "policy_makespan": 1070.0,
        "jobs_faster": "15 of 20",
        "note": "Job-14 1167.8 s -> 799.2 s (31.6%)",
    },
    "specon-random-30": {
        "source": "section 6.2.3, Figs. 6.20-6.24",
        "setting": "30 random jobs in [0, 300] s, 4 workers, alpha 0.01, interval 30 s",
        "baseline_avg_jct": 799.5,
        "policy_avg_jct": 752.6,
        "avg_jct_change_pct": 5.9,
        "baseline_makespan": 1640.0,
        "policy_makespan": 1370.0,
        "jobs_faster": "20 of 30",
        "note": "Job-2 447.4 s -> 314.9 s (29.6%)",
    },
    "specon-random-50-8w": {
        "source": "section 6.2.4, Fig. 6.25",
        "setting": "50 random jobs in [0, 1200] s, 8 workers, alpha 0.01, interval 30 s",
        "baseline_avg_jct": 596.3,
        "policy_avg_jct": 553.0,
        "avg_jct_change_pct": 7.2,
        "baseline_makespan": 2070.0,
        "policy_makespan": 1840.0,
        "jobs_faster": "30 of 50",
        "note": "Job-50 467.5 s -> 273.4 s (41.5%)",
    },
})
"""Scenario name -> the thesis's figures for it (read-only)."""
