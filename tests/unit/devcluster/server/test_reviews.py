"""Self access reviews and token requests (always allowed for the devcluster's admin), TokenReviews of
the admin token and of issued tokens, and SubjectAccessReviews evaluated against stored RBAC objects."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from devcluster.server.errors import ApiError
from devcluster.server.reviews import (
    ADMIN_TOKEN,
    INVALID_TOKEN,
    answer_review,
    subject_access_review,
    token_account,
    token_request,
    token_review,
)

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def test_an_access_review_echoes_its_spec_and_is_allowed() -> None:
    spec = {"resourceAttributes": {"verb": "create", "group": "kueue.x-k8s.io", "resource": "workloads"}}
    out = answer_review("SelfSubjectAccessReview", "authorization.k8s.io/v1", {"spec": spec})
    assert out["spec"] == spec and out["status"]["allowed"] is True


def test_a_rules_review_grants_everything() -> None:
    out = answer_review("SelfSubjectRulesReview", "authorization.k8s.io/v1", {"spec": {"namespace": "x"}})
    assert out["status"]["resourceRules"] == [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}]


def test_a_token_names_its_service_account_and_expires_when_asked() -> None:
    out = token_request("ns", "tasq", {"spec": {"expirationSeconds": 7200}}, NOW)
    payload = out["status"]["token"].split(".", 1)[1]
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    assert claims == {"sub": "system:serviceaccount:ns:tasq", "exp": int((NOW + timedelta(hours=2)).timestamp())}
    assert out["status"]["expirationTimestamp"] == "2026-01-01T02:00:00Z"


def test_a_token_shorter_than_ten_minutes_is_refused() -> None:
    with pytest.raises(ApiError) as refused:
        token_request("ns", "tasq", {"spec": {"expirationSeconds": 60}}, NOW)
    assert refused.value.code == 400


def account(namespace: str, name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"namespace": namespace, "name": name, "uid": "u1"}}


def test_an_issued_token_names_its_account_until_it_expires() -> None:
    token = token_request("mon", "prom", {"spec": {"expirationSeconds": 600}}, NOW)["status"]["token"]
    assert token_account(token, NOW) == ("mon", "prom")
    assert token_account(token, NOW + timedelta(seconds=599)) == ("mon", "prom")
    assert token_account(token, NOW + timedelta(seconds=600)) is None
    assert token_account(token[:-3] + "xyz", NOW) is None
    assert token_account("devcluster.not-base64!", NOW) is None
    assert token_account(ADMIN_TOKEN, NOW) is None


def test_a_token_review_names_the_service_account_with_its_groups() -> None:
    out = token_review({"spec": {"token": "t"}}, account("mon", "prom"))
    assert out["status"] == {"authenticated": True, "user": {
        "username": "system:serviceaccount:mon:prom", "uid": "u1",
        "groups": ["system:serviceaccounts", "system:serviceaccounts:mon", "system:authenticated"]}}


def test_the_admin_token_is_a_superuser_and_an_unknown_token_is_not_authenticated() -> None:
    assert "system:masters" in token_review({"spec": {"token": ADMIN_TOKEN}}, None)["status"]["user"]["groups"]
    assert token_review({"spec": {"token": "forged"}}, None)["status"] == {"user": {}, "error": INVALID_TOKEN}


@pytest.mark.parametrize("body", [{}, {"spec": {}}, {"spec": {"token": ""}}, {"spec": {"token": 3}}])
def test_a_token_review_without_a_token_is_refused(body: dict[str, Any]) -> None:
    with pytest.raises(ApiError) as refused:
        token_review(body, None)
    assert refused.value.code == 400


PROM = "system:serviceaccount:mon:prom"
RBAC: dict[str, list[dict[str, Any]]] = {
    "ClusterRole": [
        {"kind": "ClusterRole", "metadata": {"name": "metrics-reader"},
         "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]},
        {"kind": "ClusterRole", "metadata": {"name": "debug-all"},
         "rules": [{"nonResourceURLs": ["/debug/*"], "verbs": ["*"]}]},
        {"kind": "ClusterRole", "metadata": {"name": "pod-reader"},
         "rules": [{"apiGroups": [""], "resources": ["pods", "pods/log"], "verbs": ["get", "list"]}]},
    ],
    "Role": [{"kind": "Role", "metadata": {"namespace": "team", "name": "job-patcher"},
              "rules": [{"apiGroups": ["batch"], "resources": ["jobs"], "resourceNames": ["one"], "verbs": ["patch"]}]}],
    "ClusterRoleBinding": [
        {"kind": "ClusterRoleBinding", "metadata": {"name": "prom-metrics"}, "roleRef": {"kind": "ClusterRole",
         "name": "metrics-reader"}, "subjects": [{"kind": "ServiceAccount", "namespace": "mon", "name": "prom"}]},
        {"kind": "ClusterRoleBinding", "metadata": {"name": "ops-debug"},
         "roleRef": {"kind": "ClusterRole", "name": "debug-all"}, "subjects": [{"kind": "Group", "name": "ops"}]},
    ],
    "RoleBinding": [
        {"kind": "RoleBinding", "metadata": {"namespace": "team", "name": "alice-pods"},
         "roleRef": {"kind": "ClusterRole", "name": "pod-reader"}, "subjects": [{"kind": "User", "name": "alice"}]},
        {"kind": "RoleBinding", "metadata": {"namespace": "team", "name": "bot-jobs"},
         "roleRef": {"kind": "Role", "name": "job-patcher"}, "subjects": [{"kind": "ServiceAccount", "name": "bot"}]},
    ],
}


def non_resource(user: str, path: str, verb: str = "get", groups: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"spec": {"user": user, "groups": list(groups), "nonResourceAttributes": {"path": path, "verb": verb}}}


def on_resource(user: str, namespace: str, resource: str, verb: str, group: str = "", name: str = "",
                subresource: str = "") -> dict[str, Any]:
    return {"spec": {"user": user, "resourceAttributes": {
        "namespace": namespace, "group": group, "resource": resource, "verb": verb, "name": name,
        "subresource": subresource}}}


@pytest.mark.parametrize(("body", "allowed"), [
    pytest.param(non_resource(PROM, "/metrics"), True, id="the bound account gets /metrics"),
    pytest.param(non_resource(PROM, "/metrics", "post"), False, id="but may not post it"),
    pytest.param(non_resource(PROM, "/metricsx"), False, id="nor get a longer path"),
    pytest.param(non_resource("system:serviceaccount:other:prom", "/metrics"), False,
                 id="an account of that name in another namespace is not bound"),
    pytest.param(non_resource("bob", "/debug/pprof", "post", ("ops",)), True, id="a group binding with a prefix URL"),
    pytest.param(non_resource("bob", "/debug", "get", ("ops",)), False, id="the prefix needs its slash"),
    pytest.param(non_resource("root", "/anything", "delete", ("system:masters",)), True, id="system:masters"),
    pytest.param(on_resource("alice", "team", "pods", "list"), True, id="a RoleBinding to a ClusterRole"),
    pytest.param(on_resource("alice", "team", "pods", "get", subresource="log"), True, id="a subresource named"),
    pytest.param(on_resource("alice", "other", "pods", "list"), False, id="a RoleBinding holds in its namespace only"),
    pytest.param(on_resource("alice", "team", "pods", "delete"), False, id="a verb not granted"),
    pytest.param(on_resource("system:serviceaccount:team:bot", "team", "jobs", "patch", "batch", "one"), True,
                 id="a ServiceAccount subject defaults to the binding's namespace, resourceNames match"),
    pytest.param(on_resource("system:serviceaccount:team:bot", "team", "jobs", "patch", "batch", "two"), False,
                 id="another name than resourceNames"),
])
def test_a_subject_access_review_follows_the_stored_rbac(body: dict[str, Any], allowed: bool) -> None:
    status = subject_access_review(body, RBAC)["status"]
    assert status["allowed"] is allowed
    assert ("reason" in status) is allowed


def test_an_allowed_review_names_the_binding() -> None:
    assert subject_access_review(non_resource(PROM, "/metrics"), RBAC)["status"]["reason"] == \
        'RBAC: allowed by ClusterRoleBinding "prom-metrics" of ClusterRole "metrics-reader"'


@pytest.mark.parametrize("body", [{}, {"spec": {"user": "u"}}, {"spec": {"nonResourceAttributes": {"path": "/"}}}])
def test_a_subject_access_review_needs_a_user_and_attributes(body: dict[str, Any]) -> None:
    with pytest.raises(ApiError) as refused:
        subject_access_review(body, RBAC)
    assert refused.value.code == 400
