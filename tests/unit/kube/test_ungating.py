"""The TopologyUngater against a fake patcher (patch bodies, expectations, failures, batching, the
leader gate, bounded parallelism); the door's `KubeApi.patch_raw` against a recording HTTP server
(path, headers, token refresh, errors as ApiError); both together against the devcluster, whose
scheduler then binds the pods.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from kubernetes.aio import config as aconfig
from kubernetes.aio.client import ApiClient, Configuration, CoreV1Api

from controller.api import constants as c
from controller.api.topology_assignment import DomainPods
from controller.core.ungating import PodState, Ungate, UngatingInput
from controller.kube.api import PODS, ApiError, KubeApi, api_error
from controller.kube.metrics import Metrics
from controller.kube.ungating import PatchBodies, TopologyUngater, ungate_patch
from devcluster.cluster import DevCluster
from devcluster.server.faults import CONFLICT, ERROR
from devcluster.simulated.components import Components
from devcluster.simulated.nodes import LABEL_BLOCK, LABEL_RACK, create_nodes, parse_shape, topology_nodes
from tests.client_models import as_body, present
from tests.unit.kube.recording import RecordingApi

RACK = "cloud.com/rack"
OTHER_GATE = "example.com/other"
SLICES = {"main": [DomainPods(node_labels={RACK: "r1"}, count=2), DomainPods(node_labels={RACK: "r2"}, count=2)]}


@dataclass
class FakePod:
    name: str
    index: int
    gates: list[str] = field(default_factory=lambda: [c.SCHEDULING_GATE_TOPOLOGY, OTHER_GATE])
    node_selector: dict[str, str] = field(default_factory=lambda: {"flavor": "h100"})
    terminated: bool = False

    @property
    def uid(self) -> str:
        return f"uid-{self.name}"

    def state(self) -> PodState:
        gated = c.SCHEDULING_GATE_TOPOLOGY in self.gates
        return PodState(self.name, self.uid, "main", self.index, gated, None if gated else dict(self.node_selector),
                        self.terminated, "2026-01-01T00:00:00Z")


class FakeCore:
    """A `PodPatching` that applies our patch shape to in-memory pods (what the API server would do).

    `fail[name]` lists what the next patches of that pod answer with: an HTTP status, or -1 for a
    broken connection, each raised as the door raises it (ApiError); `delay` holds each patch so concurrency can be measured (`max_in_flight`);
    `blocks[name]` holds that pod's patch until set; `on_call(n)` runs as the n-th patch arrives.
    """

    def __init__(self, pods: list[FakePod]) -> None:
        self.pods = {p.name: p for p in pods}
        self.calls: list[tuple[str, str, dict[str, Any]]] = []
        self.fail: dict[str, list[int]] = {}
        self.delay = 0.0
        self.blocks: dict[str, asyncio.Event] = {}
        self.on_call: Callable[[int], None] | None = None
        self.in_flight = self.max_in_flight = 0
        self.refreshes = self.closes = 0

    async def refresh_raw_headers(self) -> None:
        self.refreshes += 1

    async def close_raw(self) -> None:
        self.closes += 1

    async def patch_raw(self, resource: tuple[str, str], namespace: str | None, name: str, body: bytes) -> None:
        assert resource == PODS and namespace is not None
        patch = json.loads(body)
        self.calls.append((name, namespace, patch))
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        if self.on_call is not None:
            self.on_call(len(self.calls))
        try:
            await asyncio.sleep(self.delay)
            if name in self.blocks:
                await self.blocks[name].wait()
            if self.fail.get(name):
                status = self.fail[name].pop(0)
                if status < 0:
                    raise api_error(aiohttp.ClientConnectionError("connection reset"), f"PATCH {name}")
                raise ApiError(status, "injected")
            pod = self.pods[name]
            assert patch["metadata"]["uid"] == pod.uid
            removed = {g["name"] for g in patch["spec"]["schedulingGates"] if g.get("$patch") == "delete"}
            pod.gates = [g for g in pod.gates if g not in removed]
            pod.node_selector.update(patch["spec"]["nodeSelector"])
        finally:
            self.in_flight -= 1


def live(core: FakeCore) -> Any:
    """A source that sees the fake API's pods as they are (a cache that is up to date)."""
    return lambda ns, wl: UngatingInput(ns, wl, SLICES, [p.state() for p in core.pods.values()])


def frozen(core: FakeCore) -> Any:
    """A source that keeps showing the pods as they were when it was made (a lagging cache)."""
    states = [p.state() for p in core.pods.values()]
    return lambda ns, wl: UngatingInput(ns, wl, SLICES, states)


async def eventually(check: Callable[[], bool], timeout: float = 10.0) -> None:
    """Wait until `check()` holds (polling), so a loaded machine slows a test down but does not fail it."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not check():
        assert asyncio.get_running_loop().time() < deadline, "condition not reached"
        await asyncio.sleep(0.01)


def pods(n: int) -> list[FakePod]:
    return [FakePod(f"p{i}", i) for i in range(n)]


async def test_each_gated_pod_gets_one_patch_removing_only_our_gate_and_adding_its_slice() -> None:
    core, metrics = FakeCore(pods(5)), Metrics()
    ungater = TopologyUngater(core, live(core), metrics,
                              wall_clock=lambda: datetime(2026, 1, 1, 0, 0, 2, tzinfo=UTC))
    assert await ungater.sync("ns", "wl") == 4
    assert sorted(name for name, *_ in core.calls) == ["p0", "p1", "p2", "p3"]
    _, ns, body = next(call for call in core.calls if call[0] == "p2")
    assert ns == "ns"
    assert body == {"metadata": {"uid": "uid-p2"},
                    "spec": {"schedulingGates": [{"name": c.SCHEDULING_GATE_TOPOLOGY, "$patch": "delete"}],
                             "nodeSelector": {RACK: "r2"}}}
    assert core.pods["p2"].gates == [OTHER_GATE]
    assert core.pods["p2"].node_selector == {"flavor": "h100", RACK: "r2"}
    assert core.pods["p4"].gates == [c.SCHEDULING_GATE_TOPOLOGY, OTHER_GATE]  # beyond the 4 slots
    assert b"tasq_gate_removal_latency_seconds_count 4.0" in metrics.exposition()
    assert b'tasq_gate_removal_latency_seconds_bucket{le="2.0"} 4.0' in metrics.exposition()
    assert b'tasq_gate_removal_latency_seconds_bucket{le="1.5"} 0.0' in metrics.exposition()


async def test_expectations_prevent_a_second_ungate_while_the_cache_lags_and_clear_when_it_catches_up() -> None:
    core = FakeCore(pods(4))
    ungater = TopologyUngater(core, frozen(core))
    assert await ungater.sync("ns", "wl") == 4
    assert await ungater.sync("ns", "wl") == 0  # the cache still shows all four gated
    assert len(core.calls) == 4
    assert len(ungater.expectations["ns", "wl"]) == 4
    ungater.source = live(core)
    assert await ungater.sync("ns", "wl") == 0
    assert ("ns", "wl") not in ungater.expectations  # no entry left behind once nothing is in flight


async def test_a_conflict_clears_the_expectation_and_the_pod_is_patched_again_next_round() -> None:
    core = FakeCore(pods(2))
    core.fail["p1"] = [409]
    ungater = TopologyUngater(core, frozen(core), batch_seconds=0)
    assert await ungater.sync("ns", "wl") == 1
    assert set(ungater.expectations["ns", "wl"]) == {"uid-p0"}
    assert ungater._pop_due() == [("ns", "wl")]  # re-queued for the next round
    assert await ungater.sync("ns", "wl") == 1
    assert [name for name, *_ in core.calls] in (["p0", "p1", "p1"], ["p1", "p0", "p1"])
    assert (ungater.patches, ungater.failures) == (3, 1)
    assert core.pods["p1"].gates == [OTHER_GATE]


async def test_a_pod_gone_or_invalid_is_not_retried_until_an_event_says_so() -> None:
    core = FakeCore(pods(2))
    core.fail["p0"], core.fail["p1"] = [404], [401]
    ungater = TopologyUngater(core, frozen(core), batch_seconds=0)
    assert await ungater.sync("ns", "wl") == 0
    assert ungater._pop_due() == []
    assert ungater.expectations.get(("ns", "wl"), {}) == {}
    assert (ungater.patches, ungater.failures) == (2, 2)


async def test_a_workload_the_source_no_longer_knows_drops_its_expectations() -> None:
    core = FakeCore(pods(1))
    ungater = TopologyUngater(core, frozen(core))
    await ungater.sync("ns", "wl")
    ungater.source = lambda ns, wl: None
    assert await ungater.sync("ns", "wl") == 0
    assert ("ns", "wl") not in ungater.expectations


async def test_patches_in_flight_never_exceed_the_parallelism() -> None:
    core = FakeCore(pods(40))
    core.delay = 0.01
    slices = {"main": [DomainPods(node_labels={RACK: "r1"}, count=40)]}
    ungater = TopologyUngater(core, lambda ns, wl: UngatingInput(ns, wl, slices,
                                                                 [p.state() for p in core.pods.values()]),
                              parallelism=3)
    assert await ungater.sync("ns", "wl") == 40
    assert core.max_in_flight == 3


@pytest.fixture
async def running() -> AsyncIterator[list[Any]]:
    """Background ungater tasks, cancelled at the end of the test."""
    tasks: list[Any] = []
    yield tasks
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def test_events_within_the_batch_window_make_one_sync(running: list[Any]) -> None:
    core = FakeCore(pods(4))
    seen: list[str] = []

    def source(ns: str, wl: str) -> UngatingInput:
        seen.append(wl)
        return UngatingInput(ns, wl, SLICES, [p.state() for p in core.pods.values()])
    ungater = TopologyUngater(core, source, batch_seconds=0.2)
    running.append(asyncio.create_task(ungater.run()))
    for _ in range(5):
        ungater.notify("ns", "a")
        await asyncio.sleep(0.01)
    ungater.notify("ns", "b")
    await asyncio.sleep(0.1)
    assert seen == []  # the window is still open
    await eventually(lambda: len(seen) == 2)
    await asyncio.sleep(0.3)
    assert sorted(seen) == ["a", "b"]  # one look each, however many events


async def test_only_the_leader_ungates_and_pause_holds_it_too(running: list[Any]) -> None:
    core = FakeCore(pods(2))
    leader = asyncio.Event()
    ungater = TopologyUngater(core, live(core), batch_seconds=0.01, leader=leader)
    running.append(asyncio.create_task(ungater.run()))
    ungater.notify("ns", "wl")
    await asyncio.sleep(0.1)
    assert core.calls == []
    ungater.pause()
    leader.set()
    await asyncio.sleep(0.1)
    assert core.calls == []
    ungater.resume()
    await eventually(lambda: len(core.calls) == 2)


async def test_run_closes_the_patcher_when_it_ends() -> None:
    core = FakeCore(pods(2))
    ungater = TopologyUngater(core, live(core), batch_seconds=0.01)
    task = asyncio.create_task(ungater.run())
    ungater.notify("ns", "wl")
    await eventually(lambda: len(core.calls) == 2)
    assert core.closes == 0
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert core.closes == 1


async def test_a_slow_workload_does_not_hold_up_another(running: list[Any]) -> None:
    core = FakeCore([FakePod("slow-0", 0), FakePod("fast-0", 0)])
    core.blocks["slow-0"] = asyncio.Event()

    def source(ns: str, wl: str) -> UngatingInput:
        return UngatingInput(ns, wl, SLICES, [p.state() for p in core.pods.values() if p.name.startswith(wl)])
    ungater = TopologyUngater(core, source, batch_seconds=0.01)
    running.append(asyncio.create_task(ungater.run()))
    ungater.notify("ns", "slow")
    await eventually(lambda: len(core.calls) == 1)
    ungater.notify("ns", "fast")
    await eventually(lambda: core.pods["fast-0"].gates == [OTHER_GATE])
    assert core.pods["slow-0"].gates[0] == c.SCHEDULING_GATE_TOPOLOGY  # its patch is still on the way
    core.blocks["slow-0"].set()
    await eventually(lambda: core.pods["slow-0"].gates == [OTHER_GATE])


async def test_a_failing_source_is_logged_and_retried_without_stopping_the_ungater(
        running: list[Any], caplog: pytest.LogCaptureFixture) -> None:
    core = FakeCore(pods(1))
    calls = []

    def source(ns: str, wl: str) -> UngatingInput:
        calls.append(wl)
        if len(calls) == 1:
            raise KeyError("cache bug")
        return UngatingInput(ns, wl, SLICES, [p.state() for p in core.pods.values()])
    ungater = TopologyUngater(core, source, batch_seconds=0.01)
    running.append(asyncio.create_task(ungater.run()))
    ungater.notify("ns", "wl")
    await eventually(lambda: core.pods["p0"].gates == [OTHER_GATE])
    assert len(calls) == 2
    assert "ungating Workload ns/wl failed; retrying" in caplog.text


async def test_an_api_failure_of_a_sync_is_one_warning_without_a_traceback_and_retried(
        running: list[Any], caplog: pytest.LogCaptureFixture) -> None:
    core = FakeCore(pods(1))
    calls = []

    def source(ns: str, wl: str) -> UngatingInput:
        calls.append(wl)
        if len(calls) == 1:
            raise ApiError(0, "GET /api/v1/pods: ServerDisconnectedError: Server disconnected")
        return UngatingInput(ns, wl, SLICES, [p.state() for p in core.pods.values()])
    ungater = TopologyUngater(core, source, batch_seconds=0.01)
    running.append(asyncio.create_task(ungater.run()))
    ungater.notify("ns", "wl")
    await eventually(lambda: core.pods["p0"].gates == [OTHER_GATE])
    assert [(r.levelname, r.getMessage(), r.exc_info) for r in caplog.records] == [
        ("WARNING", "ungating Workload ns/wl: 0: GET /api/v1/pods: ServerDisconnectedError: Server disconnected; "
                    "retrying in 0.0s", None)]


async def test_patches_still_queued_when_leadership_is_lost_are_not_sent() -> None:
    core = FakeCore(pods(4))
    leader = asyncio.Event()
    leader.set()
    core.on_call = lambda n: leader.clear() if n == 2 else None  # lost while the 2nd patch is sent
    ungater = TopologyUngater(core, live(core), parallelism=1, leader=leader)
    assert await ungater.sync("ns", "wl") == 2
    assert len(core.calls) == 2
    assert set(ungater.expectations["ns", "wl"]) == {"uid-p0", "uid-p1"}


async def test_a_broken_connection_is_retried_like_a_server_error() -> None:
    core = FakeCore(pods(1))
    core.fail["p0"] = [-1]
    ungater = TopologyUngater(core, frozen(core), batch_seconds=0)
    assert await ungater.sync("ns", "wl") == 0
    assert ungater._pop_due() == [("ns", "wl")]
    assert await ungater.sync("ns", "wl") == 1
    assert (ungater.patches, ungater.failures, core.refreshes) == (2, 1, 2)  # credentials looked up per batch


def test_patch_bodies_are_ungate_patch_as_json_with_the_slice_part_encoded_once_per_slice() -> None:
    bodies = PatchBodies()
    r1, r2 = {RACK: "r1", "cloud.com/block": "b\\1"}, {RACK: "r2"}
    ungates = [Ungate("a", 'uid-"a"', r1), Ungate("b", "uid-b", r1), Ungate("c", "uid-c", r2)]
    for u in ungates:
        assert bodies.body(u) == json.dumps(ungate_patch(u)).encode()
        assert json.loads(bodies.body(u)) == ungate_patch(u)
    assert len(bodies._spec) == 2


#   a local HTTP server in the API server's place, recording what the raw patcher sends
@pytest.fixture
async def recording_server() -> AsyncIterator[tuple[str, list[tuple[str, str, dict[str, str], bytes]]]]:
    seen: list[tuple[str, str, dict[str, str], bytes]] = []

    async def handle(request: web.Request) -> web.Response:
        seen.append((request.method, request.path, dict(request.headers), await request.read()))
        if request.path.endswith("/gone"):
            return web.json_response({"kind": "Status", "message": 'pods "gone" not found'}, status=404)
        return web.json_response({"kind": "Pod"})
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]  # a started site has a server
    yield f"http://127.0.0.1:{port}", seen
    await runner.cleanup()


async def test_the_raw_patch_sends_the_bytes_with_the_clients_token_refreshed_per_batch(
        recording_server: tuple[str, list[tuple[str, str, dict[str, str], bytes]]]) -> None:
    host, seen = recording_server
    config = Configuration(host=host)
    config.api_key = {"BearerToken": "t1"}
    config.api_key_prefix = {"BearerToken": "Bearer"}
    async with ApiClient(config) as client:
        api = KubeApi(client)
        await api.refresh_raw_headers()
        await api.patch_raw(PODS, "ns", "p0", b'{"spec": {}}')
        config.api_key = {"BearerToken": "t2"}  # rotated, as a refresh hook would
        await api.patch_raw(PODS, "ns", "p1", b"{}")
        await api.refresh_raw_headers()
        with pytest.raises(ApiError) as gone:
            await api.patch_raw(PODS, "ns", "gone", b"{}")
        await api.close_raw()
        await api.patch_raw(PODS, "ns", "p2", b"{}")  # usable again after close
        await api.close_raw()
    assert (gone.value.status, gone.value.not_found, gone.value.message) == (404, True, 'pods "gone" not found')
    assert api.calls == 4
    method, path, headers, body = seen[0]
    assert (method, path, body) == ("PATCH", "/api/v1/namespaces/ns/pods/p0", b'{"spec": {}}')
    assert headers["Content-Type"] == c.CONTENT_TYPE_STRATEGIC_MERGE_PATCH
    assert headers["User-Agent"] == client.user_agent
    assert [h["Authorization"] for _, _, h, _ in seen] == ["Bearer t1", "Bearer t1", "Bearer t2", "Bearer t2"]


# ------------------------------------------------------------------------ against the devcluster

#   block b1
#   ├── rack b1-r1: b1-r1-n1, b1-r1-n2   (2 GPUs each)
#   └── rack b1-r2: b1-r2-n1, b1-r2-n2
@pytest.fixture
async def cluster_api(tmp_path: Path) -> AsyncIterator[tuple[DevCluster, ApiClient]]:
    async with DevCluster() as cluster:
        await create_nodes(cluster.api, topology_nodes(parse_shape("1x2x2x2")))
        client = await aconfig.new_client_from_config(config_file=str(cluster.write_kubeconfig(tmp_path / "kc")))  # type: ignore[no-untyped-call]  # kubernetes' config loaders are unannotated
        async with client:
            yield cluster, client


def gated_pod(name: str, index: int) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {c.LABEL_JOB_COMPLETION_INDEX: str(index)}},
            "spec": {"schedulingGates": [{"name": c.SCHEDULING_GATE_TOPOLOGY}],
                     "nodeSelector": {LABEL_BLOCK: "b1"},
                     "containers": [{"name": "c", "image": "busybox",
                                     "resources": {"requests": {"nvidia.com/gpu": "1"},
                                                   "limits": {"nvidia.com/gpu": "1"}}}]}}


def pod_state(obj: Any) -> PodState:
    gates = [g.name for g in obj.spec.scheduling_gates or []]
    return PodState(obj.metadata.name, obj.metadata.uid, "main",
                    int(obj.metadata.labels[c.LABEL_JOB_COMPLETION_INDEX]), c.SCHEDULING_GATE_TOPOLOGY in gates,
                    obj.spec.node_selector, obj.status.phase in ("Succeeded", "Failed"),
                    obj.metadata.creation_timestamp.isoformat())


async def test_on_the_devcluster_indexed_pods_are_ungated_into_their_racks_and_bound_there(
        cluster_api: tuple[DevCluster, ApiClient]) -> None:
    cluster, client = cluster_api
    core = CoreV1Api(client)
    for i in range(6):
        await core.create_namespaced_pod("default", as_body(gated_pod(f"w-{i}", i)))
    slices = {"main": [DomainPods(node_labels={LABEL_BLOCK: "b1", LABEL_RACK: "b1-r1"}, count=4),
                       DomainPods(node_labels={LABEL_BLOCK: "b1", LABEL_RACK: "b1-r2"}, count=1)]}
    listed: list[PodState] = []
    door = RecordingApi(client)
    ungater = TopologyUngater(door, lambda ns, wl: UngatingInput(ns, wl, slices, listed))
    listed[:] = [pod_state(p) for p in (await core.list_namespaced_pod("default")).items]
    assert await ungater.sync("default", "job-w") == 5
    assert sorted(door.seen) == [("PATCH", f"/api/v1/namespaces/default/pods/w-{i}") for i in range(5)]
    components = Components(cluster.api).start()
    try:
        await components.settle()
    finally:
        components.close()
    got = {present(p.metadata).name: (present(p.spec).node_name or "", present(p.spec).scheduling_gates)
           for p in (await core.list_namespaced_pod("default")).items}
    assert {n: node.rsplit("-", 1)[0] for n, (node, _) in got.items()} == {
        "w-0": "b1-r1", "w-1": "b1-r1", "w-2": "b1-r1", "w-3": "b1-r1", "w-4": "b1-r2", "w-5": ""}
    assert present(got["w-5"][1])[0].name == c.SCHEDULING_GATE_TOPOLOGY
    listed[:] = [pod_state(p) for p in (await core.list_namespaced_pod("default")).items]
    assert await ungater.sync("default", "job-w") == 0  # the slots are all taken by the bound pods


async def test_on_the_devcluster_injected_409s_and_500s_on_pod_patches_converge_with_one_retry_each(
        cluster_api: tuple[DevCluster, ApiClient], running: list[Any]) -> None:
    cluster, client = cluster_api
    core = CoreV1Api(client)
    for i in range(6):
        await core.create_namespaced_pod("default", as_body(gated_pod(f"f-{i}", i)))
    cluster.faults.inject(CONFLICT, "patch", "pods", count=3)
    cluster.faults.inject(ERROR, "patch", "pods", count=2)
    slices = {"main": [DomainPods(node_labels={LABEL_BLOCK: "b1", LABEL_RACK: "b1-r1"}, count=3),
                       DomainPods(node_labels={LABEL_BLOCK: "b1", LABEL_RACK: "b1-r2"}, count=3)]}
    listed: list[PodState] = []

    async def follow() -> None:  # a cache that lags the API by up to 20 ms
        while True:
            listed[:] = [pod_state(p) for p in (await core.list_namespaced_pod("default")).items]
            await asyncio.sleep(0.02)
    running.append(asyncio.create_task(follow()))
    ungater = TopologyUngater(KubeApi(client), lambda ns, wl: UngatingInput(ns, wl, slices, list(listed)),
                              batch_seconds=0.05)
    running.append(asyncio.create_task(ungater.run()))
    await asyncio.sleep(0.05)
    ungater.notify("default", "job-f")

    async def all_released() -> list[Any]:
        items = (await core.list_namespaced_pod("default")).items
        return [] if any(present(p.spec).scheduling_gates for p in items) else items
    for _ in range(400):
        if items := await all_released():
            break
        await asyncio.sleep(0.05)
    assert items, "pods still gated after 20 s"
    assert (ungater.patches, ungater.failures) == (11, 5)  # 6 pods, each injected failure retried once
    by_index = {int(p.metadata.labels[c.LABEL_JOB_COMPLETION_INDEX]): p.spec.node_selector[LABEL_RACK]
                for p in items}
    assert by_index == {0: "b1-r1", 1: "b1-r1", 2: "b1-r1", 3: "b1-r2", 4: "b1-r2", 5: "b1-r2"}


class DyingAt:
    """Passes patches to `inner` until the n-th, which never leaves: the process dies while it is on the way."""

    def __init__(self, inner: KubeApi, n: int) -> None:
        self.inner, self.n, self.sent = inner, n, 0
        self.reached = asyncio.Event()

    async def refresh_raw_headers(self) -> None:
        await self.inner.refresh_raw_headers()

    async def close_raw(self) -> None:
        await self.inner.close_raw()

    async def patch_raw(self, resource: tuple[str, str], namespace: str | None, name: str, body: bytes) -> None:
        self.sent += 1
        if self.sent == self.n:
            self.reached.set()
            await asyncio.Event().wait()
        await self.inner.patch_raw(resource, namespace, name, body)


async def test_on_the_devcluster_a_restart_between_patches_ungates_the_rest_exactly_once(
        cluster_api: tuple[DevCluster, ApiClient]) -> None:
    """The first ungater dies while its 4th of 6 patches is on the way (its expectations die with it); a
    new one, reading the API afresh, releases only the other 3, each into the slice of its index."""
    _, client = cluster_api
    core = CoreV1Api(client)
    for i in range(6):
        await core.create_namespaced_pod("default", as_body(gated_pod(f"r-{i}", i)))
    slices = {"main": [DomainPods(node_labels={LABEL_BLOCK: "b1", LABEL_RACK: "b1-r1"}, count=3),
                       DomainPods(node_labels={LABEL_BLOCK: "b1", LABEL_RACK: "b1-r2"}, count=3)]}

    async def listing() -> list[PodState]:
        return [pod_state(p) for p in (await core.list_namespaced_pod("default")).items]
    before = await listing()
    dying = DyingAt(KubeApi(client), 4)
    first = TopologyUngater(dying, lambda ns, wl: UngatingInput(ns, wl, slices, before), parallelism=1)
    task = asyncio.create_task(first.sync("default", "job-r"))
    await dying.reached.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await first.close()
    middle = await listing()
    done_before = {p.name for p in middle if not p.gated}
    assert len(done_before) == 3

    second = TopologyUngater(KubeApi(client), lambda ns, wl: UngatingInput(ns, wl, slices, middle))
    assert await second.sync("default", "job-r") == 6 - len(done_before)
    items = (await core.list_namespaced_pod("default")).items
    assert not any(present(p.spec).scheduling_gates for p in items)
    assert {int(present(present(p.metadata).labels)[c.LABEL_JOB_COMPLETION_INDEX]): present(present(p.spec).node_selector)[LABEL_RACK] for p in items} == {
        0: "b1-r1", 1: "b1-r1", 2: "b1-r1", 3: "b1-r2", 4: "b1-r2", 5: "b1-r2"}
