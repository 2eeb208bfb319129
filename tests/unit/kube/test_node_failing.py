"""The node-failure handler (controller.kube.node_failing) against an in-memory API, with a fake clock:
a not-Ready host waits for the grace period, is recorded in status.unhealthyNodes, replaced in the
same rack in one write with an Event, its pods deleted at once; with no room in the required rack the
Workload is evicted with reason NodeFailures; pods on healthy hosts are never touched.

    rack r1: h1 h2 h3        rack r2: h4        (8 GPUs each; the gang needs its pods in one rack)
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from controller.api import constants as c
from controller.api.workload import Workload
from controller.cache.cluster import KIND_NODE, KIND_POD, ClusterCache
from controller.kube.api import PODS, WORKLOADS, ApiError, KubeApi
from controller.kube.events import EventRecorder
from controller.kube.node_failing import NodeFailureHandler
from devcluster.server.patching import merge_patch as merge  # RFC 7386, as the API server applies it
from tests.builders.cluster import make_node, make_pod
from tests.builders.kueue import (
    make_cluster_queue,
    make_flavor,
    make_local_queue,
    make_topology,
    make_workload,
)
from tests.unit.kube.test_evicting import Recording

RACK = "example.com/rack"
GPU = "nvidia.com/gpu"
HOSTS = {"h1": "r1", "h2": "r1", "h3": "r1", "h4": "r2"}
T0 = datetime(2026, 11, 27, 6, 0, 0, tzinfo=UTC)


class FakeApi(KubeApi):
    """Workload status merge patches (RFC 7386, as the API server applies them) with resourceVersion
    checks, pod deletions; `writes` logs both."""

    def __init__(self, workload: dict[str, Any]) -> None:
        self.workload = copy.deepcopy(workload)
        self.writes: list[tuple[str, Any]] = []
        self.rv = 100

    async def merge_patch(self, resource: tuple[str, str], namespace: str | None, name: str,
                          patch: Mapping[str, Any], subresource: str | None = None) -> dict[str, Any]:
        assert resource == WORKLOADS and subresource == "status"
        if patch["metadata"]["resourceVersion"] != self.workload["metadata"]["resourceVersion"]:
            raise ApiError(409, "the object has been modified")
        self.workload = merge(self.workload, {"status": copy.deepcopy(patch["status"])})
        self.rv += 1
        self.workload["metadata"]["resourceVersion"] = str(self.rv)
        self.writes.append(("status", copy.deepcopy(patch["status"])))
        return copy.deepcopy(self.workload)

    async def delete(self, resource: tuple[str, str], namespace: str | None, name: str,
                     resource_version: str | None = None, uid: str | None = None,
                     grace_period_seconds: int | None = None) -> None:
        assert resource == PODS
        self.writes.append(("delete pod", (name, grace_period_seconds)))


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


def gang(hosts: dict[str, int]) -> dict[str, Any]:
    """ns/gang admitted with its pods on `hosts`, required to stay in one rack."""
    total = sum(hosts.values())
    builder = make_workload("gang", "ns").queue("lq").pod_set("main", total, {GPU: 8}, required=RACK)
    builder.admitted("cq").assignment(
        "main", total, *[({RACK: HOSTS[h], c.LABEL_HOSTNAME: h}, n) for h, n in sorted(hosts.items())],
        cluster_queue="cq", flavors={GPU: "gpu"}, resourceUsage={GPU: str(8 * total)})
    obj = builder.obj()
    obj["metadata"]["resourceVersion"] = "50"
    return obj


def world(hosts: dict[str, int], busy: tuple[str, ...] = ()) -> tuple[ClusterCache, FakeApi, list[str]]:
    """The cache with the topology, queues, nodes, the gang and its running pods (one per pod slot,
    named `<host>-<i>`), and a full-node pod of another team on each `busy` host."""
    cache = ClusterCache()
    cache.upsert(c.KIND_TOPOLOGY, make_topology("dc", RACK, c.LABEL_HOSTNAME).obj())
    cache.upsert(c.KIND_RESOURCE_FLAVOR, make_flavor("gpu").node_label("gpu", "yes").topology_name("dc").obj())
    cache.upsert(c.KIND_CLUSTER_QUEUE, make_cluster_queue("cq").flavor("gpu", {GPU: 64}).obj())
    cache.upsert(c.KIND_LOCAL_QUEUE, make_local_queue("lq", "cq", "ns").obj())
    for host, rack in HOSTS.items():
        cache.upsert(KIND_NODE, make_node(host).labels({RACK: rack, "gpu": "yes"}).allocatable({GPU: 8}).obj())
    workload = gang(hosts)
    cache.upsert(c.KIND_WORKLOAD, workload)
    names = []
    for host, n in sorted(hosts.items()):
        for i in range(n):
            pod = (make_pod(f"{host}-{i}", "ns").annotation(c.ANNOTATION_TOPOLOGY_WORKLOAD, "gang")
                   .requests({GPU: 8}).node_selector({RACK: HOSTS[host], c.LABEL_HOSTNAME: host}).on(host))
            cache.upsert(KIND_POD, pod.obj())
            names.append(f"{host}-{i}")
    for host in busy:
        cache.upsert(KIND_POD, make_pod(f"other-{host}", "other").requests({GPU: 8}).on(host).obj())
    cache.admission_state()
    return cache, FakeApi(workload), names


def node(host: str, version: int) -> Any:
    return make_node(host).labels({RACK: HOSTS[host], "gpu": "yes"}).allocatable({GPU: 8}).set(
        "metadata.resourceVersion", str(version))


def fail(cache: ClusterCache, host: str, since: datetime = T0, version: int = 9) -> None:
    cache.upsert(KIND_NODE, node(host, version).not_ready(since.strftime("%Y-%m-%dT%H:%M:%SZ")).obj())


def handler(cache: ClusterCache, api: FakeApi, clock: Clock, recorder: EventRecorder) -> NodeFailureHandler:
    return NodeFailureHandler(cache, api, recorder, clock=clock)


def gpus_reserved(cache: ClusterCache) -> dict[str, int]:
    return {h: cache.usage.reserved("ns/gang").get(h, {}).get(GPU, 0) // 1000 for h in HOSTS}


def test_a_not_ready_host_is_replaced_in_its_rack_after_the_grace_period() -> None:
    async def scenario() -> None:
        cache, api, _ = world({"h1": 1, "h2": 1})
        clock, recorder = Clock(), Recording()
        nodes = handler(cache, api, clock, recorder)
        fail(cache, "h1")
        clock.now = T0 + timedelta(seconds=10)
        await nodes.handle("ns/gang")
        assert api.writes == []  # still within Kueue's 30 s
        clock.now = T0 + timedelta(seconds=31)
        await nodes.handle("ns/gang")
        first, second, *deletions = api.writes
        assert first[1]["unhealthyNodes"] == [{"name": "h1"}]
        assert second[1]["unhealthyNodes"] is None  # a merge patch drops the field only when told so
        written = Workload.from_dict(api.workload)
        assert "unhealthyNodes" not in api.workload["status"]
        ta = written.admission.pod_set_assignments[0].topology_assignment  # type: ignore[union-attr]
        assert {d.values[-1]: d.count for d in ta.assigned_domains()} == {"h2": 1, "h3": 1}  # type: ignore[union-attr]
        assert deletions == [("delete pod", ("h1-0", 0))]  # h2's pod stays where it runs
        await nodes.handle("ns/gang")  # the watch echoing the write: nothing more to do, no second delete
        assert len(api.writes) == 3
        assert [e[2] for e in recorder.events] == [c.EVENT_REASON_NODE_REPLACED]
        assert recorder.events[0][3].startswith("Node h1 (not Ready since 2026-11-27T06:00:00Z) replaced by h3 (1 pod)")
        cache.admission_state()
        # h3 is held for the replacement pod; h2's running pod converted its share long ago, and
        # h1's pod (its deletion not seen yet) converts nothing of h3.
        assert gpus_reserved(cache) == {"h1": 0, "h2": 0, "h3": 8, "h4": 0}
        assert cache.snapshot().quota.used["cq"][("gpu", GPU)] == 16_000

    asyncio.run(scenario())


def test_the_grace_period_ends_on_a_timer_not_by_polling() -> None:
    async def scenario() -> None:
        cache, api, _ = world({"h1": 1})
        clock = Clock()
        nodes = handler(cache, api, clock, Recording())
        fail(cache, "h1")
        clock.now = T0 + timedelta(seconds=12)
        await nodes.handle("ns/gang")
        loop = asyncio.get_running_loop()
        timer = nodes._timers["ns/gang"]
        assert api.writes == [] and 17.9 < timer.when() - loop.time() < 18.2  # due at T0 + 30 s
        # The host recovers: the timer goes with the next look.
        cache.upsert(KIND_NODE, node("h1", 10).obj())
        await nodes.handle("ns/gang")
        assert timer.cancelled() and "ns/gang" not in nodes._timers and api.writes == []

    asyncio.run(scenario())


def test_a_full_required_rack_evicts_the_gang_with_node_failures_naming_the_host() -> None:
    async def scenario() -> None:
        cache, api, _ = world({"h1": 1, "h2": 1}, busy=("h3",))
        clock, recorder = Clock(), Recording()
        fail(cache, "h1")
        clock.now = T0 + timedelta(minutes=5)
        await handler(cache, api, clock, recorder).handle("ns/gang")
        evicted = Workload.from_dict(api.workload).condition(c.CONDITION_EVICTED)
        assert evicted is not None and evicted.reason == c.REASON_NODE_FAILURES
        assert evicted.message.startswith("Workload was evicted as there was no replacement for unhealthy node(s): h1")
        assert f"{RACK}=r1" in evicted.message
        assert [e[2] for e in recorder.events] == [c.EVENT_REASON_EVICTED_NODE_FAILURES]
        assert ("delete pod", ("h1-0", 0)) in api.writes and ("delete pod", ("h2-0", 0)) not in api.writes

    asyncio.run(scenario())


def test_two_failed_hosts_of_one_gang_are_replaced_in_one_write() -> None:
    async def scenario() -> None:
        cache, api, _ = world({"h1": 1, "h2": 1})
        cache.upsert(KIND_NODE, make_node("h5").labels({RACK: "r1", "gpu": "yes"}).allocatable({GPU: 8}).obj())
        clock, recorder = Clock(), Recording()
        cache.delete(KIND_NODE, make_node("h1").obj())
        fail(cache, "h2")
        clock.now = T0 + timedelta(minutes=1)
        await handler(cache, api, clock, recorder).handle("ns/gang")
        ta = Workload.from_dict(api.workload).admission.pod_set_assignments[0].topology_assignment  # type: ignore[union-attr]
        assert {d.values[-1] for d in ta.assigned_domains()} == {"h3", "h5"}  # type: ignore[union-attr]
        assert [w[1]["unhealthyNodes"] for w in api.writes[:1]] == [[{"name": "h1"}, {"name": "h2"}]]
        assert sorted(m for *_, m in recorder.events)[0].startswith("Node h1 (deleted) replaced by")

    asyncio.run(scenario())


def test_a_healthy_gang_and_a_ready_host_are_left_alone() -> None:
    async def scenario() -> None:
        cache, api, _ = world({"h1": 1, "h2": 1})
        await handler(cache, api, Clock(), Recording()).handle("ns/gang")
        assert api.writes == []

    asyncio.run(scenario())


def test_only_a_change_of_a_placed_hosts_health_wakes_its_workload() -> None:
    async def scenario() -> None:
        cache, api, _ = world({"h1": 1, "h2": 1})
        nodes = handler(cache, api, Clock(), Recording())
        await nodes.handle("ns/gang")  # indexes the gang's hosts
        woken: list[str] = []
        nodes.notify = woken.append  # type: ignore[method-assign,assignment]
        nodes.node_changed(node("h1", 11).obj())
        assert woken == ["ns/gang"]
        woken.clear()
        cache.upsert(KIND_NODE, node("h1", 12).allocatable({"cpu": "63"}).obj())  # a status report, still Ready
        nodes.node_changed(node("h1", 12).obj())
        nodes.node_changed(node("h4", 12).obj())  # no Workload of it there
        assert not woken
        fail(cache, "h1", version=13)
        nodes.node_changed(node("h1", 13).obj())
        assert woken == ["ns/gang"]

    asyncio.run(scenario())


def test_the_second_pod_set_on_a_failed_host_sees_what_the_first_one_took() -> None:
    # Leader (4 GPUs) and worker (4 GPUs) share h1; h2 runs the other worker; h3 has 4 GPUs free (another
    # team's pod holds the other 4). One of the two fits on h3, not both: the gang is evicted rather
    # than the two placed on the same 4 GPUs.
    async def scenario() -> None:
        cache, _, _ = world({"h2": 1})
        cache.delete(c.KIND_WORKLOAD, gang({"h2": 1}))
        builder = make_workload("gang", "ns").queue("lq")
        builder.pod_set("leader", 1, {GPU: 4}, required=RACK).pod_set("workers", 2, {GPU: 4}, required=RACK)
        builder.admitted("cq")
        for name, hosts in (("leader", {"h1": 1}), ("workers", {"h1": 1, "h2": 1})):
            builder.assignment(name, sum(hosts.values()),
                               *[({RACK: HOSTS[h], c.LABEL_HOSTNAME: h}, n) for h, n in sorted(hosts.items())],
                               cluster_queue="cq", flavors={GPU: "gpu"}, resourceUsage={GPU: str(4 * sum(hosts.values()))})
        workload = builder.set("metadata.resourceVersion", "60").obj()
        cache.upsert(c.KIND_WORKLOAD, workload)
        cache.upsert(KIND_POD, make_pod("other-h3", "other").requests({GPU: 4}).on("h3").obj())
        api, clock, recorder = FakeApi(workload), Clock(), Recording()
        cache.delete(KIND_NODE, make_node("h1").obj())
        clock.now = T0
        await handler(cache, api, clock, recorder).handle("ns/gang")
        evicted = Workload.from_dict(api.workload).condition(c.CONDITION_EVICTED)
        assert evicted is not None and evicted.reason == c.REASON_NODE_FAILURES, api.workload["status"]
        # With h3 free whole, both go there.
        cache2, _, _ = world({"h2": 1})
        cache2.delete(c.KIND_WORKLOAD, gang({"h2": 1}))
        cache2.upsert(c.KIND_WORKLOAD, workload)
        cache2.delete(KIND_NODE, make_node("h1").obj())
        api2 = FakeApi(workload)
        await handler(cache2, api2, clock, Recording()).handle("ns/gang")
        admission = Workload.from_dict(api2.workload).admission
        assert admission is not None
        placed = {psa.name: {d.values[-1]: d.count for d in psa.topology_assignment.assigned_domains()}  # type: ignore[union-attr]
                  for psa in admission.pod_set_assignments}
        assert placed == {"leader": {"h3": 1}, "workers": {"h2": 1, "h3": 1}}

    asyncio.run(scenario())


def test_a_recorded_node_that_recovered_before_its_replacement_is_forgotten() -> None:
    async def scenario() -> None:
        recorded = gang({"h1": 1, "h2": 1})
        recorded["status"]["unhealthyNodes"] = [{"name": "h1"}]
        cache, _, _ = world({"h1": 1, "h2": 1})
        cache.upsert(c.KIND_WORKLOAD, recorded | {"metadata": {**recorded["metadata"], "resourceVersion": "51"}})
        api = FakeApi(recorded | {"metadata": {**recorded["metadata"], "resourceVersion": "51"}})
        await handler(cache, api, Clock(), Recording()).handle("ns/gang")  # h1 is Ready again
        assert [w[1]["unhealthyNodes"] for w in api.writes] == [None]
        assert "unhealthyNodes" not in api.workload["status"]
        assert hosts_of(api.workload) == {"h1": 1, "h2": 1}  # nothing moved

    asyncio.run(scenario())


def hosts_of(wl: dict[str, Any]) -> dict[str, int]:
    admission = Workload.from_dict(wl).admission
    assert admission is not None and admission.pod_set_assignments[0].topology_assignment is not None
    return {d.values[-1]: d.count for d in admission.pod_set_assignments[0].topology_assignment.assigned_domains()}
