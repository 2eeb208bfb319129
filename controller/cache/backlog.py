"""What a waiting Workload's status already says, read once per version of its object, across cycles.

`ClusterCache.admission_state` leaves out of a cycle a Workload that cannot be queued (its queue
stopped, missing...) when its QuotaReserved=False condition already says exactly why; that reason
changes only with a new version of the object, so it is read once per version here
(`BacklogReads.says`) instead of once per cycle. Pure data, called by controller.cache.cluster only.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from controller.api import constants as c
from controller.api.workload import Workload


def said(obj: Workload) -> tuple[str, str] | None:
    """(reason, message) of the Workload's QuotaReserved=False condition written for its current
    generation; None when there is none, it is True, or it was written for an older generation."""
    reserved = obj.condition(c.CONDITION_QUOTA_RESERVED)
    if reserved is None or reserved.status != "False" or reserved.observed_generation != obj.metadata.generation:
        return None
    return reserved.reason, reserved.message


@dataclass(slots=True)
class BacklogReads:
    """Workload key -> (the version of its object last read, what it `said`). `says` reads a version
    once; `forget_unseen` drops, once per cycle, what the cycle did not ask about (deleted, admitted,
    queued again), so the map stays the size of the held backlog and holds no old version long."""

    _reads: dict[str, tuple[Workload, tuple[str, str] | None]] = field(default_factory=dict)
    _seen: dict[str, tuple[Workload, tuple[str, str] | None]] = field(default_factory=dict)

    def says(self, key: str, obj: Workload) -> tuple[str, str] | None:
        """What this version of the Workload `said` (the same object as last time: not read again)."""
        known = self._seen.get(key) or self._reads.get(key)
        if known is None or known[0] is not obj:
            known = (obj, said(obj))
        self._seen[key] = known
        return known[1]

    def forget_unseen(self) -> None:
        """End of a cycle's pass: keep only the reads it asked for (the previous versions go)."""
        self._reads, self._seen = self._seen, {}

    def __len__(self) -> int:
        return len(self._reads)
