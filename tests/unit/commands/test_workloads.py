"""`tasq list workloads`'s table (pure, from objects as read), and the plugin's name in its usage."""

from __future__ import annotations

from typing import Any

import pytest

from controller import cli
from controller.commands.workloads import HEADER, table, workload_rows
from tests.builders.kueue import ClusterQueueBuilder, LocalQueueBuilder, WorkloadBuilder


def created(builder: WorkloadBuilder, second: int) -> dict[str, Any]:
    obj = builder.pod_set("main").build()
    obj["metadata"]["creationTimestamp"] = f"2026-11-27T10:00:{second:02d}Z"
    return obj


def cluster(*workloads: dict[str, Any]) -> list[dict[str, Any]]:
    return [ClusterQueueBuilder("cq").build(), LocalQueueBuilder("red", "cq", "team").build(),
            LocalQueueBuilder("blue", "cq", "team").build(),
            {"kind": "PriorityClass", "metadata": {"name": "urgent"}, "value": 500}, *workloads]


def test_pending_rows_come_in_queue_order_with_positions_and_the_others_after_them() -> None:
    objects = cluster(
        created(WorkloadBuilder("old", "team").queue("red"), 1),
        created(WorkloadBuilder("new", "team").queue("red"), 9),
        created(WorkloadBuilder("vip", "team").queue("blue").set("spec.priorityClassRef", {"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": "urgent"}), 30),
        created(WorkloadBuilder("running", "team").queue("red").admitted("cq").assignment("main", 1, ({}, 1),
                                                                                          cluster_queue="cq"), 0),
        created(WorkloadBuilder("paused", "team").queue("red").set("spec.active", False), 0),
        created(WorkloadBuilder("lost", "team").queue("no-such-queue"), 0),
    )
    rows = [(r[1], r[4], r[6], r[7]) for r in workload_rows(objects)]
    assert rows == [
        ("vip", "Pending", "0", "0"),    # its PriorityClass's 500 goes before the older ones
        ("old", "Pending", "1", "0"),
        ("new", "Pending", "2", "1"),
        ("lost", "NoQueue", "", ""),
        ("paused", "Stopped", "", ""),
        ("running", "Admitted", "", ""),
    ]
    assert [r[1] for r in workload_rows(objects, namespace="elsewhere")] == []
    assert [r[1] for r in workload_rows(objects, cluster_queue="cq")] == ["vip", "old", "new", "running"]


def test_the_table_aligns_columns_and_marks_empty_cells() -> None:
    lines = table([("team", "a-long-name", "red", "cq", "Stopped", "", "", "")])
    assert lines[0].split() == list(HEADER)
    assert lines[1].split() == ["team", "a-long-name", "red", "cq", "Stopped", "-", "-", "-"]
    assert lines[0].index("LOCALQUEUE") == lines[1].index("red")


@pytest.mark.parametrize(("argv0", "prog"), [
    pytest.param("/usr/local/bin/kubectl-tasq", "kubectl tasq", id="run by kubectl as a plugin"),
    pytest.param("/usr/local/bin/tasq", "tasq", id="run as tasq"),
])
def test_usage_names_the_command_as_it_was_run(monkeypatch: pytest.MonkeyPatch, argv0: str, prog: str) -> None:
    monkeypatch.setattr("sys.argv", [argv0])
    assert cli.build_parser(["list"]).prog == prog
