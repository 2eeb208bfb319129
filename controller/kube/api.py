"""The operator's REST access: JSON requests over a `kubernetes.aio` ApiClient, errors as ApiError.

`connect` builds the client (a kubeconfig path, else in-cluster; an unusable one is an ApiError); `KubeApi` sends one request with
an explicit content type (merge patches carry `metadata.resourceVersion` for optimistic
concurrency) and `retrying` re-runs a write on 5xx and 429 with backoff. Used by every writer in
controller.kube; nothing else in tasq opens a connection to the API.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote, urlencode

import yaml
from kubernetes.aio import client, config
from kubernetes.aio.config.config_exception import ConfigException

from controller.api import constants as c

MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
RETRIES = 6
"""Attempts for one write on a transient error (5xx, 429, connection) before giving up."""
BACKOFF_S = 0.05
"""The first retry's delay; doubled each time (0.05 s ... 1.6 s)."""
PROXY_VARIABLES = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy")

T = TypeVar("T")


class ApiError(Exception):
    """A request the API server refused: HTTP `status` and its message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message

    @property
    def transient(self) -> bool:
        return self.status == 0 or self.status == 429 or self.status >= 500


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


WORKLOADS = (c.API_VERSION, c.PLURAL_WORKLOADS)
JOBS = (c.JOB_API_VERSION, "jobs")
PODS = ("v1", "pods")
EVENTS = ("v1", "events")
CLUSTER_QUEUES = (c.API_VERSION, c.PLURAL_CLUSTER_QUEUES)
LOCAL_QUEUES = (c.API_VERSION, c.PLURAL_LOCAL_QUEUES)
TOKEN_REVIEWS = ("authentication.k8s.io/v1", "tokenreviews")  # metrics scrapes (controller.kube.authorizing)
SUBJECT_ACCESS_REVIEWS = ("authorization.k8s.io/v1", "subjectaccessreviews")


class KubeApi:
    """JSON requests over one ApiClient; see the module docstring."""

    def __init__(self, api_client: client.ApiClient) -> None:
        self.api_client = api_client
        self.calls = 0
        """Requests sent (for benchmarks and tests)."""

    async def request(self, method: str, url: str, body: Any = None, content_type: str = "application/json",
                      query: Mapping[str, str] | None = None) -> dict[str, Any]:
        """Send one request; the decoded JSON answer, or ApiError (status 0 for a connection error)."""
        self.calls += 1
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
        except (TimeoutError, OSError) as e:
            raise ApiError(0, f"{method} {url}: {e}") from e
        text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw or "")
        if not 200 <= response.status < 300:
            raise ApiError(response.status, _message(text))
        return json.loads(text) if text else {}

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

    async def merge_patch(self, resource: tuple[str, str], namespace: str | None, name: str, patch: Mapping[str, Any],
                          subresource: str | None = None) -> dict[str, Any]:
        return await self.request("PATCH", path(*resource, namespace, name, subresource), dict(patch), MERGE_PATCH)

    async def delete(self, resource: tuple[str, str], namespace: str | None, name: str,
                     resource_version: str | None = None) -> None:
        """Delete (its dependents in the background); with `resource_version`, only that version
        (409 when the object changed since)."""
        options: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"}
        if resource_version is not None:
            options["preconditions"] = {"resourceVersion": resource_version}
        await self.request("DELETE", path(*resource, namespace, name), options)


async def retrying(write: Callable[[], Awaitable[T]], attempts: int = RETRIES) -> T:
    """Run `write`, retrying transient failures (5xx, 429, no connection) with doubling backoff."""
    delay = BACKOFF_S
    for attempt in range(attempts):
        try:
            return await write()
        except ApiError as e:
            if not e.transient or attempt == attempts - 1:
                raise
        await asyncio.sleep(delay)
        delay *= 2
    raise AssertionError("unreachable: the last attempt returns or raises")


def _message(text: str) -> str:
    try:
        status = json.loads(text)
    except ValueError:
        return text[:500]
    return str(status.get("message", text[:500])) if isinstance(status, dict) else text[:500]
