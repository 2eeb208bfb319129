"""The Job controller's pure planning (`plan_job`, `pod_for`, `compress_indexes`) as table cases, the
controller against an in-process API server (deleted pods, backoff, deadline, restart), and
(hypothesis) a Job's whole life against a tally of its pods' outcomes."""

from __future__ import annotations

import asyncio
import copy
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from devcluster.server.apiserver import PATCH_MERGE, ApiServer
from devcluster.simulated.components import ManualClock
from devcluster.simulated.jobs import JobController, JobRecord, compress_indexes, plan_job, pod_for

NOW_AT = datetime(2026, 1, 1, 0, 10, tzinfo=UTC)
NOW = "2026-01-01T00:10:00Z"
INDEX = "batch.kubernetes.io/job-completion-index"


class JobBuilder:
    """A defaulted batch/v1 Job as stored: `make_job("j").parallelism(3).completions(5).indexed().build()`."""

    def __init__(self, name: str) -> None:
        self._obj: dict[str, Any] = {
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}"},
            "spec": {"parallelism": 1, "completions": 1, "backoffLimit": 6, "completionMode": "NonIndexed",
                     "suspend": False, "template": {"metadata": {"labels": {"app": "x"}},
                                                    "spec": {"restartPolicy": "Never",
                                                             "containers": [{"name": "main", "image": "x"}]}}},
            "status": {},
        }

    def parallelism(self, n: int) -> JobBuilder:
        self._obj["spec"]["parallelism"] = n
        return self

    def completions(self, n: int | None) -> JobBuilder:
        self._obj["spec"]["completions"] = n
        return self

    def indexed(self) -> JobBuilder:
        self._obj["spec"]["completionMode"] = "Indexed"
        return self

    def suspended(self) -> JobBuilder:
        self._obj["spec"]["suspend"] = True
        return self

    def backoff_limit(self, n: int) -> JobBuilder:
        self._obj["spec"]["backoffLimit"] = n
        return self

    def condition(self, kind: str, status: str = "True") -> JobBuilder:
        self._obj["status"].setdefault("conditions", []).append({"type": kind, "status": status})
        return self

    def started(self, at: str) -> JobBuilder:
        self._obj["status"]["startTime"] = at
        return self

    def active_deadline(self, seconds: int) -> JobBuilder:
        self._obj["spec"]["activeDeadlineSeconds"] = seconds
        return self

    def build(self) -> dict[str, Any]:
        return copy.deepcopy(self._obj)


def make_job(name: str = "j") -> JobBuilder:
    return JobBuilder(name)


def job_pod(name: str, phase: str = "Running", index: int | None = None, created: str = "") -> dict[str, Any]:
    labels = {INDEX: str(index)} if index is not None else {}
    return {"metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}", "labels": labels,
                         "creationTimestamp": created},
            "spec": {"nodeName": "n1"}, "status": {"phase": phase}}


@dataclass
class PlanCase:
    name: str
    job: JobBuilder
    pods: list[dict[str, Any]] = field(default_factory=list)
    want_create: list[int | None] = field(default_factory=list)
    want_delete: list[str] = field(default_factory=list)
    want_status: dict[str, Any] = field(default_factory=dict)
    want_conditions: list[tuple[str, str, str]] = field(default_factory=list)
    record: JobRecord = field(default_factory=JobRecord)
    want_wake: datetime | None = None


def seconds_ago(seconds: float) -> str:
    return (NOW_AT - timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def backoff(failures: int, last_seconds_ago: float, seen: tuple[str, ...] = ()) -> JobRecord:
    """A record that has counted `failures` failures since the last success, the latest that long ago."""
    return JobRecord(failed={f"uid-{name}" for name in seen}, failures_since_success=failures,
                     last_failure=NOW_AT - timedelta(seconds=last_seconds_ago))


PLAN_CASES = [
    PlanCase("a new Job starts parallelism pods and its clock",
             make_job().parallelism(3).completions(5), [], [None, None, None], [],
             {"startTime": NOW}),
    PlanCase("the last completions need fewer pods than parallelism",
             make_job().parallelism(3).completions(5).started("t0"),
             [job_pod(f"s{i}", "Succeeded") for i in range(4)], [None], [],
             {"succeeded": 4, "startTime": "t0"}),
    PlanCase("indexed: one pod per missing index, lowest first, up to parallelism",
             make_job().parallelism(2).completions(5).indexed(),
             [job_pod("a", "Succeeded", 0), job_pod("b", "Running", 2)], [1], [],
             {"completedIndexes": "0", "active": 1, "succeeded": 1}),
    PlanCase("indexed: a duplicate index keeps the older pod",
             make_job().parallelism(2).completions(2).indexed(),
             [job_pod("old", "Running", 1, "t1"), job_pod("new", "Running", 1, "t2")], [0], ["new"],
             {"active": 1}),
    PlanCase("a failed pod is counted; its replacement waits for the 10 s backoff",
             make_job().parallelism(1).completions(1), [job_pod("f", "Failed")], [], [],
             {"failed": 1}, want_wake=NOW_AT + timedelta(seconds=10)),
    PlanCase("once the backoff is over the failed pod is replaced",
             make_job().parallelism(1).completions(1), [job_pod("f", "Failed")], [None], [],
             {"failed": 1}, record=backoff(1, 10, seen=("f",))),
    PlanCase("the backoff doubles with each failure since the last success",
             make_job().parallelism(1).completions(1), [job_pod("f1", "Failed"), job_pod("f2", "Failed")], [], [],
             {"failed": 2}, record=backoff(2, 15, seen=("f1", "f2")), want_wake=NOW_AT + timedelta(seconds=5)),
    PlanCase("the backoff is capped at 10 minutes",
             make_job().parallelism(1).completions(1).backoff_limit(20), [], [], [],
             record=backoff(12, 599), want_wake=NOW_AT + timedelta(seconds=1)),
    PlanCase("a success ends the backoff",
             make_job().parallelism(1).completions(3), [job_pod("s", "Succeeded")], [None], [],
             {"succeeded": 1}, record=backoff(3, 0)),
    PlanCase("past activeDeadlineSeconds the Job fails with DeadlineExceeded and its pods go, counted as failed",
             make_job().parallelism(1).completions(1).active_deadline(60).started(seconds_ago(60)),
             [job_pod("r", "Running")], [], ["r"], {"failed": 1},
             [("FailureTarget", "True", "DeadlineExceeded"), ("Failed", "True", "DeadlineExceeded")]),
    PlanCase("before its active deadline the Job runs and is woken at the deadline",
             make_job().parallelism(1).completions(1).active_deadline(60).started(seconds_ago(30)), [], [None], [],
             want_wake=NOW_AT + timedelta(seconds=30)),
    PlanCase("a suspended Job's active deadline does not run",
             make_job().parallelism(1).completions(1).active_deadline(60).started(seconds_ago(3600)).suspended(),
             [], [], [], {}, [("Suspended", "True", "JobSuspended")]),
    PlanCase("beyond the backoff limit the Job fails and its active pods go, counted as failed",
             make_job().parallelism(2).completions(4).backoff_limit(1),
             [job_pod("f1", "Failed"), job_pod("f2", "Failed"), job_pod("r", "Running")], [], ["r"],
             {"failed": 3},
             [("FailureTarget", "True", "BackoffLimitExceeded"), ("Failed", "True", "BackoffLimitExceeded")]),
    PlanCase("completions reached: SuccessCriteriaMet and Complete",
             make_job().parallelism(2).completions(2),
             [job_pod("a", "Succeeded"), job_pod("b", "Succeeded")], [], [],
             {"succeeded": 2, "completionTime": NOW},
             [("SuccessCriteriaMet", "True", "CompletionsReached"), ("Complete", "True", "CompletionsReached")]),
    PlanCase("work queue (no completions): done after one success once the others drain",
             make_job().parallelism(2).completions(None), [job_pod("a", "Succeeded")], [], [],
             {"succeeded": 1}, [("Complete", "True", "CompletionsReached")]),
    PlanCase("work queue: no new pods after a success while others run",
             make_job().parallelism(3).completions(None),
             [job_pod("a", "Succeeded"), job_pod("b", "Running")], [], [], {"active": 1}),
    PlanCase("suspending deletes the active pods",
             make_job().parallelism(2).completions(2).suspended(),
             [job_pod("a", "Running"), job_pod("b", "Pending")], [], ["a", "b"], {},
             [("Suspended", "True", "JobSuspended")]),
    PlanCase("entering suspension clears startTime, so the template takes new scheduling directives",
             make_job().parallelism(1).completions(1).started("t0").suspended(), [job_pod("a", "Running")], [], ["a"],
             {"startTime": None}, [("Suspended", "True", "JobSuspended")]),
    PlanCase("a Job already marked Suspended keeps its status as it is",
             make_job().parallelism(1).completions(1).started("t0").suspended().condition("Suspended"), [], [], [],
             {"startTime": "t0"}, [("Suspended", "True", "JobSuspended")]),
    PlanCase("resuming resets startTime",
             make_job().parallelism(1).completions(1).started("t0").condition("Suspended"), [], [None], [],
             {"startTime": NOW}, [("Suspended", "False", "JobResumed")]),
    PlanCase("resuming restarts the active deadline from the new startTime",
             make_job().parallelism(1).completions(1).active_deadline(60).started(seconds_ago(3600))
             .condition("Suspended"), [], [None], [], {"startTime": NOW}, want_wake=NOW_AT + timedelta(seconds=60)),
    PlanCase("a finished Job makes no pods",
             make_job().parallelism(2).completions(2).condition("Complete"), [], [], [], {}),
    PlanCase("scaling down deletes unbound pods first",
             make_job().parallelism(1).completions(5),
             [job_pod("bound", "Running", created="t1"),
              {**job_pod("unbound", "Pending", created="t0"), "spec": {}}], [], ["unbound"], {"active": 1}),
]


@pytest.mark.parametrize("case", PLAN_CASES, ids=lambda c: c.name)
def test_plan_job(case: PlanCase) -> None:
    plan = plan_job(case.job.build(), case.pods, case.record, NOW_AT)

    assert [c.index for c in plan.create] == case.want_create
    assert plan.wake_at == case.want_wake
    assert sorted(p["metadata"]["name"] for p in plan.delete) == sorted(case.want_delete)
    for key, value in case.want_status.items():
        assert plan.status.get(key) == value, key
    got = [(c["type"], c["status"], c.get("reason")) for c in plan.status.get("conditions", [])]
    for want in case.want_conditions:
        assert want in got
    if not any(kind == "Failed" for kind, _s, _r in case.want_conditions):
        assert not any(kind == "Failed" for kind, _s, _r in got)


@pytest.mark.parametrize(("indexes", "want"), [
    ([], ""), ([3], "3"), ([0, 1, 2], "0-2"), ([4, 0, 2, 1, 6, 7], "0-2,4,6-7"), ([1, 1, 2], "1-2"),
])
def test_compress_indexes(indexes: list[int], want: str) -> None:
    assert compress_indexes(indexes) == want


def test_pod_for_an_index_carries_labels_annotation_hostname_env_and_owner() -> None:
    pod = pod_for(make_job("train").indexed().completions(4).build(), 3)

    meta, spec = pod["metadata"], pod["spec"]
    assert meta["generateName"] == "train-3-"
    assert meta["labels"][INDEX] == meta["annotations"][INDEX] == "3"
    assert meta["labels"]["batch.kubernetes.io/job-name"] == "train"
    assert meta["labels"]["batch.kubernetes.io/controller-uid"] == "uid-train"
    assert meta["labels"]["app"] == "x"
    assert spec["hostname"] == "train-3"
    assert spec["containers"][0]["env"][-1]["name"] == "JOB_COMPLETION_INDEX"
    assert meta["ownerReferences"] == [{"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "uid-train",
                                        "controller": True, "blockOwnerDeletion": True}]
    assert pod_for(make_job("plain").build(), None)["metadata"]["generateName"] == "plain-"


@dataclass
class EnvCase:
    name: str
    init_env: list[dict[str, Any]] | None
    main_env: list[dict[str, Any]]
    want_init: list[str] | None
    want_main: list[str]


ENV_CASES = [
    EnvCase("the index variable goes into init and main containers", [], [{"name": "A", "value": "1"}],
            ["JOB_COMPLETION_INDEX"], ["A", "JOB_COMPLETION_INDEX"]),
    EnvCase("a variable of that name set by the user is kept, not replaced", None,
            [{"name": "JOB_COMPLETION_INDEX", "value": "mine"}], None, ["JOB_COMPLETION_INDEX"]),
]


@pytest.mark.parametrize("case", ENV_CASES, ids=lambda c: c.name)
def test_pod_for_adds_the_completion_index_variable(case: EnvCase) -> None:
    job = make_job("train").indexed().completions(2).build()
    template = job["spec"]["template"]["spec"]
    template["containers"][0]["env"] = case.main_env
    if case.init_env is not None:
        template["initContainers"] = [{"name": "init", "image": "x", "env": case.init_env}]

    spec = pod_for(job, 1)["spec"]

    assert [e["name"] for e in spec["containers"][0]["env"]] == case.want_main
    assert spec["containers"][0]["env"][0] == case.main_env[0]
    if case.want_init is None:
        assert "initContainers" not in spec
    else:
        assert [e["name"] for e in spec["initContainers"][0]["env"]] == case.want_init
    assert template["containers"][0]["env"] == case.main_env  # the Job's template is not touched


# ---------------------------------------------------------------- the controller on an API server


async def start(job: dict[str, Any], clock: ManualClock | None = None) -> tuple[ApiServer, JobController]:
    api = ApiServer(now=clock or ManualClock())
    body = {k: v for k, v in job.items() if k != "status"}
    body["metadata"] = {"name": job["metadata"]["name"]}
    await api.create(api.resource("batch/v1", "jobs"), "default", body)
    controller = JobController(api).start()
    await controller.sync()
    return api, controller


async def pods(api: ApiServer) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = (await api.list_objects(api.resource("v1", "pods"), "default"))["items"]
    return items


async def test_a_pod_deleted_by_someone_else_counts_as_failed_and_is_replaced_after_the_backoff() -> None:
    clock = ManualClock()
    api, controller = await start(make_job("j").parallelism(2).completions(2).build(), clock)
    [first, _second] = await pods(api)

    await api.delete(api.resource("v1", "pods"), "default", first["metadata"]["name"])
    await controller.sync()
    job = await api.get(api.resource("batch/v1", "jobs"), "default", "j")
    assert job["status"]["failed"] == 1
    assert len(await pods(api)) == 1
    assert controller.next_deadline(clock()) == clock() + timedelta(seconds=10)

    clock.advance(9)
    await controller.sync()
    assert len(await pods(api)) == 1
    clock.advance(1)
    await controller.sync()
    assert len(await pods(api)) == 2
    assert first["metadata"]["name"] not in {p["metadata"]["name"] for p in await pods(api)}


async def test_pods_deleted_for_suspension_are_not_failures() -> None:
    api, controller = await start(make_job("j").parallelism(2).completions(2).build())
    await api.patch(api.resource("batch/v1", "jobs"), "default", "j", PATCH_MERGE, {"spec": {"suspend": True}})
    await controller.sync()

    job = await api.get(api.resource("batch/v1", "jobs"), "default", "j")
    assert await pods(api) == []
    assert "failed" not in job["status"] and "active" not in job["status"]


async def test_the_active_deadline_fails_the_job_when_its_time_comes_with_a_matching_event() -> None:
    clock = ManualClock()
    api, controller = await start(make_job("j").parallelism(1).completions(1).active_deadline(30).build(), clock)
    assert len(await pods(api)) == 1
    assert controller.next_deadline(clock()) == clock() + timedelta(seconds=30)

    clock.advance(30)
    await controller.sync()  # nothing changed in the store: the deadline alone wakes the Job

    job = await api.get(api.resource("batch/v1", "jobs"), "default", "j")
    failed = next(cd for cd in job["status"]["conditions"] if cd["type"] == "Failed")
    assert (failed["reason"], failed["message"]) == ("DeadlineExceeded", "Job was active longer than specified deadline")
    assert await pods(api) == []
    assert job["status"]["failed"] == 1  # the pod it deleted counts as failed, and only once
    events = (await api.list_objects(api.resource("v1", "events"), "default"))["items"]
    assert [(e["type"], e["reason"]) for e in events if e["reason"] not in ("SuccessfulCreate", "SuccessfulDelete")] == [
        ("Warning", "DeadlineExceeded")]


async def test_a_restarted_controller_does_not_count_the_terminated_pods_twice() -> None:
    api, first = await start(make_job("j").parallelism(2).completions(4).indexed().build())
    [done, failed] = await pods(api)
    pods_r = api.resource("v1", "pods")
    for pod, phase in ((done, "Succeeded"), (failed, "Failed")):
        await api.patch(pods_r, "default", pod["metadata"]["name"], PATCH_MERGE, {"status": {"phase": phase}},
                        subresource="status")
    await first.sync()
    before = (await api.get(api.resource("batch/v1", "jobs"), "default", "j"))["status"]
    assert (before["succeeded"], before["failed"], before["completedIndexes"]) == (1, 1, "0")
    first.close()

    second = JobController(api).start()
    await second.sync()

    after = (await api.get(api.resource("batch/v1", "jobs"), "default", "j"))["status"]
    assert (after["succeeded"], after["failed"], after["completedIndexes"]) == (1, 1, "0")


# ---------------------------------------------------------------- property: a Job's life against a tally


@dataclass
class JobRun:
    """A Job and the outcome of each pod it runs, in the order its pods finish (then all succeed)."""

    parallelism: int
    completions: int
    indexed: bool
    backoff_limit: int
    outcomes: list[bool]  # True: the next finishing pod succeeds


@st.composite
def job_runs(draw: st.DrawFn) -> JobRun:
    return JobRun(draw(st.integers(1, 4)), draw(st.integers(1, 6)), draw(st.booleans()), draw(st.integers(0, 3)),
                  draw(st.lists(st.booleans(), max_size=12)))


def is_true(job: dict[str, Any], kind: str) -> bool:
    return any(c["type"] == kind and c["status"] == "True" for c in job["status"].get("conditions", []))


async def live_job(run: JobRun) -> dict[str, Any]:
    """Drive the controller: after each sync check the active pods, then finish the first one; a
    tally of what finished is the oracle for the final status."""
    clock = ManualClock()
    builder = make_job("j").parallelism(run.parallelism).completions(run.completions).backoff_limit(run.backoff_limit)
    api, controller = await start((builder.indexed() if run.indexed else builder).build(), clock)
    jobs_r, pods_r = api.resource("batch/v1", "jobs"), api.resource("v1", "pods")
    outcomes, succeeded, failed, still_running = list(run.outcomes), 0, 0, 0
    while True:
        job = await api.get(jobs_r, "default", "j")
        if is_true(job, "Complete") or is_true(job, "Failed"):
            break
        active = sorted((p for p in await pods(api) if p.get("status", {}).get("phase") not in ("Succeeded", "Failed")),
                        key=lambda p: p["metadata"]["name"])
        assert len(active) <= min(run.parallelism, run.completions - succeeded)
        if run.indexed:
            indexes = [p["metadata"]["labels"][INDEX] for p in active]
            assert len(set(indexes)) == len(indexes)
        if not active:  # waiting out a failure backoff
            wake = controller.next_deadline(clock())
            assert wake is not None
            clock.moment = wake
        else:
            ok = outcomes.pop(0) if outcomes else True
            succeeded, failed, still_running = succeeded + ok, failed + (not ok), len(active) - 1
            await api.patch(pods_r, "default", active[0]["metadata"]["name"], PATCH_MERGE,
                            {"status": {"phase": "Succeeded" if ok else "Failed"}}, subresource="status")
        await controller.sync()
    assert job["status"].get("succeeded", 0) == succeeded
    # a failing Job's pods still running are deleted and count as failed
    assert job["status"].get("failed", 0) == failed + (still_running if is_true(job, "Failed") else 0)
    assert "active" not in job["status"]
    return job


@settings(max_examples=40, deadline=None)
@given(job_runs())
def test_a_job_ends_as_its_pods_outcomes_say(run: JobRun) -> None:
    job = asyncio.run(live_job(run))

    failures_before_end, successes = 0, 0
    for ok in [*run.outcomes, *[True] * run.completions]:  # the oracle: count until one limit is hit
        successes, failures_before_end = successes + ok, failures_before_end + (not ok)
        if failures_before_end > run.backoff_limit or successes == run.completions:
            break
    want_failed = failures_before_end > run.backoff_limit
    assert is_true(job, "Failed") is want_failed
    assert is_true(job, "Complete") is not want_failed
    if run.indexed and not want_failed:
        assert job["status"]["completedIndexes"] == compress_indexes(range(run.completions))
