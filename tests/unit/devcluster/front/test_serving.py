"""The HTTP watch stream: events queued when a bookmark falls due still go out at once."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from aiohttp.test_utils import TestClient, TestServer

from devcluster.front.serving import HttpFrontend
from devcluster.server.apiserver import ApiServer

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


async def test_a_due_bookmark_does_not_hold_back_queued_events() -> None:
    # bookmark_interval 0: a bookmark is due on the stream's first turn, while the current objects
    # are already queued. They used to be held until timeoutSeconds ended the stream (nothing sent).
    api = ApiServer(now=lambda: NOW)
    await api.create(api.resource("v1", "configmaps"), "default", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c1"}})
    frontend = HttpFrontend(api, bookmark_interval=0.0)
    async with TestClient(TestServer(frontend.app())) as client:
        response = await client.get("/api/v1/namespaces/default/configmaps", params={
            "watch": "true", "allowWatchBookmarks": "true", "timeoutSeconds": "1"})
        lines = [json.loads(line) for line in (await response.text()).splitlines() if line]

    delivered = [(e["type"], e["object"]["metadata"].get("name")) for e in lines if e["type"] != "BOOKMARK"]
    assert delivered == [("ADDED", "c1")]
