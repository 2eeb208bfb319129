"""`tasq demo`'s reading of the cluster: the domain picture, the facts it states, when a step is done.

The cluster drawn for these cases (8 GPUs per host):

    h100 block b1                      a100 block b3
      rack b1-r1: h1 h2                  rack b3-r1: a1
      rack b1-r2: h3
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from controller.api import constants as c
from controller.commands import demo
from controller.commands.demo import ClusterView


def _node(name: str, gpu: str, block: str, rack: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {demo.LABEL_GPU: gpu, demo.LABEL_BLOCK: block,
                                                  demo.LABEL_RACK: rack}}}


NODES = {n["metadata"]["name"]: n for n in (
    _node("h1", "h100", "b1", "b1-r1"), _node("h2", "h100", "b1", "b1-r1"), _node("h3", "h100", "b1", "b1-r2"),
    _node("a1", "a100", "b3", "b3-r1"))}


@dataclass
class ViewBuilder:
    """A ClusterView one Job at a time: its parallelism, where its pods run, its Workload's conditions."""

    jobs: dict[str, dict[str, Any]] = field(default_factory=dict)
    pods: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    workloads: list[dict[str, Any]] = field(default_factory=list)
    jobsets: dict[str, dict[str, Any]] = field(default_factory=dict)

    def job(self, name: str, parallelism: int, on: tuple[str, ...] = (), pending: int = 0,
            suspended: bool = False, conditions: dict[str, str] | None = None) -> ViewBuilder:
        self.jobs[name] = {"metadata": {"name": name}, "spec": {"parallelism": parallelism, "suspend": suspended}}
        self.pods[name] = [{"spec": {"nodeName": n}, "status": {"phase": "Running"}} for n in on]
        self.pods[name] += [{"spec": {}, "status": {"phase": "Pending"}} for _ in range(pending)]
        self.workloads.append({
            "metadata": {"ownerReferences": [{"kind": c.KIND_JOB, "name": name}]},
            "status": {"conditions": [{"type": t, "status": "True" if v == "True" else "False",
                                       "reason": "Pending" if v != "True" else t, "message": v}
                                      for t, v in (conditions or {}).items()]}})
        return self

    def jobset(self, name: str, replicated: tuple[tuple[int, int], ...], on: tuple[str, ...] = ()) -> ViewBuilder:
        """A JobSet of (replicas, parallelism) replicatedJobs; its running pods on the nodes `on`."""
        self.jobsets[name] = {"metadata": {"name": name}, "spec": {"replicatedJobs": [
            {"name": f"r{i}", "replicas": r, "template": {"spec": {"parallelism": p}}}
            for i, (r, p) in enumerate(replicated)]}}
        self.pods[name] = [{"spec": {"nodeName": n}, "status": {"phase": "Running"}} for n in on]
        self.workloads.append({"metadata": {"ownerReferences": [{"kind": c.KIND_JOBSET, "name": name}]},
                               "status": {}})
        return self

    def build(self) -> ClusterView:
        return ClusterView(self.workloads, self.jobs, self.pods, NODES, jobsets=self.jobsets)


def test_the_picture_groups_running_pods_by_block_rack_and_host_in_label_order() -> None:
    view = (ViewBuilder()
            .job("train", 3, on=("h1", "h2", "h1"))
            .job("eval", 2, on=("h3",), pending=1)
            .job("gang", 1, on=("a1",)).build())
    assert demo.render_domains(view) == [
        "a100 block b3",
        "  rack b3-r1: gang x1",
        "    a1: gang x1",
        "h100 block b1",
        "  rack b1-r1: train x3",
        "    h1: train x2",
        "    h2: train x1",
        "  rack b1-r2: eval x1",
        "    h3: eval x1",
    ]


def test_hosts_in_a_row_running_the_same_pods_take_one_line() -> None:
    view = ViewBuilder().job("train", 2, on=("h1", "h2")).job("eval", 2, on=("h3", "a1")).build()
    assert demo.render_domains(view) == [
        "a100 block b3",
        "  rack b3-r1: eval x1",
        "    a1: eval x1",
        "h100 block b1",
        "  rack b1-r1: train x2",
        "    h1 .. h2 (2 nodes): train x1 each",
        "  rack b1-r2: eval x1",
        "    h3: eval x1",
    ]


def test_the_facts_count_racks_and_blocks_from_where_pods_run() -> None:
    view = (ViewBuilder()
            .job(demo.REQUIRE_RACK_JOB, 2, on=("h1", "h2"))
            .job(demo.PREFER_RACK_JOB, 2, on=("h2", "h3"))
            .jobset(demo.JOBSET, ((1, 1), (2, 2)), on=("h1", "h2", "h2", "h1", "h1")).build())
    require, prefer, jobset = demo.placement_facts(view)
    assert require == f"{demo.REQUIRE_RACK_JOB} (require rack): 2 pods in 1 rack (b1-r1)"
    assert prefer.endswith("one block: 2 racks of block b1")
    assert jobset.startswith(f"{demo.JOBSET} (JobSet: ") and jobset.endswith(": 5 pods in 1 rack (b1-r1)")


def test_a_waiting_gang_reports_its_suspension_pod_count_and_reason() -> None:
    view = ViewBuilder().job(demo.SECOND_GANG, 4, suspended=True,
                             conditions={c.CONDITION_QUOTA_RESERVED: "insufficient quota"}).build()
    assert demo.waiting_facts(view, demo.SECOND_GANG) == [
        f"{demo.SECOND_GANG}: suspended=true, pods created: 0", "  Pending: insufficient quota"]


STEP_CASES = [
    pytest.param(ViewBuilder().job("a", 2, on=("h1", "h2"))
                 .job(demo.SECOND_GANG, 4, conditions={c.CONDITION_QUOTA_RESERVED: "no quota"}),
                 True, id="everything-runs-and-the-second-gang-was-told-why"),
    pytest.param(ViewBuilder().job("a", 2, on=("h1",), pending=1)
                 .job(demo.SECOND_GANG, 4, conditions={c.CONDITION_QUOTA_RESERVED: "no quota"}),
                 False, id="one-pod-still-pending"),
    pytest.param(ViewBuilder().job("a", 2, on=("h1", "h2")).job(demo.SECOND_GANG, 4),
                 False, id="the-second-gang-has-no-verdict-yet"),
    pytest.param(ViewBuilder().job("a", 2, on=("h1", "h2")).jobset("js", ((1, 1), (2, 2)), on=("h1", "h2", "h3"))
                 .job(demo.SECOND_GANG, 4, conditions={c.CONDITION_QUOTA_RESERVED: "no quota"}),
                 False, id="the-jobset-runs-3-of-its-5-pods"),
    pytest.param(ViewBuilder().job("a", 2, on=("h1", "h2")).jobset("js", ((1, 1), (2, 2)), on=("h1",) * 5)
                 .job(demo.SECOND_GANG, 4, conditions={c.CONDITION_QUOTA_RESERVED: "no quota"}),
                 True, id="the-jobset-runs-whole"),
]


@pytest.mark.parametrize(("builder", "done"), STEP_CASES)
def test_the_first_step_waits_for_whole_jobs_and_a_verdict(builder: ViewBuilder, done: bool) -> None:
    assert demo.first_step_done(builder.build()) is done


def test_the_second_step_needs_the_first_gang_finished_and_the_second_running_whole() -> None:
    running = ViewBuilder().job(demo.FIRST_GANG, 1, conditions={c.CONDITION_FINISHED: "True"}).job(demo.SECOND_GANG, 1,
                                                                                             on=("a1",))
    assert demo.second_step_done(running.build())
    not_finished = ViewBuilder().job(demo.FIRST_GANG, 1, on=("a1",)).job(demo.SECOND_GANG, 1, on=("a1",))
    assert not demo.second_step_done(not_finished.build())


def test_every_sample_job_is_told_how_long_to_run_and_only_the_first_gang_is_short() -> None:
    jobs = [o for o in demo.sample_objects() if o["kind"] == c.KIND_JOB]
    seconds = {j["metadata"]["name"]: j["spec"]["template"]["metadata"]["annotations"]
               [c.ANNOTATION_DEVCLUSTER_RUN_SECONDS] for j in jobs}
    assert {demo.FIRST_GANG, demo.SECOND_GANG, demo.REQUIRE_RACK_JOB, demo.PREFER_RACK_JOB} <= set(seconds)
    assert seconds[demo.FIRST_GANG] == str(demo.RUN_SECONDS_FIRST_GANG)
    assert all(s == str(demo.RUN_SECONDS_DEFAULT) for n, s in seconds.items() if n != demo.FIRST_GANG)
