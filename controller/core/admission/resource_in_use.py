"""The `kueue.x-k8s.io/resource-in-use` finalizer of ResourceFlavors and ClusterQueues, as Kueue keeps it.

Every ResourceFlavor and ClusterQueue carries the finalizer while it exists; once it is being
deleted, the finalizer goes only when nothing uses it any more, so the deletion completes then: a
flavor is in use while a ClusterQueue's resource groups name it, a ClusterQueue while Workloads hold
quota in it (admitted or reserving). Pure: the admission loop (controller.kube.admitting) computes
the changes from its cache after each cycle and writes them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from controller.api import constants as c
from controller.api.flavor import ResourceFlavor
from controller.api.queues import ClusterQueue

FINALIZER = c.FINALIZER_RESOURCE_IN_USE


@dataclass(frozen=True, slots=True)
class FinalizerChange:
    """Add (`add`) or remove the finalizer of one object, written only if it is still at
    `resource_version` (a newer version gets its own decision)."""

    kind: str
    name: str
    add: bool
    finalizers: tuple[str, ...]
    """The object's finalizers after the change, in their order."""
    resource_version: str | None


def finalizer_changes(flavors: Mapping[str, ResourceFlavor], cluster_queues: Mapping[str, ClusterQueue],
                      queues_holding_quota: Iterable[str]) -> list[FinalizerChange]:
    """The finalizer writes due: add it to each live flavor and queue without it; remove it from each
    one being deleted that nothing uses. `queues_holding_quota`: ClusterQueues with admitted or
    reserving Workloads. Flavors first, then queues, each by name."""
    referenced = {fq.name for cq in cluster_queues.values() for group in cq.spec.resource_groups
                  for fq in group.flavors}
    holding = set(queues_holding_quota)
    changes = [change for name, flavor in sorted(flavors.items())
               if (change := _change(c.KIND_RESOURCE_FLAVOR, name, flavor.metadata.finalizers,
                                     flavor.metadata.deletion_timestamp is not None, name in referenced,
                                     flavor.metadata.resource_version)) is not None]
    changes += [change for name, cq in sorted(cluster_queues.items())
                if (change := _change(c.KIND_CLUSTER_QUEUE, name, cq.metadata.finalizers,
                                      cq.metadata.deletion_timestamp is not None, name in holding,
                                      cq.metadata.resource_version)) is not None]
    return changes


def _change(kind: str, name: str, finalizers: list[str], deleting: bool, in_use: bool,
            resource_version: str | None) -> FinalizerChange | None:
    has = FINALIZER in finalizers
    if not deleting and not has:
        return FinalizerChange(kind, name, True, (*finalizers, FINALIZER), resource_version)
    if deleting and has and not in_use:
        return FinalizerChange(kind, name, False, tuple(f for f in finalizers if f != FINALIZER), resource_version)
    return None
