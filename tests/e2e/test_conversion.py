"""v1beta1 and v1beta2 clients see the same objects through tasq's conversion webhook, on either control
plane: `tasq run --local-webhooks` points every tasq CRD's conversion at its /convert; objects are
stored as v1beta2; kubectl with v1beta1 manifests and the official client's CustomObjectsApi at
v1beta1 read and write them as v1beta1 (Kueue's v1beta1 field names), kubectl and the client at
v1beta2 as v1beta2, including a Workload the operator admitted with a multi-domain TopologyAssignment (v1beta2's
compact slices, v1beta1's levels + domains; compared decoded: the same pods on the same hosts in both
versions, where its pods ran).

The queues of test_operator over 8 hosts x 8 GPUs, two per rack, named by pool so that a gang over
two blocks is written as two slices (one per hostname prefix, as Kueue encodes it).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, cast

import pytest
from kubernetes import client

from controller.api import constants as c
from controller.api.topology_assignment import TopologyAssignment, read_v1beta1
from tests.builders.operator import gpu_nodes
from tests.e2e.conftest import Kubectl, install_operator_cluster
from tests.e2e.test_operator import BLOCK, RACK, SETUP, condition, get, job, wait_for, workload_of
from tests.e2e.test_operator_run import Process, lease_holder
from tests.retrying_client import new_client

pytestmark = pytest.mark.e2e

POOLS = {"b1": "h100-pool-east-zone-one-host-", "b2": "a100-pool-west-zone-two-host-"}
"""Block -> the hostname prefix of its nodes: long and unlike, so per-pool slices are the smaller form."""


def pool_nodes() -> list[dict[str, Any]]:
    """test_operator's nodes (2 blocks x 2 racks x 2 hosts), each renamed `<its block's pool><n>`."""
    nodes = gpu_nodes(BLOCK, RACK, blocks=2, racks=2, hosts=2, labels={"gpu": "h100"})
    for n, node in enumerate(nodes):
        block = node["metadata"]["labels"][BLOCK]
        name = f"{POOLS[block]}{n % 4 + 1}"
        node["metadata"]["name"] = name
        node["metadata"]["labels"][c.LABEL_HOSTNAME] = name
    return nodes


@pytest.fixture(scope="module")
def installed(request: pytest.FixtureRequest, cluster: str, kubectl: Kubectl) -> Iterator[None]:
    """The CRDs, the 8 pool nodes and test_operator's queue on this module's cluster (either one)."""
    close = install_operator_cluster(request, cluster, kubectl, pool_nodes(), SETUP)
    yield
    close()

V1BETA1, V1BETA2 = c.VERSION_V1BETA1, c.VERSION_V1BETA2
CRDS = ("topologies", "resourceflavors", "clusterqueues", "localqueues", "workloads")


def converting_through_tasq(kubectl: Kubectl) -> bool:
    """Every tasq CRD's conversion is the Webhook strategy at a local /convert."""
    for plural in CRDS:
        crd = get(kubectl, "crd", f"{plural}.{c.GROUP}")
        conversion = crd["spec"].get("conversion") or {}
        url = ((conversion.get("webhook") or {}).get("clientConfig") or {}).get("url", "")
        if conversion.get("strategy") != "Webhook" or not url.endswith("/convert"):
            return False
    return True


@pytest.fixture(scope="module")
def tasq(installed: None, kubeconfig: Path, kubectl: Kubectl,
         tmp_path_factory: pytest.TempPathFactory) -> Iterator[Process]:
    proc = Process(kubeconfig, tmp_path_factory.mktemp("tasq") / "tasq.log", "--local-webhooks",
                   "--identity", "converting")
    try:
        wait_for(lambda: converting_through_tasq(kubectl), 60, "the CRDs converting through tasq", proc.output)
        wait_for(lambda: lease_holder(kubectl) == "converting", 30, "leadership", proc.output)
        yield proc
    finally:
        assert proc.stop() == 0, proc.output()


@pytest.fixture(scope="module")
def custom(kubeconfig: Path) -> Iterator[client.CustomObjectsApi]:
    with new_client(kubeconfig) as api:
        yield client.CustomObjectsApi(api)


def kubectl_get(kubectl: Kubectl, plural: str, version: str, name: str, namespace: str = "") -> dict[str, Any]:
    """`kubectl get <plural>.<version>.<group>`: the object as that version serves it."""
    where = ("-n", namespace) if namespace else ()
    return cast(dict[str, Any], get(kubectl, f"{plural}.{version}.{c.GROUP}", name, *where))


COHORT_QUEUE = """
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: converted}
spec:
  cohort: pool
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: ["cpu"]
    flavors:
    - name: h100
      resources:
      - {name: cpu, nominalQuota: "4"}
"""


def test_a_v1beta1_manifest_is_stored_once_and_each_version_reads_and_writes_it_in_its_own_terms(
        tasq: Process, kubectl: Kubectl, custom: client.CustomObjectsApi) -> None:
    kubectl("apply", "-f", "-", stdin=COHORT_QUEUE)
    as_v2 = kubectl_get(kubectl, "clusterqueues", V1BETA2, "converted")
    assert as_v2["apiVersion"] == f"{c.GROUP}/{V1BETA2}"
    assert as_v2["spec"]["cohortName"] == "pool" and "cohort" not in as_v2["spec"]
    as_v1 = kubectl_get(kubectl, "clusterqueues", V1BETA1, "converted")
    assert as_v1["spec"]["cohort"] == "pool" and "cohortName" not in as_v1["spec"]
    from_client = custom.get_cluster_custom_object(c.GROUP, V1BETA1, "clusterqueues", "converted")
    assert isinstance(from_client, dict) and from_client["spec"]["cohort"] == "pool"
    assert from_client["metadata"]["uid"] == as_v2["metadata"]["uid"]
    # a v1beta2 client's write is what the v1beta1 client reads next, and the other way round
    kubectl("patch", f"clusterqueues.{V1BETA2}.{c.GROUP}", "converted", "--type", "merge",
            "-p", json.dumps({"spec": {"cohortName": "other"}}))
    assert custom.get_cluster_custom_object(c.GROUP, V1BETA1, "clusterqueues", "converted")["spec"]["cohort"] == "other"  # type: ignore[index]
    custom.patch_cluster_custom_object(c.GROUP, V1BETA1, "clusterqueues", "converted", {"spec": {"cohort": "third"}})
    assert kubectl_get(kubectl, "clusterqueues", V1BETA2, "converted")["spec"]["cohortName"] == "third"
    # applying the v1beta1 manifest again puts its cohort back (client-side apply in v1beta1 terms)
    kubectl("apply", "-f", "-", stdin=COHORT_QUEUE)
    assert kubectl_get(kubectl, "clusterqueues", V1BETA2, "converted")["spec"]["cohortName"] == "pool"
    listed = {version: [o["metadata"]["name"] for o in custom.list_cluster_custom_object(  # type: ignore[index]
        c.GROUP, version, "clusterqueues")["items"]] for version in (V1BETA1, V1BETA2)}
    assert listed[V1BETA1] == listed[V1BETA2] and "converted" in listed[V1BETA1]


def assigned_hosts(assignment: Mapping[str, Any], version: str) -> dict[str, int]:
    """Pods per host of one pod set's topologyAssignment, decoded from the form `version` serves:
    v1beta2's compact slices, v1beta1's `levels` + `domains`."""
    if version == V1BETA2:
        compact = TopologyAssignment.model_validate(assignment)
        assert "slices" in assignment and "domains" not in assignment
        levels, domains = compact.levels, compact.assigned_domains()
    else:
        assert "domains" in assignment and "slices" not in assignment
        read = read_v1beta1(assignment)
        assert not isinstance(read, str), read
        levels, domains = read
    host = levels.index(c.LABEL_HOSTNAME)
    hosts: dict[str, int] = {}
    for domain in domains:
        hosts[domain.values[host]] = hosts.get(domain.values[host], 0) + domain.count
    return hosts


def local_queue_v1beta1(namespace: str) -> str:
    return (f"apiVersion: {c.GROUP}/{V1BETA1}\nkind: LocalQueue\n"
            f"metadata: {{name: lq, namespace: {namespace}}}\nspec: {{clusterQueue: team}}\n")


def test_an_admitted_workload_reads_the_same_in_both_versions_with_kubectl_and_the_client(
        tasq: Process, kubectl: Kubectl, custom: client.CustomObjectsApi, namespace: str) -> None:
    kubectl("apply", "-f", "-", stdin=local_queue_v1beta1(namespace))
    # 6 pods of 8 GPUs preferring one block: a block holds 4, so 6 hosts over both pools, two slices
    kubectl("create", "-f", "-", stdin=job("spread", namespace, 6, 8, run_seconds=30,
                                           annotations={c.ANNOTATION_PREFER_TOPOLOGY: BLOCK}))
    admitted = wait_for(lambda: (w := workload_of(kubectl, namespace, "spread")) and condition(w, "Admitted") and w,
                        60, "the Workload admitted", tasq.output)
    name = admitted["metadata"]["name"]
    views: dict[str, dict[str, Any]] = {
        "kubectl v1beta2": kubectl_get(kubectl, "workloads", V1BETA2, name, namespace),
        "kubectl v1beta1": kubectl_get(kubectl, "workloads", V1BETA1, name, namespace),
        "client v1beta2": cast(dict[str, Any], custom.get_namespaced_custom_object(
            c.GROUP, V1BETA2, namespace, "workloads", name)),
        "client v1beta1": cast(dict[str, Any], custom.get_namespaced_custom_object(
            c.GROUP, V1BETA1, namespace, "workloads", name)),
    }
    for view, wl in views.items():
        assert wl["apiVersion"] == f"{c.GROUP}/{view.split()[1]}", view
        assert wl["metadata"]["uid"] == admitted["metadata"]["uid"], view
    hosts = {view: [assigned_hosts(psa["topologyAssignment"], view.split()[1])
                    for psa in wl["status"]["admission"]["podSetAssignments"]] for view, wl in views.items()}
    (expected,) = hosts["kubectl v1beta2"]
    assert len(expected) == 6 and set(expected.values()) == {1}, expected
    (v1beta2_assignment,) = [psa["topologyAssignment"]
                             for psa in views["kubectl v1beta2"]["status"]["admission"]["podSetAssignments"]]
    assert len(v1beta2_assignment["slices"]) == 2, v1beta2_assignment
    assert all(h == [expected] for h in hosts.values()), hosts
    pods = wait_for(lambda: (items := get(kubectl, "pods", "-n", namespace)["items"]) and len(items) == 6
                    and all(p["spec"].get("nodeName") for p in items) and items, 60, "pods bound", tasq.output)
    assert {p["spec"]["nodeName"]: 1 for p in pods} == expected
    listed = {version: [w["metadata"]["name"] for w in custom.list_namespaced_custom_object(  # type: ignore[index]
        c.GROUP, version, namespace, "workloads")["items"]] for version in (V1BETA1, V1BETA2)}
    assert listed == {V1BETA1: [name], V1BETA2: [name]}
