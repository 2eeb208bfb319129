"""Status writes: a Workload's conditions and admission, with optimistic concurrency; queue statuses.

`write_workload_status` applies a change to a Workload model and merge-patches its status with the
object's resourceVersion (an admission the change removed is written as null); on 409 it reads the
object afresh and applies the change again, so a concurrent writer is never overwritten.
`write_queue_status` writes a ClusterQueue or LocalQueue status computed by
controller.core.admission.queue_status, `write_cohort_status` a Cohort's. Used by the admission
loop, the Job reconciler and the eviction (controller.kube.evicting).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import ValidationError

from controller.api.workload import Workload
from controller.core.merge_patch import changes
from controller.kube.api import CLUSTER_QUEUES, COHORTS, LOCAL_QUEUES, WORKLOADS, ApiError, KubeApi, retrying

CONFLICT_ATTEMPTS = 8
"""Fresh reads after a 409 before a status write gives up (the next event retries it)."""


async def write_workload_status(api: KubeApi, workload: Workload,
                                change: Callable[[Workload], bool]) -> dict[str, Any] | None:
    """Apply `change` (True when it changed something) to a copy of the cached model and patch the
    status; retried from a fresh read on 409. The Workload as written (or as found, when `change`
    had nothing to do); None when it is gone or its fresh read cannot be parsed."""
    model = workload.model_copy(deep=True)
    namespace, name = model.namespace, model.name
    for _ in range(CONFLICT_ATTEMPTS):
        had_admission = model.admission is not None
        had_unhealthy = bool(model.unhealthy_node_names)
        if not change(model):
            return model.to_dict()
        status = model.status.to_dict() if model.status is not None else {}
        if had_admission and model.admission is None:
            status["admission"] = None  # a merge patch drops a field only when told so
        if had_unhealthy and not model.unhealthy_node_names:
            status["unhealthyNodes"] = None
        patch = {"metadata": {"resourceVersion": model.metadata.resource_version}, "status": status}
        try:
            return await retrying(functools.partial(api.merge_patch, WORKLOADS, namespace, name, patch, "status"))
        except ApiError as e:
            if e.not_found:
                return None
            if not e.conflict:
                raise
        try:
            model = Workload.from_dict(await retrying(lambda: api.get(WORKLOADS, namespace, name)))
        except ValidationError:
            return None
        except ApiError as e:
            if e.not_found:
                return None
            raise
    raise ApiError(409, f"workload {namespace}/{name}: still conflicting after {CONFLICT_ATTEMPTS} fresh reads")


async def write_reserved_status(api: KubeApi, workload: Workload,
                                 mark: Callable[[Workload], bool]) -> dict[str, Any] | None:
    """`write_workload_status` for a change that only a Workload still holding a reservation and not
    finished may take (an eviction, a preemption): the Workload as written, or None when it is
    gone, holds none, finished, or `mark` (True when it changed something) had nothing to do."""
    wrote = False

    def change(model: Workload) -> bool:
        nonlocal wrote
        wrote = model.reserved_admission is not None and not model.is_finished and mark(model)
        return wrote

    written = await write_workload_status(api, workload, change)
    return written if wrote else None


async def write_queue_status(api: KubeApi, kind_local: bool, key: str, status: Mapping[str, Any],
                             current: Mapping[str, Any] | None = None) -> None:
    """Merge-patch one queue's status (tasq is its only writer: no resourceVersion needed); none
    is sent when `current`, the queue as cached, has it already (after a restart or a failover)."""
    patch = {"status": status}
    if current is not None and not changes(current, patch):
        return
    if kind_local:
        namespace, name = key.split("/", 1)
        await retrying(lambda: api.merge_patch(LOCAL_QUEUES, namespace, name, patch, "status"))
    else:
        await retrying(lambda: api.merge_patch(CLUSTER_QUEUES, None, key, patch, "status"))


async def write_cohort_status(api: KubeApi, name: str, status: Mapping[str, Any],
                              current: Mapping[str, Any] | None = None) -> None:
    """Merge-patch one Cohort's status (its conditions; tasq is their only writer); none is sent
    when `current`, the Cohort as cached, has it already."""
    if current is not None and not changes(current, {"status": status}):
        return
    await retrying(lambda: api.merge_patch(COHORTS, None, name, {"status": status}, "status"))
