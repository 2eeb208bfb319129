"""The simulated kubelet on a manual clock: start, run for the annotated time, fail on request, and
mark then evict the pods of a NotReady node."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest

from controller.api import constants as c
from devcluster.front.tables import pod_status_reason
from devcluster.server import faults
from devcluster.server.apiserver import ApiServer
from devcluster.server.faults import Faults
from devcluster.simulated.components import Components, ManualClock
from devcluster.simulated.kubelet import Kubelet, admission_failure, run_seconds
from tests.builders.cluster import PodBuilder, make_node, make_pod


async def kubelet_with_pod(pod: PodBuilder, eviction_seconds: float = 300, *, node_ready: bool = True,
                           tolerations: list[dict[str, Any]] | None = None) -> tuple[ApiServer, Kubelet, ManualClock]:
    """One node `n1` and pod `p` bound to it; `tolerations` as raw dicts (they carry tolerationSeconds)."""
    clock = ManualClock()
    api = ApiServer(now=clock)
    node = make_node("n1")
    await api.create(api.resource("v1", "nodes"), "", (node if node_ready else node.not_ready()).build())
    kubelet = Kubelet(api, eviction_seconds).start()
    body = pod.build()
    del body["metadata"]["uid"]
    body["spec"]["nodeName"] = "n1"
    if tolerations is not None:
        body["spec"]["tolerations"] = tolerations
    await api.create(api.resource("v1", "pods"), "default", body)
    return api, kubelet, clock


async def current(api: ApiServer, name: str = "p") -> dict[str, Any]:
    return await api.get(api.resource("v1", "pods"), "default", name)


def ready(pod: dict[str, Any]) -> str:
    return str(next(cd["status"] for cd in pod["status"]["conditions"] if cd["type"] == "Ready"))


async def test_bound_pod_runs_then_succeeds_after_its_run_seconds() -> None:
    api, kubelet, clock = await kubelet_with_pod(make_pod("p").annotation(c.ANNOTATION_DEVCLUSTER_RUN_SECONDS, "30"))
    await kubelet.sync()
    pod = await current(api)
    assert (pod["status"]["phase"], ready(pod)) == ("Running", "True")
    assert pod["status"]["podIP"] and pod["status"]["startTime"] == "2026-01-01T00:00:00Z"
    assert pod["status"]["containerStatuses"][0]["state"] == {"running": {"startedAt": "2026-01-01T00:00:00Z"}}

    clock.advance(29)
    await kubelet.sync()
    assert (await current(api))["status"]["phase"] == "Running"
    clock.advance(1)
    await kubelet.sync()
    pod = await current(api)
    assert (pod["status"]["phase"], ready(pod)) == ("Succeeded", "False")
    assert pod["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 0
    assert kubelet.next_deadline(clock()) is None


async def test_a_not_ready_pod_runs_unready_until_deleted() -> None:
    api, kubelet, clock = await kubelet_with_pod(make_pod("p").annotation(c.ANNOTATION_DEVCLUSTER_NOT_READY, "true"))
    await kubelet.sync()
    clock.advance(10**6)
    await kubelet.sync()
    pod = await current(api)
    assert (pod["status"]["phase"], ready(pod)) == ("Running", "False")
    assert pod["status"]["containerStatuses"][0]["ready"] is False


async def test_without_the_annotation_a_pod_runs_until_deleted() -> None:
    api, kubelet, clock = await kubelet_with_pod(make_pod("p"))
    await kubelet.sync()
    clock.advance(10**6)
    await kubelet.sync()
    assert (await current(api))["status"]["phase"] == "Running"


@pytest.mark.parametrize("by_annotation", [True, False])
async def test_a_pod_fails_on_request(by_annotation: bool) -> None:
    pod = make_pod("p").annotation(c.ANNOTATION_DEVCLUSTER_FAIL, "true") if by_annotation else make_pod("p")
    api, kubelet, _clock = await kubelet_with_pod(pod)
    await kubelet.sync()
    if not by_annotation:
        assert kubelet.fail("default", "p")
        await kubelet.sync()
    failed = await current(api)
    assert failed["status"]["phase"] == "Failed"
    assert failed["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 1
    assert not kubelet.fail("default", "p")  # terminated pods cannot fail again


async def test_not_ready_node_makes_pods_unready_then_evicts_them() -> None:
    api, kubelet, clock = await kubelet_with_pod(make_pod("p"), eviction_seconds=300)
    await kubelet.sync()
    await kubelet.set_node_ready("n1", False)
    await kubelet.sync()
    assert ready(await current(api)) == "False"

    clock.advance(299)
    await kubelet.sync()
    assert (await current(api))["status"]["phase"] == "Running"
    assert kubelet.next_deadline(clock()) == clock.moment + timedelta(seconds=1)
    clock.advance(1)
    await kubelet.sync()
    assert api.store.get(("", "pods"), ("default", "p")) is None


@dataclass
class EvictionCase:
    name: str
    tolerations: list[dict[str, Any]]
    want_evicted_after: float | None  # None: never


EVICTION_CASES = [
    EvictionCase("without a toleration the admission default (300 s) applies", [], 300),
    EvictionCase("a toleration of the unreachable taint with seconds sets the time",
                 [{"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
                   "tolerationSeconds": 60}], 60),
    EvictionCase("the least seconds of several matching tolerations wins",
                 [{"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
                   "tolerationSeconds": 90},
                  {"operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 45}], 45),
    EvictionCase("a toleration of the other (not-ready) taint does not count: the default applies",
                 [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
                   "tolerationSeconds": 10}], 300),
    EvictionCase("tolerating everything without seconds: never evicted", [{"operator": "Exists"}], None),
]


@pytest.mark.parametrize("case", EVICTION_CASES, ids=lambda c: c.name)
async def test_eviction_from_an_unreachable_node_follows_the_pods_tolerations(case: EvictionCase) -> None:
    api, kubelet, clock = await kubelet_with_pod(make_pod("p"), tolerations=case.tolerations)
    await kubelet.sync()
    await kubelet.set_node_ready("n1", False)  # Ready Unknown: the node.kubernetes.io/unreachable taint
    await kubelet.sync()

    if case.want_evicted_after is None:
        assert kubelet.next_deadline(clock()) is None
        clock.advance(10**6)
        await kubelet.sync()
        assert ready(await current(api)) == "False"
        return
    assert kubelet.next_deadline(clock()) == clock.moment + timedelta(seconds=case.want_evicted_after)
    clock.advance(case.want_evicted_after - 1)
    await kubelet.sync()
    assert ready(await current(api)) == "False"
    clock.advance(1)
    await kubelet.sync()
    assert api.store.get(("", "pods"), ("default", "p")) is None


async def test_eviction_marks_the_pod_as_a_disruption_target_before_deleting_it() -> None:
    api, kubelet, clock = await kubelet_with_pod(make_pod("p"))
    await kubelet.sync()
    await kubelet.set_node_ready("n1", False)
    Faults(api).install().inject(faults.ERROR, "delete", "pods")  # stop between the two writes
    clock.advance(300)
    await kubelet.sync()

    target = next(cd for cd in (await current(api))["status"]["conditions"] if cd["type"] == "DisruptionTarget")
    assert (target["status"], target["reason"]) == ("True", "DeletionByTaintManager")
    await kubelet.sync()
    assert api.store.get(("", "pods"), ("default", "p")) is None


async def test_a_pod_bound_to_a_not_ready_node_waits_pending_until_the_node_is_ready() -> None:
    api, kubelet, _clock = await kubelet_with_pod(make_pod("p").annotation(c.ANNOTATION_DEVCLUSTER_RUN_SECONDS, "30"),
                                                 node_ready=False, tolerations=[{"operator": "Exists"}])
    await kubelet.sync()
    assert (await current(api)).get("status", {}).get("phase", "Pending") == "Pending"

    await kubelet.set_node_ready("n1", True)
    await kubelet.sync()
    assert (await current(api))["status"]["phase"] == "Running"


async def test_a_pod_finishing_while_its_node_is_not_ready_is_reported_when_the_node_is_back() -> None:
    api, kubelet, clock = await kubelet_with_pod(make_pod("p").annotation(c.ANNOTATION_DEVCLUSTER_RUN_SECONDS, "30"),
                                                 tolerations=[{"operator": "Exists"}])
    await kubelet.sync()
    await kubelet.set_node_ready("n1", False)
    clock.advance(60)
    await kubelet.sync()
    assert (await current(api))["status"]["phase"] == "Running"

    await kubelet.set_node_ready("n1", True)
    await kubelet.sync()
    assert (await current(api))["status"]["phase"] == "Succeeded"


@dataclass
class AdmissionCase:
    name: str
    requests: dict[str, int]
    used: dict[str, int]
    allocatable: dict[str, int]
    want: tuple[str, str] | None


GPU = "nvidia.com/gpu"
ADMISSION_CASES = [
    AdmissionCase("fits exactly", {GPU: 4000, "pods": 1000}, {GPU: 4000}, {GPU: 8000, "pods": 110_000}, None),
    AdmissionCase("an extended resource in whole units",
                  {GPU: 8000, "pods": 1000}, {GPU: 4000, "pods": 1000}, {GPU: 8000, "pods": 110_000},
                  ("OutOfnvidia.com/gpu", "Pod was rejected: Node didn't have enough resource: nvidia.com/gpu, "
                                          "requested: 8, used: 4, capacity: 8")),
    AdmissionCase("cpu in millicores", {"cpu": 2000}, {"cpu": 3000}, {"cpu": 4000},
                  ("OutOfcpu", "Pod was rejected: Node didn't have enough resource: cpu, "
                               "requested: 2000, used: 3000, capacity: 4000")),
    AdmissionCase("pods are checked before cpu", {"pods": 1000, "cpu": 5000}, {"pods": 1000},
                  {"pods": 1000, "cpu": 4000},
                  ("OutOfpods", "Pod was rejected: Node didn't have enough resource: pods, "
                                "requested: 1, used: 1, capacity: 1")),
    AdmissionCase("a resource the node does not have", {"example.com/fpga": 1000}, {}, {"pods": 110_000},
                  ("OutOfexample.com/fpga", "Pod was rejected: Node didn't have enough resource: example.com/fpga, "
                                            "requested: 1, used: 0, capacity: 0")),
]


@pytest.mark.parametrize("case", ADMISSION_CASES, ids=lambda c: c.name)
def test_admission_failure(case: AdmissionCase) -> None:
    assert admission_failure(case.requests, case.used, case.allocatable) == case.want


async def test_a_pod_bound_past_the_nodes_allocatable_is_rejected_and_freed_capacity_admits_the_next() -> None:
    api, kubelet, _clock = await kubelet_with_pod(make_pod("p").requests({GPU: 8}).limits({GPU: 8}))
    pods = api.resource("v1", "pods")
    await api.patch(api.resource("v1", "nodes"), "", "n1", "application/merge-patch+json",
                    {"status": {"allocatable": {GPU: "8"}}}, subresource="status")
    for name in ("q", "r"):
        body = make_pod(name).requests({GPU: 8}).limits({GPU: 8}).build()
        del body["metadata"]["uid"]
        body["spec"]["nodeName"] = "n1"  # bound by hand: the scheduler never checked it
        await api.create(pods, "default", body)
    await kubelet.sync()

    assert (await current(api, "p"))["status"]["phase"] == "Running"
    for name in ("q", "r"):
        rejected = (await current(api, name))["status"]
        assert (rejected["phase"], rejected["reason"]) == ("Failed", "OutOfnvidia.com/gpu")
        assert rejected["message"].endswith("requested: 8, used: 8, capacity: 8")

    await api.delete(pods, "default", "p")
    body = make_pod("s").requests({GPU: 8}).limits({GPU: 8}).build()
    del body["metadata"]["uid"]
    body["spec"]["nodeName"] = "n1"
    await api.create(pods, "default", body)
    await kubelet.sync()
    assert (await current(api, "s"))["status"]["phase"] == "Running"


@dataclass
class RunSecondsCase:
    name: str
    value: str | None
    want: float | None


@pytest.mark.parametrize("case", [
    RunSecondsCase("absent: forever", None, None),
    RunSecondsCase("integer", "60", 60.0),
    RunSecondsCase("fraction", "0.5", 0.5),
    RunSecondsCase("garbage: forever", "soon", None),
    RunSecondsCase("negative: forever", "-1", None),
], ids=lambda case: case.name)
def test_run_seconds(case: RunSecondsCase) -> None:
    pod = make_pod("p")
    if case.value is not None:
        pod.annotation(c.ANNOTATION_DEVCLUSTER_RUN_SECONDS, case.value)
    assert run_seconds(pod.build()) == case.want


async def test_a_refused_status_write_is_retried_at_the_next_sync() -> None:
    api, kubelet, clock = await kubelet_with_pod(make_pod("p").annotation(c.ANNOTATION_DEVCLUSTER_RUN_SECONDS, "5"))
    injected = Faults(api).install()
    injected.inject(faults.ERROR, "patch", "pods/status", name="p", count=1)
    await kubelet.sync()
    assert (await current(api))["status"]["phase"] == "Pending"
    await kubelet.sync()
    assert (await current(api))["status"]["phase"] == "Running"

    clock.advance(5)
    injected.inject(faults.ERROR, "patch", "pods/status", name="p", count=1)
    await kubelet.sync()
    assert (await current(api))["status"]["phase"] == "Running"
    await kubelet.sync()
    assert (await current(api))["status"]["phase"] == "Succeeded"


async def test_settle_returns_while_a_fault_keeps_refusing_writes() -> None:
    clock = ManualClock()
    api = ApiServer(now=clock)
    await api.create(api.resource("v1", "nodes"), "", make_node("n1").build())
    components = Components(api).start()
    Faults(api).install().inject(faults.ERROR, "create", "pods/binding", count=None)
    body = make_pod("p").build()
    del body["metadata"]["uid"]
    await api.create(api.resource("v1", "pods"), "default", body)

    await components.settle()

    assert "nodeName" not in (await current(api))["spec"]
    assert components.scheduler.has_work  # still wanting to bind: the next round retries


@pytest.mark.parametrize("fail, want_finished", [(False, ("Succeeded", "Completed")), (True, ("Failed", "Error"))],
                         ids=["exit_0_prints_completed", "exit_1_prints_error"])
async def test_the_kubelets_container_states_print_as_kubectl_shows_them(fail: bool,
                                                                          want_finished: tuple[str, str]) -> None:
    pod = make_pod("p").init_container("setup").annotation(c.ANNOTATION_DEVCLUSTER_RUN_SECONDS, "30")
    api, kubelet, clock = await kubelet_with_pod(pod)
    await kubelet.sync()
    running = await current(api)
    assert [s["state"]["terminated"]["reason"] for s in running["status"]["initContainerStatuses"]] == ["Completed"]
    assert pod_status_reason(running) == ("Running", 1)
    if fail:
        kubelet.fail("default", "p")
    else:
        clock.advance(30)
    await kubelet.sync()
    finished = await current(api)
    assert (finished["status"]["phase"], pod_status_reason(finished)[0]) == want_finished


@pytest.mark.parametrize("addresses, want_host_ip", [
    ([{"type": "InternalIP", "address": "10.1.2.3"}, {"type": "Hostname", "address": "n1"}], "10.1.2.3"),
    ([{"type": "Hostname", "address": "n1"}], "192.168."),  # made up from the node's name
], ids=["the_nodes_internal_ip", "a_made_up_address_without_one"])
async def test_a_running_pods_host_ip_is_its_nodes_internal_ip(addresses: list[dict[str, str]],
                                                               want_host_ip: str) -> None:
    api, kubelet, _clock = await kubelet_with_pod(make_pod("p"))
    await api.patch(api.resource("v1", "nodes"), "", "n1", "application/merge-patch+json",
                    {"status": {"addresses": addresses}}, subresource="status")
    await kubelet.sync()
    assert (await current(api))["status"]["hostIP"].startswith(want_host_ip)
