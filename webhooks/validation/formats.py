"""Format rules for names, label keys and values, and quantities, as the API server applies them.

Each check returns a list of FieldErrors for one value (empty when valid), so callers can
collect everything. Rules follow apimachinery's validation package (RFC 1123 DNS labels and
subdomains, qualified names) and `controller.api.quantity`. Used by every kind's validator.
"""

from __future__ import annotations

import re
from typing import Any, Final

from controller.api.meta import DNS_LABEL_PATTERN, DNS_SUBDOMAIN_PATTERN, INT64_MAX, INT64_MIN
from controller.api.quantity import QuantityError, parse_quantity
from webhooks.validation.errors import FieldError, FieldPath, invalid, required, wrong_type

DNS1123_LABEL_MAX: Final = 63
DNS1123_SUBDOMAIN_MAX: Final = 253
QUALIFIED_NAME_MAX: Final = 63
LABEL_VALUE_MAX: Final = 63

# The CRD schemas' patterns (anchored; fullmatch makes the anchors redundant, not wrong).
_DNS1123_LABEL_RE: Final = re.compile(DNS_LABEL_PATTERN)
_DNS1123_SUBDOMAIN_RE: Final = re.compile(DNS_SUBDOMAIN_PATTERN)
_QUALIFIED_NAME_RE: Final = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")

_LABEL_RULE: Final = ("must consist of lower case alphanumeric characters or '-', and must start "
                      "and end with an alphanumeric character (e.g. 'my-name' or '123-abc')")
_SUBDOMAIN_RULE: Final = ("must consist of lower case alphanumeric characters, '-' or '.', and must "
                          "start and end with an alphanumeric character (e.g. 'example.com')")
_NAME_RULE: Final = ("must consist of alphanumeric characters, '-', '_' or '.', and must start and "
                     "end with an alphanumeric character (e.g. 'MyName', 'my.name' or '123-abc')")


def _too_long(path: FieldPath, value: str, limit: int) -> FieldError:
    return invalid(path, value, f"must be no more than {limit} characters (has {len(value)})")


def _rfc1123(path: FieldPath, value: Any, limit: int, pattern: re.Pattern[str], rule: str) -> list[FieldError]:
    """A required string of at most `limit` characters matching `pattern`; `rule` explains it."""
    if not isinstance(value, str):
        return [wrong_type(path, value, "a string")]
    if not value:
        return [required(path)]
    errs = []
    if len(value) > limit:
        errs.append(_too_long(path, value, limit))
    if not pattern.fullmatch(value):
        errs.append(invalid(path, value, rule))
    return errs


def dns_label(path: FieldPath, value: Any) -> list[FieldError]:
    """An RFC 1123 label: pod set names, container names."""
    return _rfc1123(path, value, DNS1123_LABEL_MAX, _DNS1123_LABEL_RE, f"a lowercase RFC 1123 label {_LABEL_RULE}")


def dns_subdomain(path: FieldPath, value: Any) -> list[FieldError]:
    """An RFC 1123 subdomain: object names and references to them (queues, flavors, topologies)."""
    return _rfc1123(path, value, DNS1123_SUBDOMAIN_MAX, _DNS1123_SUBDOMAIN_RE,
                    f"a lowercase RFC 1123 subdomain {_SUBDOMAIN_RULE}")


def qualified_name(path: FieldPath, value: Any) -> list[FieldError]:
    """A label key or resource name: `[prefix/]name`, prefix a DNS subdomain, name <= 63 chars."""
    if not isinstance(value, str):
        return [wrong_type(path, value, "a string")]
    if not value:
        return [required(path)]
    prefix, slash, name = value.rpartition("/")
    if slash and not prefix:
        return [invalid(path, value, "prefix part must be non-empty")]
    if value.count("/") > 1:
        return [invalid(path, value, "a qualified name must have at most one '/' (an optional "
                                     "DNS subdomain prefix, then a name)")]
    errs: list[FieldError] = []
    if prefix:
        if len(prefix) > DNS1123_SUBDOMAIN_MAX:
            errs.append(invalid(path, value, f"prefix part must be no more than "
                                             f"{DNS1123_SUBDOMAIN_MAX} characters"))
        if not _DNS1123_SUBDOMAIN_RE.fullmatch(prefix):
            errs.append(invalid(path, value, f"prefix part {_SUBDOMAIN_RULE}"))
    if not name:
        errs.append(invalid(path, value, "name part must be non-empty"))
        return errs
    if len(name) > QUALIFIED_NAME_MAX:
        errs.append(invalid(path, value, f"name part must be no more than {QUALIFIED_NAME_MAX} "
                                         f"characters (has {len(name)})"))
    if not _QUALIFIED_NAME_RE.fullmatch(name):
        errs.append(invalid(path, value, f"name part {_NAME_RULE}"))
    return errs


def label_value(path: FieldPath, value: Any) -> list[FieldError]:
    """A label value: empty, or up to 63 characters of the qualified-name alphabet."""
    if not isinstance(value, str):
        return [wrong_type(path, value, "a string")]
    errs = []
    if len(value) > LABEL_VALUE_MAX:
        errs.append(_too_long(path, value, LABEL_VALUE_MAX))
    if value and not _QUALIFIED_NAME_RE.fullmatch(value):
        errs.append(invalid(path, value, f"a valid label value {_NAME_RULE}"))
    return errs


def quantity(path: FieldPath, value: Any, *, non_negative: bool = True) -> list[FieldError]:
    """A resource quantity (string or integer); the error names the offending text."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        return [wrong_type(path, value, "a quantity string such as \"500m\" or \"2Gi\"")]
    if isinstance(value, int) and not INT64_MIN <= value <= INT64_MAX:
        # The API server cannot decode such a JSON number; the same amount as a string is fine.
        return [invalid(path, value, "must fit a 64-bit integer; write larger amounts as a string")]
    try:
        parsed = parse_quantity(value)
    except QuantityError as e:
        return [invalid(path, value, f"{e.reason}; must match the quantity format (a decimal number "
                                     "with an optional suffix n, u, m, k, M, G, T, P, E, Ki, Mi, Gi, "
                                     "Ti, Pi, Ei or an exponent, e.g. 500m, 2Gi, 1e3)")]
    if non_negative and parsed < 0:
        return [invalid(path, value, "must be greater than or equal to 0")]
    return []
