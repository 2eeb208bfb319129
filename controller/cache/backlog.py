"""What `ClusterCache.admission_state` read of each waiting Workload's object, kept across cycles.

A cycle looks at every waiting Workload; what it reads of one (finished, active, its requeue time,
the reason its QuotaReserved=False condition gives) changes only with a new version of the object,
so it is read once per version here (`BacklogReads.read`) instead of once per cycle. Pure data,
called by controller.cache.cluster only.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from controller.api import constants as c
from controller.api.workload import Workload
from controller.core.admission.pods_ready import requeue_at


@dataclass(frozen=True, slots=True, eq=False)
class WaitingRead:
    """One version of a waiting Workload as admission reads it. `queueable`: not finished and
    active; `requeue_at`: the end of its requeue backoff (epoch seconds) or None; `says`: (reason,
    message) of its QuotaReserved=False condition written for its current generation, or None
    (none, True, or written for an older generation)."""

    obj: Workload
    queueable: bool
    requeue_at: float | None
    says: tuple[str, str] | None

    @classmethod
    def of(cls, obj: Workload) -> WaitingRead:
        reserved = obj.condition(c.CONDITION_QUOTA_RESERVED)
        says = (reserved.reason, reserved.message) if reserved is not None and reserved.status == "False" \
            and reserved.observed_generation == obj.metadata.generation else None
        return cls(obj, not obj.is_finished and obj.active, requeue_at(obj), says)


@dataclass(slots=True)
class BacklogReads:
    """Workload key -> the `WaitingRead` of the version last read. `read` reads a version once;
    `forget_unseen` drops, once per cycle, what the cycle did not read (deleted, admitted, or
    finished Workloads), so the map stays the size of the backlog."""

    _reads: dict[str, WaitingRead] = field(default_factory=dict)
    _seen: dict[str, WaitingRead] = field(default_factory=dict)

    def read(self, key: str, obj: Workload) -> WaitingRead:
        """The read of this version of the Workload (the same object as last time: the same read)."""
        known = self._seen.get(key) or self._reads.get(key)
        if known is None or known.obj is not obj:
            known = WaitingRead.of(obj)
        self._seen[key] = known
        return known

    def forget_unseen(self) -> None:
        """End of a cycle's pass: keep only the reads it made (the previous versions go with them)."""
        self._reads, self._seen = self._seen, {}

    def __len__(self) -> int:
        return len(self._reads)
