"""Server-side Table rows: kubectl's AGE format, pod STATUS, Job columns and CRD printer columns."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from devcluster.front.tables import TableMaker, age
from devcluster.server.resources import BUILTIN_RESOURCES, ResourceType
from tests.builders.cluster import make_node, make_pod

NOW = datetime(2026, 1, 2, 12, 0, 0, tzinfo=UTC)


def ago(seconds: int) -> str:
    return (NOW - timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.mark.parametrize("seconds, want", [
    (5, "5s"), (119, "119s"), (150, "2m30s"), (600, "10m"), (3 * 3600 + 60, "3h1m"), (30 * 3600, "30h"),
    (3 * 86400 + 3600, "3d1h"), (30 * 86400, "30d"), (800 * 86400, "2y"),
])
def test_age_is_kubectl_human_duration(seconds: int, want: str) -> None:
    assert age(ago(seconds), NOW) == want


def builtin(kind: str) -> ResourceType:
    return next(r for r in BUILTIN_RESOURCES if r.kind == kind and r.group in ("", "batch"))


class PodStatus:
    """Fluent status for a pod row: container states as a kubelet reports them."""

    def __init__(self, phase: str = "Running") -> None:
        self.pod: dict[str, Any] = make_pod("p").on("n1", phase=phase).build()
        self.status: dict[str, Any] = self.pod["status"]

    def running(self, name: str = "main", ready: bool = True) -> PodStatus:
        return self._container("containerStatuses", name, {"running": {"startedAt": ago(60)}}, ready)

    def terminated(self, name: str = "main", reason: str = "", exit_code: int = 0, signal: int = 0,
                   init: bool = False) -> PodStatus:
        term: dict[str, Any] = {"exitCode": exit_code, **({"reason": reason} if reason else {}),
                                **({"signal": signal} if signal else {})}
        return self._container("initContainerStatuses" if init else "containerStatuses", name,
                               {"terminated": term}, False)

    def waiting(self, reason: str, name: str = "main", init: bool = False) -> PodStatus:
        return self._container("initContainerStatuses" if init else "containerStatuses", name,
                               {"waiting": {"reason": reason}}, False)

    def condition(self, kind: str, status: str, reason: str = "") -> PodStatus:
        self.status.setdefault("conditions", []).append({"type": kind, "status": status, "reason": reason})
        return self

    def init_containers(self, *names: str) -> PodStatus:
        self.pod["spec"]["initContainers"] = [{"name": n, "image": "busybox"} for n in names]
        return self

    def containers(self, *names: str) -> PodStatus:
        self.pod["spec"]["containers"] = [{"name": n, "image": "busybox"} for n in names]
        return self

    def pod_reason(self, reason: str) -> PodStatus:
        self.status["reason"] = reason
        return self

    def deleted(self, reason: str = "") -> PodStatus:
        self.pod["metadata"]["deletionTimestamp"] = ago(1)
        if reason:
            self.status["reason"] = reason
        return self

    def _container(self, field: str, name: str, state: dict[str, Any], ready: bool) -> PodStatus:
        self.status.setdefault(field, []).append({"name": name, "ready": ready, "restartCount": 0, "state": state})
        return self


@dataclass
class PodStatusCase:
    name: str
    pod: PodStatus
    want_status: str
    want_ready: str = "0/1"


POD_STATUS_CASES = [
    PodStatusCase("created_gated_pod_shows_the_gate_condition_apiserver_set",
                  PodStatus("Pending").condition("PodScheduled", "False", "SchedulingGated"), "SchedulingGated"),
    PodStatusCase("pending_without_containers_started", PodStatus("Pending"), "Pending"),
    PodStatusCase("running_and_ready", PodStatus().running(), "Running", want_ready="1/1"),
    PodStatusCase("finished_with_exit_0_is_completed", PodStatus("Succeeded").terminated(reason="Completed"),
                  "Completed"),
    PodStatusCase("finished_with_an_error_shows_the_container_reason",
                  PodStatus("Failed").terminated(reason="Error", exit_code=1), "Error"),
    PodStatusCase("oom_killed", PodStatus("Failed").terminated(reason="OOMKilled", exit_code=137), "OOMKilled"),
    PodStatusCase("no_runtime_reason_shows_the_exit_code", PodStatus("Failed").terminated(exit_code=3),
                  "ExitCode:3"),
    PodStatusCase("no_runtime_reason_shows_the_signal", PodStatus("Failed").terminated(exit_code=137, signal=9),
                  "Signal:9"),
    PodStatusCase("terminated_without_container_statuses_shows_the_phase", PodStatus("Succeeded"), "Succeeded"),
    PodStatusCase("kubelet_rejection_shows_the_status_reason", PodStatus("Failed").pod_reason("OutOfcpu"),
                  "OutOfcpu"),
    PodStatusCase("image_pull_waiting_reason", PodStatus("Pending").waiting("ImagePullBackOff"), "ImagePullBackOff"),
    PodStatusCase("one_container_completed_another_running_and_ready_is_running",
                  PodStatus().containers("a", "b").terminated("a", reason="Completed").running("b")
                  .condition("Ready", "True"), "Running", want_ready="1/2"),
    PodStatusCase("one_container_completed_another_running_pod_not_ready_is_not_ready",
                  PodStatus().containers("a", "b").terminated("a", reason="Completed").running("b")
                  .condition("Ready", "False"), "NotReady", want_ready="1/2"),
    PodStatusCase("second_of_two_init_containers_running",
                  PodStatus("Pending").init_containers("i1", "i2").terminated("i1", reason="Completed", init=True)
                  .waiting("PodInitializing", "i2", init=True).waiting("PodInitializing"), "Init:1/2"),
    PodStatusCase("failed_init_container", PodStatus("Pending").init_containers("i1")
                  .terminated("i1", reason="Error", exit_code=1, init=True), "Init:Error"),
    PodStatusCase("failed_init_container_without_reason", PodStatus("Pending").init_containers("i1")
                  .terminated("i1", exit_code=2, init=True), "Init:ExitCode:2"),
    PodStatusCase("init_container_crash_looping", PodStatus("Pending").init_containers("i1")
                  .waiting("CrashLoopBackOff", "i1", init=True), "Init:CrashLoopBackOff"),
    PodStatusCase("init_done_main_container_initializing",
                  PodStatus("Pending").init_containers("i1").terminated("i1", reason="Completed", init=True)
                  .waiting("PodInitializing"), "PodInitializing"),
    PodStatusCase("deleted_running_pod_is_terminating", PodStatus().running().deleted(), "Terminating",
                  want_ready="1/1"),
    PodStatusCase("deleted_finished_pod_keeps_its_reason",
                  PodStatus("Succeeded").terminated(reason="Completed").deleted(), "Completed"),
    PodStatusCase("deleted_pod_of_a_lost_node_is_unknown", PodStatus().running().deleted("NodeLost"), "Unknown",
                  want_ready="1/1"),
]


@pytest.mark.parametrize("case", POD_STATUS_CASES, ids=lambda c: c.name)
def test_pod_status_and_ready_columns_follow_the_pod_printer(case: PodStatusCase) -> None:
    cells = TableMaker(builtin("Pod")).cells(case.pod.pod, NOW)
    assert (cells[2], cells[1]) == (case.want_status, case.want_ready)


@pytest.mark.parametrize("labels, want_roles", [
    ({}, "<none>"),
    ({"cloud.provider.com/topology-rack": "r1"}, "<none>"),
    ({"node-role.kubernetes.io/gpu": ""}, "gpu"),
    ({"node-role.kubernetes.io/worker": "", "node-role.kubernetes.io/control-plane": "yes"}, "control-plane,worker"),
    ({"kubernetes.io/role": "master"}, "master"),
    ({"kubernetes.io/role": "worker", "node-role.kubernetes.io/worker": ""}, "worker"),
    ({"kubernetes.io/role": "", "node-role.kubernetes.io/": ""}, "<none>"),
], ids=["no_labels_worker", "only_topology_labels", "role_label_key", "several_roles_sorted",
        "legacy_role_label_value", "both_forms_counted_once", "empty_roles_ignored"])
def test_node_roles_column_reads_the_role_labels_as_kubectl(labels: dict[str, str], want_roles: str) -> None:
    node = make_node("n1").labels(labels).build()
    assert TableMaker(builtin("Node")).cells(node, NOW)[2] == want_roles


def test_node_row_shows_readiness_version_and_addresses() -> None:
    node = make_node("n1").not_ready().build()
    node["status"]["nodeInfo"] = {"kubeletVersion": "v1.37.0"}
    node["status"]["addresses"] = [{"type": "InternalIP", "address": "10.0.0.1"},
                                   {"type": "ExternalIP", "address": "34.1.2.3"}]
    cells = TableMaker(builtin("Node")).cells(node, NOW)
    assert [cells[i] for i in (0, 1, 4, 5, 6)] == ["n1", "NotReady", "v1.37.0", "10.0.0.1", "34.1.2.3"]


def test_job_row_counts_completions_and_duration() -> None:
    job = {"metadata": {"name": "j", "creationTimestamp": ago(600)},
           "spec": {"completions": 4, "parallelism": 4},
           "status": {"succeeded": 4, "startTime": ago(600), "completionTime": ago(300),
                      "conditions": [{"type": "Complete", "status": "True"}]}}
    assert TableMaker(builtin("Job")).cells(job, NOW)[:5] == ["j", "Complete", "4/4", "5m", "10m"]


def test_job_row_with_unreadable_completion_time_runs_duration_to_now() -> None:
    job = {"metadata": {"name": "j", "creationTimestamp": ago(600)},
           "spec": {"completions": 1, "parallelism": 1},
           "status": {"startTime": ago(420), "completionTime": "yesterday"}}
    assert TableMaker(builtin("Job")).cells(job, NOW)[3] == "7m"


def test_crd_printer_columns_use_jsonpath_types_and_dates() -> None:
    r = ResourceType("kueue.x-k8s.io", "v1beta1", "workloads", "Workload", True, custom=True, printer_columns=(
        {"name": "Queue", "type": "string", "jsonPath": ".spec.queueName"},
        {"name": "Admitted", "type": "string", "jsonPath": '.status.conditions[?(@.type=="Admitted")].status'},
        {"name": "Count", "type": "integer", "jsonPath": ".spec.podSets[0].count"},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ))
    wl = {"metadata": {"name": "w", "creationTimestamp": ago(90)},
          "spec": {"queueName": "q", "podSets": [{"count": 8}]},
          "status": {"conditions": [{"type": "Admitted", "status": "True"}]}}
    maker = TableMaker(r)
    assert [c["name"] for c in maker.column_definitions()] == ["Name", "Queue", "Admitted", "Count", "Age"]
    assert maker.cells(wl, NOW) == ["w", "q", "True", 8, "90s"]
    assert maker.cells({"metadata": {"name": "bare"}}, NOW) == ["bare", None, None, None, None]


def test_rows_carry_partial_metadata_unless_the_object_is_asked_for() -> None:
    maker = TableMaker(builtin("Pod"))
    pod = make_pod("p").label("a", "b").build()
    assert maker.row(pod, NOW, "Metadata")["object"]["kind"] == "PartialObjectMetadata"
    assert maker.row(pod, NOW, "Object")["object"] is pod
    assert "object" not in maker.row(pod, NOW, "None")


@pytest.mark.parametrize("kind, obj, want", [
    ("ConfigMap", {"metadata": {"name": "c", "creationTimestamp": ago(5)}, "data": {"a": "1", "b": "2"}},
     ["c", 2, "5s"]),
    ("Secret", {"metadata": {"name": "s", "creationTimestamp": ago(5)}, "type": "Opaque", "data": {"a": "MQ=="}},
     ["s", "Opaque", 1, "5s"]),
    ("Lease", {"metadata": {"name": "l", "creationTimestamp": ago(5)}, "spec": {"holderIdentity": "tasq-0"}},
     ["l", "tasq-0", "5s"]),
    ("PriorityClass", {"metadata": {"name": "high", "creationTimestamp": ago(5)}, "value": 1000},
     ["high", 1000, False, "5s", "PreemptLowerPriority"]),
    ("Event", {"metadata": {"name": "p.1", "creationTimestamp": ago(90)}, "lastTimestamp": ago(30),
               "type": "Warning", "reason": "FailedScheduling", "message": "0/4 nodes are available",
               "involvedObject": {"kind": "Pod", "name": "p"}},
     ["30s", "Warning", "FailedScheduling", "pod/p", "0/4 nodes are available"]),
], ids=["configmap", "secret", "lease", "priorityclass", "event_last_seen_from_last_timestamp"])
def test_other_builtin_rows(kind: str, obj: dict[str, object], want: list[object]) -> None:
    r = next(r for r in BUILTIN_RESOURCES if r.kind == kind)
    assert TableMaker(r).cells(obj, NOW) == want
