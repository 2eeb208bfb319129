"""Name and value formats: RFC 1123 labels and subdomains, qualified names, label values, quantities."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from webhooks.validation import formats
from webhooks.validation.errors import FieldError, FieldPath

PATH = FieldPath("x")


@dataclass(frozen=True)
class FormatCase:
    name: str
    check: Callable[[FieldPath, Any], list[FieldError]]
    value: Any
    want_valid: bool


CASES = [
    FormatCase("label: lowercase with dash", formats.dns_label, "my-name", True),
    FormatCase("label: digits first", formats.dns_label, "123-abc", True),
    FormatCase("label: 63 characters", formats.dns_label, "a" * 63, True),
    FormatCase("label: 64 characters", formats.dns_label, "a" * 64, False),
    FormatCase("label: uppercase", formats.dns_label, "Name", False),
    FormatCase("label: a dot", formats.dns_label, "a.b", False),
    FormatCase("label: trailing dash", formats.dns_label, "a-", False),
    FormatCase("label: empty", formats.dns_label, "", False),
    FormatCase("label: not a string", formats.dns_label, 5, False),
    FormatCase("subdomain: dotted", formats.dns_subdomain, "team-a.example.com", True),
    FormatCase("subdomain: 253 characters", formats.dns_subdomain, ".".join(["a" * 63] * 4)[:253], True),
    FormatCase("subdomain: 254 characters", formats.dns_subdomain, "a" * 254, False),
    FormatCase("subdomain: double dot", formats.dns_subdomain, "a..b", False),
    FormatCase("subdomain: underscore", formats.dns_subdomain, "a_b", False),
    FormatCase("subdomain: a part longer than 63 (only the total is bounded)", formats.dns_subdomain,
               "a" * 64 + ".io", True),
    FormatCase("subdomain: leading dot", formats.dns_subdomain, ".a", False),
    FormatCase("qualified: bare name", formats.qualified_name, "rack", True),
    FormatCase("qualified: mixed case, dots and underscores", formats.qualified_name, "My_Rack.id", True),
    FormatCase("qualified: prefixed", formats.qualified_name, "cloud.provider.com/topology-rack", True),
    FormatCase("qualified: hostname label", formats.qualified_name, "kubernetes.io/hostname", True),
    FormatCase("qualified: name part of 63", formats.qualified_name, "p.io/" + "a" * 63, True),
    FormatCase("qualified: name part of 64", formats.qualified_name, "p.io/" + "a" * 64, False),
    FormatCase("qualified: uppercase prefix", formats.qualified_name, "Cloud.com/rack", False),
    FormatCase("qualified: empty prefix", formats.qualified_name, "/rack", False),
    FormatCase("qualified: empty name", formats.qualified_name, "cloud.com/", False),
    FormatCase("qualified: two slashes", formats.qualified_name, "a/b/c", False),
    FormatCase("qualified: a space", formats.qualified_name, "my rack", False),
    FormatCase("qualified: starts with a dash", formats.qualified_name, "-rack", False),
    FormatCase("label value: empty is allowed", formats.label_value, "", True),
    FormatCase("label value: mixed", formats.label_value, "H100_sxm.v2", True),
    FormatCase("label value: 64 characters", formats.label_value, "a" * 64, False),
    FormatCase("label value: a slash", formats.label_value, "a/b", False),
    FormatCase("quantity: milli", formats.quantity, "500m", True),
    FormatCase("quantity: an integer", formats.quantity, 4, True),
    FormatCase("quantity: negative", formats.quantity, "-1", False),
    FormatCase("quantity: lowercase ki", formats.quantity, "1ki", False),
    FormatCase("quantity: a float", formats.quantity, 1.5, False),
    FormatCase("quantity: a boolean", formats.quantity, True, False),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_format(case: FormatCase) -> None:
    errs = case.check(PATH, case.value)
    assert (errs == []) == case.want_valid
    assert all(e.path == "x" for e in errs)


def test_a_too_long_label_says_how_long_it_is() -> None:
    assert [e.message for e in formats.dns_label(PATH, "a" * 64)] == [
        f'Invalid value: "{"a" * 64}": must be no more than 63 characters (has 64)']


def test_a_bad_quantity_names_the_text() -> None:
    [err] = formats.quantity(PATH, "64 Gi")
    assert err.message.startswith('Invalid value: "64 Gi": ')


# Oracles written character by character from the Kubernetes rules, independent of the regexes.
LOWER_ALNUM = set("abcdefghijklmnopqrstuvwxyz0123456789")
ALNUM = LOWER_ALNUM | set("ABCDEFGHIJKLMNOPQRSTUVWXYZ")


def is_label_shaped(s: str) -> bool:
    return s != "" and s[0] in LOWER_ALNUM and s[-1] in LOWER_ALNUM and all(
        ch in LOWER_ALNUM or ch == "-" for ch in s)


def is_dns_label(s: str) -> bool:
    return len(s) <= 63 and is_label_shaped(s)


def is_dns_subdomain(s: str) -> bool:
    # apimachinery bounds only the whole name (253), not each dot-separated part.
    return 0 < len(s) <= 253 and all(is_label_shaped(part) for part in s.split("."))


def is_name_part(s: str) -> bool:
    return 0 < len(s) <= 63 and s[0] in ALNUM and s[-1] in ALNUM and all(ch in ALNUM or ch in "-_." for ch in s)


def is_qualified_name(s: str) -> bool:
    parts = s.split("/")
    if len(parts) == 1:
        return is_name_part(s)
    return len(parts) == 2 and is_dns_subdomain(parts[0]) and is_name_part(parts[1])


# Short strings over an alphabet that hits every rule's edge (case, separators, other scripts).
names = st.text(alphabet="aZ09-._/ é", max_size=12) | st.builds(
    lambda n, c: c * n, st.integers(60, 66), st.sampled_from(["a", "A", "-"]))


@given(names)
def test_dns_label_matches_the_oracle(s: str) -> None:
    assert (formats.dns_label(PATH, s) == []) == is_dns_label(s)


@given(names)
def test_dns_subdomain_matches_the_oracle(s: str) -> None:
    assert (formats.dns_subdomain(PATH, s) == []) == is_dns_subdomain(s)


@given(names | st.builds(lambda p, n: f"{p}/{n}", names, names))
def test_qualified_name_matches_the_oracle(s: str) -> None:
    assert (formats.qualified_name(PATH, s) == []) == is_qualified_name(s)


@given(names)
def test_label_value_matches_the_oracle(s: str) -> None:
    assert (formats.label_value(PATH, s) == []) == (s == "" or is_name_part(s))


@dataclass(frozen=True)
class NameCase:
    name: str
    check: Callable[[FieldPath, Any], list[FieldError]]
    value: Any
    want_messages: tuple[str, ...]


NAME_CASES = [
    NameCase("a plain label passes", formats.dns_label, "worker-0", ()),
    NameCase("a dotted subdomain passes", formats.dns_subdomain, "team-a.gpu", ()),
    NameCase("a dot is no label character", formats.dns_label, "team-a.gpu",
             ("Invalid value: \"team-a.gpu\": a lowercase RFC 1123 label must consist",)),
    NameCase("a trailing newline does not slip past the anchored pattern", formats.dns_subdomain, "queue\n",
             ("Invalid value: \"queue\\n\": a lowercase RFC 1123 subdomain must consist",)),
    NameCase("an empty name is required", formats.dns_subdomain, "", ("Required value",)),
    NameCase("a number is the wrong type", formats.dns_label, 7, ("Invalid value: 7: must be a string",)),
    NameCase("a 64-character label is too long but well formed", formats.dns_label, "a" * 64,
             ("Invalid value: \"" + "a" * 64 + "\": must be no more than 63 characters (has 64)",)),
    NameCase("a 254-character subdomain is too long and ends badly", formats.dns_subdomain, "a" * 253 + "-",
             ("Invalid value: \"" + "a" * 253 + "-\": must be no more than 253 characters (has 254)",
              "Invalid value: \"" + "a" * 253 + "-\": a lowercase RFC 1123 subdomain must consist")),
]


@pytest.mark.parametrize("case", NAME_CASES, ids=lambda case: case.name)
def test_rfc1123_names(case: NameCase) -> None:
    errs = case.check(FieldPath("metadata.name"), case.value)
    assert len(errs) == len(case.want_messages)
    for err, want in zip(errs, case.want_messages, strict=True):
        assert err.path == "metadata.name"
        assert err.message.startswith(want)
