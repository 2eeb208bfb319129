"""Per-cycle usage: what is taken on every node (bound non-terminal pods, each with 1000 milli `pods`,
plus reservations of admitted workloads whose pods are not bound yet), whichever flavor looks at it.

One Usage serves the whole cluster (rows keyed in a shared, append-only `NodeRegistry`, renumbered
when removed nodes pile up). Fed incrementally by the cache; cloned per admission cycle (a numpy copy
plus copy-on-write maps); every changed row is logged for the per-shape counts (`counting`). Read by
`assigning`, which never mutates it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from controller.api import constants as c
from controller.api.views import PodView

MILLI_CAP = 1 << 62
"""Milli amounts are clamped here so int64 arithmetic (alloc - used) can never overflow.
(2^62 milli is 4.6e15 whole units: no real allocatable reaches it.)"""

Int64Array = npt.NDArray[np.int64]

GONE_ROW_SLACK = 1024
"""Rows of removed nodes tolerated beyond the live ones before a Usage renumbers onto a fresh
registry: node churn (new names for replaced hosts) must not grow the matrix every clone copies."""
MAX_LOG = 1 << 15
"""Changed rows a Usage remembers before its change log restarts (derived counts then rebuild once)."""


class ChangeLog:
    """The rows whose used amounts changed, in order (append-only). A clone starts a log of its own
    whose `parent` is the original's log as it was (`base` entries) when cloned, so derived state
    computed on one Usage can be brought up to date on a relative by re-reading only the rows
    either side changed since their common point (`counting`)."""

    __slots__ = ("base", "parent", "rows")

    def __init__(self, parent: ChangeLog | None = None, base: int = 0) -> None:
        self.rows: list[int] = []
        self.parent = parent
        self.base = base


class NodeRegistry:
    """Node name -> row and resource name -> column; append-only, shared by a Usage and its clones
    (a Usage that renumbers moves to a new registry, leaving the old one to the clones using it)."""

    __slots__ = ("cols", "rows")

    def __init__(self) -> None:
        self.rows: dict[str, int] = {}
        self.cols: dict[str, int] = {}

    def row(self, name: str) -> int:
        row = self.rows.get(name)
        if row is None:
            row = self.rows[name] = len(self.rows)
        return row

    def col(self, resource: str) -> int:
        col = self.cols.get(resource)
        if col is None:
            col = self.cols[resource] = len(self.cols)
        return col


def workload_key_of(pod: PodView) -> str | None:
    """The workload a tasq pod belongs to: `<namespace>/<topology-workload annotation>`, if any."""
    name = pod.annotations.get(c.ANNOTATION_TOPOLOGY_WORKLOAD)
    return f"{pod.namespace}/{name}" if name else None


@dataclass(frozen=True, slots=True)
class _BoundPod:
    row: int
    amounts: tuple[tuple[int, int], ...]
    """(column, milli) the pod adds to its node."""
    workload: str | None = None
    """The workload the pod belongs to (its topology-workload annotation), if any."""


class Usage:
    """Used capacity per node (see the module docstring). Mutators are O(resources of one pod)."""

    def __init__(self, registry: NodeRegistry | None = None) -> None:
        self.registry = registry if registry is not None else NodeRegistry()
        self._used: Int64Array = np.zeros((16, 8), dtype=np.int64)
        self._pods: dict[str, _BoundPod] = {}
        self._on_row: dict[int, set[str]] = {}
        """Row -> keys of the pods bound there, so a node removal touches only its own pods."""
        self._owned_rows: set[int] = set()
        """Rows whose `_on_row` set this Usage copied since it last shared them (copy-on-write)."""
        self._reservations: dict[str, dict[int, dict[int, int]]] = {}
        self._converted: dict[str, set[str]] = {}
        """Workload key -> uids of the pods whose share of its reservation already became usage."""
        self._workload_pods: dict[str, set[str]] = {}
        """Workload key -> keys of its bound pods, so a victim search can take a workload away whole."""
        self._gone: set[str] = set()
        """Nodes removed (their rows are zero) and not seen since; renumbered away past the slack."""
        self._shared = False
        self.log = ChangeLog()
        """Rows changed since this Usage (or its log) started; read by `counting`."""

    @classmethod
    def from_pods(cls, pods: Iterable[PodView], registry: NodeRegistry | None = None) -> Usage:
        """A usage counting every bound, non-terminal pod (pass one registry for the whole cluster)."""
        usage = cls(registry)
        for pod in pods:
            usage.add_bound_pod(pod)
        return usage

    def clone(self) -> Usage:
        """An independent copy: the matrix is copied, the maps are shared until either side writes."""
        twin = Usage.__new__(Usage)
        twin.registry = self.registry
        twin._used = self._used.copy()
        twin._pods = self._pods
        twin._on_row = self._on_row
        twin._owned_rows = set()
        twin._reservations = self._reservations
        twin._converted = self._converted
        twin._workload_pods = self._workload_pods
        twin._gone = self._gone
        twin._shared = self._shared = True
        twin.log = ChangeLog(self.log, len(self.log.rows))
        return twin

    def _touched(self, row: int) -> None:
        """Log a row whose used amounts changed (a full log starts over: counts rebuild once)."""
        if len(self.log.rows) >= MAX_LOG:
            self.log = ChangeLog()
        self.log.rows.append(row)

    # -- incremental updates --------------------------------------------------------------------

    def add_bound_pod(self, pod: PodView, workload_key: str | None = None) -> None:
        """Count a bound, non-terminal pod (re-adding the same pod replaces it; others are ignored).

        If the pod belongs to a reserved workload (`workload_key`, else its topology-workload
        annotation), that reservation shrinks by what the pod now really uses (see `_consume`), once
        per pod uid: a later version of the same pod (a status update, a resize, or a removal and
        re-add from a relist) only replaces its own amounts, since its share was already converted.
        """
        self._own()
        known = pod.key in self._pods
        if known:
            self.remove_bound_pod(pod)
        if not pod.node_name or pod.terminal:
            return
        row = self._row(pod.node_name)
        amounts = tuple((self.registry.col(r), min(m, MILLI_CAP)) for r, m in sorted(pod.requests.items()) if m > 0)
        self._ensure(row, max((col for col, _ in amounts), default=0))
        key = workload_key if workload_key is not None else workload_key_of(pod)
        held = self._reservations.get(key) if key is not None and not known else None
        if held and key is not None:
            converted = self._converted.setdefault(key, set())
            if (pod.uid or pod.key) not in converted:
                converted.add(pod.uid or pod.key)
                self._consume(held, row, amounts)
        for col, milli in amounts:
            self._used[row, col] = min(int(self._used[row, col]) + milli, MILLI_CAP)
        self._touched(row)
        self._pods[pod.key] = _BoundPod(row, amounts, key)
        self._pods_on(row).add(pod.key)
        if key is not None:
            self._workload_pods.setdefault(key, set()).add(pod.key)

    def _consume(self, held: dict[int, dict[int, int]], row: int, amounts: tuple[tuple[int, int], ...]) -> None:
        """A pod of a reserved workload bound: its reservation turns into real usage. Take from the
        pod's own node first, then from the workload's other nodes in row order (when the lowest
        level is not hostname, kube-scheduler may pick another node of the domain than we guessed)."""
        left = {col: milli for col, milli in amounts}
        self._take(held, row, left)
        if any(left.values()):
            for other in sorted(held.keys() - {row}):
                self._take(held, other, left)
                if not any(left.values()):
                    break

    def _take(self, held: dict[int, dict[int, int]], row: int, left: dict[int, int]) -> None:
        """Move up to `left` out of the reservation on `row` (and out of `used`), shrinking `left`."""
        cols = held.get(row)
        if not cols:
            return
        self._touched(row)
        for col, want in left.items():
            take = min(cols.get(col, 0), want)
            if take:
                cols[col] -= take
                self._used[row, col] -= take
                left[col] -= take
        if not any(cols.values()):
            del held[row]  # fully bound here: later binds skip this node

    def remove_bound_pod(self, pod: PodView | str) -> None:
        """Forget a pod (finished, deleted or unbound); its reservation share is not given back."""
        self._own()
        key = pod if isinstance(pod, str) else pod.key
        entry = self._pods.pop(key, None)
        if entry is None:
            return
        keys = self._pods_on(entry.row)
        keys.discard(key)
        if not keys:
            del self._on_row[entry.row]
        self._forget_of_workload(entry, key)
        for col, milli in entry.amounts:
            self._used[entry.row, col] = max(int(self._used[entry.row, col]) - milli, 0)
        self._touched(entry.row)

    def reserve(self, workload_key: str, resources: Mapping[str, Mapping[str, int]]) -> None:
        """Hold `resources[node]` (milli) for an admitted workload until its pods bind or it ends.

        Pass `AssignmentSuccess.placement.resources`. Reserving a key again replaces its reservation.
        """
        self._own()
        self.release(workload_key)
        held: dict[int, dict[int, int]] = {}
        for node, vector in resources.items():
            row = self._row(node)
            cols = {self.registry.col(r): min(m, MILLI_CAP) for r, m in vector.items() if m > 0}
            self._ensure(row, max(cols, default=0))
            for col, milli in cols.items():
                self._used[row, col] = min(int(self._used[row, col]) + milli, MILLI_CAP)
            self._touched(row)
            held[row] = cols
        self._reservations[workload_key] = held  # (`release` forgot its converted pods: none yet)

    def release(self, workload_key: str) -> None:
        """Drop what is left of a workload's reservation (it finished, or was evicted)."""
        self._own()
        held = self._reservations.pop(workload_key, None)
        self._converted.pop(workload_key, None)
        for row, cols in (held or {}).items():
            for col, milli in cols.items():
                self._used[row, col] = max(int(self._used[row, col]) - milli, 0)
            self._touched(row)

    def remove_workload(self, workload_key: str) -> None:
        """Take a workload away whole: what is left of its reservation and every bound pod of it. The
        victim search does this on a clone to see what a preemption would free; a live Usage loses a
        workload's pods one pod event at a time instead."""
        self.release(workload_key)
        for key in sorted(self._workload_pods.get(workload_key, ())):
            self.remove_bound_pod(key)

    def remove_node(self, name: str) -> None:
        """A node left the cluster: its pods and reservations on it no longer count, and its row is
        dropped once enough rows are (`_renumber`)."""
        self._own()
        row = self.registry.rows.get(name)
        if row is None or name in self._gone:
            return
        if row < self._used.shape[0]:
            for key in self._on_row.pop(row, ()):
                self._forget_of_workload(self._pods.pop(key), key)
            for held in self._reservations.values():
                held.pop(row, None)
            self._used[row, :] = 0
            self._touched(row)
        self._gone.add(name)
        if len(self._gone) > len(self.registry.rows) - len(self._gone) + GONE_ROW_SLACK:
            self._renumber()

    # -- reads ----------------------------------------------------------------------------------

    def footprint(self, workload_key: str) -> dict[int, dict[int, int]]:
        """Row -> column -> milli a workload takes now: what is left of its reservation plus its bound
        pods (what `remove_workload` would free); columns as in `registry.cols`. Read-only: the inner
        maps may be this Usage's own."""
        out: dict[int, dict[int, int]] = dict(self._reservations.get(workload_key, {}))
        for key in self._workload_pods.get(workload_key, ()):
            pod = self._pods[key]
            vec = out[pod.row] = dict(out.get(pod.row, {}))
            for col, milli in pod.amounts:
                vec[col] = vec.get(col, 0) + milli
        return out

    def reserved(self, workload_key: str) -> dict[str, dict[str, int]]:
        """What is still held for a workload, per node and resource (non-zero amounts only)."""
        names = {row: name for name, row in self.registry.rows.items()}
        resources = {col: name for name, col in self.registry.cols.items()}
        out: dict[str, dict[str, int]] = {}
        for row, cols in self._reservations.get(workload_key, {}).items():
            vec = {resources[col]: m for col, m in cols.items() if m > 0}
            if vec:
                out[names[row]] = vec
        return out

    def used(self, node: str) -> dict[str, int]:
        """Used milli per resource on one node (non-zero amounts only)."""
        row = self.registry.rows.get(node)
        if row is None or row >= self._used.shape[0]:
            return {}
        return {r: int(self._used[row, col]) for r, col in self.registry.cols.items()
                if col < self._used.shape[1] and self._used[row, col]}

    def changed_since(self, log: ChangeLog, position: int) -> list[int] | None:
        """Rows whose used amounts may differ between this Usage now and the state it (or a relative
        sharing a log ancestor) had when `log` held `position` entries; None when unrelated."""
        mine: dict[int, tuple[ChangeLog, int]] = {}
        at: ChangeLog | None = self.log
        n = len(self.log.rows)
        while at is not None:
            mine[id(at)] = (at, n)
            n, at = at.base, at.parent
        rows: list[int] = []
        theirs: ChangeLog | None = log
        n = position
        while theirs is not None and id(theirs) not in mine:
            rows.extend(theirs.rows[:n])
            n, theirs = theirs.base, theirs.parent
        if theirs is None:
            return None
        common, here = theirs, mine[id(theirs)][1]
        rows.extend(common.rows[min(n, here):max(n, here)])
        at, n = self.log, len(self.log.rows)
        while at is not common and at is not None:
            rows.extend(at.rows[:n])
            n, at = at.base, at.parent
        return rows

    def used_of(self, row: int, resources: Sequence[str]) -> list[int]:
        """One row's used milli per resource, as Python ints (rows or resources never seen: 0)."""
        if row >= self._used.shape[0]:
            return [0] * len(resources)
        line = self._used[row].tolist()
        cols = self.registry.cols
        return [line[col] if (col := cols.get(r)) is not None and col < len(line) else 0 for r in resources]

    def used_matrix(self, rows: Int64Array, resources: Sequence[str]) -> Int64Array:
        """[len(rows) x len(resources)] used milli; rows or resources never seen read as zero."""
        out = np.zeros((rows.shape[0], len(resources)), dtype=np.int64)
        known = rows < self._used.shape[0]
        for j, resource in enumerate(resources):
            col = self.registry.cols.get(resource)
            if col is not None and col < self._used.shape[1]:
                out[known, j] = self._used[rows[known], col]
        return out

    # -- internals ------------------------------------------------------------------------------

    def _row(self, node: str) -> int:
        """The row of a node that is (again) in use."""
        if node in self._gone:
            self._gone.discard(node)
        return self.registry.row(node)

    def _renumber(self) -> None:
        """Move onto a fresh registry holding only the nodes not removed; rows, pods and reservations
        are remapped. Clones keep the old registry, and `FlavorTopology.rows_in` notices the new one."""
        fresh = NodeRegistry()
        fresh.cols = dict(self.registry.cols)
        live = sorted((row, name) for name, row in self.registry.rows.items() if name not in self._gone)
        new_of = {row: fresh.row(name) for row, name in live}
        used = np.zeros((max(len(live), 16), self._used.shape[1]), dtype=np.int64)
        old_rows = np.asarray([row for row, _ in live if row < self._used.shape[0]], dtype=np.int64)
        used[np.asarray([new_of[int(r)] for r in old_rows], dtype=np.int64)] = self._used[old_rows]
        self._used = used
        self._pods = {key: _BoundPod(new_of[p.row], p.amounts, p.workload) for key, p in self._pods.items()}
        self._on_row = {new_of[row]: set(keys) for row, keys in self._on_row.items()}
        self._owned_rows = set(self._on_row)
        self._reservations = {k: {new_of[r]: cols for r, cols in held.items()}
                              for k, held in self._reservations.items()}
        self._gone = set()
        self.registry = fresh
        self.log = ChangeLog()  # rows were renumbered: derived counts rebuild

    def _own(self) -> None:
        """Copy-on-write: take private copies of the maps shared with a clone before writing."""
        if self._shared:
            self._gone = set(self._gone)
            self._pods = dict(self._pods)
            self._on_row = dict(self._on_row)  # the sets themselves are copied row by row (_pods_on)
            self._owned_rows = set()
            self._reservations = {k: {r: dict(cols) for r, cols in held.items()}
                                  for k, held in self._reservations.items()}
            self._converted = {k: set(uids) for k, uids in self._converted.items()}
            self._workload_pods = {k: set(pods) for k, pods in self._workload_pods.items()}
            self._shared = False

    def _forget_of_workload(self, entry: _BoundPod, key: str) -> None:
        """Drop a removed pod from its workload's set (call after `_own`)."""
        if entry.workload is None:
            return
        pods = self._workload_pods.get(entry.workload)
        if pods is not None:
            pods.discard(key)
            if not pods:
                del self._workload_pods[entry.workload]

    def _pods_on(self, row: int) -> set[str]:
        """The (private, writable) set of pod keys bound on a row; call after `_own`."""
        keys = self._on_row.get(row)
        if keys is None or row not in self._owned_rows:
            keys = self._on_row[row] = set(keys or ())
            self._owned_rows.add(row)
        return keys

    def _ensure(self, row: int, col: int) -> None:
        """Grow the matrix (doubling rows, a few columns at a time) so [row, col] exists."""
        rows, cols = self._used.shape
        if row < rows and col < cols:
            return
        grown = np.zeros((max(row + 1, 2 * rows) if row >= rows else rows,
                          max(col + 1, cols + 4) if col >= cols else cols), dtype=np.int64)
        grown[:rows, :cols] = self._used
        self._used = grown
