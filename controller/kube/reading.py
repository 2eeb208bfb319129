"""One read of everything admission looks at, for `tasq explain` on a live cluster.

Lists every resource the operator watches (`watching.RESOURCES`) once, with the same client and
errors as the operator's writers (an optional integrated kind whose CRD is absent counts as none);
the objects come back with their kind set.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kubernetes.aio import client

from controller.kube.api import ApiError, KubeApi, connect
from controller.kube.watching import OPTIONAL_KINDS, RESOURCES


async def read_cluster(api_client: client.ApiClient) -> list[dict[str, Any]]:
    """Every watched object, configuration kinds first (the order the operator primes its cache)."""
    api = KubeApi(api_client)
    objects: list[dict[str, Any]] = []
    for kind, (group, version, plural) in RESOURCES.items():
        api_version = f"{group}/{version}" if group else version
        try:
            listed = await api.list((api_version, plural))
        except ApiError as e:
            if kind in OPTIONAL_KINDS and e.not_found:
                continue  # JobSet's CRD not installed: no JobSets
            raise
        objects.extend({**obj, "kind": kind} for obj in listed)
    return objects


async def read_cluster_at(kubeconfig: Path | None) -> list[dict[str, Any]]:
    """`read_cluster` through a client for `kubeconfig` (in-cluster without one)."""
    api_client = await connect(kubeconfig)
    try:
        return await read_cluster(api_client)
    finally:
        await api_client.close()  # type: ignore[no-untyped-call]  # kubernetes.aio is unannotated
