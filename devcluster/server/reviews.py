"""Answers the apiserver computes instead of storing: access reviews (`kubectl auth can-i`) and
ServiceAccount token requests (`kubectl create token`).

The devcluster has one identity, the admin of its kubeconfig, and authorizes every request (RBAC
objects are stored, not enforced): a review is always allowed, a token is accepted like any other.
Called by the HTTP front on POST; pure apart from the clock passed in.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from devcluster.server.clock import timestamp
from devcluster.server.errors import bad_request

ALLOWED_REASON = "the devcluster authorizes every request"
DEFAULT_TOKEN_SECONDS = 3600


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
    claims = json.dumps({"sub": f"system:serviceaccount:{namespace}:{account}"}).encode()
    token = "devcluster." + base64.urlsafe_b64encode(claims).decode().rstrip("=")
    return {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
            "metadata": {"name": account, "namespace": namespace, "creationTimestamp": None},
            "spec": {**spec, "expirationSeconds": seconds},
            "status": {"token": token, "expirationTimestamp": timestamp(now + timedelta(seconds=seconds))}}
