"""Quantities: every legal form parsed exactly, the API server's canonical text, illegal forms
rejected with the offending text, and properties (round trip, order, exactness, rounding, fit)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from decimal import Decimal, localcontext

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from kubernetes.utils import parse_quantity as k8s_parse_quantity

from controller.api import quantity as q


@dataclass(frozen=True)
class ParseCase:
    name: str
    text: str
    want_value: Decimal
    want_canonical: str


PARSE_CASES = [
    ParseCase("milli cpu", "500m", Decimal("0.5"), "500m"),
    ParseCase("a plain decimal becomes milli", "1.5", Decimal("1.5"), "1500m"),
    ParseCase("gibibytes", "2Gi", Decimal(2 * 1024**3), "2Gi"),
    ParseCase("an exponent keeps its form", "1e3", Decimal(1000), "1e3"),
    ParseCase("an uppercase exponent prints lowercase", "1E3", Decimal(1000), "1e3"),
    ParseCase("an explicit positive exponent", "1e+3", Decimal(1000), "1e3"),
    ParseCase("a negative exponent", "1e-3", Decimal("0.001"), "1e-3"),
    ParseCase("an exponent not a multiple of three", "12e2", Decimal(1200), "1200"),
    ParseCase("an exponent above exa", "1e19", Decimal(10**19), "10e18"),
    ParseCase("kilo", "10k", Decimal(10_000), "10k"),
    ParseCase("exbibyte", "1Ei", Decimal(1024**6), "1Ei"),
    ParseCase("exa", "5E", Decimal(5 * 10**18), "5E"),
    ParseCase("a leading dot", ".5", Decimal("0.5"), "500m"),
    ParseCase("a trailing dot", "1.", Decimal(1), "1"),
    ParseCase("an explicit plus", "+1", Decimal(1), "1"),
    ParseCase("a minus", "-1", Decimal(-1), "-1"),
    ParseCase("nano", "1n", Decimal("1e-9"), "1n"),
    ParseCase("micro", "1u", Decimal("1e-6"), "1u"),
    ParseCase("1536Mi stays binary", "1536Mi", Decimal(1536 * 1024**2), "1536Mi"),
    ParseCase("half a Gi is 512Mi", "0.5Gi", Decimal(512 * 1024**2), "512Mi"),
    ParseCase("1.5Gi is 1536Mi", "1.5Gi", Decimal(1536 * 1024**2), "1536Mi"),
    ParseCase("binary below 1024 falls back to decimal", "0.5Ki", Decimal(512), "512"),
    ParseCase("binary not divisible by 1024 falls back to decimal", "1.5Ki", Decimal(1536), "1536"),
    ParseCase("one thousand becomes 1k", "1000", Decimal(1000), "1k"),
    ParseCase("1024 stays decimal", "1024", Decimal(1024), "1024"),
    ParseCase("milli stays milli", "100m", Decimal("0.1"), "100m"),
    ParseCase("ten thousandths become micro", "0.0001", Decimal("0.0001"), "100u"),
    ParseCase("below a nano rounds up to 1n", "0.1n", Decimal("1e-10"), "1n"),
    ParseCase("zero with a binary suffix", "0Gi", Decimal(0), "0"),
    ParseCase("a negative binary value", "-0.5Gi", Decimal(-512 * 1024**2), "-512Mi"),
]


@pytest.mark.parametrize("case", PARSE_CASES, ids=[c.name for c in PARSE_CASES])
def test_parse_and_canonical(case: ParseCase) -> None:
    assert q.parse_quantity(case.text) == case.want_value
    assert q.canonical(case.text) == case.want_canonical


ILLEGAL = [
    pytest.param("1.2.3", id="two dots"),
    pytest.param("Ki", id="a suffix without a number"),
    pytest.param("1 Gi", id="a space before the suffix"),
    pytest.param("1ki", id="a lowercase binary suffix"),
    pytest.param("1K", id="an uppercase kilo"),
    pytest.param("NaN", id="not a number"),
    pytest.param("Infinity", id="infinity"),
    pytest.param("1_000", id="digit separators"),
    pytest.param("", id="empty"),
    pytest.param(" 1", id="a leading space"),
    pytest.param("1e3k", id="an exponent and a suffix"),
    pytest.param("1e3Ki", id="an exponent and a binary suffix"),
    pytest.param("1e", id="an exponent without digits"),
    pytest.param("0x10", id="hexadecimal"),
    pytest.param("++1", id="two signs"),
    pytest.param(".", id="a lone dot"),
    pytest.param("1mm", id="two suffixes"),
    pytest.param("\u0661", id="an Arabic-Indic digit"),
    pytest.param("1e99", id="an exponent out of range"),
]


@pytest.mark.parametrize("text", ILLEGAL)
def test_illegal_quantities_are_rejected_naming_the_text(text: str) -> None:
    with pytest.raises(q.QuantityError) as info:
        q.parse(text)
    assert info.value.text == text
    assert repr(text) in str(info.value)


@pytest.mark.parametrize(("value", "want"), [
    pytest.param(True, "True", id="a boolean is not a number"),
    pytest.param(1.5, "1.5", id="a float is not exact"),
])
def test_non_string_non_integer_inputs_are_rejected(value: object, want: str) -> None:
    with pytest.raises(q.QuantityError) as info:
        q.parse(value)  # type: ignore[arg-type]  # deliberately neither str nor int
    assert want in info.value.text


@pytest.mark.parametrize(("milli", "resource", "want"), [
    pytest.param(512 * 1024**2 * 1000, "memory", "512Mi", id="memory prefers binary"),
    pytest.param(1500 * 1000, "memory", "1500", id="memory not divisible by 1024 stays decimal"),
    pytest.param(8000, "nvidia.com/gpu", "8", id="gpus are decimal"),
    pytest.param(250, "cpu", "250m", id="milli cpu"),
    pytest.param(2 * 1024**3 * 1000, "hugepages-2Mi", "2Gi", id="hugepages are binary"),
])
def test_format_milli(milli: int, resource: str, want: str) -> None:
    assert q.format_milli(milli, resource) == want


SUFFIXES = ["", "n", "u", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]
# Values a quantity can hold exactly: whole nano-units.
nanos = st.integers(min_value=-(10**30), max_value=10**30)
formats = st.sampled_from(["DecimalSI", "BinarySI", "DecimalExponent"])


@given(nanos, formats)
def test_format_then_parse_round_trips(n: int, fmt: q.QuantityFormat) -> None:
    value = Decimal(n).scaleb(-9)
    assert q.parse_quantity(q.format_quantity(value, fmt)) == value


# Legal quantity texts of moderate size: sign, digits with an optional fraction, one suffix or exponent.
legal_texts = st.builds(
    lambda sign, whole, frac, tail: f"{sign}{whole}{frac}{tail}",
    st.sampled_from(["", "+", "-"]),
    st.integers(min_value=0, max_value=10**9).map(str),
    st.one_of(st.just(""), st.just("."), st.integers(min_value=0, max_value=10**6).map(lambda f: f".{f}")),
    st.one_of(st.sampled_from(SUFFIXES), st.integers(min_value=-9, max_value=9).map(lambda e: f"e{e}")),
)


@given(legal_texts)
def test_parse_agrees_with_the_official_client_where_it_is_exact(text: str) -> None:
    # kubernetes.utils.parse_quantity computes in Decimal's default 28 digits, so it is an exact
    # oracle only for values that need no more (e.g. 999999999.999999Ei needs 34).
    value = q.parse_quantity(text)
    digits = "".join(map(str, value.as_tuple().digits)).strip("0")  # normalize() would round to 28
    assume(len(digits) <= 28)
    assert value == k8s_parse_quantity(text)  # type: ignore[no-untyped-call]  # kubernetes.utils is unannotated


@given(st.integers(min_value=-(10**12), max_value=10**12), st.sampled_from(SUFFIXES))
def test_canonical_text_keeps_the_value(mantissa: int, suffix: str) -> None:
    text = f"{mantissa}{suffix}"
    assert q.parse_quantity(q.canonical(text)) == q.parse_quantity(text)


@given(nanos, nanos, formats, formats)
def test_formatting_preserves_order(a: int, b: int, fmt_a: q.QuantityFormat, fmt_b: q.QuantityFormat) -> None:
    with localcontext() as ctx:
        ctx.prec = 80  # the default 28 digits would merge a and a+1 before formatting runs
        va, vb = Decimal(a).scaleb(-9), Decimal(b).scaleb(-9)
    pa = q.parse_quantity(q.format_quantity(va, fmt_a))
    pb = q.parse_quantity(q.format_quantity(vb, fmt_b))
    assert (pa < pb) == (a < b) and (pa == pb) == (a == b)


@given(st.integers(min_value=0, max_value=2**63), st.sampled_from(["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]))
def test_large_binary_values_are_exact(n: int, suffix: str) -> None:
    power = ["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"].index(suffix) + 1
    assert q.to_milli(f"{n}{suffix}") == n * 1024**power * 1000


@given(st.integers(min_value=0, max_value=2**63), st.integers(min_value=0, max_value=999))
def test_milli_values_are_exact(whole: int, milli: int) -> None:
    assert q.to_milli(f"{whole}.{milli:03d}") == whole * 1000 + milli
    assert q.to_milli(f"{whole * 1000 + milli}m") == whole * 1000 + milli


@given(st.integers(min_value=0, max_value=10**15), st.integers(min_value=1, max_value=999_999))
def test_to_milli_rounds_up(milli: int, nano: int) -> None:
    # milli-units plus a fraction of a milli: always the next whole milli, never truncated.
    text = f"{milli * 10**6 + nano}n"
    assert q.to_milli(text) == milli + 1


@given(st.integers(min_value=0, max_value=10**12))
def test_milli_round_trip(milli: int) -> None:
    assert q.to_milli(q.milli_to_decimal(milli)) == milli


resource_names = st.sampled_from(["cpu", "memory", "nvidia.com/gpu"])


@given(st.dictionaries(resource_names, st.integers(min_value=0, max_value=20), max_size=3),
       st.dictionaries(resource_names, st.integers(min_value=0, max_value=60), max_size=3))
def test_how_many_fit_matches_brute_force(request: dict[str, int], free: dict[str, int]) -> None:
    if not any(v > 0 for v in request.values()):
        assert q.how_many_fit(request, free) == q.UNBOUNDED
        return
    # Oracle: keep adding one more copy while the total still fits.
    count = next(k for k in itertools.count() if not q.fits(q.scale(request, k + 1), free))
    assert q.how_many_fit(request, free) == count


@pytest.mark.parametrize(("request_", "available", "want_fits", "want_exceeded"), [
    pytest.param({"cpu": 1000}, {"cpu": 1000}, True, [], id="exactly fits"),
    pytest.param({"cpu": 1001}, {"cpu": 1000}, False, ["cpu"], id="one milli too many"),
    pytest.param({"nvidia.com/gpu": 1000}, {"cpu": 8000}, False, ["nvidia.com/gpu"], id="an absent resource"),
    pytest.param({"cpu": 0, "memory": 5}, {"memory": 5}, True, [], id="a zero request needs nothing"),
])
def test_fits_and_exceeded(request_: dict[str, int], available: dict[str, int], want_fits: bool,
                           want_exceeded: list[str]) -> None:
    assert q.fits(request_, available) == want_fits
    assert q.exceeded(request_, available) == want_exceeded


def test_resource_vector_arithmetic() -> None:
    vec = q.resources_from({"cpu": "1.5", "memory": "1Gi"})
    assert vec == {"cpu": 1500, "memory": 1024**3 * 1000}
    assert q.subtract(q.add(vec, vec), vec) == vec
    assert q.total([vec, vec, {"pods": 1000}]) == {**q.scale(vec, 2), "pods": 1000}
    assert q.resources_to_strings(q.scale(vec, 2)) == {"cpu": "3", "memory": "2Gi"}


@pytest.mark.parametrize("text", ["1x", " 1", "1e99"])
def test_a_rejected_text_is_rejected_every_time_it_is_read(text: str) -> None:
    # parses are memoised per string: the memo must never turn a second read of bad input into a value
    for _ in range(3):
        with pytest.raises(q.QuantityError):
            q.parse(text)
        with pytest.raises(q.QuantityError):
            q.to_milli(text)


@given(st.integers(min_value=0, max_value=10**12), st.sampled_from(["", "m", "k", "Ki", "Gi", "e3"]))
def test_reading_a_text_again_gives_the_same_exact_value(mantissa: int, suffix: str) -> None:
    text = f"{mantissa}{suffix}"
    first, milli = q.parse(text), q.to_milli(text)
    assert (q.parse(text), q.to_milli(text)) == (first, milli)
    assert milli == q.to_milli(first.value)
