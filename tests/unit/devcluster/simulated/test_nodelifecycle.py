"""The node lifecycle controller: cordon adds the unschedulable NoSchedule taint, uncordon removes it,
other taints are kept."""

from __future__ import annotations

from devcluster.server.apiserver import PATCH_MERGE, ApiServer
from devcluster.simulated.nodelifecycle import NodeLifecycle
from tests.builders.cluster import make_node

UNSCHEDULABLE = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
GPU = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}


async def test_cordon_taints_the_node_and_uncordon_removes_only_that_taint() -> None:
    api = ApiServer()
    nodes = api.resource("v1", "nodes")
    await api.create(nodes, "", make_node("n1").taint("nvidia.com/gpu", "true").build())
    controller = NodeLifecycle(api).start()
    assert await controller.sync() == 0  # nothing to do for a schedulable node

    await api.patch(nodes, "", "n1", PATCH_MERGE, {"spec": {"unschedulable": True}})
    assert await controller.sync() == 1
    assert (await api.get(nodes, "", "n1"))["spec"]["taints"] == [GPU, UNSCHEDULABLE]
    assert await controller.sync() == 0  # its own write needs nothing more

    await api.patch(nodes, "", "n1", PATCH_MERGE, {"spec": {"unschedulable": None}})
    await controller.sync()
    assert (await api.get(nodes, "", "n1"))["spec"]["taints"] == [GPU]


async def test_a_node_cordoned_before_the_controller_started_is_tainted() -> None:
    api = ApiServer()
    node = make_node("n2").build()
    node["spec"]["unschedulable"] = True
    await api.create(api.resource("v1", "nodes"), "", node)
    controller = NodeLifecycle(api).start()
    assert controller.has_work
    await controller.sync()
    assert (await api.get(api.resource("v1", "nodes"), "", "n2"))["spec"]["taints"] == [UNSCHEDULABLE]
