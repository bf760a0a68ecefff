"""The one Kubernetes quantity parser, and its two readers: the pod source (cores) and the
actuator (whole millicores), which must agree on every quantity the API server may write."""

from __future__ import annotations

from decimal import Decimal

import pytest

from policyd.actuators.errors import ActuationError
from policyd.actuators.kubernetes.cpu import millicores
from policyd.clients.kubernetes_quantity import parse_quantity
from policyd.sources.kubernetes_pod_facts import cores

QUANTITIES = {
    # decimalSI
    "plain": ("2", "2"),
    "decimal": ("1.5", "1.5"),
    "trailing-dot": ("5.", "5"),
    "leading-dot": (".5", "0.5"),
    "signed": ("+3", "3"),
    "negative": ("-250m", "-0.25"),
    "milli": ("250m", "0.25"),
    "milli-fraction": ("1.5m", "0.0015"),
    "micro": ("500u", "0.0005"),
    "nano": ("7n", "0.000000007"),
    "kilo": ("2k", "2000"),
    "mega": ("1.5M", "1500000"),
    "giga": ("1G", "1000000000"),
    "tera": ("1T", "1e12"),
    "peta": ("1P", "1e15"),
    "exa": ("1E", "1e18"),
    # binarySI
    "kibi": ("1Ki", "1024"),
    "mebi": ("0.5Mi", "524288"),
    "gibi": ("2Gi", "2147483648"),
    "tebi": ("1Ti", "1099511627776"),
    "pebi": ("1Pi", "1125899906842624"),
    "exbi": ("1Ei", "1152921504606846976"),
    # decimalExponent: E followed by digits is an exponent, E alone is exa
    "exponent": ("1e3", "1000"),
    "exponent-upper": ("1E3", "1000"),
    "exponent-signed": ("1.5e+2", "150"),
    "exponent-negative": ("25e-2", "0.25"),
    # what Python writes when a number is passed instead of a string
    "int": (2, "2"),
    "float": (0.25, "0.25"),
    "float-exponent": (1e-05, "0.00001"),
}


@pytest.mark.parametrize(("text", "value"), QUANTITIES.values(), ids=QUANTITIES.keys())
def test_quantities(text: str | int | float, value: str) -> None:
    assert parse_quantity(text) == Decimal(value)


NOT_QUANTITIES = {
    "empty": "",
    "suffix-only": "m",
    "two-dots": "1.5.2",
    "space": "1 ",
    "unknown-suffix": "2x",
    "lowercase-kibi": "1ki",
    "binary-exponent": "1Ki3",
    "fractional-exponent": "1e1.5",
    "words": "two",
    "bool": True,
    "too-big": "1e999999999",
}


@pytest.mark.parametrize("text", NOT_QUANTITIES.values(), ids=NOT_QUANTITIES.keys())
def test_not_quantities(text: str | bool) -> None:
    with pytest.raises(ValueError, match="Kubernetes quantity"):
        parse_quantity(text)


MILLICORES = {
    "milli": ("250m", 250, 0.25),
    "cores": ("2", 2000, 2.0),
    "fraction": ("1.5", 1500, 1.5),
    "rounds-up-to-a-millicore": ("0.0001", 1, 0.0001),
    "exact-tenth": ("0.1", 100, 0.1),
    "kilo": ("1k", 1_000_000, 1000.0),
    "exponent": ("2e-3", 2, 0.002),
    "number": (2, 2000, 2.0),
}


@pytest.mark.parametrize(("text", "milli", "in_cores"), MILLICORES.values(),
                         ids=MILLICORES.keys())
def test_source_and_actuator_read_cpu_alike(text: str | int, milli: int,
                                            in_cores: float) -> None:
    assert millicores(text) == milli
    assert cores(text) == in_cores


def test_absent_and_unreadable_cpu() -> None:
    assert millicores(None) is None and millicores("") is None
    assert cores(None) is None and cores("") is None
    with pytest.raises(ActuationError, match="CPU quantity 'lots' cannot be read"):
        millicores("lots")
    assert cores("lots") is None  # the source leaves an unreadable request out
