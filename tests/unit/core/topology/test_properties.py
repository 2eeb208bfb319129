"""Property tests: random trees and usages against a brute-force oracle (pure Python, per node).
The flavor is `pool=gpu`; nodes of another pool are outside it: never placed on, never counted."""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import dataclass, replace
from unittest import mock

from hypothesis import given, settings
from hypothesis import strategies as st

from controller.api.views import NodeView, PodView
from controller.core.topology import (
    AssignmentFailure,
    AssignmentOutcome,
    AssignmentSuccess,
    FlavorTopology,
    PodSetRequest,
    SliceLayer,
    TopologyRequest,
    Usage,
    assign,
    tree,
)
from controller.core.topology import usage as usage_rows
from tests.builders.cluster import make_pod
from tests.unit.core.topology.scenario import GPU, LEVELS, gpu_node, topology

POOL = "cloud.com/pool"
FLAVOR_LABELS = {POOL: "gpu"}


@dataclass(frozen=True)
class World:
    """Hosts as (block, rack, host) paths with their node views, bound pods and oracle fits
    (0 for nodes outside the flavor); `members` the flavor's nodes."""

    nodes: list[NodeView]
    pods: list[PodView]
    fit: dict[str, int]
    path: dict[str, tuple[str, str, str]]
    members: frozenset[str]


@st.composite
def worlds(draw: st.DrawFn, gpus_per_pod: int) -> World:
    nodes, pods, fit, path, members = [], [], {}, {}, set()
    for b in range(draw(st.integers(1, 3))):
        for r in range(draw(st.integers(1, 3))):
            for h in range(draw(st.integers(1, 3))):
                name = f"h{b}{r}{h}"
                alloc, used = draw(st.integers(0, 6)), draw(st.integers(0, 6))
                ready = draw(st.booleans()) or draw(st.booleans())
                member = draw(st.booleans()) or draw(st.booleans())
                builder = gpu_node(name, f"b{b}", f"r{b}{r}", alloc).label(POOL, "gpu" if member else "cpu")
                nodes.append((builder if ready else builder.not_ready()).view())
                used = min(used, alloc)
                if used:
                    pods.append(make_pod(f"ds-{name}").requests({GPU: used}).on(name).view())
                fit[name] = (alloc - used) // gpus_per_pod if ready and member else 0
                path[name] = (f"b{b}", f"r{b}{r}", name)
                if member:
                    members.add(name)
    return World(nodes, pods, fit, path, frozenset(members))


def domain_sums(world: World, level: int) -> dict[tuple[str, ...], int]:
    sums: dict[tuple[str, ...], int] = defaultdict(int)
    for name, n in world.fit.items():
        sums[world.path[name][: level + 1]] += n
    return sums


def min_domains_to_hold(sums: dict[tuple[str, ...], int], n: int) -> int:
    total, used = 0, 0
    for s in sorted(sums.values(), reverse=True):
        if total >= n:
            break
        total, used = total + s, used + 1
    return used


requests = st.sampled_from([
    TopologyRequest("required", LEVELS[0]), TopologyRequest("required", LEVELS[1]),
    TopologyRequest("required", LEVELS[2]), TopologyRequest("preferred", LEVELS[0]),
    TopologyRequest("preferred", LEVELS[1]), TopologyRequest("preferred", None),
    TopologyRequest("unconstrained", None)])


def flavor_tree(nodes: list[NodeView], levels: tuple[str, ...] = LEVELS) -> FlavorTopology:
    """The `pool=gpu` flavor's tree over these nodes."""
    return topology(nodes, levels, node_labels=FLAVOR_LABELS)


def run(world: World, request: PodSetRequest, seed: int | None = None) -> AssignmentOutcome:
    nodes = list(world.nodes)
    if seed is not None:
        random.Random(seed).shuffle(nodes)
    topo = flavor_tree(nodes)
    return assign(topo, Usage.from_pods(world.pods), [request])


@settings(max_examples=300, deadline=None)
@given(data=st.data(), gpus_per_pod=st.integers(1, 2), count=st.integers(1, 14), topo_request=requests,
       seed=st.integers(0, 1000))
def test_assignment_matches_the_oracle(data: st.DataObject, gpus_per_pod: int, count: int,
                                       topo_request: TopologyRequest, seed: int) -> None:
    world = data.draw(worlds(gpus_per_pod))
    request = PodSetRequest("main", count, {GPU: 1000 * gpus_per_pod, "pods": 1000}, topo_request)
    outcome = run(world, request)
    level = 2 if topo_request.level is None else LEVELS.index(topo_request.level)
    at_level = domain_sums(world, level)
    if topo_request.mode == "required":
        possible = max(at_level.values()) >= count
    else:
        possible = sum(world.fit.values()) >= count
    # A result exists exactly when the oracle says one exists.
    assert isinstance(outcome, AssignmentSuccess) == possible, getattr(outcome, "message", "")
    # Shuffling the node input order does not change the result.
    assert run(world, request, seed) == outcome
    if isinstance(outcome, AssignmentFailure):
        # Only the flavor's nodes count; each one that holds no pod is excluded for one reason.
        assert outcome.total_nodes == len(world.members)
        usable = sum(1 for name in world.members if world.fit[name] > 0)
        assert sum(n for _, n in outcome.excluded) == len(world.members) - usable
        return
    (assignment,) = outcome.assignments
    placed = outcome.placement.pods["main"]
    # No node over capacity; counts sum to the pod set count; slices agree with the nodes.
    assert all(n <= world.fit[node] for node, n in placed.items())
    assert sum(placed.values()) == assignment.count == count
    assert all(s.count > 0 for s in assignment.slices)
    keys = [tuple(s.node_labels[lv] for lv in LEVELS) for s in assignment.slices]
    assert keys == sorted(keys)
    assert {k[2]: s.count for k, s in zip(keys, assignment.slices, strict=True)} == dict(placed)
    used_domains = {world.path[node][: level + 1] for node in placed}
    fitting = {d: s for d, s in at_level.items() if s >= count}
    if topo_request.mode == "required":
        # Required stays inside one domain, and it is the tightest one that holds the pods.
        (domain,) = used_domains
        assert at_level[domain] == min(fitting.values())
    if topo_request.mode == "preferred" and fitting:
        # Preferred uses one domain at its level whenever one fits.
        assert len(used_domains) == 1
    if topo_request.mode == "unconstrained" and fitting:
        # Unconstrained uses the least free host that holds every pod whenever one does.
        (domain,) = used_domains
        assert at_level[domain] == min(fitting.values())
    if topo_request.mode == "preferred" and not any(s >= count for s in domain_sums(world, 0).values()):
        # Spread over the fewest top-level domains.
        blocks = {world.path[node][:1] for node in placed}
        assert len(blocks) == min_domains_to_hold(domain_sums(world, 0), count)


@settings(max_examples=150, deadline=None)
@given(data=st.data(), counts=st.tuples(st.integers(1, 8), st.integers(1, 8)),
       modes=st.tuples(requests, requests))
def test_several_pod_sets_share_nodes_without_overcommitting(
        data: st.DataObject, counts: tuple[int, int], modes: tuple[TopologyRequest, TopologyRequest]) -> None:
    world = data.draw(worlds(1))
    usage = Usage.from_pods(world.pods)
    before = {node.name: usage.used(node.name) for node in world.nodes}
    topo = flavor_tree(world.nodes)
    podsets = [PodSetRequest(f"ps{i}", n, {GPU: 1000, "pods": 1000}, mode)
               for i, (n, mode) in enumerate(zip(counts, modes, strict=True))]
    outcome = assign(topo, usage, podsets)
    # assign never mutates the usage, whatever the outcome.
    assert {node.name: usage.used(node.name) for node in world.nodes} == before
    alone = assign(topo, usage, podsets[:1])
    if not isinstance(outcome, AssignmentSuccess):
        # All or nothing: failing on the second pod set still fails the workload.
        assert outcome.podset == "ps0" or isinstance(alone, AssignmentSuccess)
        return
    # The first pod set is placed as if alone; the pair never exceeds a node's free GPUs.
    assert isinstance(alone, AssignmentSuccess)
    assert outcome.assignments[0] == alone.assignments[0]
    for node in world.fit:
        taken = sum(outcome.placement.pods[ps.name].get(node, 0) for ps in podsets)
        assert taken <= world.fit[node]


node_ops = st.lists(st.tuples(
    st.sampled_from(["upsert", "upsert", "remove", "bind", "unbind"]),
    st.integers(0, 5),  # node number
    st.integers(0, 2),  # rack number (blocks: racks 0-1 in b0, 2 in b1)
    st.integers(0, 6),  # GPUs (allocatable, or requested by a bound pod)
    st.booleans(),      # ready
    st.sampled_from([True, True, False]),  # in the flavor's pool (an upsert may move a node in or out)
), max_size=30)


@settings(max_examples=150, deadline=None)
@given(ops=node_ops, topo_request=requests, count=st.integers(1, 10), slack=st.sampled_from([0, 64]))
def test_incremental_updates_match_a_fresh_build(
        ops: list[tuple[str, int, int, int, bool, bool]], topo_request: TopologyRequest, count: int,
        slack: int) -> None:
    # slack 0 renumbers the tree's domains as soon as more are empty than twice the nodes, and the
    # usage rows as soon as more nodes are gone than live: often, here.
    with mock.patch.object(tree, "DEAD_DOMAIN_SLACK", slack), mock.patch.object(usage_rows, "GONE_ROW_SLACK", slack):
        _replay_against_a_fresh_build(ops, topo_request, count)


def _replay_against_a_fresh_build(ops: list[tuple[str, int, int, int, bool, bool]],
                                  topo_request: TopologyRequest, count: int,
                                  levels: tuple[str, ...] = LEVELS) -> None:
    topo = flavor_tree([], levels)
    usage = Usage()
    nodes: dict[str, NodeView] = {}
    pods: dict[str, PodView] = {}
    request = [PodSetRequest("main", count, {GPU: 1000, "pods": 1000}, topo_request)]
    for i, (op, n, rack, gpus, ready, member) in enumerate(ops):
        name = f"h{n}"
        if op == "upsert":
            builder = gpu_node(name, "b0" if rack < 2 else "b1", f"r{rack}", gpus).label(POOL, "gpu" if member else "cpu")
            nodes[name] = (builder if ready else builder.not_ready()).view()
            topo.upsert_node(nodes[name])
        elif op == "remove":
            nodes.pop(name, None)
            topo.remove_node(name)
            usage.remove_node(name)
            pods = {k: p for k, p in pods.items() if p.node_name != name}
        elif op == "bind" and name in nodes:
            pod = make_pod(f"p{i}").requests({GPU: gpus}).on(name).view()
            pods[pod.key] = pod
            usage.add_bound_pod(pod)
        elif op == "unbind" and pods:
            key = sorted(pods)[n % len(pods)]
            usage.remove_bound_pod(pods.pop(key))
        assign(topo, usage, request)  # interleave reads so cached masks and rows get patched
    fresh = flavor_tree(list(nodes.values()), levels)
    assert topo.node_count == fresh.node_count == sum(v.labels[POOL] == "gpu" for v in nodes.values())
    assert assign(topo, usage, request) == assign(fresh, Usage.from_pods(pods.values()), request)


RACK_LOWEST = LEVELS[:2]
rack_requests = st.sampled_from([
    TopologyRequest("required", LEVELS[0]), TopologyRequest("required", LEVELS[1]),
    TopologyRequest("preferred", LEVELS[1]), TopologyRequest("unconstrained", None)])


@settings(max_examples=150, deadline=None)
@given(ops=node_ops, topo_request=rack_requests, count=st.integers(1, 10))
def test_incremental_updates_with_racks_lowest_match_a_fresh_build(
        ops: list[tuple[str, int, int, int, bool, bool]], topo_request: TopologyRequest, count: int) -> None:
    # A rack holds one node, then two, then one again as nodes join, move and leave: the pods of
    # a rack go to its fewest nodes however it got them.
    _replay_against_a_fresh_build(ops, topo_request, count, RACK_LOWEST)


@settings(max_examples=150, deadline=None)
@given(data=st.data(), gpus_per_pod=st.integers(1, 2), count=st.integers(1, 14), topo_request=rack_requests)
def test_racks_as_the_lowest_level_still_count_and_place_pods_per_node(
        data: st.DataObject, gpus_per_pod: int, count: int, topo_request: TopologyRequest) -> None:
    world = data.draw(worlds(gpus_per_pod))
    topo = flavor_tree(world.nodes, RACK_LOWEST)
    request = PodSetRequest("main", count, {GPU: 1000 * gpus_per_pod, "pods": 1000}, topo_request)
    outcome = assign(topo, Usage.from_pods(world.pods), [request])
    level = RACK_LOWEST.index(topo_request.level) if topo_request.level else 1
    at_level = domain_sums(world, level)
    possible = (max(at_level.values()) if topo_request.mode == "required" else sum(world.fit.values())) >= count
    assert isinstance(outcome, AssignmentSuccess) == possible, getattr(outcome, "message", "")
    if not isinstance(outcome, AssignmentSuccess):
        return
    # Slices name racks, each the sum of the pods its nodes got; no node gets more than it holds.
    placed = outcome.placement.pods["main"]
    assert all(n <= world.fit[node] for node, n in placed.items())
    per_rack: dict[tuple[str, ...], int] = defaultdict(int)
    for node, n in placed.items():
        per_rack[world.path[node][:2]] += n
    (assignment,) = outcome.assignments
    assert [(tuple(s.node_labels.values()), s.count) for s in assignment.slices] == sorted(per_rack.items())
    assert sum(per_rack.values()) == count


slice_requests = st.sampled_from([
    (TopologyRequest("required", LEVELS[0]), LEVELS[1]), (TopologyRequest("required", LEVELS[0]), LEVELS[2]),
    (TopologyRequest("required", LEVELS[1]), LEVELS[1]), (TopologyRequest("required", LEVELS[1]), LEVELS[2]),
    (TopologyRequest("required", LEVELS[2]), LEVELS[2]), (TopologyRequest("preferred", LEVELS[1]), LEVELS[2]),
    (TopologyRequest("preferred", LEVELS[0]), LEVELS[1]), (TopologyRequest("unconstrained", None), LEVELS[2])])


@settings(max_examples=300, deadline=None)
@given(data=st.data(), count=st.integers(1, 14), size=st.integers(1, 4), choice=slice_requests,
       balanced=st.booleans())
def test_slices_match_the_oracle(data: st.DataObject, count: int, size: int,
                                 choice: tuple[TopologyRequest, str], balanced: bool) -> None:
    base, slice_level = choice
    world = data.draw(worlds(1))
    request = PodSetRequest("main", count, {GPU: 1000, "pods": 1000},
                            replace(base, slices=(SliceLayer(slice_level, size),)))
    outcome = assign(flavor_tree(world.nodes), Usage.from_pods(world.pods), [request], balanced=balanced)
    if count < size:  # smaller than one slice: plain pods
        size = 1
    whole, s_level = count // size, LEVELS.index(slice_level)
    slices_in = {d: n // size for d, n in domain_sums(world, s_level).items()}

    def holds(domain: tuple[str, ...]) -> bool:
        """The oracle: whole slices inside the domain's slice-level domains, and room for every pod."""
        slices = sum(n for d, n in slices_in.items() if d[: len(domain)] == domain)
        pods = sum(n for node, n in world.fit.items() if world.path[node][: len(domain)] == domain)
        return slices >= whole and pods >= count

    if base.mode == "required":
        level = LEVELS.index(base.level or "")
        possible = any(holds(d) for d in domain_sums(world, level))
    else:
        possible = holds(())
    # A result exists exactly when the oracle finds one.
    assert isinstance(outcome, AssignmentSuccess) == possible, getattr(outcome, "message", "")
    if not isinstance(outcome, AssignmentSuccess):
        return
    placed = outcome.placement.pods["main"]
    # Counts sum to the pod set's count; no node over what it holds.
    assert sum(placed.values()) == outcome.assignments[0].count == count
    assert all(n <= world.fit[node] for node, n in placed.items())
    # Every slice lies inside one domain of its level: the pods each slice-level domain got hold
    # the pod set's whole slices.
    got: dict[tuple[str, ...], int] = defaultdict(int)
    for node, n in placed.items():
        got[world.path[node][: s_level + 1]] += n
    assert sum(n // size for n in got.values()) >= whole
    if base.mode == "required":
        # All of it, remainder included, inside one domain of the required level.
        assert len({world.path[node][: LEVELS.index(base.level or "") + 1] for node in placed}) == 1


lineage_ops = st.lists(st.tuples(
    st.sampled_from(["bind", "unbind", "reserve", "release", "clone", "switch", "upsert", "remove"]),
    st.integers(0, 5),  # node number / usage index / reservation key
    st.integers(0, 6),  # GPUs
), max_size=40)


@settings(max_examples=150, deadline=None)
@given(ops=lineage_ops, topo_request=requests, count=st.integers(1, 10), gpus_per_pod=st.integers(1, 2))
def test_kept_counts_follow_clones_reservations_and_node_changes(
        ops: list[tuple[str, int, int]], topo_request: TopologyRequest, count: int, gpus_per_pod: int) -> None:
    """The per-shape counts a tree keeps, patched from the change logs of a Usage, its clones and
    the tree, give the same answer as a tree built fresh (which recounts every node)."""
    nodes = {f"h{i}": gpu_node(f"h{i}", "b0" if i < 3 else "b1", f"r{i % 3}", 4).label(POOL, "gpu").view()
             for i in range(6)}
    topo = flavor_tree(list(nodes.values()))
    usages = [Usage()]
    current = usages[0]
    request = [PodSetRequest("main", count, {GPU: 1000 * gpus_per_pod, "pods": 1000}, topo_request)]
    for i, (op, n, gpus) in enumerate(ops):
        name = f"h{n}"
        if op == "bind" and name in nodes:
            current.add_bound_pod(make_pod(f"p{i}").requests({GPU: gpus}).on(name).view())
        elif op == "unbind":
            current.remove_bound_pod(f"default/p{n}")
        elif op == "reserve":
            current.reserve(f"ns/w{n % 3}", {name: {GPU: gpus * 1000}})
        elif op == "release":
            current.release(f"ns/w{n % 3}")
        elif op == "clone":
            current = current.clone()
            usages.append(current)
        elif op == "switch":
            current = usages[n % len(usages)]
        elif op == "upsert":
            nodes[name] = gpu_node(name, "b0" if n < 3 else "b1", f"r{gpus % 3}", gpus).label(POOL, "gpu").view()
            topo.upsert_node(nodes[name])
        elif op == "remove":
            nodes.pop(name, None)
            topo.remove_node(name)
        assert assign(topo, current, request) == assign(flavor_tree(list(nodes.values())), current, request)
    for usage in usages:
        assert assign(topo, usage, request) == assign(flavor_tree(list(nodes.values())), usage, request)


@st.composite
def wide_racks(draw: st.DrawFn) -> tuple[dict[str, int], list[NodeView]]:
    """One rack of 70-400 hosts with 0-8 free GPUs each, named h000... and fed to the tree in a
    random order. Half the time the least free hosts carry the last names, so the hosts a
    least-free placement takes sit at the end of the label order."""
    n = draw(st.integers(70, 400))
    free = draw(st.lists(st.integers(0, 8), min_size=n, max_size=n))
    if draw(st.booleans()):
        free.sort(reverse=True)
    names = [f"h{i:03d}" for i in range(n)]
    order = draw(st.permutations(range(n)))
    nodes = [gpu_node(names[i], "b0", "r0", free[i]).label(POOL, "gpu").view() for i in order]
    return dict(zip(names, free, strict=True)), nodes


def least_free_oracle(free: dict[str, int], count: int) -> dict[str, int] | None:
    """Kueue's rule for an unconstrained pod set, host by host: the least free host holding every
    pod (ties by name); else least free first (ties by name), the last taking the remainder."""
    room = sorted((f, host) for host, f in free.items() if f > 0)
    if sum(f for f, _ in room) < count:
        return None
    holding = [(f, host) for f, host in room if f >= count]
    if holding:
        return {holding[0][1]: count}
    placed: dict[str, int] = {}
    for f, host in room:
        placed[host] = min(f, count - sum(placed.values()))
        if sum(placed.values()) == count:
            break
    return placed


@settings(max_examples=100, deadline=None)
@given(world=wide_racks(), data=st.data())
def test_unconstrained_on_hundreds_of_hosts_places_exactly_as_the_least_free_oracle(
        world: tuple[dict[str, int], list[NodeView]], data: st.DataObject) -> None:
    free, nodes = world
    values = sorted({f for f in free.values() if f > 0})
    near_ties: bool = data.draw(st.booleans())
    if values and near_ties:
        # Every pod of the hosts less free than v, then a few hosts holding v: ties cut by name,
        # far down the label order in a skewed rack.
        v = data.draw(st.sampled_from(values))
        count = sum(f for f in free.values() if f < v) + data.draw(st.integers(1, 3 * v))
    else:
        count = data.draw(st.integers(1, sum(free.values()) + 1))
    outcome = assign(flavor_tree(nodes), Usage(), [PodSetRequest("main", count, {GPU: 1000, "pods": 1000})])
    want = least_free_oracle(free, count)
    assert isinstance(outcome, AssignmentSuccess) == (want is not None), getattr(outcome, "message", "")
    if want is None or not isinstance(outcome, AssignmentSuccess):
        return
    assert dict(outcome.placement.pods["main"]) == want
    (assignment,) = outcome.assignments
    assert [(s.node_labels[LEVELS[2]], s.count) for s in assignment.slices] == sorted(want.items())
