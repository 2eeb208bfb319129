"""The WorkloadPriorityClass kind: a named priority value for Workloads, apart from pod priority.

A Job labelled `kueue.x-k8s.io/priority-class: <name>` gets the value of that class as its
Workload's priority, whatever PriorityClass its pod template names (Kueue's rule). Cluster-scoped,
served as v1beta1 and v1beta2 with the same fields. Used by the cache, the Job reconciler, the
validators and `tasq simulate`.
"""

from __future__ import annotations

from typing import Annotated, Final

from controller.api.meta import Int32, KubeObject, schema_only

MAX_DESCRIPTION_LENGTH: Final = 2048
"""Kueue's limit on `description`."""


class WorkloadPriorityClass(KubeObject):
    """`value` and `description` sit at the top level, beside metadata (no spec), as in Kueue."""

    value: Int32
    """The priority Workloads get when their Job's kueue.x-k8s.io/priority-class label names this class;
    changing it does not change Workloads created before."""
    description: Annotated[str, schema_only(maxLength=MAX_DESCRIPTION_LENGTH)] | None = None
    """When this class should be used (at most 2048 characters)."""
