"""The static topology of one ResourceFlavor: its own nodes (those carrying every flavor nodeLabel)
in slots, their allocatable, their domain per level (ids; a key is the label values widest first)
with children, label ranks, each lowest domain's slots (its lone slot when it has one, and its
labels once a result names it), and candidacy masks per pod-set signature.
Built once (`build`), then patched node by node by the cache (`upsert_node`, `remove_node`), each
change logged with the slot's old domains for the per-shape counts (`counting`); never rebuilt per
cycle. Per-cycle usage lives in `usage.Usage`. Read by `assigning`."""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import numpy.typing as npt

from controller.api.selectors import Toleration
from controller.api.views import NodeView
from controller.core.topology.candidacy import CandidateMask, Signature, static_reason
from controller.core.topology.outcome import DomainLabels
from controller.core.topology.usage import MILLI_CAP, NodeRegistry

Int64Array = npt.NDArray[np.int64]
DomainKey = tuple[str, ...]
MAX_MASKS = 64
"""Candidacy masks kept per topology (one per distinct pod-set signature, least recently used out)."""
DEAD_DOMAIN_SLACK = 64
"""Empty domains tolerated beyond the live ones before the domain tables are renumbered: node churn
(autoscaled or replaced hosts, each a new hostname domain) must not grow them, and every assignment
that scans them, without bound."""
MAX_LOG = 4096
"""Slot changes kept for the per-shape counts (`counting`); past this the log restarts (a new epoch)
and the counts are recomputed once."""


class LevelDomains:
    """The domains of one level: ids are dense, assigned in order of first appearance, never reused
    (empty domains stay until the tree renumbers them all). `children[d]` lists the ids of the
    next level's domains under `d`. Ranks by label values are sorted once when first read, then
    kept current as domains appear (a bisect into the sorted keys), so a node joining under a new
    name never re-sorts a level, and a build or renumbering never pays per-domain insertions."""

    __slots__ = ("_parent_array", "_rank", "_sorted", "children", "id_of", "keys", "parent")

    def __init__(self) -> None:
        self.keys: list[DomainKey] = []
        self.id_of: dict[DomainKey, int] = {}
        self.parent: list[int] = []
        self.children: list[list[int]] = []
        self._sorted: list[DomainKey] | None = None
        """The keys in label order while ranks are kept current; None until first read."""
        self._rank: Int64Array = np.zeros(0, dtype=np.int64)
        self._parent_array: Int64Array | None = None

    def intern(self, key: DomainKey, parent: int) -> int:
        """The id of the domain with this key, created (under `parent`) on first sight."""
        found = self.id_of.get(key)
        if found is not None:
            return found
        new = len(self.keys)
        self.id_of[key] = new
        self.keys.append(key)
        self.parent.append(parent)
        self.children.append([])
        self._parent_array = None
        if self._sorted is not None:
            pos = bisect.bisect_left(self._sorted, key)
            self._sorted.insert(pos, key)
            if new >= self._rank.shape[0]:
                self._rank = np.concatenate([self._rank, np.zeros(max(self._rank.shape[0], 16), dtype=np.int64)])
            live = self._rank[:new]
            live[live >= pos] += 1
            self._rank[new] = pos
        return new

    def rank(self) -> Int64Array:
        """rank[id]: position of the domain when all are sorted by label values (ties broken by it)."""
        if self._sorted is None:
            order = sorted(range(len(self.keys)), key=self.keys.__getitem__)
            self._rank = np.zeros(max(len(self.keys), 16), dtype=np.int64)
            self._rank[np.asarray(order, dtype=np.int64)] = np.arange(len(order), dtype=np.int64)
            self._sorted = [self.keys[i] for i in order]
        return self._rank[: len(self.keys)]

    def parents(self) -> Int64Array:
        if self._parent_array is None:
            self._parent_array = np.asarray(self.parent, dtype=np.int64)
        return self._parent_array


class FlavorTopology:
    """Static per-flavor tree; see the module docstring. Slots of removed nodes are reused.
    `node_count` is the flavor's node count ("Total nodes" in failure messages)."""

    def __init__(self, name: str, levels: tuple[str, ...], node_labels: Mapping[str, str],
                 flavor_tolerations: Sequence[Toleration]) -> None:
        self.name = name
        self.levels = tuple(levels)
        self.node_labels = dict(node_labels)
        self.flavor_tolerations = tuple(flavor_tolerations)
        self.version = 0
        self.domains = [LevelDomains() for _ in self.levels]
        self._slot_of: dict[str, int] = {}
        self._views: list[NodeView | None] = []
        self._static: list[str | None] = []
        self._free_slots: list[int] = []
        self._resource_col: dict[str, int] = {}
        self._alloc: Int64Array = np.zeros((0, 0), dtype=np.int64)
        self._domain_of: list[Int64Array] = [np.zeros(0, dtype=np.int64) for _ in self.levels]
        self._masks: dict[Signature, CandidateMask] = {}
        self._rows: tuple[NodeRegistry, Int64Array, dict[int, int]] | None = None
        self._slots_in: list[list[int]] = []
        """Slots of each lowest domain (a node's slot is in its lowest domain's list)."""
        self._labels: list[DomainLabels | None] = []
        """Per lowest domain, its labels once a result has named it (`labels_of`)."""
        self._lone: Int64Array = np.zeros(0, dtype=np.int64)
        """Per lowest domain, its slot when it holds exactly one (-1 otherwise): with hostname as the
        lowest level every domain is one node, and a result's pods per node are read in bulk."""
        self._slot_domains: list[tuple[int, ...] | None] = []
        """Each slot's domain ids (as `_domain_of`, kept in Python too: read per node change)."""
        self._nowhere = (-1,) * len(self.levels)
        self.epoch = 0
        """Bumped when domain ids are renumbered or the change log restarts: derived counts rebuild."""
        self.log: list[tuple[int, tuple[int, ...]]] = []
        """(slot, its domain ids before the change) per node change in this epoch, for `counting`."""
        self.shapes: dict[object, object] = {}
        """Per pod shape counts kept by `counting` (opaque here), least recently used first."""

    @classmethod
    def build(cls, name: str, levels: tuple[str, ...], node_labels: Mapping[str, str],
              flavor_tolerations: Sequence[Toleration], nodes: Iterable[NodeView]) -> FlavorTopology:
        """The tree of a flavor from the cluster's nodes (only the flavor's own are kept); `levels`
        widest first, as the admission normalises them."""
        topo = cls(name, levels, node_labels, flavor_tolerations)
        members = [view for view in nodes if topo.holds(view)]
        topo._grow(len(members))
        for view in members:
            topo.upsert_node(view)
        return topo

    # -- node changes --------------------------------------------------------------------------

    @property
    def slots(self) -> int:
        """Number of slots in use or free; arrays are indexed by slot below this bound."""
        return len(self._views)

    @property
    def node_count(self) -> int:
        return len(self._slot_of)

    @property
    def resources(self) -> tuple[str, ...]:
        """Every resource some node of the flavor has had allocatable, in order of first sight."""
        return tuple(self._resource_col)

    def view(self, slot: int) -> NodeView | None:
        return self._views[slot]

    def slot_of(self, name: str) -> int | None:
        return self._slot_of.get(name)

    def holds(self, view: NodeView) -> bool:
        """Whether a node belongs to this flavor: it carries every flavor nodeLabel with its value.
        (Level labels are not required: a member lacking one is counted, then excluded.)"""
        labels = view.labels
        return all(labels.get(key) == value for key, value in self.node_labels.items())

    def upsert_node(self, view: NodeView) -> None:
        """Add a node or apply a change to it; a change that equals the known node is a no-op. A node
        that is not (or no longer) the flavor's is ignored (or removed), so relabelling moves it."""
        if not self.holds(view):
            self.remove_node(view.name)
            return
        slot = self._slot_of.get(view.name)
        if slot is not None and self._views[slot] == view:
            return
        if slot is None:
            slot = self._free_slots.pop() if self._free_slots else self._append_slot()
            self._slot_of[view.name] = slot
        self._views[slot] = view
        static = static_reason(view, self.levels)
        self._static[slot] = static
        self._set_alloc(slot, view.allocatable)
        self._set_domains(slot, view if self._has_levels(view) else None)
        self._changed(slot)

    def remove_node(self, name: str) -> None:
        """Forget a node; its slot is reused by the next new node. Its domains stay, even empty, until
        too many are empty (`_compact`)."""
        slot = self._slot_of.pop(name, None)
        if slot is None:
            return
        self._views[slot] = None
        self._static[slot] = None
        self._alloc[slot, :] = 0
        self._set_domains(slot, None)
        self._free_slots.append(slot)
        self._changed(slot)

    def _append_slot(self) -> int:
        slot = len(self._views)
        self._grow(slot + 1)
        self._views.append(None)
        self._static.append(None)
        self._slot_domains.append(None)
        return slot

    def _grow(self, need: int) -> None:
        """Make the per-slot arrays hold at least `need` rows (doubling, so appends are amortised O(1))."""
        have = self._alloc.shape[0]
        if need <= have:
            return
        size = max(need, 2 * have, 16)
        alloc = np.zeros((size, self._alloc.shape[1]), dtype=np.int64)
        alloc[:have] = self._alloc
        self._alloc = alloc
        for i, arr in enumerate(self._domain_of):
            grown = np.full(size, -1, dtype=np.int64)
            grown[:have] = arr
            self._domain_of[i] = grown

    def _set_alloc(self, slot: int, allocatable: Mapping[str, int]) -> None:
        """Write a node's allocatable row, clamped to [0, MILLI_CAP]; new resources add columns."""
        for resource in allocatable:
            if resource not in self._resource_col:
                self._resource_col[resource] = len(self._resource_col)
        if len(self._resource_col) > self._alloc.shape[1]:
            wider = np.zeros((self._alloc.shape[0], len(self._resource_col) + 4), dtype=np.int64)
            wider[:, : self._alloc.shape[1]] = self._alloc
            self._alloc = wider
        row = self._alloc[slot]
        row[:] = 0
        for resource, milli in allocatable.items():
            row[self._resource_col[resource]] = min(max(milli, 0), MILLI_CAP)

    def _set_domains(self, slot: int, view: NodeView | None) -> None:
        """Record the node's domain at every level (-1 everywhere when it has no place in the tree),
        log the slot with its previous domains, and keep the lowest domains' slot lists and the
        parents' children lists. Renumbers the domains once too many are empty: a node is in one
        lowest domain, so more lowest domains than nodes means empty ones (and an empty wider
        domain has an empty child)."""
        before = self._slot_domains[slot]
        self._log_change(slot, before if before is not None else self._nowhere)
        ids: tuple[int, ...] | None = None
        if view is None:
            for arr in self._domain_of:
                arr[slot] = -1
        else:
            values = [view.labels[k] for k in self.levels]
            found: list[int] = []
            parent = -1
            for i, level in enumerate(self.domains):
                known = len(level.keys)
                parent = level.intern(tuple(values[: i + 1]), parent)
                if parent == known:  # a new domain
                    if i > 0:
                        self.domains[i - 1].children[found[-1]].append(parent)
                    if i == len(self.domains) - 1:
                        self._slots_in.append([])
                        self._labels.append(None)
                        self._grow_lone(len(self._slots_in))
                found.append(parent)
                self._domain_of[i][slot] = parent
            ids = tuple(found)
        self._slot_domains[slot] = ids
        if self.domains:
            old_low = before[-1] if before is not None else -1
            new_low = ids[-1] if ids is not None else -1
            if old_low != new_low:
                if old_low >= 0:
                    self._slots_in[old_low].remove(slot)
                    self._set_lone(old_low)
                if new_low >= 0:
                    self._slots_in[new_low].append(slot)
                    self._set_lone(new_low)
        if self.domains and len(self.domains[-1].keys) > 2 * self.node_count + DEAD_DOMAIN_SLACK:
            self._compact()

    def _grow_lone(self, need: int) -> None:
        """Make `_lone` hold at least `need` domains (doubling; new entries -1)."""
        have = self._lone.shape[0]
        if need > have:
            grown = np.full(max(need, 2 * have, 16), -1, dtype=np.int64)
            grown[:have] = self._lone
            self._lone = grown

    def _set_lone(self, low: int) -> None:
        slots = self._slots_in[low]
        self._lone[low] = slots[0] if len(slots) == 1 else -1

    def _log_change(self, slot: int, before: tuple[int, ...]) -> None:
        """Remember a changed slot for the per-shape counts; a log past MAX_LOG starts a new epoch."""
        if len(self.log) >= MAX_LOG:
            self.log = []
            self.epoch += 1
        self.log.append((slot, before))

    def _compact(self) -> None:
        """Renumber every level from the nodes present, dropping empty domains. Ids are internal
        (results name domains by label values), so nothing outside the tree notices but the
        per-shape counts (a new epoch); the cost, one pass over the nodes, is paid once per more
        than `node_count` domains that emptied."""
        self.domains = [LevelDomains() for _ in self.levels]
        self._slots_in = []
        self._labels = []
        self._lone = np.zeros(0, dtype=np.int64)
        self._slot_domains = [None] * len(self._slot_domains)
        for arr in self._domain_of:
            arr[:] = -1
        for slot, view in enumerate(self._views):
            if view is not None and self._has_levels(view):
                self._set_domains(slot, view)
        self.log = []
        self.epoch += 1

    def _has_levels(self, view: NodeView) -> bool:
        """Only a node carrying every level label has a place in the tree, whatever else excludes
        it (a cordoned or not-ready node may lack them too)."""
        return all(key in view.labels for key in self.levels)

    def _changed(self, slot: int) -> None:
        """Patch what is derived per slot (candidacy masks, usage rows) for one changed slot."""
        self.version += 1
        view = self._views[slot]
        for mask in self._masks.values():
            mask.refresh(slot, view, self._static[slot], self.flavor_tolerations)
        if self._rows is not None:
            registry, rows, slot_of_row = self._rows
            if slot >= rows.shape[0]:
                rows = np.concatenate([rows, np.zeros(max(slot + 1, 2 * rows.shape[0]) - rows.shape[0],
                                                      dtype=np.int64)])
            if view is not None:
                rows[slot] = registry.row(view.name)
                slot_of_row[int(rows[slot])] = slot
            else:
                slot_of_row.pop(int(rows[slot]), None)
                rows[slot] = 0
            self._rows = (registry, rows, slot_of_row)

    # -- reads for the assignment --------------------------------------------------------------

    def candidates(self, signature: Signature) -> CandidateMask:
        """The candidacy mask for a pod-set signature, computed on first use and then kept current."""
        mask = self._masks.pop(signature, None)
        if mask is None:
            mask = CandidateMask(signature, self.slots)
            mask.fill(self._views, self._static, self.flavor_tolerations)
            if len(self._masks) >= MAX_MASKS:
                # Least recently used first (dict order): every node change refreshes every mask.
                del self._masks[next(iter(self._masks))]
        self._masks[signature] = mask
        return mask

    @property
    def cached_masks(self) -> int:
        return len(self._masks)

    def domain_of(self, level: int) -> Int64Array:
        """domain id per slot at `level` (-1: no domain), trimmed to `slots`."""
        return self._domain_of[level][: self.slots]

    def allocatable(self, resources: Sequence[str]) -> Int64Array:
        """[slots x len(resources)] allocatable in milli; a resource no node has is all zeros."""
        out = np.zeros((self.slots, len(resources)), dtype=np.int64)
        for j, resource in enumerate(resources):
            col = self._resource_col.get(resource)
            if col is not None:
                out[:, j] = self._alloc[: self.slots, col]
        return out

    def rows_in(self, registry: NodeRegistry) -> Int64Array:
        """Row of every slot in a usage registry (empty slots point at row 0 and are never candidates).
        Computed once per registry, then patched by node changes; keep one registry for the cluster."""
        return self._rows_for(registry)[1][: self.slots]

    def slot_of_row(self, registry: NodeRegistry) -> dict[int, int]:
        """The inverse of `rows_in`: usage row -> slot, for the rows of this flavor's nodes."""
        return self._rows_for(registry)[2]

    def _rows_for(self, registry: NodeRegistry) -> tuple[NodeRegistry, Int64Array, dict[int, int]]:
        if self._rows is None or self._rows[0] is not registry:
            rows = np.zeros(self.slots, dtype=np.int64)
            slot_of_row: dict[int, int] = {}
            for slot, view in enumerate(self._views):
                if view is not None:
                    rows[slot] = registry.row(view.name)
                    slot_of_row[int(rows[slot])] = slot
            self._rows = (registry, rows, slot_of_row)
        return self._rows

    def slot_domains(self, slot: int) -> tuple[int, ...]:
        """A slot's domain id per level (-1 at every level when it has no place in the tree), as
        `domain_of` holds them, read as Python ints."""
        return self._slot_domains[slot] or self._nowhere

    def slots_in(self, domain: int) -> list[int]:
        """The slots of a lowest-level domain."""
        return self._slots_in[domain]

    def labels_of(self, domains: Sequence[int]) -> list[DomainLabels]:
        """The labels of lowest-level domains (level -> value), made on first use and kept (a
        domain's key never changes; renumbering starts over), so a result shares them."""
        known = self._labels
        out: list[DomainLabels] = []
        for d in domains:
            labels = known[d]
            if labels is None:
                labels = known[d] = DomainLabels(self.levels, self.domains[-1].keys[d])
            out.append(labels)
        return out

    def names_of(self, slots: Sequence[int]) -> list[str]:
        """The node names of occupied slots."""
        views = self._views
        return [views[slot].name for slot in slots]  # type: ignore[union-attr]  # occupied slots only

    def lone_slots(self) -> Int64Array:
        """lone[domain] per lowest-level domain: its slot when it holds exactly one, else -1."""
        return self._lone[: len(self._slots_in)]

    def allocatable_of(self, slot: int, resources: Sequence[str]) -> list[int]:
        """One slot's allocatable in milli per resource, as Python ints (0 for a resource it lacks)."""
        row = self._alloc[slot].tolist()
        cols = self._resource_col
        return [row[col] if (col := cols.get(r)) is not None else 0 for r in resources]

    def allocatable_at(self, slots: Int64Array, resources: Sequence[str]) -> Int64Array:
        """[len(slots) x len(resources)] allocatable in milli of some slots."""
        out = np.zeros((slots.shape[0], len(resources)), dtype=np.int64)
        for j, resource in enumerate(resources):
            col = self._resource_col.get(resource)
            if col is not None:
                out[:, j] = self._alloc[slots, col]
        return out
