"""Kubernetes resource quantities (`500m`, `2Gi`, `1e3`): parsed strictly, as milli-units.

The request pipeline validates pod resources with `parse_milli` (an invalid one is a 422 at create),
and the simulated scheduler and kubelet add and compare requests as `Resources` (name -> milli-units).
The grammar is resource.Quantity's; values are rounded up to whole milli-units as MilliValue does.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from fractions import Fraction

Resources = dict[str, int]

_QUANTITY_RE = re.compile(
    r"(?P<number>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[eE][+-]?[0-9]+|[mkMGTPE])?")
_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL = {"m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
QUANTITY_HINT = "must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"


class QuantityError(ValueError):
    """Text that is not a quantity; the message is the apiserver's field error detail."""


def _power_of_ten(exponent: int) -> Fraction:
    return Fraction(10**exponent) if exponent >= 0 else Fraction(1, 10**-exponent)


def parse(text: str | int | float) -> Fraction:
    """The exact value of a quantity; JSON numbers are accepted as the apiserver accepts them."""
    if isinstance(text, bool):
        raise QuantityError(QUANTITY_HINT)
    if isinstance(text, int | float):
        return Fraction(text)
    if not isinstance(text, str):
        raise QuantityError(QUANTITY_HINT)
    m = _QUANTITY_RE.fullmatch(text)
    if m is None:
        raise QuantityError(QUANTITY_HINT)
    value = Fraction(m.group("number"))
    suffix = m.group("suffix") or ""
    if suffix in _BINARY:
        return value * (1 << (10 * _BINARY[suffix]))
    if suffix in _DECIMAL:
        return value * _power_of_ten(_DECIMAL[suffix])
    exponent = int(suffix[1:])
    if abs(exponent) > 1000:  # beyond any int64 the apiserver keeps; refuse rather than build huge numbers
        raise QuantityError(QUANTITY_HINT)
    return value * _power_of_ten(exponent)


def parse_milli(text: str | int | float) -> int:
    """Milli-units of a quantity, rounded up (resource.Quantity.MilliValue)."""
    return math.ceil(parse(text) * 1000)


def resources_from(spec: Mapping[str, object] | None) -> Resources:
    """A `requests`/`limits`/`allocatable` map as milli-units; raises QuantityError on a bad value."""
    return {str(k): parse_milli(v) for k, v in (spec or {}).items()}  # type: ignore[arg-type]


def add_into(acc: Resources, other: Mapping[str, int], times: int = 1) -> None:
    for name, milli in other.items():
        acc[name] = acc.get(name, 0) + milli * times


def subtract(a: Mapping[str, int], b: Mapping[str, int]) -> Resources:
    out = dict(a)
    add_into(out, b, times=-1)
    return out


def exceeded(request: Mapping[str, int], available: Mapping[str, int]) -> list[str]:
    """The resource names of `request` that `available` does not cover, in request order."""
    return [name for name, milli in request.items() if milli > 0 and milli > available.get(name, 0)]


def fits(request: Mapping[str, int], available: Mapping[str, int]) -> bool:
    return not exceeded(request, available)
