"""Request-header authentication's pure parts: reading the extension-apiserver-authentication
ConfigMap, the allowed-name check on a verified client certificate's common name, and the user,
groups and extras taken from the configured headers (as kube-apiserver's aggregator sends them)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.core.request_headers import (
    RemoteUser,
    RequestHeaderConfig,
    common_name,
    name_allowed,
    remote_user,
)

CA = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
AGGREGATOR = RequestHeaderConfig(CA, ("front-proxy-client",))


def test_a_config_map_written_by_kube_apiserver_gives_its_settings() -> None:
    config = RequestHeaderConfig.from_config_map({
        "requestheader-client-ca-file": CA,
        "requestheader-allowed-names": '["front-proxy-client","aggregator"]',
        "requestheader-username-headers": '["X-Remote-User"]',
        "requestheader-group-headers": '["X-Remote-Group"]',
        "requestheader-extra-headers-prefix": '["X-Remote-Extra-"]',
        "client-ca-file": "other",
    })
    assert config == RequestHeaderConfig(CA, ("front-proxy-client", "aggregator"), ("X-Remote-User",),
                                         ("X-Remote-Group",), ("X-Remote-Extra-",))


@pytest.mark.parametrize(("data", "why"), [
    ({}, "has no requestheader-client-ca-file"),
    ({"client-ca-file": CA}, "has no requestheader-client-ca-file"),
    ({"requestheader-client-ca-file": CA, "requestheader-allowed-names": "front-proxy-client"},
     "data.requestheader-allowed-names must be a JSON array of strings, not 'front-proxy-client'"),
    ({"requestheader-client-ca-file": CA, "requestheader-username-headers": "[1]"},
     "data.requestheader-username-headers must be a JSON array of strings"),
    ({"requestheader-client-ca-file": CA, "requestheader-username-headers": "[]"},
     "data.requestheader-username-headers names no header"),
], ids=["empty ConfigMap", "only the client CA of client certs", "allowed names not JSON",
        "header list of numbers", "no username header"])
def test_a_config_map_without_usable_settings_says_why(data: dict[str, str], why: str) -> None:
    config = RequestHeaderConfig.from_config_map(data)
    assert isinstance(config, str) and why in config
    assert "kube-system/extension-apiserver-authentication" in config


def test_common_name_comes_from_the_subject_python_reports() -> None:
    subject = ((("organizationName", "k8s"),), (("commonName", "front-proxy-client"),))
    assert common_name(subject) == "front-proxy-client"
    assert common_name(((("organizationName", "k8s"),),)) == ""


@pytest.mark.parametrize(("name", "allowed", "expected"), [
    ("front-proxy-client", (), True),
    ("anyone", (), True),
    ("front-proxy-client", ("front-proxy-client",), True),
    ("Front-Proxy-Client", ("front-proxy-client",), False),
    ("kubelet", ("front-proxy-client", "aggregator"), False),
], ids=["no list allows the aggregator", "no list allows any signed name", "listed name",
        "names compare exactly", "unlisted name"])
def test_allowed_names(name: str, allowed: tuple[str, ...], expected: bool) -> None:
    assert name_allowed(name, allowed) is expected


def test_the_aggregator_headers_give_user_groups_and_extras() -> None:
    headers = [("x-remote-user", "alice"), ("X-Remote-Group", "devs"), ("X-Remote-Group", "system:authenticated"),
               ("X-Remote-Extra-Scopes", "a"), ("X-Remote-Extra-Scopes", "b"),
               ("X-Remote-Extra-Acme.com%2Fproject", "p1"), ("Accept", "application/json")]
    assert remote_user("front-proxy-client", headers, AGGREGATOR) == RemoteUser(
        "alice", ("devs", "system:authenticated"), (("acme.com/project", ("p1",)), ("scopes", ("a", "b"))))


def test_the_first_configured_username_header_with_a_value_wins() -> None:
    config = RequestHeaderConfig(CA, (), ("X-Remote-User", "X-Forwarded-User"))
    assert remote_user("x", [("X-Forwarded-User", "bob"), ("X-Remote-User", " ")], config) == RemoteUser("bob")
    assert remote_user("x", [("X-Forwarded-User", "bob"), ("X-Remote-User", "al")], config) == RemoteUser("al")


@pytest.mark.parametrize(("name", "headers", "why"), [
    ("kubelet", [("X-Remote-User", "alice")],
     'client certificate common name "kubelet" is not one of the allowed names front-proxy-client'),
    ("front-proxy-client", [("X-Remote-Group", "system:masters")], "no user in the headers X-Remote-User"),
], ids=["a certificate not named as allowed asserts nobody", "groups without a user are no user"])
def test_refused_assertions_say_why(name: str, headers: list[tuple[str, str]], why: str) -> None:
    assert remote_user(name, headers, AGGREGATOR) == why


header_names = st.sampled_from(["X-Remote-User", "x-remote-group", "X-REMOTE-GROUP", "X-Other", "X-Remote-Extra-k"])
header_values = st.text(alphabet="abc :", max_size=4)


@given(st.lists(st.tuples(header_names, header_values), max_size=8))
def test_groups_and_user_match_a_brute_force_reading(headers: list[tuple[str, str]]) -> None:
    users = [v.strip() for k, v in headers if k.lower() == "x-remote-user" and v.strip()]
    got = remote_user("front-proxy-client", headers, AGGREGATOR)
    if not users:
        assert isinstance(got, str)
        return
    assert isinstance(got, RemoteUser)
    assert got.user == users[0]
    assert got.groups == tuple(v for k, v in headers if k.lower() == "x-remote-group" and v)
    assert dict(got.extra).get("k", ()) == tuple(v for k, v in headers if k == "X-Remote-Extra-k")
