"""dns_label and dns_subdomain share one check over the CRD schemas' anchored patterns."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from webhooks.validation.errors import FieldError, FieldPath
from webhooks.validation.formats import dns_label, dns_subdomain

PATH = FieldPath("metadata.name")


@dataclass(frozen=True)
class NameCase:
    name: str
    check: Callable[[FieldPath, Any], list[FieldError]]
    value: Any
    want_messages: tuple[str, ...]


CASES = [
    NameCase("a plain label passes", dns_label, "worker-0", ()),
    NameCase("a dotted subdomain passes", dns_subdomain, "team-a.gpu", ()),
    NameCase("a dot is no label character", dns_label, "team-a.gpu",
             ("Invalid value: \"team-a.gpu\": a lowercase RFC 1123 label must consist",)),
    NameCase("a trailing newline does not slip past the anchored pattern", dns_subdomain, "queue\n",
             ("Invalid value: \"queue\\n\": a lowercase RFC 1123 subdomain must consist",)),
    NameCase("an empty name is required", dns_subdomain, "", ("Required value",)),
    NameCase("a number is the wrong type", dns_label, 7, ("Invalid value: 7: must be a string",)),
    NameCase("a 64-character label is too long but well formed", dns_label, "a" * 64,
             ("Invalid value: \"" + "a" * 64 + "\": must be no more than 63 characters (has 64)",)),
    NameCase("a 254-character subdomain is too long and ends badly", dns_subdomain, "a" * 253 + "-",
             ("Invalid value: \"" + "a" * 253 + "-\": must be no more than 253 characters (has 254)",
              "Invalid value: \"" + "a" * 253 + "-\": a lowercase RFC 1123 subdomain must consist")),
]


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_rfc1123_names(case: NameCase) -> None:
    errs = case.check(PATH, case.value)
    assert len(errs) == len(case.want_messages)
    for err, want in zip(errs, case.want_messages, strict=True):
        assert err.path == "metadata.name"
        assert err.message.startswith(want)
