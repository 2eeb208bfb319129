"""`tasq simulate` end to end (in process): the gang deadlock, 1,000 realistic nodes, the samples,
output formats, invalid input and unknown kinds."""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from controller.api import constants as c
from controller.api.conversion import ConversionFailure
from controller.cli import main
from controller.commands import simulate as simulate_command
from tests.builders.cluster import make_node, make_pod
from tests.builders.kueue import (
    label_slices,
    make_cluster_queue,
    make_flavor,
    make_job,
    make_local_queue,
    make_topology,
    make_workload,
)
from tests.data.simulate.realistic_nodes import node_list

DATA = Path(__file__).resolve().parents[1] / "data" / "simulate"
DEADLOCK = DATA / "deadlock"
SAMPLES = Path(__file__).resolve().parents[2] / "config" / "samples"


def simulate(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["simulate", *args])
    out, err = capsys.readouterr()
    return code, out, err


def workloads_of(capsys: pytest.CaptureFixture[str], *files: Path) -> dict[str, dict[str, Any]]:
    args = [a for f in files for a in ("-f", str(f))]
    code, out, err = simulate(capsys, *args, "-o", "json")
    assert code == 0, err
    listing = json.loads(out)
    assert listing["kind"] == "List"
    return {item["metadata"]["name"]: item for item in listing["items"]}


def condition(wl: dict[str, Any], type_: str) -> dict[str, Any] | None:
    return next((cd for cd in wl.get("status", {}).get("conditions", []) if cd["type"] == type_), None)


def test_gang_deadlock_one_gang_gets_all_the_other_holds_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    wls = workloads_of(capsys, DEADLOCK / "cluster.yaml", DEADLOCK / "jobs.yaml")
    first, second = wls["job-job-a-b5c0b"], wls["job-job-b-423dd"]
    [assignment] = first["status"]["admission"]["podSetAssignments"]
    assert assignment["count"] == 100
    assert sum(s["count"] for s in label_slices(assignment["topologyAssignment"])) == 100
    assert "admission" not in second["status"]
    waiting = condition(second, "QuotaReserved")
    assert waiting is not None and waiting["status"] == "False"
    # It needs 100 GPUs (100 single-GPU pods) and says that only 50 are free.
    assert waiting["message"] == (
        'couldn\'t assign flavors to pod set "main": flavor "gpu": topology "dc" allows to fit only 50 out of '
        '100 pod(s) in total. Total nodes: 19; excluded: resource "nvidia.com/gpu": 12; '
        "needs cpu 200, nvidia.com/gpu 100; free on 19 candidate node(s): cpu 1614500m, nvidia.com/gpu 50")


def test_gang_deadlock_second_gang_is_admitted_when_the_first_finishes(
        capsys: pytest.CaptureFixture[str]) -> None:
    wls = workloads_of(capsys, DEADLOCK / "cluster.yaml", DEADLOCK / "jobs.yaml", DEADLOCK / "job-a-complete.yaml")
    finished = condition(wls["job-job-a-b5c0b"], "Finished")
    assert finished is not None and (finished["status"], finished["reason"]) == ("True", "Succeeded")
    admitted = condition(wls["job-job-b-423dd"], "Admitted")
    assert admitted is not None and admitted["status"] == "True"
    [assignment] = wls["job-job-b-423dd"]["status"]["admission"]["podSetAssignments"]
    assert sum(s["count"] for s in label_slices(assignment["topologyAssignment"])) == 100


def test_table_and_explain(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = simulate(capsys, "-f", str(DEADLOCK / "cluster.yaml"), "-f", str(DEADLOCK / "jobs.yaml"),
                            "--explain")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["NAMESPACE", "NAME", "QUEUE", "RESERVED", "IN", "ADMITTED", "FINISHED",
                                "FLAVOR", "PLACEMENT", "WAITS", "FOR"]
    assert lines[1].split() == ["team", "job-job-a-b5c0b", "ml", "research", "True", "gpu", "b1/r1:80", "b1/r2:20"]
    assert lines[2].split() == ["team", "job-job-b-423dd", "ml", "PodSetTopologyUnfit"]
    assert lines[3].startswith("team/job-job-b-423dd: PodSetTopologyUnfit: ")
    assert "only 50 out of 100 pod(s)" in lines[3]


def test_same_input_same_output(capsys: pytest.CaptureFixture[str]) -> None:
    args = ("-f", str(DEADLOCK / "cluster.yaml"), "-f", str(DEADLOCK / "jobs.yaml"), "-o", "yaml")
    first = simulate(capsys, *args)
    assert first == simulate(capsys, *args)
    assert yaml.safe_load(first[1])["kind"] == "List"


@dataclass(frozen=True)
class RealisticNodes:
    """1,000 generated nodes: the listing and the YAML file holding it."""
    listing: dict[str, Any]
    path: Path


@pytest.fixture(scope="module")
def thousand_nodes(tmp_path_factory: pytest.TempPathFactory) -> RealisticNodes:
    """Written once per module: dumping 1,000 nodes to YAML takes about a second."""
    listing = node_list(1000)
    path = tmp_path_factory.mktemp("realistic") / "nodes.yaml"
    path.write_text(yaml.dump(listing, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper)), encoding="utf-8")
    return RealisticNodes(listing, path)


def test_thousand_realistic_nodes_with_the_samples(capsys: pytest.CaptureFixture[str],
                                                   thousand_nodes: RealisticNodes) -> None:
    nodes, listing = thousand_nodes.path, thousand_nodes.listing
    wls = workloads_of(capsys, nodes, SAMPLES)
    by_node = {n["metadata"]["name"]: n for n in listing["items"]}
    admitted = [w for w in wls.values() if condition(w, "Admitted")]
    assert admitted, "the samples' small Jobs fit on 1,000 nodes"
    for wl in admitted:
        for psa in wl["status"]["admission"]["podSetAssignments"]:
            for sl in (label_slices(psa["topologyAssignment"]) if "topologyAssignment" in psa else []):
                host = sl["nodeLabels"].get("kubernetes.io/hostname")
                if host is not None:  # hostname-level slices name Ready, schedulable nodes only
                    node = by_node[host]
                    assert not node["spec"].get("unschedulable")
                    assert {"type": "Ready", "status": "True"}.items() <= \
                        next(cd for cd in node["status"]["conditions"] if cd["type"] == "Ready").items()
    for wl in wls.values():
        if not condition(wl, "Admitted"):
            waiting = condition(wl, "QuotaReserved")
            assert waiting is not None and waiting["status"] == "False" and waiting["message"]


def queued_documents(path: Path) -> list[dict[str, Any]]:
    """The Workloads and queue-labelled Jobs of a YAML file: each becomes one simulated Workload."""
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    return [d for d in docs if d["kind"] == c.KIND_WORKLOAD or
            (d["kind"] == "Job" and c.LABEL_QUEUE_NAME in d["metadata"].get("labels", {}))]


def test_every_sample_alone_is_valid_and_simulates(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = simulate(capsys, "-f", str(SAMPLES))
    assert code == 0, err
    assert "error" not in err
    queued = [d for p in SAMPLES.glob("*.yaml") for d in queued_documents(p)]
    assert queued, "the samples hold Jobs and Workloads"
    assert len(out.splitlines()) == 1 + len(queued)
    assert err == ""


INVALID = """\
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: bad}
spec:
  queueingStrategy: Sometimes
---
apiVersion: v1
kind: List
items:
- apiVersion: kueue.x-k8s.io/v1beta1
  kind: LocalQueue
  metadata: {name: lq, namespace: default}
  spec: {}
"""


def test_invalid_objects_give_every_error_with_file_document_and_path(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(INVALID, encoding="utf-8")
    code, out, err = simulate(capsys, "-f", str(path))
    assert code == 2
    assert out == ""
    assert f"error: {path}:1: spec.queueingStrategy" in err
    assert f"error: {path}:2: items[0].spec.clusterQueue" in err


def test_a_kind_tasq_does_not_read_is_skipped_with_a_warning_and_the_simulation_runs(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    text = ((DEADLOCK / "cluster.yaml").read_text() + "---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\n"
            "---\napiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: ConfigMap, metadata: {name: y}}\n")
    monkeypatch.setattr("sys.stdin", io.StringIO(text))
    code, out, err = simulate(capsys, "-f", "-", "-f", str(DEADLOCK / "jobs.yaml"))
    assert code == 0
    assert err.splitlines() == [
        "warning: <stdin>:6: skipped: tasq does not read this kind (apps/v1 Deployment)",
        "warning: <stdin>:7: items[0]: skipped: tasq does not read this kind (v1 ConfigMap)"]
    assert "job-job-a-b5c0b" in out  # the Workloads were still simulated


def test_json_output_lists_the_skipped_documents(capsys: pytest.CaptureFixture[str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\n"))
    code, out, err = simulate(capsys, "-f", str(DEADLOCK / "cluster.yaml"), "-f", "-", "-o", "json")
    assert code == 0
    assert json.loads(out)["warnings"] == [{"file": "<stdin>", "document": 1, "apiVersion": "apps/v1",
                                            "kind": "Deployment", "message": "skipped: tasq does not read this kind"}]
    assert err == "warning: <stdin>:1: skipped: tasq does not read this kind (apps/v1 Deployment)\n"


def test_json_output_has_no_warnings_when_nothing_was_skipped(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = simulate(capsys, "-f", str(DEADLOCK / "cluster.yaml"), "-o", "json")
    assert code == 0 and "warnings" not in json.loads(out)


NULL_ITEMS = """\
apiVersion: v1
kind: Pod
metadata: {name: affine, namespace: team}
spec:
  containers: [{name: c, image: x}]
  affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [null]}}}
---
apiVersion: batch/v1
kind: Job
metadata: {name: done, namespace: team, labels: {kueue.x-k8s.io/queue-name: ml}}
spec:
  template: {spec: {restartPolicy: Never, containers: [{name: c, image: x}]}}
status:
  conditions: [null]
"""


def test_a_null_selector_term_or_job_condition_is_an_empty_one_as_kube_apiserver_stores_it(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """kube-apiserver accepts both (an empty term, an empty condition): the simulation runs, the Job
    is not finished, so its Workload is admitted."""
    monkeypatch.setattr("sys.stdin", io.StringIO(NULL_ITEMS))
    code, out, err = simulate(capsys, "-f", str(DEADLOCK / "cluster.yaml"), "-f", "-", "-o", "json")
    assert (code, err) == (0, "")
    [workload] = json.loads(out)["items"]
    assert condition(workload, "Admitted") is not None and condition(workload, "Finished") is None


@pytest.mark.parametrize(("text", "error"), [
    ("apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: team}\n"
     "spec: {containers: [{name: c, image: x}], schedulingGates: [null]}\n",
     'error: <stdin>:1: spec.schedulingGates[0]: Invalid value: "": name part must be non-empty'),
    ("apiVersion: batch/v1\nkind: Job\nmetadata: {name: j, namespace: team}\n"
     "spec: {template: {spec: {containers: [{name: c, image: x}]}}}\n",
     'error: <stdin>:1: spec.template.spec.restartPolicy: Required value: valid values: "OnFailure", "Never"'),
    ("apiVersion: batch/v1\nkind: Job\nmetadata: {name: j, namespace: team}\nspec: {template: {spec: "
     "{restartPolicy: Never, containers: [{name: c, image: x, resources: {requests: {nvidia.com/gpu: 1}}}]}}}\n",
     "error: <stdin>:1: spec.template.spec.containers[0].resources.limits: Required value: Limit must be set for "
     "non overcommitable resources"),
    ("apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: team}\n"
     "spec: {nodeName: n1, schedulingGates: [{name: a.io/x}], containers: [{name: c, image: x}]}\n",
     "error: <stdin>:1: spec.nodeName: Forbidden: cannot be set until all schedulingGates have been cleared"),
], ids=["null_scheduling_gate", "job_without_restart_policy", "gpu_request_without_limit", "node_name_and_gates"])
def test_what_kube_apiserver_refuses_exits_2_with_its_field_path(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, text: str, error: str) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(text))
    code, out, err = simulate(capsys, "-f", str(DEADLOCK / "cluster.yaml"), "-f", "-")
    assert (code, out) == (2, "")
    assert err.splitlines() == [error, "1 error(s); nothing simulated"]


def test_an_unknown_kind_in_tasqs_group_is_an_error(capsys: pytest.CaptureFixture[str],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("apiVersion: kueue.x-k8s.io/v1beta1\nkind: AdmissionCheck\n"
                                                 "metadata: {name: y}\n"))
    code, out, err = simulate(capsys, "-f", "-")
    assert (code, out) == (2, "")
    assert 'error: <stdin>:1: kind: Unsupported value: "AdmissionCheck"' in err


def test_unreadable_input_is_an_error(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("a: [unclosed\n", encoding="utf-8")
    code, out, err = simulate(capsys, "-f", str(path))
    assert (code, out) == (2, "")
    assert f"error: {path}: not YAML or JSON" in err


A100_QUEUE = """\
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: a100}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: cq}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - name: a100
      resources: [{name: nvidia.com/gpu, nominalQuota: "8"}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: lq, namespace: default}
spec: {clusterQueue: cq}
"""
"""A flavor `a100`, ClusterQueue `cq` with 8 GPUs and LocalQueue `lq`, without topology."""

ALREADY_ADMITTED = A100_QUEUE + """\
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: Workload
metadata: {name: running, namespace: default, creationTimestamp: "2025-12-31T00:00:00Z"}
spec:
  queueName: lq
  podSets:
  - name: main
    count: 6
    template:
      spec:
        containers: [{name: c, image: x, resources: {requests: {nvidia.com/gpu: "1"}}}]
status:
  admission:
    clusterQueue: cq
    podSetAssignments:
    - {name: main, count: 6, flavors: {nvidia.com/gpu: a100}, resourceUsage: {nvidia.com/gpu: "6"}}
  conditions:
  - {type: QuotaReserved, status: "True", reason: QuotaReserved, message: Quota reserved in ClusterQueue cq,
     lastTransitionTime: "2025-12-31T00:00:01Z"}
---
apiVersion: batch/v1
kind: Job
metadata:
  name: new
  namespace: default
  labels: {kueue.x-k8s.io/queue-name: lq}
spec:
  parallelism: 4
  template:
    spec:
      restartPolicy: Never
      containers: [{name: c, image: x, resources: {requests: {nvidia.com/gpu: "1"}, limits: {nvidia.com/gpu: "1"}}}]
"""


def test_workloads_admitted_before_the_simulation_keep_their_quota(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "live.yaml"
    path.write_text(ALREADY_ADMITTED, encoding="utf-8")
    wls = workloads_of(capsys, path)
    assert wls["running"]["status"]["admission"]["clusterQueue"] == "cq"
    [new] = [w for name, w in wls.items() if name.startswith("job-new-")]
    waiting = condition(new, "QuotaReserved")
    assert waiting is not None and waiting["status"] == "False"
    assert "requests 4, available 2 (nominal 8, used 6)" in waiting["message"]


def test_a_workload_given_for_a_job_stands_for_it(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    job_a = yaml.safe_load_all((DEADLOCK / "jobs.yaml").read_text())
    template = next(iter(job_a))["spec"]["template"]
    workload = {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Workload",
                "metadata": {"name": "wl-for-job-a", "namespace": "team", "creationTimestamp": "2026-01-01T00:00:00Z",
                             "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "job-a",
                                                  "uid": "u", "controller": True}]},
                "spec": {"queueName": "ml", "podSets": [{"name": "main", "count": 100, "template": template}]}}
    path = tmp_path / "jobs-and-workload.yaml"
    path.write_text((DEADLOCK / "jobs.yaml").read_text() + "---\n" + yaml.safe_dump(workload), encoding="utf-8")
    wls = workloads_of(capsys, DEADLOCK / "cluster.yaml", path)
    assert sorted(wls) == ["job-job-b-423dd", "wl-for-job-a"]
    assert condition(wls["wl-for-job-a"], "Admitted") is not None
    # When its Job completes, the given Workload finishes (as Kueue's job reconciler marks it) and
    # gives its quota and nodes to job-b.
    wls = workloads_of(capsys, DEADLOCK / "cluster.yaml", path, DEADLOCK / "job-a-complete.yaml")
    finished = condition(wls["wl-for-job-a"], "Finished")
    assert finished is not None and (finished["status"], finished["reason"]) == ("True", "Succeeded")
    admitted = condition(wls["job-job-b-423dd"], "Admitted")
    assert admitted is not None and admitted["status"] == "True"


def test_json_input_as_kubectl_get_prints_it(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    objects = [d for d in yaml.safe_load_all((DEADLOCK / "cluster.yaml").read_text()) if d]
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}, indent=2), encoding="utf-8")
    from_json = workloads_of(capsys, path, DEADLOCK / "jobs.yaml")
    from_yaml = workloads_of(capsys, DEADLOCK / "cluster.yaml", DEADLOCK / "jobs.yaml")
    assert from_json == from_yaml


GPU_NODES = SAMPLES.parent / "simulate" / "gpu-nodes.yaml"
CLUSTER_SAMPLES = sorted(p for p in SAMPLES.glob("*.yaml")
                         if any(d and d.get("kind") in ("Topology", "ResourceFlavor", "ClusterQueue", "LocalQueue")
                                for d in yaml.safe_load_all(p.read_text())))
WORKLOAD_SAMPLES = sorted(p for p in SAMPLES.glob("*.yaml")
                          if any(d and d.get("kind") in ("Job", "Workload") for d in yaml.safe_load_all(p.read_text())))


@pytest.mark.parametrize("sample", WORKLOAD_SAMPLES, ids=lambda p: p.name)
def test_each_sample_job_alone_is_admitted_on_the_sample_fleet(capsys: pytest.CaptureFixture[str],
                                                               sample: Path) -> None:
    wls = workloads_of(capsys, GPU_NODES, *CLUSTER_SAMPLES, sample)
    assert wls and len(wls) == len(queued_documents(sample))  # one Workload per queued Job or Workload
    for name, wl in wls.items():
        admitted = condition(wl, "Admitted")
        assert admitted is not None and admitted["status"] == "True", (name, condition(wl, "QuotaReserved"))


INVALID_CORE = """\
apiVersion: v1
kind: Node
metadata: {name: n1}
spec: {taints: [{key: gpu, effect: Sometimes}]}
status: {allocatable: {cpu: lots, nvidia.com/gpu: "8"}}
---
apiVersion: v1
kind: Pod
metadata: {name: p, namespace: default}
spec: {nodeName: n1, containers: [{name: c, image: x, resources: {requests: {cpu: 1x}}}]}
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high}
"""


def test_invalid_nodes_pods_and_priority_classes_are_errors_not_crashes(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "core.yaml"
    path.write_text(INVALID_CORE, encoding="utf-8")
    code, out, err = simulate(capsys, "-f", str(path))
    assert (code, out) == (2, "")
    assert [line.split(": ")[2] for line in err.splitlines() if line.startswith("error: ")] == [
        "status.allocatable[cpu]", "spec.taints[0].effect", "spec.containers[0].resources.requests[cpu]", "value"]
    assert err.splitlines()[-1] == "4 error(s); nothing simulated"


def test_nodes_added_in_a_later_step_admit_the_waiting_gang(capsys: pytest.CaptureFixture[str],
                                                            tmp_path: Path) -> None:
    """50 GPUs are free after job-a; a third rack of 7 x 8 GPUs makes room for job-b's 100 pods."""
    nodes = [{"apiVersion": "v1", "kind": "Node",
              "metadata": {"name": f"gpu-r3-{i}", "labels": {"kubernetes.io/hostname": f"gpu-r3-{i}",
                                                             "cloud.com/block": "b1", "cloud.com/rack": "r3",
                                                             "pool": "gpu"}},
              "status": {"allocatable": {"cpu": "95500m", "pods": "110", "nvidia.com/gpu": "8"},
                         "conditions": [{"type": "Ready", "status": "True"}]}} for i in range(7)]
    path = tmp_path / "more-nodes.yaml"
    path.write_text(yaml.safe_dump_all(nodes), encoding="utf-8")
    wls = workloads_of(capsys, DEADLOCK / "cluster.yaml", DEADLOCK / "jobs.yaml", path)
    first, second = wls["job-job-a-b5c0b"], wls["job-job-b-423dd"]
    assert condition(first, "Admitted") is not None and condition(first, "Finished") is None
    admitted = condition(second, "Admitted")
    assert admitted is not None and admitted["status"] == "True"
    [assignment] = second["status"]["admission"]["podSetAssignments"]
    racks: dict[str, int] = {}
    for sl in label_slices(assignment["topologyAssignment"]):
        rack = sl["nodeLabels"]["cloud.com/rack"]
        racks[rack] = racks.get(rack, 0) + sl["count"]
    # r1 is full with job-a; the 100 pods share the 50 free in r2 and the 56 of the new rack r3.
    assert sorted(racks) == ["r2", "r3"] and sum(racks.values()) == 100
    assert racks["r2"] <= 50 and racks["r3"] <= 56


TOO_WIDE_FOR_A_RACK = """\
apiVersion: batch/v1
kind: Job
metadata:
  name: too-wide
  namespace: default
  labels: {kueue.x-k8s.io/queue-name: training}
  annotations: {kueue.x-k8s.io/require-topology: cloud.provider.com/topology-rack}
spec:
  parallelism: 17
  template:
    spec:
      restartPolicy: Never
      containers:
      - {name: c, image: x, resources: {requests: {cpu: "1", memory: 130Gi, nvidia.com/gpu: "1"}, limits: {nvidia.com/gpu: "1"}}}
"""


def test_thousand_realistic_nodes_the_waiting_message_matches_a_count_of_usable_nodes(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, thousand_nodes: RealisticNodes) -> None:
    """17 pods of 130Gi (one per node) required in one rack wait; the message's numbers match an
    oracle over the generated nodes: the flavor's nodes = labelled h100 ("Total nodes"); usable =
    those Ready, schedulable, not tainted broken."""
    nodes, listing = thousand_nodes.path, thousand_nodes.listing
    job = tmp_path / "job.yaml"
    job.write_text(TOO_WIDE_FOR_A_RACK, encoding="utf-8")
    per_rack: dict[tuple[str, str], int] = {}
    h100 = [node for node in listing["items"] if node["metadata"]["labels"].get("cloud.provider.com/gpu") == "h100"]
    for node in h100:
        labels, spec = node["metadata"]["labels"], node["spec"]
        ready = any(cd["type"] == "Ready" and cd["status"] == "True" for cd in node["status"]["conditions"])
        broken = any(t["key"] == "gpu" for t in spec.get("taints", []))
        if ready and not spec.get("unschedulable") and not broken:
            rack = (labels["cloud.provider.com/topology-block"], labels["cloud.provider.com/topology-rack"])
            per_rack[rack] = per_rack.get(rack, 0) + 1
    best = max(sorted(per_rack), key=lambda rack: per_rack[rack])
    wls = workloads_of(capsys, nodes, *CLUSTER_SAMPLES, job)
    [waiting] = [w for name, w in wls.items() if name.startswith("job-too-wide-")]
    reserved = condition(waiting, "QuotaReserved")
    assert reserved is not None and reserved["status"] == "False"
    message = reserved["message"]
    assert (f'allows to fit only {per_rack[best]} out of 17 pod(s) at level "cloud.provider.com/topology-rack" '
            f"(best: {best[0]}/{best[1]}). Total nodes: {len(h100)};") in message
    # a100 and CPU nodes are not the h100 flavor's: neither counted nor listed as excluded.
    assert len(h100) < len(listing["items"])
    assert 'missing label "cloud.provider.com/gpu' not in message
    assert f"free on {sum(per_rack.values())} candidate node(s)" in message


PRIORITY_CLASSES = """\
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: batch-default}
value: 10
globalDefault: true
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: urgent}
value: 1000
---
""" + A100_QUEUE


def test_priority_classes_order_jobs_and_the_global_default_applies(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """The older Job gets the globalDefault class (10); the younger `urgent` one (1000) goes first."""
    cluster, jobs = tmp_path / "cluster.yaml", tmp_path / "jobs.yaml"
    cluster.write_text(PRIORITY_CLASSES, encoding="utf-8")
    older = make_job("older").queue("lq").requests({"nvidia.com/gpu": "8"}).created("2026-01-01T00:00:00Z")
    younger = (make_job("younger").queue("lq").requests({"nvidia.com/gpu": "8"})
               .priority(class_name="urgent").created("2026-01-01T00:00:05Z"))
    jobs.write_text(yaml.safe_dump_all([older.obj(), younger.obj()]), encoding="utf-8")
    wls = {name.rsplit("-", 1)[0]: w for name, w in workloads_of(capsys, cluster, jobs).items()}
    assert (wls["job-older"]["spec"]["priority"], wls["job-younger"]["spec"]["priority"]) == (10, 1000)
    assert wls["job-younger"]["spec"]["priorityClassRef"] == {"group": "scheduling.k8s.io", "kind": "PriorityClass",
                                                              "name": "urgent"}
    assert condition(wls["job-younger"], "Admitted") is not None
    waiting = condition(wls["job-older"], "QuotaReserved")
    assert waiting is not None and waiting["status"] == "False"
    assert "requests 8, available 0 (nominal 8, used 8)" in waiting["message"]


# Two racks without a host level, so a Workload's slices name racks, never nodes:
#
#                b1
#            /        \
#          r1          r2
#        /    \      /    \
#     n1(4)  n2(4) n3(4)  n4(4)      (GPUs per node)
BLOCK, RACK, GPU = "cloud.com/block", "cloud.com/rack", "nvidia.com/gpu"
R1 = {BLOCK: "b1", RACK: "r1"}


def rack_cluster() -> list[dict[str, Any]]:
    nodes = [make_node(f"n{i}").labels({BLOCK: "b1", RACK: "r1" if i <= 2 else "r2"}).allocatable({GPU: 4}).build()
             for i in range(1, 5)]
    return [*nodes, make_topology("racks", BLOCK, RACK).obj(),
            make_flavor("gpu").node_labels({BLOCK: "b1"}).topology_name("racks").obj(),
            make_cluster_queue("cq").flavor("gpu", {GPU: 100}).obj(), make_local_queue("lq", "cq").obj()]


@dataclass
class HeldCase:
    name: str
    bound: int
    """Pods of the admitted Workload bound in r1, and given in the input."""
    job_pods: int
    want_rack: str


HELD_CASES = [
    HeldCase("6 pods admitted in r1 hold 6 of its 8 GPUs: a 4-pod Job needs r2", 0, 4, want_rack="r2"),
    HeldCase("with none bound, the 2 GPUs r1 has left fit a 2-pod Job (BestFit)", 0, 2, want_rack="r1"),
    HeldCase("2 of its pods bound in r1 are part of the 6, not added to them", 2, 2, want_rack="r1"),
    HeldCase("all 6 bound: nothing more is held, r1 keeps 2", 6, 2, want_rack="r1"),
]


@pytest.mark.parametrize("case", HELD_CASES, ids=lambda case: case.name)
def test_a_workload_admitted_to_a_rack_before_the_simulation_holds_that_racks_nodes(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, case: HeldCase) -> None:
    running = make_workload("running").queue("lq").created("2025-12-31T00:00:00Z") \
        .pod_set("main", 6, {GPU: 1}, required=RACK) \
        .admitted("cq").assignment("main", 6, (R1, 6), cluster_queue="cq", flavors={GPU: "gpu"},
                                   resourceUsage={GPU: "6"}).obj()
    bound = [make_pod(f"running-{i}").annotation(c.ANNOTATION_TOPOLOGY_WORKLOAD, "running")
             .annotation(c.ANNOTATION_TOPOLOGY_PODSET, "main").requests({GPU: 1}).on(f"n{1 + i % 2}").build()
             for i in range(case.bound)]
    first, later = tmp_path / "cluster.yaml", tmp_path / "job.yaml"
    first.write_text(yaml.safe_dump_all([*rack_cluster(), running, *bound]), encoding="utf-8")
    # The Job comes in a later step: the held nodes outlive the step that restored them.
    job = make_job("new").queue("lq").parallelism(case.job_pods).requests({GPU: 1}) \
        .annotate(c.ANNOTATION_REQUIRE_TOPOLOGY, RACK).obj()
    later.write_text(yaml.safe_dump(job), encoding="utf-8")
    wls = workloads_of(capsys, first, later)
    [new] = [w for name, w in wls.items() if name.startswith("job-new-")]
    admitted = condition(new, "Admitted")
    assert admitted is not None and admitted["status"] == "True", condition(new, "QuotaReserved")
    [psa] = new["status"]["admission"]["podSetAssignments"]
    assert {sl["nodeLabels"][RACK] for sl in label_slices(psa["topologyAssignment"])} == {case.want_rack}


@dataclass
class JobChangeCase:
    name: str
    first_parallelism: int
    then_parallelism: int
    want_count: int
    """The Workload's pod count after the second step (spec and, when admitted, admission)."""
    want_admitted: bool


JOB_CHANGE_CASES = [
    JobChangeCase("too wide for a rack, then narrowed while waiting: rebuilt and admitted", 10, 6,
                  want_count=6, want_admitted=True),
    JobChangeCase("waiting, then widened further: rebuilt, still waiting with the new count", 10, 12,
                  want_count=12, want_admitted=False),
    JobChangeCase("admitted, then widened: the admission stands", 4, 6, want_count=4, want_admitted=True),
]


@pytest.mark.parametrize("case", JOB_CHANGE_CASES, ids=lambda case: case.name)
def test_a_job_changed_in_a_later_step_rebuilds_its_workload_only_while_it_waits(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, case: JobChangeCase) -> None:
    def job(parallelism: int) -> dict[str, Any]:
        return make_job("train").queue("lq").parallelism(parallelism).requests({GPU: 1}) \
            .annotate(c.ANNOTATION_REQUIRE_TOPOLOGY, RACK).obj()

    first, then = tmp_path / "first.yaml", tmp_path / "then.yaml"
    first.write_text(yaml.safe_dump_all([*rack_cluster(), job(case.first_parallelism)]), encoding="utf-8")
    then.write_text(yaml.safe_dump(job(case.then_parallelism)), encoding="utf-8")
    wls = workloads_of(capsys, first, then)
    [wl] = wls.values()
    assert wl["spec"]["podSets"][0]["count"] == case.want_count
    assert wl["metadata"]["creationTimestamp"] == "2026-01-01T00:00:01Z"  # the first step's, kept
    admitted = condition(wl, "Admitted")
    assert (admitted is not None and admitted["status"] == "True") == case.want_admitted
    if case.want_admitted:
        [psa] = wl["status"]["admission"]["podSetAssignments"]
        assert psa["count"] == case.want_count
    else:
        waiting = condition(wl, "QuotaReserved")
        assert waiting is not None and f"out of {case.want_count} pod(s)" in waiting["message"]


MIXED_VERSIONS = f"""
apiVersion: {c.API_VERSION_V1BETA1}
kind: ResourceFlavor
metadata: {{name: default-flavor}}
---
apiVersion: {c.API_VERSION_V1BETA1}
kind: ClusterQueue
metadata: {{name: cq}}
spec:
  cohort: pool
  namespaceSelector: {{}}
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{{name: default-flavor, resources: [{{name: cpu, nominalQuota: 9}}]}}]
---
apiVersion: {c.API_VERSION}
kind: LocalQueue
metadata: {{name: lq, namespace: default}}
spec: {{clusterQueue: cq}}
---
apiVersion: {c.API_VERSION_V1BETA1}
kind: Workload
metadata: {{name: w1, namespace: default}}
spec:
  queueName: lq
  priorityClassName: high
  priorityClassSource: scheduling.k8s.io/priorityclass
  priority: 10
  podSets: [{{name: main, count: 2, template: {{spec: {{containers: [{{name: c, image: i,
    resources: {{requests: {{cpu: "1"}}}}}}]}}}}}}]
"""


@pytest.mark.parametrize("flags, api_version, priority", [
    ((), c.API_VERSION, {"priorityClassRef": {"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": "high"}}),
    (("--api-version", c.API_VERSION_V1BETA1), c.API_VERSION_V1BETA1,
     {"priorityClassName": "high", "priorityClassSource": "scheduling.k8s.io/priorityclass"}),
])
def test_v1beta1_and_v1beta2_mixed_in_one_input_print_as_v1beta2_or_as_asked(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, flags: tuple[str, ...], api_version: str,
        priority: dict[str, Any]) -> None:
    path = tmp_path / "mixed.yaml"
    path.write_text(MIXED_VERSIONS)
    code, out, err = simulate(capsys, "-f", str(path), "-o", "json", *flags)
    assert code == 0, err
    (wl,) = json.loads(out)["items"]
    assert wl["apiVersion"] == api_version
    assert {k: v for k, v in wl["spec"].items() if k.startswith("priorityClass")} == priority
    assert condition(wl, "Admitted") is not None and wl["status"]["admission"]["clusterQueue"] == "cq"
    code, table, _ = simulate(capsys, "-f", str(path), *flags)
    assert code == 0 and table.splitlines()[1].split()[:4] == ["default", "w1", "lq", "cq"]


def test_errors_in_a_v1beta1_document_name_its_v1beta1_fields(capsys: pytest.CaptureFixture[str],
                                                              tmp_path: Path) -> None:
    path = tmp_path / "mixed.yaml"
    path.write_text(MIXED_VERSIONS.replace("cohort: pool", "cohort: Pool").replace("  priority: 10\n", ""))
    code, out, err = simulate(capsys, "-f", str(path))
    assert code == 2 and out == ""
    assert err.splitlines()[0].startswith(f"error: {path}:2: spec.cohort: Invalid value: \"Pool\"")
    assert err.splitlines()[1] == (f"error: {path}:4: spec.priority: Required value: priority should not be nil "
                                   "when priorityClassName is set")


def test_a_field_of_the_other_version_is_an_unknown_field(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "mixed.yaml"
    path.write_text(MIXED_VERSIONS.replace(f"apiVersion: {c.API_VERSION_V1BETA1}\nkind: ClusterQueue",
                                           f"apiVersion: {c.API_VERSION}\nkind: ClusterQueue"))
    code, _, err = simulate(capsys, "-f", str(path))
    assert code == 2
    assert err.splitlines()[0] == f'error: {path}:2: spec.cohort: unknown field "cohort"'


def test_a_workload_that_cannot_be_printed_in_the_version_asked_for_exits_1_printing_nothing(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "mixed.yaml"
    path.write_text(MIXED_VERSIONS)
    failure = ConversionFailure(c.KIND_WORKLOAD, "default", "w1", "status.admission", "cannot be held in v1beta1")
    monkeypatch.setattr(simulate_command, "convert", lambda obj, version: failure)
    code, out, err = simulate(capsys, "-f", str(path), "-o", "json", "--api-version", c.API_VERSION_V1BETA1)
    assert (code, out) == (1, "")
    assert err == (f"error: cannot print as {c.API_VERSION_V1BETA1}: Workload default/w1: status.admission: "
                   "cannot be held in v1beta1\n")


def test_pending_rows_show_their_reason_and_explain_names_the_fix(capsys: pytest.CaptureFixture[str]) -> None:
    files = ("-f", str(DEADLOCK / "cluster.yaml"), "-f", str(DATA / "misconfigured" / "jobs.yaml"))
    code, out, err = simulate(capsys, *files)
    assert code == 0
    rows = {line.split()[1]: line.split()[2:] for line in out.splitlines()[1:]}
    assert rows == {"job-no-nodes-56874": ["next", "PodSetTopologyUnfit"],
                    "job-too-big-6b12c": ["ml", "PodSetTopologyUnfit"]}
    assert err == ""
    code, out, _ = simulate(capsys, *files, "--explain")
    why = dict(line.split(": PodSetTopologyUnfit: ") for line in out.splitlines()[3:])
    assert why["team/job-no-nodes-56874"] == (
        'couldn\'t assign flavors to pod set "main": flavor "h200": no node carries flavor "h200"\'s nodeLabels '
        "pool=h200 (label the nodes, or fix the flavor; kubectl get nodes -l pool=h200)")
    assert why["team/job-too-big-6b12c"].startswith(
        'couldn\'t assign flavors to pod set "main": flavor "gpu": can never fit: the largest rack has 80 '
        'nvidia.com/gpu, pod set "main" needs 90; topology "dc" allows to fit only 80 out of 90 pod(s)')


def test_the_quota_reserved_condition_carries_the_messages_that_name_the_fix(
        capsys: pytest.CaptureFixture[str]) -> None:
    wls = workloads_of(capsys, DEADLOCK / "cluster.yaml", DATA / "misconfigured" / "jobs.yaml")
    no_nodes = condition(wls["job-no-nodes-56874"], "QuotaReserved")
    too_big = condition(wls["job-too-big-6b12c"], "QuotaReserved")
    assert no_nodes is not None and no_nodes["status"] == "False"
    assert 'no node carries flavor "h200"\'s nodeLabels pool=h200' in no_nodes["message"]
    assert too_big is not None and too_big["status"] == "False"
    assert 'can never fit: the largest rack has 80 nvidia.com/gpu, pod set "main" needs 90' in too_big["message"]
