"""AccessReviewer against a fake API server that answers TokenReviews and SubjectAccessReviews as
kube-apiserver does: the verdict for each kind of caller, the bodies sent, and the caching (what a
second scrape costs, when an answer expires, one review for concurrent scrapes, nothing cached on
an error)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import pytest

from controller.kube import authorizing as a
from controller.kube.api import ApiError, KubeApi, path
from controller.kube.authorizing import AccessReviewer, Identity, bearer_token, identity_of

TOKEN_REVIEW_PATH = path("authentication.k8s.io/v1", "tokenreviews")
ACCESS_REVIEW_PATH = path("authorization.k8s.io/v1", "subjectaccessreviews")
READER = "system:serviceaccount:monitoring:prometheus"
STRANGER = "system:serviceaccount:default:nobody"


class ReviewingApi(KubeApi):
    """Tokens known by user; `may_get` the (user, path) pairs granted `get` (the metrics-reader
    binding); `failing` makes every request fail as an unreachable API server; `gate`, when set,
    holds each answer until it is set. `sent` logs (path, body) of each request."""

    def __init__(self) -> None:
        self.tokens = {"reader-token": READER, "stranger-token": STRANGER}
        self.may_get = {(READER, "/metrics")}
        self.failing = False
        self.gate: asyncio.Event | None = None
        self.sent: list[tuple[str, dict[str, Any]]] = []

    async def request(self, method: str, url: str, body: Any = None, content_type: str = "application/json",
                      query: Mapping[str, str] | None = None) -> dict[str, Any]:
        assert method == "POST"
        self.sent.append((url, body))
        if self.gate is not None:
            await self.gate.wait()
        if self.failing:
            raise ApiError(0, f"POST {url}: connection refused")
        if url == TOKEN_REVIEW_PATH:
            user = self.tokens.get(body["spec"]["token"])
            if user is None:
                return {**body, "status": {"user": {}, "error": "invalid bearer token"}}
            return {**body, "status": {"authenticated": True, "user": {
                "username": user, "uid": f"uid-{user}", "groups": ["system:serviceaccounts", "system:authenticated"],
                "extra": {"authentication.kubernetes.io/pod-name": ["p"]}}}}
        assert url == ACCESS_REVIEW_PATH
        spec = body["spec"]
        attributes = spec.get("nonResourceAttributes") or spec["resourceAttributes"]
        asked = attributes.get("path") or f"{attributes['resource']}/{attributes.get('subresource', '')}"
        allowed = attributes["verb"] == "get" and (spec["user"], asked) in self.may_get
        return {**body, "status": {"allowed": allowed} if allowed else {"allowed": False, "reason": "no RBAC policy matched"}}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def api() -> ReviewingApi:
    return ReviewingApi()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def reviewer(api: ReviewingApi, clock: Clock) -> AccessReviewer:
    return AccessReviewer(api, clock=clock)


@pytest.mark.parametrize(("header", "status", "reason", "words"), [
    pytest.param("Bearer reader-token", 200, a.REASON_ALLOWED, f'user "{READER}" may get /metrics',
                 id="a reader's token"),
    pytest.param("bearer reader-token", 200, a.REASON_ALLOWED, "may get", id="the scheme in lower case"),
    pytest.param("Bearer stranger-token", 403, a.REASON_FORBIDDEN,
                 f'user "{STRANGER}" may not get /metrics: no RBAC policy matched', id="a valid token without the role"),
    pytest.param("Bearer forged", 401, a.REASON_INVALID_TOKEN, "not accepted", id="a token the API server refuses"),
    pytest.param(None, 401, a.REASON_NO_TOKEN, "no bearer token", id="no header"),
    pytest.param("Basic dXNlcjpwYXNz", 401, a.REASON_NO_TOKEN, "no bearer token", id="another scheme"),
    pytest.param("Bearer ", 401, a.REASON_NO_TOKEN, "no bearer token", id="an empty token"),
])
async def test_each_caller_gets_its_verdict(reviewer: AccessReviewer, header: str | None, status: int, reason: str,
                                            words: str) -> None:
    verdict = await reviewer.review(header, "get", "/metrics")
    assert (verdict.status, verdict.reason) == (status, reason)
    assert words in verdict.message
    assert verdict.allowed is (status == 200)


async def test_the_access_review_asks_about_the_user_the_token_review_named(
        reviewer: AccessReviewer, api: ReviewingApi) -> None:
    await reviewer.review("Bearer reader-token", "get", "/metrics")
    (token_path, token_review), (access_path, access_review) = api.sent
    assert token_path == TOKEN_REVIEW_PATH and access_path == ACCESS_REVIEW_PATH
    assert token_review == {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                            "spec": {"token": "reader-token"}}
    assert access_review == {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": {
        "user": READER, "uid": f"uid-{READER}", "groups": ["system:serviceaccounts", "system:authenticated"],
        "extra": {"authentication.kubernetes.io/pod-name": ["p"]},
        "nonResourceAttributes": {"path": "/metrics", "verb": "get"}}}


async def test_no_token_costs_no_api_call(reviewer: AccessReviewer, api: ReviewingApi) -> None:
    await reviewer.review(None, "get", "/metrics")
    assert api.sent == []


async def test_a_second_scrape_within_the_ttl_costs_nothing_and_one_after_it_asks_again(
        reviewer: AccessReviewer, api: ReviewingApi, clock: Clock) -> None:
    assert (await reviewer.review("Bearer reader-token", "get", "/metrics")).status == 200
    clock.now += min(a.AUTHENTICATED_TTL_S, a.ALLOWED_TTL_S) - 1
    assert (await reviewer.review("Bearer reader-token", "get", "/metrics")).status == 200
    assert reviewer.calls == 2 and len(api.sent) == 2
    clock.now += 2
    api.may_get.clear()  # the ClusterRoleBinding was deleted: honoured once the answers expire
    assert (await reviewer.review("Bearer reader-token", "get", "/metrics")).status == 403
    assert reviewer.calls == 4


async def test_a_denial_is_kept_shorter_than_an_allowance_so_a_new_binding_soon_counts(
        reviewer: AccessReviewer, api: ReviewingApi, clock: Clock) -> None:
    assert (await reviewer.review("Bearer stranger-token", "get", "/metrics")).status == 403
    api.may_get.add((STRANGER, "/metrics"))
    clock.now += a.DENIED_TTL_S - 1
    assert (await reviewer.review("Bearer stranger-token", "get", "/metrics")).status == 403
    clock.now += 2
    assert (await reviewer.review("Bearer stranger-token", "get", "/metrics")).status == 200
    assert a.DENIED_TTL_S < a.ALLOWED_TTL_S


async def test_a_refused_token_is_remembered_briefly(reviewer: AccessReviewer, api: ReviewingApi, clock: Clock) -> None:
    for _ in range(5):
        assert (await reviewer.review("Bearer forged", "get", "/metrics")).status == 401
    assert reviewer.calls == 1
    api.tokens["forged"] = READER  # e.g. a token issued a moment after it was first tried
    clock.now += a.UNAUTHENTICATED_TTL_S + 1
    assert (await reviewer.review("Bearer forged", "get", "/metrics")).status == 200


async def test_another_path_or_verb_is_authorized_on_its_own(reviewer: AccessReviewer) -> None:
    assert (await reviewer.review("Bearer reader-token", "get", "/metrics")).status == 200
    assert (await reviewer.review("Bearer reader-token", "get", "/debug")).status == 403
    assert (await reviewer.review("Bearer reader-token", "post", "/metrics")).status == 403
    assert reviewer.calls == 4  # one TokenReview, three SubjectAccessReviews


async def test_concurrent_scrapes_with_one_token_share_one_review(reviewer: AccessReviewer, api: ReviewingApi) -> None:
    api.gate = asyncio.Event()
    scrapes = [asyncio.create_task(reviewer.review("Bearer reader-token", "get", "/metrics")) for _ in range(20)]
    await asyncio.sleep(0)
    api.gate.set()
    verdicts = await asyncio.gather(*scrapes)
    assert {v.status for v in verdicts} == {200}
    assert reviewer.calls == 2


async def test_a_scraper_going_away_cancels_no_one_elses_review(reviewer: AccessReviewer, api: ReviewingApi) -> None:
    api.gate = asyncio.Event()
    leaving = asyncio.create_task(reviewer.review("Bearer reader-token", "get", "/metrics"))
    staying = asyncio.create_task(reviewer.review("Bearer reader-token", "get", "/metrics"))
    await asyncio.sleep(0)
    leaving.cancel()
    await asyncio.sleep(0)
    api.gate.set()
    assert (await staying).status == 200
    assert leaving.cancelled()
    assert reviewer.calls == 2


async def test_an_unreachable_api_server_is_a_500_that_is_not_cached(reviewer: AccessReviewer,
                                                                     api: ReviewingApi) -> None:
    api.failing = True
    verdict = await reviewer.review("Bearer reader-token", "get", "/metrics")
    assert (verdict.status, verdict.reason) == (500, a.REASON_REVIEW_FAILED)
    assert "connection refused" in verdict.message
    api.failing = False
    assert (await reviewer.review("Bearer reader-token", "get", "/metrics")).status == 200


async def test_the_caches_stay_bounded(api: ReviewingApi, clock: Clock) -> None:
    reviewer = AccessReviewer(api, clock=clock, max_entries=8)
    for i in range(50):
        await reviewer.review(f"Bearer random-{i}", "get", "/metrics")
    assert len(reviewer._identities.entries) == 8
    await reviewer.review("Bearer random-0", "get", "/metrics")  # evicted: asked again
    assert reviewer.calls == 51


@pytest.mark.parametrize(("header", "token"), [
    ("Bearer abc", "abc"), ("BEARER  abc ", "abc"), ("Bearer", None), ("Token abc", None), ("", None), (None, None),
])
def test_bearer_token(header: str | None, token: str | None) -> None:
    assert bearer_token(header) == token


@pytest.mark.parametrize(("status", "identity"), [
    pytest.param({"authenticated": True, "user": {"username": "u", "groups": ["g"]}}, Identity("u", "", ("g",)),
                 id="authenticated"),
    pytest.param({"authenticated": False, "user": {"username": "u"}}, None, id="not authenticated"),
    pytest.param({"authenticated": True, "user": {}}, None, id="authenticated without a user name"),
    pytest.param({"error": "invalid bearer token"}, None, id="an error only"),
])
def test_identity_of(status: dict[str, Any], identity: Identity | None) -> None:
    assert identity_of({"status": status}) == identity


async def test_a_resource_request_is_reviewed_with_its_resource_attributes(
        reviewer: AccessReviewer, api: ReviewingApi) -> None:
    api.may_get.add((READER, "clusterqueues/pendingworkloads"))
    asked = {"verb": "get", "group": "visibility.kueue.x-k8s.io", "version": "v1beta1",
             "resource": "clusterqueues", "subresource": "pendingworkloads", "name": "team-a"}
    verdict = await reviewer.review_resource("Bearer reader-token", asked)
    assert verdict.allowed and verdict.message == f'user "{READER}" may get clusterqueues/team-a/pendingworkloads'
    assert api.sent[-1][1]["spec"]["resourceAttributes"] == asked
    assert "nonResourceAttributes" not in api.sent[-1][1]["spec"]
    local = {**asked, "resource": "localqueues", "namespace": "team", "name": "red"}
    verdict = await reviewer.review_resource("Bearer reader-token", local)
    assert (verdict.status, verdict.message) == (
        403, f'user "{READER}" may not get localqueues/red/pendingworkloads in namespace team: no RBAC policy matched')
    # an answer about /metrics is never reused for a resource, nor one resource's for another
    assert (await reviewer.review("Bearer reader-token", "get", "/metrics")).allowed
    assert sum(url == ACCESS_REVIEW_PATH for url, _ in api.sent) == 3
