"""Authenticating and authorizing a metrics scrape with the API server, as Kubernetes components do.

`AccessReviewer.review(authorization, verb, path)` turns a request's `Authorization: Bearer` header
into a `Verdict`: a TokenReview says who the token belongs to (401 when nobody), a SubjectAccessReview
whether that user may `verb` the non-resource URL `path` (403 when not; the `metrics-reader`
ClusterRole grants `get /metrics`). Answers are cached briefly (see the TTLs) so a scrape every few
seconds costs no API call. `review_resource` asks about a resource instead (resourceAttributes), and
may be given the user the aggregator asserted (request-header authentication: a verified front-proxy
client certificate, see controller.core.request_headers) in place of a token.
Called by controller.kube.metrics for `/metrics` and controller.kube.visibility for pendingworkloads.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from controller.core.request_headers import RemoteUser, RequestHeaderConfig
from controller.kube.api import SUBJECT_ACCESS_REVIEWS, TOKEN_REVIEWS, ApiError, KubeApi

log = logging.getLogger(__name__)

AUTHENTICATED_TTL_S: Final = 60.0
"""How long a token's identity is reused: a Prometheus scraping every 15-30 s costs one TokenReview a
minute, and a token deleted or expired is refused within a minute (controller-runtime also keeps 1 min)."""
UNAUTHENTICATED_TTL_S: Final = 10.0
"""How long a refused token stays refused without asking again: bounds the API calls a client
retrying a bad token can cause, while a just-issued token is never refused for long."""
ALLOWED_TTL_S: Final = 60.0
"""How long an allowed (user, verb, path) stays allowed: a removed ClusterRoleBinding takes effect
within a minute (shorter than controller-runtime's 5 min, since a scrape is cheap to re-authorize)."""
DENIED_TTL_S: Final = 10.0
"""How long a denial is kept: a binding just created is honoured within 10 s (controller-runtime: 30 s)."""
MAX_ENTRIES: Final = 1024
"""Cached answers of each kind; the oldest goes first, so random tokens cannot grow memory."""

REASON_ALLOWED: Final = "Allowed"
REASON_NO_TOKEN: Final = "NoBearerToken"
REASON_INVALID_TOKEN: Final = "InvalidToken"
REASON_REMOTE_USER_REFUSED: Final = "RemoteUserRefused"
REASON_FORBIDDEN: Final = "Forbidden"
REASON_REVIEW_FAILED: Final = "ReviewFailed"


@dataclass(frozen=True, slots=True)
class Identity:
    """Who a token belongs to, as the TokenReview said (what a SubjectAccessReview is asked about)."""

    user: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()


@dataclass(frozen=True, slots=True)
class Verdict:
    """The HTTP status a request gets (200, 401, 403, or 500 when the API could not be asked), a
    PascalCase reason and a message naming the user and what was asked."""

    status: int
    reason: str
    message: str

    @property
    def allowed(self) -> bool:
        return self.status == 200


class _Expiring:
    """A bounded map of answers with an expiry each. A lookup runs as its own task that concurrent
    callers for the same key join, so a caller that goes away (a scraper disconnecting) cancels
    nobody else's answer."""

    def __init__(self, clock: Callable[[], float], max_entries: int) -> None:
        self.clock = clock
        self.max_entries = max_entries
        self.entries: OrderedDict[Any, tuple[float, Any]] = OrderedDict()
        self.pending: dict[Any, asyncio.Task[Any]] = {}

    async def get(self, key: Any, fetch: Callable[[], Awaitable[tuple[Any, float]]]) -> Any:
        """The cached value of `key`, else `fetch()`'s (value, ttl), kept for ttl seconds. A fetch
        that raises is not kept: each caller waiting for it gets the error."""
        entry = self.entries.get(key)
        if entry is not None and entry[0] > self.clock():
            return entry[1]
        task = self.pending.get(key)
        if task is None:
            task = asyncio.create_task(self._fetch(key, fetch))
            task.add_done_callback(_retrieve)
            self.pending[key] = task
        return await asyncio.shield(task)

    async def _fetch(self, key: Any, fetch: Callable[[], Awaitable[tuple[Any, float]]]) -> Any:
        try:
            value, ttl = await fetch()
        finally:
            del self.pending[key]
        self.entries[key] = (self.clock() + ttl, value)
        self.entries.move_to_end(key)
        while len(self.entries) > self.max_entries:
            self.entries.popitem(last=False)
        return value


def _retrieve(task: asyncio.Task[Any]) -> None:
    """Mark a lookup's error as seen (every caller got it), so asyncio does not log it again."""
    if not task.cancelled():
        task.exception()


def bearer_token(authorization: str | None) -> str | None:
    """The token of an `Authorization: Bearer <token>` header (scheme case-insensitive), else None."""
    scheme, _, token = (authorization or "").strip().partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None


def identity_of(review: Mapping[str, Any]) -> Identity | None:
    """The user of an answered TokenReview, or None when it did not authenticate."""
    status = review.get("status") or {}
    user = status.get("user") or {}
    if status.get("authenticated") is not True or not user.get("username"):
        return None
    extra = user.get("extra") or {}
    return Identity(str(user["username"]), str(user.get("uid") or ""), tuple(user.get("groups") or ()),
                    tuple(sorted((str(k), tuple(v or ())) for k, v in extra.items())))


class AccessReviewer:
    """See the module docstring; `calls` counts the reviews sent (tests and benchmarks read it)."""

    def __init__(self, api: KubeApi, clock: Callable[[], float] = time.monotonic,
                 max_entries: int = MAX_ENTRIES, request_header: RequestHeaderConfig | None = None) -> None:
        self.api = api
        self.request_header = request_header
        """The aggregator's request-header settings when they could be read (the server then asks
        for client certificates signed by their CA); None: asserted users are never accepted."""
        self.calls = 0
        self._identities = _Expiring(clock, max_entries)
        self._decisions = _Expiring(clock, max_entries)

    async def review(self, authorization: str | None, verb: str, path: str) -> Verdict:
        """The verdict on a request carrying the `authorization` header for `verb` on `path`."""
        return await self._review(authorization, f"{verb} {path}",
                                  ("nonResourceAttributes", (("path", path), ("verb", verb))))

    async def review_resource(self, authorization: str | None, attributes: Mapping[str, str],
                              remote: RemoteUser | str | None = None) -> Verdict:
        """The verdict on a request for a resource: `attributes` are a SubjectAccessReview's
        resourceAttributes (verb, group, version, resource, subresource, namespace, name). `remote`
        is what request-header authentication found for a verified front-proxy client certificate
        (the user, or why it was refused; None: no such certificate): a user is reviewed without a
        TokenReview, a refusal is a 401 unless a bearer token authenticates instead."""
        what = "/".join(attributes.get(k, "") for k in ("resource", "name", "subresource") if attributes.get(k))
        where = f" in namespace {attributes['namespace']}" if attributes.get("namespace") else ""
        return await self._review(authorization, f"{attributes.get('verb', 'get')} {what}{where}",
                                  ("resourceAttributes", tuple(sorted(attributes.items()))), remote)

    async def _review(self, authorization: str | None, asked: str,
                      attributes: tuple[str, tuple[tuple[str, str], ...]],
                      remote: RemoteUser | str | None = None) -> Verdict:
        token = bearer_token(authorization)
        if isinstance(remote, str) and token is None:
            return Verdict(401, REASON_REMOTE_USER_REFUSED, f"front-proxy client certificate refused: {remote}")
        if token is None and not isinstance(remote, RemoteUser):
            return Verdict(401, REASON_NO_TOKEN, "no bearer token: send Authorization: Bearer <token>")
        try:
            if isinstance(remote, RemoteUser):
                identity: Identity | None = Identity(remote.user, "", remote.groups, remote.extra)
            else:
                known = str(token)
                identity = await self._identities.get(hashlib.sha256(known.encode()).digest(),
                                                      lambda: self._authenticate(known))
            if identity is None:
                return Verdict(401, REASON_INVALID_TOKEN, "the bearer token was not accepted by the API server")
            allowed, why = await self._decisions.get((identity, attributes),
                                                     lambda: self._authorize(identity, attributes))
        except ApiError as e:
            log.warning("Cannot review a request to %s: %s", asked, e)
            return Verdict(500, REASON_REVIEW_FAILED, f"the API server could not review the request: {e}")
        if not allowed:
            detail = f": {why}" if why else ""
            return Verdict(403, REASON_FORBIDDEN, f'user "{identity.user}" may not {asked}{detail}')
        return Verdict(200, REASON_ALLOWED, f'user "{identity.user}" may {asked}')

    async def _authenticate(self, token: str) -> tuple[Identity | None, float]:
        self.calls += 1
        review = await self.api.create(TOKEN_REVIEWS, None, {
            "apiVersion": TOKEN_REVIEWS[0], "kind": "TokenReview", "spec": {"token": token}})
        identity = identity_of(review)
        return identity, AUTHENTICATED_TTL_S if identity is not None else UNAUTHENTICATED_TTL_S

    async def _authorize(self, identity: Identity, attributes: tuple[str, tuple[tuple[str, str], ...]]
                         ) -> tuple[tuple[bool, str], float]:
        self.calls += 1
        kind, fields = attributes
        spec: dict[str, Any] = {"user": identity.user, "groups": list(identity.groups), kind: dict(fields)}
        if identity.uid:
            spec["uid"] = identity.uid
        if identity.extra:
            spec["extra"] = {k: list(v) for k, v in identity.extra}
        review = await self.api.create(SUBJECT_ACCESS_REVIEWS, None, {
            "apiVersion": SUBJECT_ACCESS_REVIEWS[0], "kind": "SubjectAccessReview", "spec": spec})
        status = review.get("status") or {}
        allowed = status.get("allowed") is True and status.get("denied") is not True
        why = str(status.get("reason") or status.get("evaluationError") or "")
        return (allowed, why), ALLOWED_TTL_S if allowed else DENIED_TTL_S
