"""Exact Kubernetes resource quantities and integer resource vectors.

Parses every legal quantity form (`500m`, `1.5`, `2Gi`, `1e3`, `10k`, `1Ei`...) into an exact
Decimal, formats values canonically as the API server does, and converts them to integer milli-units,
the unit of every resource vector on tasq's hot paths. Used by the models, validators, engine, admission.
"""

# The official client's `kubernetes.utils.parse_quantity` is not used: it hands the text to
# Decimal(), so it accepts "NaN", "Infinity", "1_000" and "1e3k", and computes in 28 digits.

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import ROUND_CEILING, Decimal, localcontext
from typing import Final, Literal

QuantityFormat = Literal["DecimalSI", "BinarySI", "DecimalExponent"]

_BINARY: Final = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL: Final = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_DECIMAL_SUFFIX_BY_EXP: Final = {v: k for k, v in _DECIMAL.items()}
_BINARY_SUFFIX_BY_POWER: Final = {v: k for k, v in _BINARY.items()}
# The grammar of k8s.io/apimachinery/pkg/api/resource: signed number, then one suffix.
# ASCII digits only: Python's \d would also accept other scripts' digits (Arabic-Indic...).
_QUANTITY_RE: Final = re.compile(
    r"^(?P<num>[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+))"
    r"(?:(?P<bin>Ki|Mi|Gi|Ti|Pi|Ei)|(?P<exp>[eE][+-]?[0-9]+)|(?P<dec>[numkMGTPE]?))$"
)
# Enough digits that no legal quantity (up to 2^63 Ei-scaled mantissas) ever rounds.
_PRECISION: Final = 80
UNBOUNDED: Final = 1 << 62
"""What `how_many_fit` returns when a request asks for nothing: any number of pods fits."""


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity; carries the offending text and why."""

    def __init__(self, text: str, reason: str) -> None:
        super().__init__(f"invalid quantity {text!r}: {reason}; allowed: a decimal number with an "
                         "optional suffix (n, u, m, k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei) "
                         "or exponent (e.g. 500m, 2Gi, 1e3)")
        self.text = text
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Quantity:
    """An exact quantity and the format family its text used (kept when re-serialising)."""

    value: Decimal
    format: QuantityFormat

    def __str__(self) -> str:
        return format_quantity(self.value, self.format)


def parse(text: str | int) -> Quantity:
    """Parse a quantity exactly; raises QuantityError naming the offending text."""
    if isinstance(text, str):
        return _parse_text(text)
    if isinstance(text, bool):
        raise QuantityError(str(text), "not a number")
    if isinstance(text, int):
        return Quantity(Decimal(text), "DecimalSI")
    raise QuantityError(repr(text), "must be a string or an integer")


# A cluster spells its quantities in a handful of distinct strings ("8", "16Gi", "100m"), read
# millions of times from Nodes and Pods; Quantity is immutable, so one parse per string is enough.
# Bounded so that hostile input cannot grow it; errors are not cached (lru_cache re-raises).
@functools.lru_cache(maxsize=4096)
def _parse_text(text: str) -> Quantity:
    s = text.strip()
    if s != text or not s:
        raise QuantityError(text, "empty or surrounded by spaces")
    m = _QUANTITY_RE.match(s)
    if m is None:
        raise QuantityError(text, "unknown form")
    with localcontext() as ctx:
        ctx.prec = _PRECISION
        num = Decimal(m.group("num"))
        if m.group("bin"):
            return Quantity(num * (Decimal(1024) ** _BINARY[m.group("bin")]), "BinarySI")
        if m.group("exp"):
            exponent = int(m.group("exp")[1:])
            if abs(exponent) > 60:
                raise QuantityError(text, "exponent out of range")
            return Quantity(num.scaleb(exponent), "DecimalExponent")
        return Quantity(num.scaleb(_DECIMAL[m.group("dec") or ""]), "DecimalSI")


def parse_quantity(text: str | int) -> Decimal:
    """The exact value of a quantity string (or integer)."""
    return parse(text).value


def to_milli(value: Decimal | str | int) -> int:
    """Integer milli-units, rounded up as Quantity.MilliValue() does."""
    if isinstance(value, str):
        return _milli_of_text(value)
    return _milli(value if isinstance(value, Decimal) else parse_quantity(value))


@functools.lru_cache(maxsize=4096)
def _milli_of_text(text: str) -> int:
    return _milli(_parse_text(text).value)


def _milli(d: Decimal) -> int:
    with localcontext() as ctx:
        ctx.prec = _PRECISION
        return int((d * 1000).to_integral_value(rounding=ROUND_CEILING))


def milli_to_decimal(milli: int) -> Decimal:
    with localcontext() as ctx:
        ctx.prec = _PRECISION
        return Decimal(milli).scaleb(-3)


def format_quantity(value: Decimal, fmt: QuantityFormat = "DecimalSI") -> str:
    """Canonical text: the largest suffix that keeps the mantissa an integer, no precision lost.

    Values finer than a nano-unit are rounded up to the next nano-unit, as the API server does.
    BinarySI is used only for integers of magnitude >= 1024 that a binary suffix divides exactly.
    """
    with localcontext() as ctx:
        ctx.prec = _PRECISION
        nanos = (value * Decimal(10) ** 9).to_integral_value(rounding=ROUND_CEILING)
        if nanos == 0:
            return "0"
        sign = "-" if nanos < 0 else ""
        n = abs(int(nanos))
        if fmt == "BinarySI" and n % 10**9 == 0 and n >= 1024 * 10**9:
            units = n // 10**9
            power = 0
            while power < 6 and units % 1024 == 0:
                units //= 1024
                power += 1
            if power > 0:
                return f"{sign}{units}{_BINARY_SUFFIX_BY_POWER[power]}"
        exp = -9
        while n % 1000 == 0 and (exp + 3 <= 18 or fmt == "DecimalExponent"):
            n //= 1000
            exp += 3
        if fmt == "DecimalExponent":
            return f"{sign}{n}" if exp == 0 else f"{sign}{n}e{exp}"
        return f"{sign}{n}{_DECIMAL_SUFFIX_BY_EXP[exp]}"


def canonical(text: str | int) -> str:
    """Re-serialise a quantity the way the API server would store it."""
    return str(parse(text))


def format_milli(milli: int, resource: str = "") -> str:
    """A milli-unit amount as a canonical quantity; memory-like resources prefer binary suffixes."""
    fmt: QuantityFormat = "BinarySI" if resource in ("memory", "ephemeral-storage") or \
        resource.startswith("hugepages-") else "DecimalSI"
    return format_quantity(milli_to_decimal(milli), fmt)


# ---------------------------------------------------------------------------------------------
# Resource vectors: plain dicts of resource name -> integer milli-units. Functions, not a class,
# so the hot paths pay no attribute or wrapper cost.

Resources = dict[str, int]


def resources_from(spec: Mapping[str, str | int] | None) -> Resources:
    """A resource vector from a `{name: quantity}` mapping (requests, allocatable, quotas)."""
    if not spec:
        return {}
    return {name: to_milli(q) for name, q in spec.items()}


def resources_to_strings(vec: Mapping[str, int]) -> dict[str, str]:
    """Canonical quantity strings, keys sorted, for statuses and messages."""
    return {name: format_milli(vec[name], name) for name in sorted(vec)}


def add(a: Mapping[str, int], b: Mapping[str, int]) -> Resources:
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0) + v
    return out


def add_into(acc: Resources, b: Mapping[str, int], times: int = 1) -> None:
    """In place: acc += b * times."""
    for k, v in b.items():
        acc[k] = acc.get(k, 0) + v * times


def subtract(a: Mapping[str, int], b: Mapping[str, int]) -> Resources:
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0) - v
    return out


def scale(a: Mapping[str, int], times: int) -> Resources:
    return {k: v * times for k, v in a.items()}


def fits(request: Mapping[str, int], available: Mapping[str, int]) -> bool:
    """True when every requested amount is within what is available (absent = 0)."""
    return all(v <= available.get(k, 0) for k, v in request.items() if v > 0)


def how_many_fit(request: Mapping[str, int], free: Mapping[str, int]) -> int:
    """How many copies of `request` fit in `free`: min over requested resources of floor(free/req)."""
    best = UNBOUNDED
    for k, v in request.items():
        if v <= 0:
            continue
        have = free.get(k, 0)
        if have < v:
            return 0
        n = have // v
        if n < best:
            best = n
    return best


def exceeded(request: Mapping[str, int], available: Mapping[str, int]) -> list[str]:
    """Sorted names of the resources whose request exceeds what is available."""
    return sorted(k for k, v in request.items() if v > 0 and v > available.get(k, 0))


def total(vectors: Iterable[Mapping[str, int]]) -> Resources:
    out: Resources = {}
    for v in vectors:
        add_into(out, v)
    return out
