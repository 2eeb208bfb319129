"""Node objects from compact topology shapes and from `kubectl get nodes -o yaml` dumps."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import yaml

from controller.api.views import NodeView
from devcluster.front.discovery import version
from devcluster.front.tables import node_roles
from devcluster.server.apiserver import ApiServer
from devcluster.simulated.nodes import (
    LABEL_BLOCK,
    LABEL_RACK,
    NodeDumpError,
    TopologyShape,
    create_nodes,
    nodes_from_dump,
    parse_shape,
    topology_nodes,
)
from tests.builders.cluster import make_node


@dataclass
class ShapeCase:
    name: str
    text: str
    want: TopologyShape | None  # None: ValueError


@pytest.mark.parametrize("case", [
    ShapeCase("the sample shape", "2x4x4x8", TopologyShape(2, 4, 4, 8)),
    ShapeCase("spaces allowed", " 1 x 2 x 3 x 0 ", TopologyShape(1, 2, 3, 0)),
    ShapeCase("three numbers", "2x4x4", None),
    ShapeCase("zero racks", "2x0x4x8", None),
    ShapeCase("not numbers", "axbxcxd", None),
], ids=lambda case: case.name)
def test_parse_shape(case: ShapeCase) -> None:
    if case.want is None:
        with pytest.raises(ValueError, match="topology shape"):
            parse_shape(case.text)
    else:
        assert parse_shape(case.text) == case.want


def test_topology_nodes_label_blocks_racks_and_hosts() -> None:
    # b1 ─┬─ b1-r1 ─┬─ n1
    #     │         └─ n2
    #     └─ b1-r2 ─┬─ ...   and the same under b2
    nodes = topology_nodes(parse_shape("2x2x2x8"), prefix="gpu-")
    views = [NodeView.from_dict(n) for n in nodes]

    assert len(views) == 8
    assert views[0].name == "gpu-b1-r1-n1"
    assert dict(views[-1].labels) == {"kubernetes.io/hostname": "gpu-b2-r2-n2", LABEL_BLOCK: "b2",
                                      LABEL_RACK: "b2-r2"}
    assert {v.allocatable["nvidia.com/gpu"] for v in views} == {8000}
    assert all(v.ready for v in views)
    assert nodes[0]["status"]["capacity"] == nodes[0]["status"]["allocatable"]
    assert "nvidia.com/gpu" not in topology_nodes(parse_shape("1x1x1x0"))[0]["status"]["allocatable"]


def test_sample_nodes_have_distinct_internal_ips_in_order() -> None:
    nodes = topology_nodes(parse_shape("2x4x40x8"))  # 320 nodes: the addresses cross an octet
    ips = [next(a["address"] for a in n["status"]["addresses"] if a["type"] == "InternalIP") for n in nodes]
    assert (ips[0], ips[255], ips[-1]) == ("10.0.0.1", "10.0.1.0", "10.0.1.64")
    assert len(set(ips)) == len(nodes)


def test_sample_nodes_are_workers_running_the_servers_version() -> None:
    node = topology_nodes(parse_shape("1x1x1x8"))[0]
    assert node["status"]["nodeInfo"]["kubeletVersion"] == version()["gitVersion"]
    assert node_roles(node["metadata"]["labels"]) == []  # printed `<none>`, as kubectl shows worker nodes


async def test_a_dump_of_the_api_recreates_the_same_nodes() -> None:
    source = ApiServer()
    await create_nodes(source, [make_node("a").label("zone", "z1").allocatable(cpu="8").taint("gpu").build(),
                                make_node("b").not_ready().build()])
    listed = await source.list_objects(source.resource("v1", "nodes"))
    dump = yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": listed["items"]})

    target = ApiServer()
    await create_nodes(target, nodes_from_dump(dump))

    again = await target.list_objects(target.resource("v1", "nodes"))
    assert [NodeView.from_dict(n) for n in again["items"]] == [NodeView.from_dict(n) for n in listed["items"]]
    assert all(n["metadata"]["uid"] != m["metadata"]["uid"] for n, m in zip(again["items"], listed["items"],
                                                                             strict=True))


async def test_create_nodes_replaces_existing_ones() -> None:
    api = ApiServer()
    await create_nodes(api, [make_node("a").allocatable(cpu="8").build()])
    await create_nodes(api, [make_node("a").allocatable(cpu="16").label("new", "yes").build()])
    node = NodeView.from_dict(await api.get(api.resource("v1", "nodes"), "", "a"))
    assert (node.allocatable["cpu"], node.labels["new"]) == (16000, "yes")


@pytest.mark.parametrize(("text", "want"), [
    ("kind: List\nitems:\n- kind: Pod\n  metadata: {name: p}\n", "document 0 item 0: kind 'Pod' is not Node"),
    ("kind: Node\nmetadata: {}\n", "document 0 item 0: metadata.name is missing"),
    ("--- [1, 2]\n", "document 0: not a mapping"),
    ("kind: List\nitems: 5\n", "document 0: items is not a list"),
    ("kind: Node\nmetadata: {name: a}\nstatus: [Ready]\n", "document 0 item 0: status is not a mapping"),
    ("kind: Node\nmetadata: {name: a}\n---\nkind: Node\nmetadata: n\n", "document 1 item 0: metadata is not a mapping"),
])
def test_broken_dumps(text: str, want: str) -> None:
    with pytest.raises(NodeDumpError) as err:
        nodes_from_dump(text)
    assert str(err.value) == want


def test_dump_of_separate_documents_strips_server_fields() -> None:
    text = ("kind: Node\nmetadata: {name: a, uid: u1, resourceVersion: '7', creationTimestamp: x,\n"
            "  annotations: {kubectl.kubernetes.io/last-applied-configuration: '{}'}}\n---\n"
            "apiVersion: v1\nkind: NodeList\nitems: [{metadata: {name: b}}]\n")
    nodes = nodes_from_dump(text)
    assert [n["metadata"] for n in nodes] == [{"name": "a"}, {"name": "b"}]
