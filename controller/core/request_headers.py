"""Request-header authentication, as kube-apiserver's aggregator uses it to call an APIService.

`RequestHeaderConfig.from_config_map` reads the `extension-apiserver-authentication` ConfigMap's
requestheader keys; `remote_user` takes the user of a request whose client certificate was verified
against that CA: its common name must be an allowed name (none listed: any), the user, groups and
extras come from the configured headers. Pure; called by controller.kube.authorizing.
"""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

CONFIG_MAP_NAMESPACE: Final = "kube-system"
CONFIG_MAP_NAME: Final = "extension-apiserver-authentication"
KEY_CLIENT_CA: Final = "requestheader-client-ca-file"
KEY_ALLOWED_NAMES: Final = "requestheader-allowed-names"
KEY_USERNAME_HEADERS: Final = "requestheader-username-headers"
KEY_GROUP_HEADERS: Final = "requestheader-group-headers"
KEY_EXTRA_PREFIXES: Final = "requestheader-extra-headers-prefix"


@dataclass(frozen=True, slots=True)
class RequestHeaderConfig:
    """The requestheader settings of kube-apiserver: the client CA (PEM), the common names a client
    certificate may carry (empty: any signed by the CA), and the headers naming the user."""

    client_ca: str
    allowed_names: tuple[str, ...] = ()
    username_headers: tuple[str, ...] = ("X-Remote-User",)
    group_headers: tuple[str, ...] = ("X-Remote-Group",)
    extra_prefixes: tuple[str, ...] = ("X-Remote-Extra-",)

    @classmethod
    def from_config_map(cls, data: Mapping[str, Any]) -> RequestHeaderConfig | str:
        """The settings in a ConfigMap's `data`, or why there are none (a message naming the key).
        The list keys hold JSON arrays of strings, as kube-apiserver writes them."""
        ca = data.get(KEY_CLIENT_CA)
        if not isinstance(ca, str) or "BEGIN CERTIFICATE" not in ca:
            return (f"ConfigMap {CONFIG_MAP_NAMESPACE}/{CONFIG_MAP_NAME} has no {KEY_CLIENT_CA} "
                    "(kube-apiserver runs without --requestheader-client-ca-file)")
        lists: dict[str, tuple[str, ...]] = {}
        for key in (KEY_ALLOWED_NAMES, KEY_USERNAME_HEADERS, KEY_GROUP_HEADERS, KEY_EXTRA_PREFIXES):
            parsed = _string_list(data.get(key))
            if parsed is None:
                return (f"ConfigMap {CONFIG_MAP_NAMESPACE}/{CONFIG_MAP_NAME}: data.{key} must be a JSON "
                        f"array of strings, not {data.get(key)!r}")
            lists[key] = parsed
        if not lists[KEY_USERNAME_HEADERS]:
            return (f"ConfigMap {CONFIG_MAP_NAMESPACE}/{CONFIG_MAP_NAME}: data.{KEY_USERNAME_HEADERS} "
                    "names no header")
        return cls(ca, lists[KEY_ALLOWED_NAMES], lists[KEY_USERNAME_HEADERS], lists[KEY_GROUP_HEADERS],
                   lists[KEY_EXTRA_PREFIXES])


def _string_list(raw: Any) -> tuple[str, ...] | None:
    """A JSON array of strings (missing or empty: no entries); None when malformed."""
    if raw is None or raw == "":
        return ()
    try:
        value = json.loads(raw) if isinstance(raw, str) else None
    except ValueError:
        return None
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        return None
    return tuple(v for v in value if v)


@dataclass(frozen=True, slots=True)
class RemoteUser:
    """Who the aggregator says calls: user, groups, and extras (key lowercased, values in order)."""

    user: str
    groups: tuple[str, ...] = ()
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()


def common_name(subject: Iterable[Iterable[tuple[str, str]]]) -> str:
    """The commonName of a certificate subject as Python's `getpeercert()` gives it (RDNs of
    (attribute, value) pairs); "" when it has none."""
    for rdn in subject:
        for attribute, value in rdn:
            if attribute == "commonName":
                return value
    return ""


def name_allowed(name: str, allowed: tuple[str, ...]) -> bool:
    """Whether a verified client certificate's common name may assert users (empty `allowed`: any)."""
    return not allowed or name in allowed


def remote_user(name: str, headers: Iterable[tuple[str, str]], config: RequestHeaderConfig) -> RemoteUser | str:
    """The user a request asserts in its headers (each (name, value), repeated names kept), given its
    client certificate was verified against `config.client_ca` and carries common name `name`; or
    why it is not accepted. Header names compare case-insensitively; the first username header with a
    value wins; every group header value is a group; `<prefix><key>` headers are extras with the key
    lowercased and percent-decoded, as kube-apiserver reads them."""
    if not name_allowed(name, config.allowed_names):
        return (f'client certificate common name "{name}" is not one of the allowed names '
                f"{', '.join(config.allowed_names)}")
    pairs = [(key.lower(), value) for key, value in headers]
    user = ""
    for header in config.username_headers:
        user = next((value.strip() for key, value in pairs if key == header.lower() and value.strip()), "")
        if user:
            break
    if not user:
        return f"no user in the headers {', '.join(config.username_headers)}"
    group_headers = {h.lower() for h in config.group_headers}
    groups = tuple(value for key, value in pairs if key in group_headers and value)
    prefixes = [p.lower() for p in config.extra_prefixes]
    extra: dict[str, list[str]] = {}
    for key, value in pairs:
        prefix = next((p for p in prefixes if key.startswith(p) and len(key) > len(p)), None)
        if prefix is not None:
            extra.setdefault(urllib.parse.unquote(key[len(prefix):]).lower(), []).append(value)
    return RemoteUser(user, groups, tuple(sorted((k, tuple(v)) for k, v in extra.items())))
