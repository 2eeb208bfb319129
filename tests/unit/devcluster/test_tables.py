"""Server-side Table rows: kubectl's AGE format, pod STATUS, Job columns and CRD printer columns."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from devcluster.resources import BUILTIN_RESOURCES, ResourceType
from devcluster.tables import TableMaker, age
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


@pytest.mark.parametrize("pod, want_status", [
    (make_pod("a").gate().build(), "SchedulingGated"),
    (make_pod("b").build(), "Pending"),
    (make_pod("c").on("n1").build(), "Running"),
    (make_pod("d").on("n1", phase="Succeeded").build(), "Succeeded"),
], ids=["gated", "pending", "running", "succeeded"])
def test_pod_status_column(pod: dict[str, object], want_status: str) -> None:
    cells = TableMaker(builtin("Pod")).cells(pod, NOW)
    assert cells[2] == want_status


def test_node_row_shows_readiness_roles_and_version() -> None:
    node = make_node("n1").label("node-role.kubernetes.io/gpu", "").not_ready().build()
    cells = TableMaker(builtin("Node")).cells(node, NOW)
    assert cells[:3] == ["n1", "NotReady", "gpu"]


def test_job_row_counts_completions_and_duration() -> None:
    job = {"metadata": {"name": "j", "creationTimestamp": ago(600)},
           "spec": {"completions": 4, "parallelism": 4},
           "status": {"succeeded": 4, "startTime": ago(600), "completionTime": ago(300),
                      "conditions": [{"type": "Complete", "status": "True"}]}}
    assert TableMaker(builtin("Job")).cells(job, NOW)[:5] == ["j", "Complete", "4/4", "5m", "10m"]


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
