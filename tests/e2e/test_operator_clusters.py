"""The operator's flow end to end on either control plane: `tasq run --local-webhooks` as a process,
only the real kubectl to drive and observe it. Runs unchanged on the devcluster and `--cluster=real`.

Nodes (as `hack/realcluster/up` makes them; the devcluster gets the same from its node helpers),
8 GPUs each, 256 in all:

    b1: b1-r1 [gpu-b1-r1-n1..n4]  b1-r2 [..]  b1-r3 [..]  b1-r4 [..]
    b2: b2-r1 [gpu-b2-r1-n1..n4]  b2-r2 [..]  b2-r3 [..]  b2-r4 [..]

A rack holds 32 GPUs, a block 128. Each test has its own ClusterQueue over the flavor `pool` (every
node, labelled here with a test label because a flavor with a topology needs a nodeLabel).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from controller.api import constants as c
from devcluster.simulated.nodes import parse_shape, topology_nodes
from tests.builders.kueue import label_slices
from tests.e2e.conftest import KUBECTL, Kubectl, install_operator_cluster, wait_for

pytestmark = pytest.mark.e2e

TASQ = Path(sys.executable).parent / "tasq"
BLOCK, RACK, HOST = "cloud.provider.com/topology-block", "cloud.provider.com/topology-rack", "kubernetes.io/hostname"
POOL = "e2e.tasq.io/pool"
LEASE_NAMESPACE = "tasq-e2e"
GPU = "nvidia.com/gpu"



def rack_topology(flavor: str, pool: str) -> str:
    """The Topology `racks` (block > rack > host) and the ResourceFlavor `flavor` over it, of the nodes
    labelled `pool`=gpu (a flavor with a topology needs a nodeLabel); the operator modules' set-up."""
    return f"""
apiVersion: kueue.x-k8s.io/v1alpha1
kind: Topology
metadata: {{name: racks}}
spec:
  levels: [{{nodeLabel: {BLOCK}}}, {{nodeLabel: {RACK}}}, {{nodeLabel: {HOST}}}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {{name: {flavor}}}
spec: {{nodeLabels: {{{pool}: gpu}}, topologyName: racks}}
"""


SETUP = rack_topology("pool", POOL)


def cluster_queue(name: str, gpus: int) -> str:
    return f"""
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {{name: {name}}}
spec:
  namespaceSelector: {{}}
  resourceGroups:
  - coveredResources: [{GPU}]
    flavors:
    - name: pool
      resources: [{{name: {GPU}, nominalQuota: "{gpus}"}}]
"""


def local_queue(namespace: str, cq: str) -> str:
    return f"""
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {{name: lq, namespace: {namespace}}}
spec: {{clusterQueue: {cq}}}
"""


def job(name: str, namespace: str, pods: int, gpus: int, run_seconds: int, annotations: dict[str, str]) -> str:
    """An Indexed Job of `pods` pods of `gpus` GPUs each, queued on `lq`, not suspended by its author."""
    return json.dumps({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": {c.LABEL_QUEUE_NAME: "lq"},
                     "annotations": annotations},
        "spec": {"parallelism": pods, "completions": pods, "completionMode": "Indexed", "template": {
            "metadata": {"annotations": {c.ANNOTATION_DEVCLUSTER_RUN_SECONDS: str(run_seconds)}},
            "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 0, "containers": [{
                "name": "main", "image": "registry.example/trainer:1",
                "resources": {"requests": {GPU: str(gpus)}, "limits": {GPU: str(gpus)}}}]}}},
    })


def get(kubectl: Kubectl, *args: str) -> Any:
    return json.loads(kubectl("get", *args, "-o", "json").stdout)


def condition(obj: dict[str, Any] | None, kind: str) -> dict[str, Any] | None:
    for cond in ((obj or {}).get("status") or {}).get("conditions") or []:
        if cond["type"] == kind:
            return dict(cond)
    return None


def workload_of(kubectl: Kubectl, namespace: str, job_name: str) -> dict[str, Any] | None:
    for wl in get(kubectl, "workloads", "-n", namespace)["items"]:
        if any(ref["kind"] == "Job" and ref["name"] == job_name for ref in wl["metadata"].get("ownerReferences", [])):
            return dict(wl)
    return None


def admitted(kubectl: Kubectl, namespace: str, job_name: str) -> dict[str, Any] | None:
    wl = workload_of(kubectl, namespace, job_name)
    cond = condition(wl, "Admitted")
    return wl if cond and cond["status"] == "True" else None


def job_complete(kubectl: Kubectl, namespace: str, name: str) -> bool:
    cond = condition(get(kubectl, "job", name, "-n", namespace), "Complete")
    return bool(cond and cond["status"] == "True")


def pods_of(kubectl: Kubectl, namespace: str, job_name: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = get(kubectl, "pods", "-n", namespace, "-l", f"{c.LABEL_JOB_NAME}={job_name}")["items"]
    return items


def gpu_usage(cq: dict[str, Any]) -> str:
    status = cq.get("status") or {}
    for flavor in status.get("flavorsUsage") or []:
        for res in flavor["resources"]:
            if res["name"] == GPU:
                return str(res["total"])
    return "missing"


class PodWatch:
    """`kubectl get pods -w --output-watch-events` over a namespace: the first version seen of each pod
    is the one the API server stored at create (after the admission webhooks)."""

    def __init__(self, kubectl: Kubectl, namespace: str, out: Path) -> None:
        self.out, self.restarts = out, 0
        self.command = [str(KUBECTL), "--kubeconfig", str(kubectl.kubeconfig), "get", "pods", "-n", namespace, "-w",
                        "--output-watch-events", "-o", "json"]
        self.proc = subprocess.Popen(self.command, stdout=out.open("w"), stderr=subprocess.STDOUT)

    def first_versions(self) -> dict[str, dict[str, Any]]:
        """Pod name -> the first version of it the watch delivered so far. kubectl ends when the API
        server closes its watch (it drops a watcher that falls behind, as a starved kubectl on a
        loaded machine is): it is started again, and its listing delivers every pod still there. A
        pod deleted meanwhile is then missed, and a pod's first version may be a later one (a check
        that it was stored gated gets stricter, not weaker)."""
        if self.proc.poll() is not None:
            self.restarts += 1
            self.proc = subprocess.Popen(self.command, stdout=self.out.open("a"), stderr=subprocess.STDOUT)
        text, decoder, pos = self.out.read_text(), json.JSONDecoder(), 0
        first: dict[str, dict[str, Any]] = {}
        while True:
            while pos < len(text) and text[pos].isspace():
                pos += 1
            if pos >= len(text):
                break
            try:
                event, pos = decoder.raw_decode(text, pos)
            except json.JSONDecodeError:
                break  # an event kubectl is still writing
            first.setdefault(event["object"]["metadata"]["name"], event["object"])
        return first

    def stop(self, pods: int) -> dict[str, dict[str, Any]]:
        """Once the watch delivered `pods` pods (kubectl may lag behind the server on a loaded
        machine), ends it; their first versions."""
        try:
            return dict(wait_for(lambda: (seen := self.first_versions()) and len(seen) >= pods and seen, 60,
                                 f"the watch to deliver {pods} pods"))
        finally:
            self.close()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)


class Process:
    """`tasq run` against the cluster, its output in `log`."""

    def __init__(self, kubeconfig: Path, log: Path, extra: Sequence[str] = ()) -> None:
        self.log = log
        self.proc = subprocess.Popen(
            [str(TASQ), "run", "--kubeconfig", str(kubeconfig), "--local-webhooks", "--metrics-port", "-1",
             "--probe-port", "-1", "--lease-namespace", LEASE_NAMESPACE, "--identity", "e2e", "-v", *extra],
            stdout=log.open("w"), stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"})

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait(10)

    def tail(self) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-60:])


@contextmanager
def leading_tasq(kubeconfig: Path, kubectl: Kubectl, workdir: Path, extra: Sequence[str] = ()) -> Iterator[Process]:
    """A `tasq run --local-webhooks` (its log in `workdir`, `extra` flags added) once it leads and
    its webhooks are registered; on exit it must stop cleanly (its output in the failure otherwise)."""
    kubectl("create", "namespace", LEASE_NAMESPACE)
    proc = Process(kubeconfig, workdir / "tasq.log", extra)
    try:
        wait_for(lambda: kubectl("get", "mutatingwebhookconfigurations", "-o", "name").stdout.strip(), 60,
                 "webhooks registered")
        wait_for(lambda: kubectl("get", "lease", "-n", LEASE_NAMESPACE, "-o", "name").stdout.strip(), 60,
                 "the Lease taken")
    except AssertionError as e:
        proc.stop()
        raise AssertionError(f"{e}\n{proc.tail()}") from None
    yield proc
    code = proc.stop()
    assert code == 0, f"tasq run exited {code}:\n{proc.tail()}"


@pytest.fixture(scope="module")
def installed(request: pytest.FixtureRequest, cluster: str, kubectl: Kubectl) -> Iterator[None]:
    """CRDs, the 32 GPU nodes (`hack/realcluster/up` made them on the real control plane), the
    topology and the flavor, every node in the flavor's pool."""
    nodes = [] if cluster == "real" else topology_nodes(parse_shape("2x4x4x8"), "gpu-")
    close = install_operator_cluster(request, cluster, kubectl, nodes, SETUP)
    kubectl("label", "nodes", "--all", "--overwrite", f"{POOL}=gpu")
    yield
    close()


@pytest.fixture(scope="module")
def tasq(installed: None, kubeconfig: Path, kubectl: Kubectl,
         tmp_path_factory: pytest.TempPathFactory) -> Iterator[Process]:
    """One `tasq run --local-webhooks` for the module, leading, its webhooks registered."""
    with leading_tasq(kubeconfig, kubectl, tmp_path_factory.mktemp("tasq")) as proc:
        yield proc
    assert kubectl("get", "mutatingwebhookconfigurations", "-o", "name").stdout.strip() == ""


def check_placement(kubectl: Kubectl, pods: list[dict[str, Any]], wl: dict[str, Any]) -> set[str]:
    """Every pod ungated with its slice's nodeSelector and bound onto a node of that slice, each slice
    holding exactly its count; the racks used."""
    (psa,) = wl["status"]["admission"]["podSetAssignments"]
    slices = label_slices(psa["topologyAssignment"])
    nodes = {n["metadata"]["name"]: n["metadata"]["labels"] for n in get(kubectl, "nodes")["items"]}
    placed = [0] * len(slices)
    for pod in pods:
        assert not pod["spec"].get("schedulingGates"), pod["metadata"]["name"]
        labels = nodes[pod["spec"]["nodeName"]]
        matching = [i for i, sl in enumerate(slices) if all(labels.get(k) == v for k, v in sl["nodeLabels"].items())]
        assert len(matching) == 1, (pod["metadata"]["name"], pod["spec"]["nodeName"], slices)
        # the ungater's patch: the slice's labels as the pod's nodeSelector
        selector = pod["spec"].get("nodeSelector") or {}
        assert slices[matching[0]]["nodeLabels"].items() <= selector.items(), (pod["metadata"]["name"], selector)
        placed[matching[0]] += 1
    assert placed == [sl["count"] for sl in slices], slices
    return {nodes[p["spec"]["nodeName"]][RACK] for p in pods}


def test_require_rack_runs_in_one_rack_and_prefer_rack_waits_for_quota_then_falls_back_to_a_block(
        tasq: Process, kubectl: Kubectl, namespace: str, tmp_path: Path) -> None:
    # 64 GPUs of quota: "rack" (6 pods x 4 GPUs, one rack of 32) runs first; "wide" (6 x 8 = 48 GPUs,
    # more than a rack) waits on quota, then takes 2 racks of one block.
    kubectl("apply", "-f", "-", stdin=cluster_queue("racks", 64))
    kubectl("apply", "-f", "-", stdin=local_queue(namespace, "racks"))
    watch = PodWatch(kubectl, namespace, tmp_path / "watch.json")
    try:
        created = json.loads(kubectl("create", "-f", "-", "-o", "json", stdin=job(
            "rack", namespace, 6, 4, 5, {c.ANNOTATION_REQUIRE_TOPOLOGY: RACK})).stdout)
        assert created["spec"]["suspend"] is True, "the Job webhook did not suspend the Job"
        rack_wl = wait_for(lambda: admitted(kubectl, namespace, "rack"), 60, "rack admitted")
        kubectl("create", "-f", "-", stdin=job("wide", namespace, 6, 8, 3, {c.ANNOTATION_PREFER_TOPOLOGY: RACK}))
        waiting = wait_for(lambda: (cond := condition(workload_of(kubectl, namespace, "wide"), "QuotaReserved"))
                           and cond["status"] == "False" and cond, 60, "wide waiting")
        assert get(kubectl, "job", "wide", "-n", namespace)["spec"]["suspend"] is True
        rack_pods = wait_for(lambda: (p := pods_of(kubectl, namespace, "rack")) and len(p) == 6 and
                             all(x["spec"].get("nodeName") for x in p) and p, 60, "rack pods bound")
        assert len(check_placement(kubectl, rack_pods, rack_wl)) == 1
        wait_for(lambda: job_complete(kubectl, namespace, "rack"), 60, "rack complete")
        wide_wl = wait_for(lambda: admitted(kubectl, namespace, "wide"), 60, "wide admitted after rack finished")
        wide_pods = wait_for(lambda: (p := pods_of(kubectl, namespace, "wide")) and len(p) == 6 and
                             all(x["spec"].get("nodeName") for x in p) and p, 60, "wide pods bound")
        racks = check_placement(kubectl, wide_pods, wide_wl)
        assert len(racks) == 2 and len({r.split("-")[0] for r in racks}) == 1, racks
        wait_for(lambda: job_complete(kubectl, namespace, "wide"), 60, "wide complete")
        finished = wait_for(lambda: condition(workload_of(kubectl, namespace, "wide"), "Finished"), 30, "finished")
        assert finished["status"] == "True"
        cq = wait_for(lambda: (q := get(kubectl, "clusterqueue", "racks")) and
                      (q.get("status") or {}).get("admittedWorkloads") == 0 and gpu_usage(q) == "0" and q, 30,
                      "usage released")
        assert cq["status"]["pendingWorkloads"] == 0
        first = watch.stop(12)
    except AssertionError as e:
        raise AssertionError(f"{e}\n--- tasq run:\n{tasq.tail()}") from None
    finally:
        watch.close()
    assert waiting["reason"] == "Pending"
    assert ('insufficient quota for nvidia.com/gpu in flavor "pool": requests 48, available 40 (nominal 64, used 24)'
            in waiting["message"]), waiting
    # every pod was stored gated, before any node was chosen
    assert len(first) == 12
    for name, pod in first.items():
        assert c.SCHEDULING_GATE_TOPOLOGY in [g["name"] for g in pod["spec"].get("schedulingGates") or []], name
        assert not pod["spec"].get("nodeName"), name


def test_two_gangs_over_the_quota_one_runs_whole_the_other_creates_no_pod_until_it_finishes(
        tasq: Process, kubectl: Kubectl, namespace: str, tmp_path: Path) -> None:
    # 150 GPUs of quota, 256 free: two Jobs of 100 one-GPU pods; together they would deadlock half-started.
    kubectl("apply", "-f", "-", stdin=cluster_queue("gangs", 150))
    kubectl("apply", "-f", "-", stdin=local_queue(namespace, "gangs"))
    prefer_block = {c.ANNOTATION_PREFER_TOPOLOGY: BLOCK}
    started = time.monotonic()
    watch = PodWatch(kubectl, namespace, tmp_path / "watch.json")
    try:
        kubectl("create", "-f", "-", stdin=job("first", namespace, 100, 1, 5, prefer_block))
        wait_for(lambda: admitted(kubectl, namespace, "first"), 60, "first admitted")
        kubectl("create", "-f", "-", stdin=job("second", namespace, 100, 1, 4, prefer_block))
        waiting = wait_for(lambda: (cond := condition(workload_of(kubectl, namespace, "second"), "QuotaReserved"))
                           and cond["status"] == "False" and cond, 60, "second waiting")
        # Until the first's Workload is Finished (the moment tasq releases its quota), the second stays
        # suspended with no pod at all; its state is read before the first's, so it held while the first ran.
        while True:
            second_pods = pods_of(kubectl, namespace, "second")
            second_suspended = get(kubectl, "job", "second", "-n", namespace)["spec"]["suspend"]
            second_admitted = admitted(kubectl, namespace, "second")
            if finished := condition(workload_of(kubectl, namespace, "first"), "Finished"):
                break
            assert second_pods == []
            assert second_suspended is True
            assert second_admitted is None
            assert time.monotonic() - started < 120, "first did not finish in 120s"
            time.sleep(0.5)
        first_pods = pods_of(kubectl, namespace, "first")
        assert [p["status"].get("phase") for p in first_pods] == ["Succeeded"] * 100
        nodes = {n["metadata"]["name"]: n["metadata"]["labels"] for n in get(kubectl, "nodes")["items"]}
        assert len({nodes[p["spec"]["nodeName"]][BLOCK] for p in first_pods}) == 1  # 100 GPUs fit one block
        assert finished["status"] == "True"
        first_done = finished["lastTransitionTime"]
        wait_for(lambda: admitted(kubectl, namespace, "second"), 60, "second admitted after first finished")
        wait_for(lambda: job_complete(kubectl, namespace, "second"), 90, "second complete")
        wait_for(lambda: (q := get(kubectl, "clusterqueue", "gangs")) and
                 (q.get("status") or {}).get("admittedWorkloads") == 0 and gpu_usage(q) == "0", 30, "usage released")
        seen = watch.stop(200)
    except AssertionError as e:
        raise AssertionError(f"{e}\n--- tasq run:\n{tasq.tail()}") from None
    finally:
        watch.close()
    assert waiting["reason"] == "Pending"
    assert ('insufficient quota for nvidia.com/gpu in flavor "pool": requests 100, available 50 (nominal 150, used 100)'
            in waiting["message"]), waiting
    # every pod of the second Job the watch ever saw (deleted ones too) was created after the first finished
    second = [p for p in seen.values() if p["metadata"]["labels"].get(c.LABEL_JOB_NAME) == "second"]
    assert len(second) == 100
    assert all(p["metadata"]["creationTimestamp"] >= first_done for p in second), first_done


CONFIGURATIONS = (("mutatingwebhookconfiguration", c.MUTATING_WEBHOOK_CONFIGURATION),
                  ("validatingwebhookconfiguration", c.VALIDATING_WEBHOOK_CONFIGURATION))


def placement_violations(kubectl: Kubectl, namespace: str, nodes: dict[str, dict[str, str]], quota: int) -> list[str]:
    """What breaks "tasq never records an assignment for pods it did not place", read now: a live
    pod of an admitted, unfinished Workload that the started template did not create (no
    topology-workload annotation naming the Workload: a pod from before the admission), or that runs
    on a node outside every slice, or a slice holding more pods than its count; and admitted GPUs
    beyond the quota. Workloads are read before pods, so a pod read is never older than its Workload."""
    workloads = get(kubectl, "workloads", "-n", namespace)["items"]
    pods = get(kubectl, "pods", "-n", namespace)["items"]
    problems, used = [], 0
    for wl in workloads:
        cond = condition(wl, "Admitted")
        finished = condition(wl, "Finished")
        if not cond or cond["status"] != "True" or (finished and finished["status"] == "True"):
            continue
        (psa,) = wl["status"]["admission"]["podSetAssignments"]
        used += int(psa["resourceUsage"][GPU])
        slices = label_slices(psa["topologyAssignment"])
        job_name = wl["metadata"]["ownerReferences"][0]["name"]
        placed = [0] * len(slices)
        for pod in pods:
            meta, spec = pod["metadata"], pod["spec"]
            if meta.get("labels", {}).get(c.LABEL_JOB_NAME) != job_name or not spec.get("nodeName") \
                    or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                continue
            where = f"{job_name}: pod {meta['name']} on {spec['nodeName']}"
            if (meta.get("annotations") or {}).get(c.ANNOTATION_TOPOLOGY_WORKLOAD) != wl["metadata"]["name"]:
                problems.append(f"{where} was not created from the admitted template")
            labels = nodes[spec["nodeName"]]
            matching = [i for i, sl in enumerate(slices) if all(labels.get(k) == v for k, v in sl["nodeLabels"].items())]
            if len(matching) != 1:
                problems.append(f"{where} is outside the assignment {slices}")
            else:
                placed[matching[0]] += 1
        problems += [f"{job_name}: {n} pods in slice {sl}" for n, sl in zip(placed, slices, strict=True) if n > sl["count"]]
    if used > quota:
        problems.append(f"admitted {used} GPUs, quota {quota}")
    return problems


def test_webhook_configurations_deleted_during_a_burst_no_job_runs_outside_its_assignment(
        tasq: Process, kubectl: Kubectl, namespace: str, tmp_path: Path) -> None:
    # 64 GPUs of quota. Two Jobs are created with the webhooks in place; then both configurations are
    # deleted (a replica's clean stop, an install order, a person) and six more are created: nothing
    # suspends them, the Job controller runs their pods at once on any node. tasq must stop each
    # (suspend, pods gone) before it has a Workload, admit them like any other and start them with
    # the topology gate in their template (no Pod webhook gates them either); "rack" Jobs need a
    # whole rack (4 pods x 8 GPUs), "plain" ones 2 pods x 4 GPUs anywhere. Polled throughout.
    quota = 64
    kubectl("apply", "-f", "-", stdin=cluster_queue("burst", quota))
    kubectl("apply", "-f", "-", stdin=local_queue(namespace, "burst"))
    nodes = {n["metadata"]["name"]: n["metadata"]["labels"] for n in get(kubectl, "nodes")["items"]}

    def create(name: str) -> dict[str, Any]:
        shape = (4, 8, {c.ANNOTATION_REQUIRE_TOPOLOGY: RACK}) if name.startswith("rack") else (2, 4, {})
        return dict(json.loads(kubectl("create", "-f", "-", "-o", "json", stdin=job(
            name, namespace, shape[0], shape[1], 10, shape[2])).stdout))

    names = [f"{kind}-{i}" for i in range(4) for kind in ("rack", "plain")]
    saved = [get(kubectl, kind, name) for kind, name in CONFIGURATIONS]
    problems: list[str] = []
    try:
        assert all(create(name)["spec"]["suspend"] is True for name in names[:2]), "the webhook did not suspend"
        for kind, name in CONFIGURATIONS:
            kubectl("delete", kind, name)
        unsuspended = [name for name in names[2:] if create(name)["spec"].get("suspend") is not True]
        assert unsuspended == names[2:], "created with no webhook, they were suspended anyway"
        deadline = time.monotonic() + 300
        while not all(job_complete(kubectl, namespace, name) for name in names):
            problems += placement_violations(kubectl, namespace, nodes, quota)
            assert not problems, problems
            assert time.monotonic() < deadline, "not every Job completed in 300 s"
            time.sleep(0.3)
        for name in names:
            wl = workload_of(kubectl, namespace, name)
            assert wl is not None and condition(wl, "Admitted") is not None, f"{name} completed without an admission"
            assert (condition(wl, "Finished") or {}).get("status") == "True", name
        wait_for(lambda: (q := get(kubectl, "clusterqueue", "burst")) and
                 (q.get("status") or {}).get("admittedWorkloads") == 0 and gpu_usage(q) == "0", 30, "usage released")
        # each Job created with no webhook was stopped by tasq (not admitted in place)
        stopped = wait_for(lambda: (seen := {e["involvedObject"]["name"] for e in get(
            kubectl, "events", "-n", namespace, "--field-selector", f"reason={c.EVENT_REASON_STOPPED}")["items"]})
            >= set(unsuspended) and seen, 30, "a Stopped Event for every Job created unsuspended")
        assert not stopped & set(names[:2]), stopped  # the ones the webhook suspended never needed it
    except AssertionError as e:
        raise AssertionError(f"{e}\n--- tasq run:\n{tasq.tail()}") from None
    finally:
        for item in saved:  # put back what was deleted, so the module's other tests keep their webhooks
            meta = item["metadata"]
            item["metadata"] = {"name": meta["name"], "annotations": meta.get("annotations") or {}}
            kubectl("create", "-f", "-", stdin=json.dumps(item), check=False)
