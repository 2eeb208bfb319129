"""tasq's one door to the API server: every request tasq sends itself, and its one error type, ApiError.

`connect` builds a `kubernetes.aio` ApiClient; `KubeApi` sends JSON requests and the ungater's patch
bytes (`patch_raw`) over it; any failure (a non-2xx answer, a dropped connection, a timeout, TLS) is an
`ApiError` (`api_error`, `refused`) and `retrying` re-runs transient ones. Called by the admission loop,
job reconciler, statuses, Events, priming, `tasq explain`, leader election, local webhook registration
and the ungater; only kopf's watches use a connection of their own (kopf's)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote, urlencode

import aiohttp
import yaml
from aiohttp.helpers import get_env_proxy_for_url
from kubernetes.aio import client, config
from kubernetes.aio.client.exceptions import ApiException
from kubernetes.aio.config.config_exception import ConfigException
from yarl import URL

from controller.api import constants as c

MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
RETRIES = 6
"""Attempts for one write on a transient error (5xx, 429, no answer) before giving up."""
BACKOFF_S = 0.05
"""The first retry's delay; doubled each time (0.05 s ... 1.6 s)."""
RAW_TIMEOUT_S = 30.0
"""Give up on one `patch_raw` request after this long (a transient ApiError)."""
CONNECTIONS = 300
"""Connections the client keeps at most, the watch streams' included: over HTTP/1.1 each request in
flight holds one, and the operator's writers alone (128 reconciles, 128 status writes, Events, the
ungater's patches, 13 watches) outnumber the kubernetes client's default of 100; past it a request
waits for a free connection behind every other."""
PROXY_VARIABLES = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy")

T = TypeVar("T")


class ApiError(Exception):
    """A request that failed: the HTTP `status` the API server answered with (0: no answer came
    back: the connection was refused or dropped, the request timed out, TLS failed) and a message.
    Callers ask `conflict`, `not_found` or `transient`, never for status numbers."""

    def __init__(self, status: int, message: str, retry_after_s: float | None = None) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message
        self.retry_after_s = retry_after_s
        """The wait the server asked for before the same request again (its Retry-After), if any."""

    @property
    def conflict(self) -> bool:
        """409: a stale resourceVersion, or the object exists already."""
        return self.status == 409

    @property
    def not_found(self) -> bool:
        return self.status == 404

    @property
    def forbidden(self) -> bool:
        """403: the identity lacks a permission; only its administrator can change that."""
        return self.status == 403

    @property
    def transient(self) -> bool:
        """Worth the same request again later: no answer, throttled (429) or a server error (5xx)."""
        return self.status == 0 or self.status == 429 or self.status >= 500


TRANSPORT_ERRORS: tuple[type[Exception], ...] = (aiohttp.ClientError, TimeoutError, OSError)
"""What a request raises when no answer came back: aiohttp's client errors (refused, a keep-alive
connection the server closed, ServerDisconnectedError, an answer cut short), timeouts, socket and
TLS errors (ssl.SSLError is an OSError)."""
_CLIENT_ERRORS: tuple[type[Exception], ...] = (*TRANSPORT_ERRORS, ApiException)


def api_error(error: Exception, request: str) -> ApiError:
    """The one mapping of what a request raised to ApiError (`request` names it: method and path).

    | raised                                   | status     | so             |
    | ApiError                                 | its own    | as it is       |
    | kubernetes ApiException (from `call_api`) | its status | by that status |
    | TRANSPORT_ERRORS                         | 0          | transient      |
    Anything else is a bug and is not passed here. An answer outside 2xx is `refused`.
    """
    if isinstance(error, ApiError):
        return error
    if isinstance(error, ApiException):
        return ApiError(error.status or 0, f"{request}: {error.reason}")
    detail = str(error).strip()
    return ApiError(0, f"{request}: {type(error).__name__}{': ' + detail if detail else ''}")


def refused(status: int, text: str, retry_after: str | None = None) -> ApiError:
    """The ApiError for an answer outside 2xx: its status, the Status object's message and the
    Retry-After header's seconds (an HTTP date is not waited for, as client-go does not)."""
    seconds: float | None = None
    if retry_after is not None:
        with contextlib.suppress(ValueError):
            seconds = max(float(int(retry_after)), 0.0)
    return ApiError(status, _message(text), seconds)


async def connect(kubeconfig: Path | None) -> client.ApiClient:
    """An ApiClient for the kubeconfig (its current context), or in-cluster without one."""
    configuration = client.Configuration()
    try:
        if kubeconfig is not None:
            # The aio config loaders and RESTResponse.read carry no annotations (kubernetes 37).
            await config.load_kube_config(config_file=str(kubeconfig),  # type: ignore[no-untyped-call]
                                          client_configuration=configuration, persist_config=False)
        else:
            config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    # An unusable kubeconfig (not YAML, wrong shapes, missing entries) is refused like an
    # unreachable server: the loader raises any of these on malformed input.
    except (ConfigException, yaml.YAMLError, KeyError, TypeError, AttributeError, ValueError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ApiError(0, f"cannot use the kubeconfig {str(kubeconfig)!r}: {first}") from e
    if not any(os.environ.get(name) for name in PROXY_VARIABLES):
        # aiohttp with trust_env looks up ~/.netrc and the proxy variables on a worker thread for
        # every request (two thread hops each, ~10% of a busy operator's CPU): only worth it when
        # a proxy is configured.
        configuration.client_session_kwargs = {"trust_env": False}
    configuration.connection_pool_maxsize = CONNECTIONS
    return client.ApiClient(configuration)


def path(api_version: str, plural: str, namespace: str | None = None, name: str | None = None,
         subresource: str | None = None) -> str:
    """The REST path of a collection or an object (`api/v1` for the core group, `apis/...` otherwise)."""
    parts = ["/api/v1" if api_version == "v1" else f"/apis/{api_version}"]
    if namespace:
        parts.append(f"namespaces/{quote(namespace, safe='')}")
    parts.append(plural)
    if name:
        parts.append(quote(name, safe=""))
    if subresource:
        parts.append(subresource)
    return "/".join(parts)


def _call_kind(method: str, url: str) -> str:
    """`METHOD plural[/subresource]` of a REST path built by `path` (names and namespaces left out)."""
    parts = url.split("?", 1)[0].split("/")
    rest = parts[3:] if parts[1] == "api" else parts[4:]  # after /api/v1 or /apis/group/version
    if len(rest) >= 2 and rest[0] == "namespaces" and len(rest) != 2:
        rest = rest[2:]
    return f"{method} {rest[0] if rest else '?'}" + (f"/{rest[2]}" if len(rest) > 2 else "")


WORKLOADS = (c.API_VERSION, c.PLURAL_WORKLOADS)
JOBS = (c.JOB_API_VERSION, "jobs")
PODS = ("v1", "pods")
EVENTS = ("v1", "events")
CLUSTER_QUEUES = (c.API_VERSION, c.PLURAL_CLUSTER_QUEUES)
RESOURCE_FLAVORS = (c.API_VERSION, c.PLURAL_RESOURCE_FLAVORS)  # their resource-in-use finalizer
LOCAL_QUEUES = (c.API_VERSION, c.PLURAL_LOCAL_QUEUES)
COHORTS = (f"{c.GROUP}/{c.VERSION_V1BETA2}", c.PLURAL_COHORTS)
LEASES = (c.LEASE_API_VERSION, "leases")
MUTATING_WEBHOOK_CONFIGURATIONS = ("admissionregistration.k8s.io/v1", "mutatingwebhookconfigurations")
VALIDATING_WEBHOOK_CONFIGURATIONS = ("admissionregistration.k8s.io/v1", "validatingwebhookconfigurations")
CUSTOM_RESOURCE_DEFINITIONS = ("apiextensions.k8s.io/v1", "customresourcedefinitions")  # local conversion only
TOKEN_REVIEWS = ("authentication.k8s.io/v1", "tokenreviews")  # metrics scrapes (controller.kube.authorizing)
CONFIG_MAPS = ("v1", "configmaps")  # kube-system/extension-apiserver-authentication (controller.kube.metrics)
SUBJECT_ACCESS_REVIEWS = ("authorization.k8s.io/v1", "subjectaccessreviews")


class KubeApi:
    """Requests over one ApiClient; see the module docstring.

    `request` (and the verbs built on it) goes through the client's `call_api`, which runs its
    credential refresh for every request. `patch_raw` is the ungater's path for thousands of pod
    patches in a burst: the generated `CoreV1Api.patch_namespaced_pod` serialises the body through
    the client's models, and the client's session (trust_env) looks up proxies and netrc on a
    worker thread per request, most of the ungater's CPU (bench/ungating.py). Here the body goes out
    as the caller's bytes, over a session on the client's own connector (TLS and connections shared;
    closing the ApiClient closes them), with the proxy resolved once (netrc is not read: the
    kubeconfig's credentials are what the API server checks) and the auth headers read once per
    `refresh_raw_headers` (which runs the client's token refresh hook).
    """

    def __init__(self, api_client: client.ApiClient) -> None:
        self.api_client = api_client
        self.calls = 0
        """Requests sent (for benchmarks and tests)."""
        self.calls_by: Counter[str] = Counter()
        """Requests sent by method and resource path without names, e.g. `PATCH workloads/status`."""
        self._raw_headers: dict[str, str] = {}
        self._raw_session: aiohttp.ClientSession | None = None
        self._raw_extra: dict[str, Any] | None = None

    async def request(self, method: str, url: str, body: Any = None, content_type: str = "application/json",
                      query: Mapping[str, str] | None = None) -> dict[str, Any]:
        """Send one request; the decoded JSON answer, or ApiError (status 0 when no answer came back)."""
        self.calls += 1
        self.calls_by[_call_kind(method, url)] += 1
        if query:
            url = f"{url}?{urlencode(query)}"
        headers = {"Content-Type": content_type, "Accept": "application/json"}
        try:
            # The body is plain JSON already: it is handed to the REST layer (which encodes it) past
            # param_serialize, whose walk over every value for OpenAPI models was ~5% of a busy
            # operator's CPU.
            method, full, headers, _, _ = await self.api_client.param_serialize(
                method, url, header_params=headers, auth_settings=["BearerToken"])
            response = await self.api_client.call_api(method, full, headers, body)
            raw = await response.read()  # type: ignore[no-untyped-call]
        except _CLIENT_ERRORS as e:
            raise api_error(e, f"{method} {url}") from e
        text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw or "")
        if not 200 <= response.status < 300:
            raise refused(response.status, text, response.headers.get("Retry-After"))
        try:
            return json.loads(text) if text else {}
        except ValueError as e:  # a proxy's error page, say
            raise ApiError(response.status, f"{method} {url}: the answer is not JSON: {text[:200]!r}") from e

    async def get(self, resource: tuple[str, str], namespace: str | None, name: str) -> dict[str, Any]:
        return await self.request("GET", path(*resource, namespace, name))

    async def list(self, resource: tuple[str, str]) -> list[dict[str, Any]]:
        """Every object of a resource in all namespaces (one request; the operator's priming read)."""
        answer = await self.request("GET", path(*resource))
        kind = str(answer.get("kind", "")).removesuffix("List")
        version = str(answer.get("apiVersion", resource[0]))
        return [{"apiVersion": version, "kind": kind, **item} for item in answer.get("items") or []]

    async def create(self, resource: tuple[str, str], namespace: str | None, obj: Mapping[str, Any]) -> dict[str, Any]:
        return await self.request("POST", path(*resource, namespace), dict(obj))

    async def replace(self, resource: tuple[str, str], namespace: str | None, name: str,
                      obj: Mapping[str, Any]) -> dict[str, Any]:
        """PUT the whole object; with `metadata.resourceVersion` it applies only to that version (409 otherwise)."""
        return await self.request("PUT", path(*resource, namespace, name), dict(obj))

    async def merge_patch(self, resource: tuple[str, str], namespace: str | None, name: str, patch: Mapping[str, Any],
                          subresource: str | None = None) -> dict[str, Any]:
        return await self.request("PATCH", path(*resource, namespace, name, subresource), dict(patch), MERGE_PATCH)

    async def delete(self, resource: tuple[str, str], namespace: str | None, name: str,
                     resource_version: str | None = None, uid: str | None = None,
                     grace_period_seconds: int | None = None) -> None:
        """Delete (its dependents in the background); with `resource_version` or `uid`, only that
        version or that object (409 when it changed since); `grace_period_seconds` 0 removes it at
        once (a pod whose node is gone, so no kubelet confirms its end)."""
        options: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"}
        preconditions = {k: v for k, v in (("resourceVersion", resource_version), ("uid", uid)) if v is not None}
        if preconditions:
            options["preconditions"] = preconditions
        if grace_period_seconds is not None:
            options["gracePeriodSeconds"] = grace_period_seconds
        await self.request("DELETE", path(*resource, namespace, name), options)

    async def refresh_raw_headers(self) -> None:
        """The headers `patch_raw` sends from now on: the client's defaults, cookie and bearer token
        as it would send them now (its refresh hook runs), the strategic-merge content type."""
        headers = {str(k): str(v) for k, v in self.api_client.default_headers.items()}
        if self.api_client.cookie:
            headers["Cookie"] = str(self.api_client.cookie)
        for auth in (await self.api_client.configuration.auth_settings()).values():
            if auth.get("in") == "header" and auth.get("value"):
                headers[str(auth["key"])] = str(auth["value"])
        headers["Content-Type"] = c.CONTENT_TYPE_STRATEGIC_MERGE_PATCH
        headers["Accept"] = "application/json"
        self._raw_headers = headers

    async def patch_raw(self, resource: tuple[str, str], namespace: str | None, name: str, body: bytes) -> None:
        """One strategic-merge PATCH whose body is already JSON bytes; ApiError when it fails.

        Nothing of the answer is decoded unless it is an error (the ungater does not need the object).
        """
        self.calls += 1
        self.calls_by[f"PATCH {resource[1]}"] += 1
        if not self._raw_headers:
            await self.refresh_raw_headers()
        url = path(*resource, namespace, name)
        try:
            session, extra = self._raw_session_now()
            async with session.patch(self._raw_base + url, data=body, headers=self._raw_headers, **extra) as response:
                # Read the answer even on success: a connection goes back to the pool only once it is read.
                raw = await response.read()
        except TRANSPORT_ERRORS as e:
            raise api_error(e, f"PATCH {url}") from e
        if not 200 <= response.status < 300:
            raise refused(response.status, raw.decode("utf-8", "replace"), response.headers.get("Retry-After"))

    async def close_raw(self) -> None:
        """Close `patch_raw`'s session (not the ApiClient's connections); it is made again when needed."""
        if self._raw_session is not None:
            await self._raw_session.close()
            self._raw_session = None

    @property
    def _raw_base(self) -> str:
        return str(self.api_client.configuration.host).rstrip("/")

    def _raw_session_now(self) -> tuple[aiohttp.ClientSession, dict[str, Any]]:
        """A session on the ApiClient's connector (made here if the client has sent nothing yet) and
        the per-request arguments the client would add (TLS server name, proxy), resolved once."""
        if self._raw_extra is None:
            config = self.api_client.configuration
            extra: dict[str, Any] = {}
            if config.tls_server_name:
                extra["server_hostname"] = config.tls_server_name
            proxy: Any = config.proxy
            if proxy is None:
                with contextlib.suppress(LookupError):
                    proxy, extra["proxy_auth"] = get_env_proxy_for_url(URL(self._raw_base))
            if proxy is not None:
                extra["proxy"] = proxy
                if config.proxy_headers:
                    extra["proxy_headers"] = config.proxy_headers
            self._raw_extra = extra
        if self._raw_session is None or self._raw_session.closed:
            rest = self.api_client.rest_client
            if rest.pool_manager is None:
                rest.pool_manager = rest._create_pool_manager()
            self._raw_session = aiohttp.ClientSession(
                connector=rest.pool_manager.connector, connector_owner=False, trust_env=False,
                timeout=aiohttp.ClientTimeout(total=RAW_TIMEOUT_S))
        return self._raw_session, self._raw_extra


async def retrying(write: Callable[[], Awaitable[T]], attempts: int = RETRIES) -> T:
    """Run `write`, retrying transient failures (5xx, 429, no answer) with doubling backoff, or after
    the server's Retry-After when that is longer (kube-apiserver answers 503 with Retry-After: 1
    while it swaps the storage of a CRD that just changed, and 429 when it sheds load)."""
    delay = BACKOFF_S
    for attempt in range(attempts):
        try:
            return await write()
        except ApiError as e:
            if not e.transient or attempt == attempts - 1:
                raise
            wait = max(delay, e.retry_after_s or 0.0)
        await asyncio.sleep(wait)
        delay *= 2
    raise AssertionError("unreachable: the last attempt returns or raises")


def _message(text: str) -> str:
    try:
        status = json.loads(text)
    except ValueError:
        return text[:500]
    return str(status.get("message", text[:500])) if isinstance(status, dict) else text[:500]
