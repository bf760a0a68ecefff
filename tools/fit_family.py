"""Fit the simulator's loss-curve family to the shipped recorded curves and write the parameters.

Usage: .venv/bin/python tools/fit_family.py [--out policyd/sim/data/family.json]

Runs `policyd.sim.family.fit_family` on each curve of `policyd/sim/data/curves.json` (~10 s in
all) and writes the fits, with the SHA-256 of the curves file they were made from, as JSON.
`policyd simulate` reads that file instead of fitting at every start. Re-run it whenever
`tools/record_curves.py` re-records the curves; `tests/sim/test_family.py` fails until then.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from policyd.sim.family import fit_family, fits_to_dict
from policyd.sim.profiles import curves_sha256, load_profiles

DEFAULT_OUT = Path(__file__).resolve().parent.parent / "policyd" / "sim" / "data" / "family.json"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    fits = {name: fit_family(name, p.losses) for name, p in load_profiles().items()}
    document = fits_to_dict(fits, curves_sha256=curves_sha256())
    args.out.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    for name, fit in fits.items():
        print(f"{name:6} c={fit.c:.4g} a={fit.a:.4g} tau={fit.tau:.4g} gamma={fit.gamma:.4g} "
              f"k={fit.k:.3g} rms_log_residual={fit.rms_log_residual:.3f}")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
