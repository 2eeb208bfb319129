"""`tasq simulate` follows Kueue on five points where it once did not.

Pod sets that request nothing but ask for a topology are placed (one `pods` slot each); heads that
fit without borrowing go first; a preemption evicts its victim with Kueue's conditions; a waiting Workload
re-applied with a new spec is updated; `generateName` objects get distinct generated names.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from controller.cli import main
from tests.builders.cluster import make_node
from tests.builders.kueue import (
    label_slices,
    make_cluster_queue,
    make_flavor,
    make_job,
    make_local_queue,
    make_topology,
    make_workload,
)

RACK = "cloud.com/rack"
GPU = "nvidia.com/gpu"


def write(tmp_path: Path, name: str, *objects: Any) -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump_all([o.build() if hasattr(o, "build") else o for o in objects]), encoding="utf-8")
    return str(path)


def simulate(capsys: pytest.CaptureFixture[str], *files: str) -> tuple[dict[str, dict[str, Any]], str]:
    code = main(["simulate", *(a for f in files for a in ("-f", f)), "-o", "json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return {item["metadata"]["name"]: item for item in json.loads(out)["items"]}, err


def condition(wl: dict[str, Any], type_: str) -> dict[str, Any]:
    return next((cd for cd in wl["status"].get("conditions", []) if cd["type"] == type_), {})


def one_rack_with_8_pod_slots(tmp_path: Path) -> str:
    """rack r1 ── node n1 (allocatable pods: 8, cpu 64); a topology flavor and queue `lq` on it."""
    return write(tmp_path, "cluster.yaml",
                 make_node("n1").labels({RACK: "r1"}).allocatable(cpu="64", pods="8"),
                 make_topology("racks", RACK, "kubernetes.io/hostname"),
                 make_flavor("tas").node_label(RACK, "r1").topology_name("racks"),
                 make_cluster_queue("cq").flavor("tas", {"cpu": 64}),
                 make_local_queue("lq", "cq"))


def no_request_workload(name: str, count: int) -> Any:
    wl = make_workload(name).queue("lq").pod_set("main", count, required=RACK)
    wl.set("spec.podSets.0.template.spec.containers.0.resources", {})
    return wl


@pytest.mark.parametrize(("count", "fits"), [(8, True), (9, False)], ids=["8 pods fit 8 slots", "9 pods do not"])
def test_a_pod_set_requesting_nothing_still_gets_a_topology_assignment_one_pod_slot_each(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, count: int, fits: bool) -> None:
    wls, _ = simulate(capsys, one_rack_with_8_pod_slots(tmp_path),
                      write(tmp_path, "wl.yaml", no_request_workload("empty", count)))
    wl = wls["empty"]
    if fits:
        [psa] = wl["status"]["admission"]["podSetAssignments"]
        assert label_slices(psa["topologyAssignment"]) == [
            {"nodeLabels": {RACK: "r1", "kubernetes.io/hostname": "n1"}, "count": 8}]
    else:
        assert "admission" not in wl["status"]
        assert condition(wl, "QuotaReserved")["status"] == "False"
        assert "8 out of 9" in condition(wl, "QuotaReserved")["message"]


def test_heads_that_fit_without_borrowing_are_admitted_before_an_older_higher_priority_borrower(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Cohort c: team-a nominal 4 GPUs, team-b nominal 8. The borrower (team-a, 8 GPUs, priority
    100, older) would take all of team-b's spare quota; team-b's own 6-GPU Job goes first."""
    cluster = write(tmp_path, "cluster.yaml",
                    make_node("n1").allocatable({GPU: "16"}, cpu="64"),
                    make_flavor("gpu"),
                    make_cluster_queue("team-a").cohort("c").flavor("gpu", {GPU: 4}),
                    make_cluster_queue("team-b").cohort("c").flavor("gpu", {GPU: 8}),
                    make_local_queue("a", "team-a"), make_local_queue("b", "team-b"))
    jobs = write(tmp_path, "jobs.yaml",
                 make_workload("borrower").queue("a").priority(100).pod_set("main", 8, {GPU: 1}),
                 make_workload("own").queue("b").pod_set("main", 6, {GPU: 1}))
    wls, _ = simulate(capsys, cluster, jobs)
    assert condition(wls["own"], "QuotaReserved")["status"] == "True"
    assert condition(wls["borrower"], "QuotaReserved")["status"] == "False"


def test_a_preemption_evicts_the_victim_with_kueues_conditions_and_it_runs_again_later(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    # rack r1 ── n1 (8 pod slots): the low-priority gang holds it; the urgent one preempts it, then
    # finishes (step 3) and the victim is admitted again.
    cluster = write(tmp_path, "cluster.yaml",
                    make_node("n1").labels({RACK: "r1"}).allocatable(cpu="64", pods="8"),
                    make_topology("racks", RACK, "kubernetes.io/hostname"),
                    make_flavor("tas").node_label(RACK, "r1").topology_name("racks"),
                    make_cluster_queue("cq").preemption(within="LowerPriority").flavor("tas", {"cpu": 64}),
                    make_local_queue("lq", "cq"))
    low = make_workload("low").queue("lq").priority(0).pod_set("main", 8, {"cpu": 1}, required=RACK)
    urgent = make_workload("urgent").queue("lq").priority(100).pod_set("main", 8, {"cpu": 1}, required=RACK)
    first = write(tmp_path, "low.yaml", low)
    second = write(tmp_path, "urgent.yaml", urgent)
    code = main(["simulate", "-f", cluster, "-f", first, "-f", second, "-o", "json"])
    out, err = capsys.readouterr()
    assert code == 0 and err == ""
    listing = json.loads(out)
    wls = {item["metadata"]["name"]: item for item in listing["items"]}
    assert condition(wls["urgent"], "QuotaReserved")["status"] == "True"
    evicted, preempted = condition(wls["low"], "Evicted"), condition(wls["low"], "Preempted")
    assert (evicted["status"], evicted["reason"]) == ("True", "Preempted")
    assert (preempted["status"], preempted["reason"]) == ("True", "InClusterQueue")
    assert "Preempted to accommodate a workload" in preempted["message"] and "default/urgent" in preempted["message"]
    assert condition(wls["low"], "QuotaReserved")["status"] == "False"
    assert "admission" not in wls["low"]["status"]
    (record,) = listing["preemptions"]
    assert (record["victim"], record["preemptor"], record["reason"], record["step"]) == \
        ("default/low", "default/urgent", "InClusterQueue", 3)
    assert record["message"] == 'preempting 1 workload(s) in rack "r1" to fit 8 pod(s) of pod set "main" in flavor "tas"'

    done = write(tmp_path, "done.yaml", urgent.set("status", {"conditions": [{
        "type": "Finished", "status": "True", "reason": "Succeeded", "message": "done",
        "lastTransitionTime": "2026-01-01T00:00:00Z"}]}))
    code = main(["simulate", "-f", cluster, "-f", first, "-f", second, "-f", done])
    out, _ = capsys.readouterr()
    table, preemptions = out.split("\n\n")
    low_row = next(line for line in table.splitlines() if " low " in line)
    assert "True" in low_row.split()  # admitted again once the urgent one finished
    assert preemptions.splitlines()[1].split()[:6] == ["3", "default/low", "cq", "default/urgent", "cq",
                                                       "InClusterQueue"]


def test_a_pending_workload_reapplied_with_a_new_spec_is_updated(capsys: pytest.CaptureFixture[str],
                                                                 tmp_path: Path) -> None:
    cluster = one_rack_with_8_pod_slots(tmp_path)
    too_big = write(tmp_path, "v1.yaml", make_workload("w").queue("lq").pod_set("main", 9, {"cpu": 1}, required=RACK))
    smaller = write(tmp_path, "v2.yaml", make_workload("w").queue("lq").pod_set("main", 4, {"cpu": 1}, required=RACK))
    wls, _ = simulate(capsys, cluster, too_big, smaller)
    [psa] = wls["w"]["status"]["admission"]["podSetAssignments"]
    assert (wls["w"]["spec"]["podSets"][0]["count"], psa["count"]) == (4, 4)


def test_generate_name_objects_get_distinct_generated_names(capsys: pytest.CaptureFixture[str],
                                                            tmp_path: Path) -> None:
    job = make_job("x").queue("lq").requests({"cpu": 1}).build()
    del job["metadata"]["name"]
    job["metadata"]["generateName"] = "tas-sample-"
    cluster = one_rack_with_8_pod_slots(tmp_path)
    wls, _ = simulate(capsys, cluster, write(tmp_path, "a.yaml", job), write(tmp_path, "b.yaml", job))
    assert len(wls) == 2
    assert all(name.startswith("job-tas-sample-") for name in wls)
    again, _ = simulate(capsys, cluster, write(tmp_path, "a.yaml", job), write(tmp_path, "b.yaml", job))
    assert sorted(again) == sorted(wls), "seeded: the same input gives the same names"
