"""The official kubernetes client, sending a request again when the answer asks for it as client-go
does: a 429 or 5xx carrying Retry-After (kube-apiserver answers 503 "apiserver is shutting down",
Retry-After: 1, while it swaps the storage of a CRD that just changed; kubectl waits and retries, the
Python client raises). The e2e and conformance fixtures build their ApiClient with `new_client`.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from kubernetes import client, config
from kubernetes.client import rest

MAX_RETRIES = 10
"""client-go's default: a request goes out at most 11 times."""


def retry_after_seconds(status: int, retry_after: str | None) -> int | None:
    """Whole seconds to wait before sending the request again, as client-go decides it: a 429 or any
    5xx answer with Retry-After in seconds; None when the answer is the caller's."""
    if (status != 429 and status < 500) or retry_after is None:
        return None
    try:
        return max(int(retry_after), 0)
    except ValueError:  # an HTTP date: client-go does not wait for those either
        return None


class RetryingApiClient(client.ApiClient):
    """An ApiClient whose every request (typed APIs, CustomObjectsApi, watches) is retried as
    `retry_after_seconds` says, at most MAX_RETRIES times; the last answer is the caller's."""

    def call_api(self, method: str, url: str, header_params: Any = None, body: Any = None,
                 post_params: Any = None, _request_timeout: Any = None) -> rest.RESTResponse:
        for _ in range(MAX_RETRIES):
            response = super().call_api(method, url, header_params, body, post_params, _request_timeout)
            seconds = retry_after_seconds(response.status, response.headers.get("Retry-After"))
            if seconds is None:
                return response
            response.read()  # type: ignore[no-untyped-call]  # read: the connection goes back to the pool
            time.sleep(seconds)
        return super().call_api(method, url, header_params, body, post_params, _request_timeout)


def new_client(kubeconfig: Path) -> RetryingApiClient:
    """A RetryingApiClient for the kubeconfig's current context (`config.new_client_from_config`'s
    loading, this client class)."""
    configuration = type.__call__(client.Configuration)
    config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration,  # type: ignore[no-untyped-call]  # kubernetes' config loaders are unannotated
                            persist_config=False)
    return RetryingApiClient(configuration)
