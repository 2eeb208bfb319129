"""Quantities: the resource.Quantity grammar, exact values in milli-units (rounded up), against the
kubernetes client's own parser as an independent oracle."""

from __future__ import annotations

import math
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kubernetes.utils.quantity import parse_quantity

from devcluster.server.quantities import QuantityError, exceeded, fits, parse_milli, resources_from, subtract


@pytest.mark.parametrize(("_name", "text", "milli"), [
    ("half a core", "500m", 500),
    ("a fraction of a milli-core rounds up", "0.0001", 1),
    ("two gibibytes", "2Gi", 2 * 1024**3 * 1000),
    ("a decimal exponent", "1e3", 1_000_000),
    ("a negative exponent", "25e-3", 25),
    ("an exa suffix is not an exponent", "1E", 10**21),
    ("a leading dot", ".5", 500),
    ("a trailing dot", "1.", 1000),
    ("a signed value", "+2k", 2_000_000),
    ("a JSON integer", 4, 4000),
])
def test_a_quantity_reads_as_milli_units(_name: str, text: str | int, milli: int) -> None:
    assert parse_milli(text) == milli


@pytest.mark.parametrize("text", ["abc", "", "1.5.5", "1Ki5", "5 m", "1e", "Gi", "0x10", "1_000", True, None])
def test_what_is_not_a_quantity_is_refused_with_the_apiservers_pattern(text: object) -> None:
    with pytest.raises(QuantityError, match=r"must match the regular expression"):
        parse_milli(text)  # type: ignore[arg-type]  # deliberately not a str: bad input is refused


_digits = st.text("0123456789", min_size=1, max_size=6)
_numbers = st.one_of(_digits, st.builds(lambda a, b: f"{a}.{b}", _digits, _digits))
_suffixes = st.sampled_from(["", "m", "k", "M", "G", "T", "Ki", "Mi", "Gi", "Ti", "e3", "e-2", "E2"])


@given(_numbers, _suffixes)
def test_values_agree_with_the_kubernetes_clients_parser(number: str, suffix: str) -> None:
    oracle = Decimal(parse_quantity(number + suffix)) * 1000  # type: ignore[no-untyped-call]  # kubernetes.utils is unannotated
    assert parse_milli(number + suffix) == math.ceil(oracle)


def test_resource_arithmetic_names_what_does_not_fit() -> None:
    free = subtract(resources_from({"cpu": "4", "nvidia.com/gpu": 8}), resources_from({"cpu": "3500m"}))
    request = resources_from({"cpu": "1", "nvidia.com/gpu": "8", "memory": "1Gi"})
    assert exceeded(request, free) == ["cpu", "memory"]
    assert not fits(request, free)
    assert fits(resources_from({"cpu": "500m", "nvidia.com/gpu": "8"}), free)
