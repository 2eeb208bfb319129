"""Upgrading a cluster from an earlier tasq (v1beta1 stored; its CRDs in tests/data/earlier-tasq/) on
either control plane: objects written through the earlier CRDs keep working once this tasq's CRDs are
installed and `tasq run --local-webhooks` converts them, and `tasq migrate-storage` (a dry run first)
moves them to v1beta2 storage: each CRD's status.storedVersions ends as [v1beta2]. Everything is
driven by the real kubectl and the `tasq` command, as an administrator would.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from controller.api import constants as c
from controller.api.crds import KINDS
from tests.e2e.conftest import REPO, Kubectl, wait_for
from tests.e2e.test_conversion import converting_through_tasq, kubectl_get
from tests.e2e.test_operator import condition, get
from tests.e2e.test_operator_run import Process, lease_holder

pytestmark = pytest.mark.e2e

TASQ = Path(sys.executable).parent / "tasq"
EARLIER_CRDS = REPO / "tests" / "data" / "earlier-tasq" / "crds"
V1BETA1, V1BETA2 = c.VERSION_V1BETA1, c.VERSION_V1BETA2


def earlier_objects(namespace: str) -> str:
    """What an earlier tasq's user wrote: every kind in v1beta1 (Topology in v1alpha1), a
    ClusterQueue in a cohort and a Workload with a priority class (the fields v1beta2 renamed)."""
    return f"""
apiVersion: {c.GROUP}/v1alpha1
kind: Topology
metadata: {{name: racks}}
spec:
  levels: [{{nodeLabel: cloud.provider.com/topology-rack}}, {{nodeLabel: kubernetes.io/hostname}}]
---
apiVersion: {c.GROUP}/{V1BETA1}
kind: ResourceFlavor
metadata: {{name: plain}}
---
apiVersion: {c.GROUP}/{V1BETA1}
kind: ClusterQueue
metadata: {{name: upgraded}}
spec:
  cohort: pool
  namespaceSelector: {{}}
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{{name: plain, resources: [{{name: cpu, nominalQuota: "4"}}]}}]
---
apiVersion: {c.GROUP}/{V1BETA1}
kind: LocalQueue
metadata: {{name: lq, namespace: {namespace}}}
spec: {{clusterQueue: upgraded}}
---
apiVersion: {c.GROUP}/{V1BETA1}
kind: Workload
metadata: {{name: earlier, namespace: {namespace}}}
spec:
  queueName: lq
  priorityClassName: high
  priorityClassSource: scheduling.k8s.io/priorityclass
  priority: 100
  podSets:
  - name: main
    count: 2
    template: {{spec: {{restartPolicy: Never, containers: [{{name: c, image: registry.example/app:1,
      resources: {{requests: {{cpu: "1"}}}}}}]}}}}
"""


def earlier_leader() -> str:
    """The Lease of an earlier tasq replica that leads for the next hour (so this tasq waits)."""
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return json.dumps({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                       "metadata": {"name": c.LEADER_LEASE_NAME, "namespace": "default"},
                       "spec": {"holderIdentity": "earlier-tasq", "leaseDurationSeconds": 3600,
                                "acquireTime": now, "renewTime": now}})


def migrate_storage(kubeconfig: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(TASQ), "migrate-storage", "--kubeconfig", str(kubeconfig), *flags],
                          capture_output=True, text=True, timeout=300)


def stored_versions(kubectl: Kubectl) -> dict[str, list[str]]:
    """CRD name -> status.storedVersions of each tasq CRD installed."""
    return {crd["metadata"]["name"]: crd["status"]["storedVersions"] for crd in get(kubectl, "crds")["items"]
            if crd["spec"]["group"] == c.GROUP}


def without_tasq_crds(kubectl: Kubectl) -> None:
    """No tasq CRD left (the real control plane starts with the current ones installed). Objects other
    modules left keep the finalizers tasq put on them (resource-in-use, as Kueue's), which only a
    running tasq removes: they are removed here, or deleting the CRD waits on them for ever."""
    for spec in KINDS:
        listed = kubectl("get", spec.crd_name, "-A", "-o", "json", check=False)
        for obj in (json.loads(listed.stdout).get("items") or []) if listed.returncode == 0 else []:
            meta = obj["metadata"]
            if meta.get("finalizers"):
                where = ["-n", meta["namespace"]] if meta.get("namespace") else []
                kubectl("patch", spec.crd_name, meta["name"], *where, "--type=merge",
                        "-p", '{"metadata":{"finalizers":null}}', check=False)
        kubectl("delete", "crd", spec.crd_name, "--ignore-not-found", "--wait", timeout=120)


@pytest.fixture
def processes() -> Iterator[list[Process]]:
    """The `tasq run` processes a test started, stopped (cleanly, or the test fails) at its end."""
    started: list[Process] = []
    yield started
    for proc in started:
        assert proc.stop() == 0, proc.output()[-5000:]


def test_without_tasqs_crds_each_kind_is_named_not_installed(kubeconfig: Path, kubectl: Kubectl) -> None:
    without_tasq_crds(kubectl)
    result = migrate_storage(kubeconfig)
    assert result.returncode == 1, result
    for spec in KINDS:
        assert (f"{spec.kind}: not migrated: CRDNotInstalled: CRD {spec.crd_name} is not installed: install tasq's "
                "CRDs first") in result.stderr
    assert result.stdout.splitlines()[-1] == f"0 of {len(KINDS)} kind(s) migrated, 0 object(s) rewritten; " \
                                             f"{len(KINDS)} not migrated"


def test_objects_an_earlier_tasq_stored_keep_working_and_move_to_v1beta2_storage(
        kubeconfig: Path, kubectl: Kubectl, namespace: str, tmp_path: Path, processes: list[Process]) -> None:
    earlier = [f"{p}.{c.GROUP}" for p in ("topologies", "resourceflavors", "clusterqueues", "localqueues", "workloads")]
    # an earlier tasq's install, and its users' objects
    without_tasq_crds(kubectl)
    kubectl("apply", "-f", str(EARLIER_CRDS))
    wait_for(lambda: kubectl("apply", "-f", "-", stdin=earlier_objects(namespace), check=False).returncode == 0,
             60, "the objects created through the earlier CRDs")
    assert all(stored_versions(kubectl)[name] == [V1BETA1] for name in earlier)
    # the upgrade, as a rolling one goes: the earlier tasq still leads (its Lease) while this tasq's
    # CRDs are installed and this tasq starts, serves its conversion webhook and registers it; only
    # then does the earlier one go and this one take over. (Without that order, a status write made
    # while the CRDs convert with strategy None stores the renamed fields dropped.)
    kubectl("apply", "-f", "-", stdin=earlier_leader())
    kubectl("apply", "-f", "crds/")
    assert all(stored_versions(kubectl)[name] == [V1BETA1, V1BETA2] for name in earlier)
    tasq = Process(kubeconfig, tmp_path / "tasq.log", "--local-webhooks", "--identity", "upgraded")
    processes.append(tasq)
    wait_for(lambda: converting_through_tasq(kubectl), 60, "the CRDs converting through tasq", tasq.output)
    kubectl("delete", "lease", c.LEADER_LEASE_NAME, "-n", "default")
    wait_for(lambda: lease_holder(kubectl) == "upgraded", 60, "this tasq leading", tasq.output)

    # they keep working: read in both versions, and the earlier Workload is admitted
    queue = kubectl_get(kubectl, "clusterqueues", V1BETA2, "upgraded")
    assert queue["spec"]["cohortName"] == "pool" and "cohort" not in queue["spec"]
    assert kubectl_get(kubectl, "clusterqueues", V1BETA1, "upgraded")["spec"]["cohort"] == "pool"
    admitted = wait_for(lambda: (w := kubectl_get(kubectl, "workloads", V1BETA2, "earlier", namespace))
                        and (condition(w, "Admitted") or {}).get("status") == "True" and w, 60,
                        "the earlier Workload admitted", tasq.output)
    assert admitted["spec"]["priorityClassRef"] == {"group": "scheduling.k8s.io", "kind": "PriorityClass",
                                                    "name": "high"}
    as_v1 = kubectl_get(kubectl, "workloads", V1BETA1, "earlier", namespace)
    assert (as_v1["spec"]["priorityClassName"], as_v1["spec"]["priorityClassSource"]) == (
        "high", "scheduling.k8s.io/priorityclass")

    # a dry run lists every object and changes nothing
    dry = migrate_storage(kubeconfig, "--dry-run")
    assert dry.returncode == 0, dry
    for line in ("  Topology racks", "  ResourceFlavor plain", "  ClusterQueue upgraded",
                 f"  LocalQueue {namespace}/lq", f"  Workload {namespace}/earlier"):
        assert line in dry.stdout.splitlines(), dry.stdout
    assert all(stored_versions(kubectl)[name] == [V1BETA1, V1BETA2] for name in earlier)

    # the migration: every object rewritten, only v1beta2 stored
    done = migrate_storage(kubeconfig)
    assert done.returncode == 0, done
    assert f"{len(KINDS)} of {len(KINDS)} kind(s) migrated" in done.stdout.splitlines()[-1], done.stdout
    assert "ClusterQueue: 1 rewritten, 0 deleted meanwhile" in done.stdout, done.stdout
    assert all(versions == [V1BETA2] for versions in stored_versions(kubectl).values()), stored_versions(kubectl)
    # and they read as before, in both versions
    assert kubectl_get(kubectl, "clusterqueues", V1BETA1, "upgraded")["spec"]["cohort"] == "pool"
    after = kubectl_get(kubectl, "workloads", V1BETA2, "earlier", namespace)
    assert after["spec"] == admitted["spec"] and after["status"]["admission"] == admitted["status"]["admission"]
    assert migrate_storage(kubeconfig).stdout.count("only: nothing to rewrite") == len(KINDS)
