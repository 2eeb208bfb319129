"""Writing the resource-in-use finalizer (controller.kube.finalizing): one resourceVersion-checked merge
patch per change, a 409 or 404 left to the next event, other failures reported, and the answer to a
last-finalizer removal kept out of the cache."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controller.api import constants as c
from controller.cache.cluster import ClusterCache
from controller.kube.api import CLUSTER_QUEUES, RESOURCE_FLAVORS, ApiError
from controller.kube.finalizing import write_finalizers
from tests.builders.kueue import make_cluster_queue, make_flavor

GPU = "nvidia.com/gpu"


class FinalizerApi:
    """Answers each merge patch with the patched metadata, or raises the error queued for that name."""

    def __init__(self, errors: Mapping[str, ApiError] | None = None) -> None:
        self.errors = dict(errors or {})
        self.patches: list[tuple[tuple[str, str], str, dict[str, Any]]] = []

    async def merge_patch(self, resource: tuple[str, str], namespace: str | None, name: str,
                          patch: Mapping[str, Any], subresource: str | None = None) -> dict[str, Any]:
        assert namespace is None and subresource is None
        self.patches.append((resource, name, dict(patch)))
        if name in self.errors:
            raise self.errors[name]
        kind = c.KIND_RESOURCE_FLAVOR if resource == RESOURCE_FLAVORS else c.KIND_CLUSTER_QUEUE
        return {"apiVersion": c.API_VERSION, "kind": kind, "spec": {},
                "metadata": {"name": name, **patch["metadata"], "resourceVersion": "99"}}


def cache_with(*objs: dict[str, Any]) -> ClusterCache:
    cache = ClusterCache()
    for obj in objs:
        obj["metadata"]["resourceVersion"] = "5"
        cache.upsert(obj["kind"], obj)
    return cache


def recorder() -> tuple[list[tuple[str, str]], Any]:
    seen: list[tuple[str, str]] = []

    def applied(kind: str, obj: Mapping[str, Any]) -> bool:
        seen.append((kind, obj["metadata"]["name"]))
        return True
    return seen, applied


async def test_live_objects_get_the_finalizer_at_the_version_it_was_decided_on() -> None:
    cache = cache_with(make_flavor("gpu").obj(), make_cluster_queue("cq").flavor("gpu", {GPU: 8}).obj())
    api = FinalizerApi()
    seen, applied = recorder()
    assert await write_finalizers(api, cache, applied)  # type: ignore[arg-type]
    assert [(r, n, p["metadata"]) for r, n, p in api.patches] == [
        (RESOURCE_FLAVORS, "gpu", {"finalizers": [c.FINALIZER_RESOURCE_IN_USE], "resourceVersion": "5"}),
        (CLUSTER_QUEUES, "cq", {"finalizers": [c.FINALIZER_RESOURCE_IN_USE], "resourceVersion": "5"})]
    assert seen == [(c.KIND_RESOURCE_FLAVOR, "gpu"), (c.KIND_CLUSTER_QUEUE, "cq")]


async def test_a_newer_version_or_a_deletion_waits_for_its_event_and_other_failures_are_reported() -> None:
    cache = cache_with(make_flavor("a").obj(), make_flavor("b").obj(), make_flavor("c").obj())
    api = FinalizerApi({"a": ApiError(409, "stale"), "b": ApiError(404, "gone")})
    seen, applied = recorder()
    assert await write_finalizers(api, cache, applied)  # type: ignore[arg-type]
    assert seen == [(c.KIND_RESOURCE_FLAVOR, "c")]
    failing = FinalizerApi({"a": ApiError(500, "etcd down")})
    assert not await write_finalizers(failing, cache_with(make_flavor("a").obj()), applied)  # type: ignore[arg-type]


async def test_removing_the_last_finalizer_leaves_the_cache_to_the_deleted_event() -> None:
    deleted = make_flavor("old").obj()
    deleted["metadata"].update(deletionTimestamp="2026-11-27T06:00:00Z", finalizers=[c.FINALIZER_RESOURCE_IN_USE])
    cache = cache_with(deleted)
    api = FinalizerApi()
    seen, applied = recorder()
    assert await write_finalizers(api, cache, applied)  # type: ignore[arg-type]
    assert [p["metadata"]["finalizers"] for _, _, p in api.patches] == [[]]
    assert seen == []

