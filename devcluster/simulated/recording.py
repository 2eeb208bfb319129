"""Kubernetes Events from the simulated components, so `kubectl describe` tells what happened.

`EventRecorder(api, "job-controller").record(obj, "Normal", "SuccessfulCreate", "Created pod: x")`
writes a core/v1 Event about `obj` through the in-process API. Used by the Job controller and the
scheduler; a refused write (an injected fault) is dropped, as client-go's recorder drops on error.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

from devcluster.server.apiserver import ApiServer
from devcluster.server.clock import timestamp
from devcluster.server.errors import ApiError

NORMAL = "Normal"
WARNING = "Warning"


class EventRecorder:
    """Records Events for one component (`source.component` and `reportingComponent`)."""

    def __init__(self, api: ApiServer, component: str) -> None:
        self.api = api
        self.component = component
        self._counter = itertools.count(1)

    async def record(self, obj: Mapping[str, Any], kind: str, reason: str, message: str) -> bool:
        meta = obj.get("metadata") or {}
        namespace = str(meta.get("namespace") or "default")
        now = timestamp(self.api.now())
        event = {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": f"{meta.get('name', '')}.{self.component}.{next(self._counter):x}",
                         "namespace": namespace},
            "involvedObject": {"apiVersion": obj.get("apiVersion", ""), "kind": obj.get("kind", ""),
                               "name": meta.get("name", ""), "namespace": namespace, "uid": meta.get("uid", ""),
                               "resourceVersion": meta.get("resourceVersion", "")},
            "reason": reason, "message": message, "type": kind, "count": 1,
            "firstTimestamp": now, "lastTimestamp": now,
            "source": {"component": self.component}, "reportingComponent": self.component,
        }
        try:
            await self.api.create(self.api.resource("v1", "events"), namespace, event, copy=False)
        except ApiError:
            return False
        return True
