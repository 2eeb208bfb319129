"""Access reviews and token requests: always allowed for the devcluster's single admin identity."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime

import pytest

from devcluster.server.errors import ApiError
from devcluster.server.reviews import answer_review, token_request

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
    assert claims == {"sub": "system:serviceaccount:ns:tasq"}
    assert out["status"]["expirationTimestamp"] == "2026-01-01T02:00:00Z"


def test_a_token_shorter_than_ten_minutes_is_refused() -> None:
    with pytest.raises(ApiError) as refused:
        token_request("ns", "tasq", {"spec": {"expirationSeconds": 60}}, NOW)
    assert refused.value.code == 400
