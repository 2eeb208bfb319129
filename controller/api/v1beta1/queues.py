"""The ClusterQueue and LocalQueue kinds as served in v1beta1 (for their CRD schemas only).

Where they differ from v1beta2: ClusterQueue `spec.cohort` (v1beta2 `cohortName`), flavorFungibility's
deprecated `Borrow`/`Preempt` values (v1beta2 `MayStopSearch`), LocalQueue `status.flavorUsage`
(v1beta2 `flavorsUsage`). Every other part is the hub's model. Used by `controller.api.crds`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from controller.api import constants as c
from controller.api.meta import (
    ApiModel,
    Condition,
    DnsSubdomainStr,
    Int32,
    KubeObject,
    LabelSelector,
    omitempty_list,
)
from controller.api.queues import (
    MAX_RESOURCE_GROUPS,
    ClusterQueuePreemption,
    ClusterQueueStatus,
    LocalQueueFlavorUsage,
    LocalQueueSpec,
    QueueingStrategy,
    ResourceGroup,
    StopPolicy,
)

WhenCanBorrow = Literal["MayStopSearch", "TryNextFlavor", "Borrow"]
WhenCanPreempt = Literal["MayStopSearch", "TryNextFlavor", "Preempt"]


class FlavorFungibility(ApiModel):
    """How admission moves on to the next flavor when the current one would need borrowing or
    preemption. `Borrow` and `Preempt` are the deprecated spellings of `MayStopSearch`."""

    when_can_borrow: WhenCanBorrow | None = None
    """`MayStopSearch` (or `Borrow`): take this flavor even if it means borrowing; `TryNextFlavor`:
    try the next flavor first."""
    when_can_preempt: WhenCanPreempt | None = None
    """`MayStopSearch` (or `Preempt`): take this flavor even if it means preempting; `TryNextFlavor`:
    try the next flavor first."""


class ClusterQueueSpec(ApiModel):
    """The quota a ClusterQueue holds and how it admits Workloads against it."""

    resource_groups: list[ResourceGroup] = omitempty_list(maxItems=MAX_RESOURCE_GROUPS)
    """Groups of resources with their quota per flavor; a resource appears in at most one group."""
    cohort: DnsSubdomainStr | None = None
    """The cohort whose queues this queue borrows unused quota from and lends its own to."""
    queueing_strategy: QueueingStrategy = c.QUEUEING_BEST_EFFORT_FIFO
    """`BestEffortFIFO` (default): a Workload that does not fit lets later ones try; `StrictFIFO`:
    the oldest (highest priority first) Workload blocks those behind it."""
    namespace_selector: LabelSelector | None = None
    """Namespaces whose LocalQueues may submit to this queue; none selects no namespace, {} every one."""
    preemption: ClusterQueuePreemption | None = None
    """When the queue may preempt admitted Workloads to admit others."""
    flavor_fungibility: FlavorFungibility | None = None
    """When admission tries the next flavor instead of borrowing or preempting in the current one."""
    stop_policy: StopPolicy | None = None
    """`Hold` stops admitting new Workloads; `HoldAndDrain` also evicts the admitted ones; `None` runs."""


class ClusterQueue(KubeObject):
    """ClusterQueue holds quota per flavor and admits Workloads against it."""

    spec: ClusterQueueSpec = Field(default_factory=ClusterQueueSpec)
    """What the queue holds and how it admits."""
    status: ClusterQueueStatus | None = None
    """What the queue holds now, as the controller last wrote it."""


class LocalQueueStatus(ApiModel):
    """A LocalQueue's Workloads and the quota they use, as the controller last counted them."""

    pending_workloads: Int32 | None = None
    """Workloads of this queue waiting for quota."""
    reserving_workloads: Int32 | None = None
    """Workloads of this queue holding quota, admitted or not yet."""
    admitted_workloads: Int32 | None = None
    """Workloads of this queue admitted and not finished."""
    conditions: list[Condition] = omitempty_list()
    """The queue's state (`Active`) with reason and message."""
    flavors_reservation: list[LocalQueueFlavorUsage] = omitempty_list()
    """Quota reserved by this queue's Workloads, per flavor and resource."""
    flavor_usage: list[LocalQueueFlavorUsage] = omitempty_list()
    """Quota used by this queue's admitted Workloads, per flavor and resource (v1beta2: `flavorsUsage`)."""


class LocalQueue(KubeObject):
    """LocalQueue lets a namespace submit Workloads to a ClusterQueue."""

    spec: LocalQueueSpec
    """Which ClusterQueue the queue feeds."""
    status: LocalQueueStatus | None = None
    """The queue's Workloads and usage, as the controller last wrote them."""
