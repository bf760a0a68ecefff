"""The loss-curve family's fits as shipped (`policyd/sim/data/family.json`): they are what
`tools/fit_family.py` computes from the shipped curves, so they cannot go stale silently."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import resources
from pathlib import Path

import numpy as np
import pytest

from policyd.sim.family import NOISE_BANDS, FamilyFit, fits_from_dict, fits_to_dict
from policyd.sim.profiles import MODELS, curves_sha256, family_fits, read_family

TOOL = Path(__file__).resolve().parents[2] / "tools" / "fit_family.py"


def test_shipped_fits_were_made_from_the_shipped_curves() -> None:
    shipped = read_family()
    assert shipped["curves_sha256"] == curves_sha256(), (
        "policyd/sim/data/curves.json changed since the fits were made: "
        "run tools/fit_family.py")
    assert tuple(family_fits()) == MODELS
    assert all(fit.model == name for name, fit in family_fits().items())


def test_the_json_form_reads_back_bit_for_bit() -> None:
    fit = FamilyFit(model="m", a=1 / 3, c=0.1 + 0.2, tau=np.pi, gamma=2 ** -40, k=1.5,
                    rms_log_residual=1e-17, noise_sigma=7e300, systematic_rms=0.0,
                    band_sigmas=tuple(1 / (b + 7) for b in NOISE_BANDS))
    text = json.dumps(fits_to_dict({"m": fit}, curves_sha256="0" * 64))
    assert fits_from_dict(json.loads(text)) == {"m": fit}


def test_fits_of_other_noise_bands_are_refused() -> None:
    document = {**read_family(), "noise_bands": [0, 100]}
    with pytest.raises(ValueError, match=r"re-run tools/fit_family\.py"):
        fits_from_dict(document)


@pytest.mark.slow  # the tool fits six curves: ~10 s
def test_shipped_fits_equal_what_the_tool_computes(tmp_path: Path) -> None:
    out = tmp_path / "family.json"
    subprocess.run([sys.executable, str(TOOL), "--out", str(out)], check=True,
                   capture_output=True)
    computed = json.loads(out.read_text("utf-8"))
    shipped = json.loads(
        resources.files("policyd.sim").joinpath("data", "family.json").read_text("utf-8"))
    assert computed.keys() == shipped.keys()
    assert {k: v for k, v in computed.items() if k != "models"} == {
        k: v for k, v in shipped.items() if k != "models"}
    assert computed["models"].keys() == shipped["models"].keys()
    for name, fit in computed["models"].items():
        # Equal on the machine that wrote them; numpy's vectorised pow may differ in the last
        # bit on another CPU, hence the tolerance far below any real change of the fit.
        assert fit.keys() == shipped["models"][name].keys()
        for key, value in fit.items():
            assert value == pytest.approx(shipped["models"][name][key], rel=1e-9, abs=0), (
                name, key)
