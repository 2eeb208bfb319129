"""`RecordingApi`: the door (`controller.kube.api.KubeApi`) noting each request's method and path
before sending it, so a test can show that a process's API traffic goes through it. Used by
test_leading, test_webhooking and test_ungating."""

from __future__ import annotations

from typing import Any

from kubernetes.aio.client import ApiClient

from controller.kube.api import KubeApi, path


class RecordingApi(KubeApi):
    """KubeApi with `seen`: (method, path) of every request, JSON and raw patches alike, in order."""

    def __init__(self, api_client: ApiClient) -> None:
        super().__init__(api_client)
        self.seen: list[tuple[str, str]] = []

    async def request(self, method: str, url: str, *args: Any, **kw: Any) -> dict[str, Any]:
        self.seen.append((method, url))
        return await super().request(method, url, *args, **kw)

    async def patch_raw(self, resource: tuple[str, str], namespace: str | None, name: str, body: bytes) -> None:
        self.seen.append(("PATCH", path(*resource, namespace, name)))
        await super().patch_raw(resource, namespace, name, body)
