"""`kubectl tasq top` against a live cluster, on either control plane: tasq (run as in test_metrics)
admits a Workload into one rack of three GPU nodes, and the plugin draws it on exactly those nodes.

  block b1: rack r1 = n1, n2 (4 GPUs each); rack r2 = n3 (4 GPUs)

The Workload asks for 6 GPUs (6 pods of one) required in one rack: only r1 holds it. A second one
asking for 9 in one rack waits with the message that names the fix (no rack has more than 8).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.conftest import Kubectl, wait_for
from tests.e2e.test_metrics import Tasq, tasq  # noqa: F401  (the fixture)
from tests.e2e.test_visibility import apply, kubectl_tasq

pytestmark = pytest.mark.e2e

BLOCK, RACK, HOST = "example.com/block", "example.com/rack", "kubernetes.io/hostname"
OBJECTS = """\
apiVersion: kueue.x-k8s.io/v1beta2
kind: Topology
metadata: {{name: top-{ns}}}
spec:
  levels: [{{nodeLabel: {block}}}, {{nodeLabel: {rack}}}, {{nodeLabel: {host}}}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {{name: top-{ns}}}
spec: {{nodeLabels: {{pool: top-{ns}}}, topologyName: top-{ns}}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {{name: top-{ns}}}
spec:
  namespaceSelector: {{}}
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - name: top-{ns}
      resources: [{{name: nvidia.com/gpu, nominalQuota: "64"}}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {{name: lq, namespace: {ns}}}
spec: {{clusterQueue: top-{ns}}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Workload
metadata: {{name: trainer, namespace: {ns}}}
spec:
  queueName: lq
  podSets:
  - name: main
    count: 6
    topologyRequest: {{required: {rack}}}
    template:
      spec:
        restartPolicy: Never
        containers:
        - name: c
          image: busybox
          resources: {{requests: {{nvidia.com/gpu: "1"}}, limits: {{nvidia.com/gpu: "1"}}}}
"""
TOO_BIG = """\
apiVersion: kueue.x-k8s.io/v1beta2
kind: Workload
metadata: {{name: too-big, namespace: {ns}}}
spec:
  queueName: lq
  podSets:
  - name: main
    count: 9
    topologyRequest: {{required: {rack}}}
    template:
      spec:
        restartPolicy: Never
        containers:
        - name: c
          image: busybox
          resources: {{requests: {{nvidia.com/gpu: "1"}}, limits: {{nvidia.com/gpu: "1"}}}}
"""
NODES = (("n1", "r1"), ("n2", "r1"), ("n3", "r2"))


def make_nodes(kubectl: Kubectl, namespace: str) -> list[str]:
    """Three GPU nodes of this test's pool (names carry the namespace: nodes are cluster-wide)."""
    names = []
    for short, rack in NODES:
        name = f"{namespace}-{short}"
        labels = {HOST: name, BLOCK: "b1", RACK: rack, "pool": f"top-{namespace}"}
        kubectl("create", "-f", "-", stdin=json.dumps(
            {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}}))
        gpus = {"nvidia.com/gpu": "4", "cpu": "8", "memory": "32Gi", "pods": "110"}
        kubectl("patch", "node", name, "--subresource=status", "--type=merge", "-p", json.dumps(
            {"status": {"capacity": gpus, "allocatable": gpus,
                        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]}}))
        names.append(name)
    return names


def test_top_draws_the_admitted_workload_on_its_nodes(
        tasq: Tasq, kubectl: Kubectl, kubeconfig: Path, namespace: str, tmp_path: Path) -> None:  # noqa: F811
    nodes = make_nodes(kubectl, namespace)
    try:
        apply(kubectl, tmp_path, OBJECTS.format(ns=namespace, block=BLOCK, rack=RACK, host=HOST))
        wait_for(lambda: kubectl("get", "workload", "trainer", "-n", namespace, "-o",
                                 "jsonpath={.status.admission.clusterQueue}").stdout, 60,
                 "the Workload admitted", logs=tasq.output)
        out = kubectl_tasq(kubeconfig, "top", "--flavor", f"top-{namespace}").stdout
        assert "\x1b" not in out
        lines = out.splitlines()
        assert lines[0].startswith(f"top-{namespace} (flavor, topology top-{namespace}): nvidia.com/gpu 6/12 used "
                                   f"(50%), 3 nodes, 1 Workloads in {namespace}"), out
        rows = {cols[0]: cols[1:] for cols in (line.split() for line in lines[2:-1])}
        placed = {name: rows[name] for name in nodes}
        assert {name: cells[1] for name, cells in placed.items()} == {
            nodes[0]: "4/4", nodes[1]: "2/4", nodes[2]: "0/4"}, out
        assert placed[nodes[0]][-1] == placed[nodes[1]][-1] == "trainer"
        assert placed[nodes[2]][-1] == "-"
        assert rows["r1"][1:] == ["6/8", "2", "free", "trainer"] and rows["r2"][1] == "0/4"

        apply(kubectl, tmp_path, TOO_BIG.format(ns=namespace, rack=RACK))
        message = wait_for(lambda: kubectl("get", "workload", "too-big", "-n", namespace, "-o",
                                           "jsonpath={.status.conditions[?(@.type=='QuotaReserved')].message}").stdout,
                           60, "the too-big Workload's pending message", logs=tasq.output)
        assert f'flavor "top-{namespace}": can never fit: the largest rack has 8 nvidia.com/gpu, pod set "main" ' \
               "needs 9; " in message
    finally:
        kubectl("delete", "node", *nodes, "--wait=false", check=False)
