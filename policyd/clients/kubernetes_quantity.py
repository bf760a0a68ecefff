"""Kubernetes resource quantities (`250m`, `2`, `1.5`, `1e3`, `2k`, `1Ki`) read exactly.

The one parser of the quantity format for the pod source (`policyd.sources.kubernetes_pod_facts`:
requests, limits, allocatable CPU in cores) and the Kubernetes actuator (resizes in whole
millicores). The format, as the API server writes it (k8s.io/apimachinery `resource.Quantity`):

    quantity  ::= signedNumber suffix
    number    ::= digits | digits "." digits | digits "." | "." digits     (sign: + or -)
    suffix    ::= binarySI | decimalExponent | decimalSI
    binarySI  ::= Ki | Mi | Gi | Ti | Pi | Ei                        (powers of 1024)
    decimalSI ::= n | u | m | "" | k | M | G | T | P | E             (powers of 1000)
    decimalExponent ::= "e" signedInteger | "E" signedInteger

`E` alone is exa (10^18); `E` followed by digits is an exponent. `n` and `u` are not in the
documented grammar but the API server's own parser accepts them, so they are read here too.
Values are `Decimal`s so that `0.1` cores is exactly 100 millicores; `millicores` rounds up,
as `Quantity.MilliValue()` does. Pure: no I/O, no Kubernetes client.
"""

from __future__ import annotations

import math
import re
from decimal import Context, Decimal, Inexact, InvalidOperation, Overflow, Underflow

_NUMBER = r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)"
_QUANTITY = re.compile(
    rf"(?P<number>{_NUMBER})"
    r"(?:(?P<binary>[KMGTPE]i)|[eE](?P<exponent>[+-]?\d+)|(?P<decimal>[numkMGTPE]?))")

_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
"""Powers of 1024."""
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15,
            "E": 18}
"""Powers of ten."""
_EXACT = Context(prec=60, Emax=999, Emin=-999, traps=[Inexact, InvalidOperation, Overflow,
                                                    Underflow])
"""Decimal arithmetic that refuses to round or overflow (quantities are exact)."""


def parse_quantity(quantity: str | int | float) -> Decimal:
    """The value of a quantity (`"250m"` -> 0.25, `"1Ki"` -> 1024, `"2e3"` -> 2000).
    Raises ValueError naming the text when it is not a quantity."""
    text = str(quantity)
    found = _QUANTITY.fullmatch(text)
    if found is None or isinstance(quantity, bool):
        raise ValueError(f"{text!r} is not a Kubernetes quantity (e.g. 250m, 2, 1.5, 1Ki)")
    number = Decimal(found["number"])
    try:
        if found["binary"] is not None:
            return number * Decimal(1024) ** _BINARY[found["binary"]]
        exponent = (int(found["exponent"]) if found["exponent"] is not None
                    else _DECIMAL[found["decimal"]])
        value = number.scaleb(exponent, _EXACT)
    except ArithmeticError:  # an exponent beyond what a Decimal holds
        raise ValueError(f"{text!r} is out of range for a Kubernetes quantity") from None
    return value


def cores(quantity: str | int | float) -> float:
    """A CPU quantity in cores (`"250m"` -> 0.25)."""
    return float(parse_quantity(quantity))


def millicores(quantity: str | int | float) -> int:
    """A CPU quantity in whole millicores, rounded up (`"0.0001"` -> 1, `"1.5"` -> 1500)."""
    return math.ceil(parse_quantity(quantity) * 1000)
