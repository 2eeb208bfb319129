"""Answers the apiserver computes instead of storing: access reviews (`kubectl auth can-i`),
ServiceAccount token requests (`kubectl create token`), and the reviews a component asks about
someone else: TokenReview (whose token is this?) and SubjectAccessReview (may they do this?).

The devcluster authorizes every request it serves (RBAC objects are stored, not enforced on
requests), so a self review is always allowed. A component that authenticates its own callers (a
metrics endpoint) still gets real answers: a TokenReview knows the kubeconfig's admin token
(group system:masters) and the tokens `token_request` issued until they expire; a
SubjectAccessReview evaluates the stored RBAC objects as kube-apiserver's RBAC authorizer does
(no aggregation, no default roles). Called by the HTTP front on POST; pure apart from the clock
passed in.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any

from devcluster.server.clock import timestamp
from devcluster.server.errors import bad_request

ALLOWED_REASON = "the devcluster authorizes every request"
DEFAULT_TOKEN_SECONDS = 3600
ADMIN_TOKEN = "devcluster"  # the kubeconfig's (devcluster.cluster)
ADMIN_USER = "devcluster-admin"
SUPERUSER_GROUP = "system:masters"
TOKEN_PREFIX = "devcluster."
INVALID_TOKEN = "invalid bearer token"


def answer_review(kind: str, group_version: str, body: Any) -> dict[str, Any]:
    """The review sent back with its status filled: allowed, or every rule granted (rules review)."""
    if not isinstance(body, Mapping) or not isinstance(body.get("spec", {}), Mapping):
        raise bad_request(f"{kind} in version \"v1\" cannot be handled as a {kind}: invalid body")
    out = {"apiVersion": group_version, "kind": kind, "metadata": {"creationTimestamp": None},
           "spec": dict(body.get("spec") or {})}
    if kind == "SelfSubjectRulesReview":
        out["status"] = {"resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
                         "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}], "incomplete": False}
    else:
        out["status"] = {"allowed": True, "reason": ALLOWED_REASON}
    return out


def token_request(namespace: str, account: str, body: Any, now: datetime) -> dict[str, Any]:
    """A TokenRequest for a ServiceAccount: an opaque token naming it (the devcluster accepts any)."""
    spec = dict(body.get("spec") or {}) if isinstance(body, Mapping) else {}
    seconds = spec.get("expirationSeconds") or DEFAULT_TOKEN_SECONDS
    if not isinstance(seconds, int) or seconds < 600:
        raise bad_request("spec.expirationSeconds: Invalid value: may not specify a duration less than 10 minutes")
    expires = now + timedelta(seconds=seconds)
    claims = json.dumps({"sub": f"system:serviceaccount:{namespace}:{account}",
                         "exp": int(expires.timestamp())}).encode()
    token = TOKEN_PREFIX + base64.urlsafe_b64encode(claims).decode().rstrip("=")
    return {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
            "metadata": {"name": account, "namespace": namespace, "creationTimestamp": None},
            "spec": {**spec, "expirationSeconds": seconds},
            "status": {"token": token, "expirationTimestamp": timestamp(expires)}}


def token_account(token: str, now: datetime) -> tuple[str, str] | None:
    """(namespace, name) of the ServiceAccount a token from `token_request` names while it is
    unexpired; None for anything else."""
    if not token.startswith(TOKEN_PREFIX):
        return None
    payload = token.removeprefix(TOKEN_PREFIX)
    try:
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        prefix, namespace, name = str(claims["sub"]).rsplit(":", 2)
        expires = int(claims["exp"])
    except (ValueError, KeyError, TypeError):
        return None
    if prefix != "system:serviceaccount" or expires <= now.timestamp():
        return None
    return namespace, name


def token_review(body: Any, account: Mapping[str, Any] | None) -> dict[str, Any]:
    """A TokenReview answered: the admin token, or the token of `account` (the ServiceAccount the front
    found for it with `token_account`, None when there is none), else not authenticated."""
    if not isinstance(body, Mapping) or not isinstance(body.get("spec"), Mapping) \
            or not isinstance(body["spec"].get("token"), str) or not body["spec"]["token"]:
        raise bad_request("TokenReview.authentication.k8s.io \"\" is invalid: spec.token: Required value")
    spec = dict(body["spec"])
    out = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
           "metadata": {"creationTimestamp": None}, "spec": spec}
    if spec["token"] == ADMIN_TOKEN:
        user = {"username": ADMIN_USER, "groups": [SUPERUSER_GROUP, "system:authenticated"]}
    elif account is not None:
        namespace, name = account["metadata"]["namespace"], account["metadata"]["name"]
        user = {"username": f"system:serviceaccount:{namespace}:{name}", "uid": account["metadata"].get("uid", ""),
                "groups": ["system:serviceaccounts", f"system:serviceaccounts:{namespace}", "system:authenticated"]}
    else:
        out["status"] = {"user": {}, "error": INVALID_TOKEN}
        return out
    out["status"] = {"authenticated": True, "user": user}
    return out


def _subject_matches(subject: Mapping[str, Any], user: str, groups: Iterable[str], namespace: str) -> bool:
    """Whether a binding subject names the user: a User, one of its Groups, or a ServiceAccount (its
    namespace defaulting to the binding's)."""
    kind, name = subject.get("kind"), subject.get("name")
    if kind == "User":
        return bool(name == user)
    if kind == "Group":
        return name in set(groups)
    if kind == "ServiceAccount":
        return user == f"system:serviceaccount:{subject.get('namespace') or namespace}:{name}"
    return False


def _matches(values: Iterable[str], wanted: str) -> bool:
    return any(v == "*" or v == wanted for v in values)


def _rule_allows(rule: Mapping[str, Any], attributes: Mapping[str, Any], resource: bool) -> bool:
    """One PolicyRule against the review's resource or non-resource attributes, as RBAC matches them."""
    if not _matches(rule.get("verbs") or (), str(attributes.get("verb", ""))):
        return False
    if not resource:
        path = str(attributes.get("path", ""))
        return any(u == "*" or u == path or (u.endswith("*") and path.startswith(u[:-1]))
                   for u in rule.get("nonResourceURLs") or ())
    wanted = str(attributes.get("resource", "")) + (f"/{attributes['subresource']}" if attributes.get("subresource")
                                                   else "")
    names = rule.get("resourceNames") or ()
    return (_matches(rule.get("apiGroups") or (), str(attributes.get("group", "")))
            and _matches(rule.get("resources") or (), wanted)
            and (not names or attributes.get("name") in names))


def subject_access_review(body: Any, rbac: Mapping[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """A SubjectAccessReview answered from the stored RBAC objects (`rbac`: lists of the kinds Role,
    ClusterRole, RoleBinding, ClusterRoleBinding): allowed when a binding of the user, one of its
    groups or its ServiceAccount refers to a role with a matching rule; system:masters always."""
    spec = body.get("spec") if isinstance(body, Mapping) else None
    if not isinstance(spec, Mapping) or (not spec.get("user") and not spec.get("groups")):
        raise bad_request("SubjectAccessReview.authorization.k8s.io \"\" is invalid: spec.user: Invalid value: "
                          "\"\": at least one of user or group must be specified")
    resource = isinstance(spec.get("resourceAttributes"), Mapping)
    attributes = spec.get("resourceAttributes") if resource else spec.get("nonResourceAttributes")
    if not isinstance(attributes, Mapping):
        raise bad_request("SubjectAccessReview.authorization.k8s.io \"\" is invalid: spec.resourceAttributes: "
                          "Invalid value: \"null\": exactly one of nonResourceAttributes or resourceAttributes must be specified")
    user, groups = str(spec.get("user") or ""), [str(g) for g in spec.get("groups") or ()]
    out = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
           "metadata": {"creationTimestamp": None}, "spec": dict(spec)}
    namespace = str(attributes.get("namespace") or "") if resource else ""
    allowed_by = SUPERUSER_GROUP if SUPERUSER_GROUP in groups else _allowing_binding(
        rbac, user, groups, namespace, attributes, resource)
    out["status"] = {"allowed": True, "reason": f"RBAC: allowed by {allowed_by}"} if allowed_by else {"allowed": False}
    return out


def _allowing_binding(rbac: Mapping[str, list[dict[str, Any]]], user: str, groups: list[str], namespace: str,
                      attributes: Mapping[str, Any], resource: bool) -> str | None:
    """The first binding (ClusterRoleBindings, then RoleBindings of `namespace`) that grants the
    request, described; None when none does."""
    roles = {(r["kind"], r["metadata"].get("namespace", ""), r["metadata"]["name"]): r
             for kind in ("Role", "ClusterRole") for r in rbac.get(kind, [])}
    bindings = [*rbac.get("ClusterRoleBinding", []),
                *(b for b in rbac.get("RoleBinding", []) if namespace and b["metadata"].get("namespace") == namespace)]
    for binding in bindings:
        meta = binding["metadata"]
        if not any(_subject_matches(s, user, groups, meta.get("namespace", "")) for s in binding.get("subjects") or ()):
            continue
        ref = binding.get("roleRef") or {}
        role = roles.get((ref.get("kind"), meta.get("namespace", "") if ref.get("kind") == "Role" else "",
                          ref.get("name")))
        if role is not None and any(_rule_allows(rule, attributes, resource) for rule in role.get("rules") or ()):
            return f'{binding["kind"]} "{meta["name"]}" of {ref["kind"]} "{ref["name"]}"'
    return None
