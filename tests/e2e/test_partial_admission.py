"""Partial admission end to end on either control plane: `tasq run --local-webhooks` as a process, only
the real kubectl to drive and observe it. Runs unchanged on the devcluster and `--cluster=real`.

The flavor `two-racks` holds the nodes of racks b1-r1 and b1-r2 only, 8 GPUs each (preemption's
setup). Fillers take one node of b1-r1 and two of b1-r2, so a rack has room for at most six pods of
4 GPUs:

    b1-r1: [filler] [free] [free] [free]       room for 6 pods of 4 GPUs
    b1-r2: [filler] [filler] [free] [free]     room for 4

Every test polls, from start to end, that nothing is over-committed (test_preemption's watch).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from typing import Any

import pytest

from controller.api import constants as c
from tests.e2e.conftest import Kubectl
from tests.e2e.test_operator_clusters import (
    GPU,
    Process,
    condition,
    get,
    pods_of,
    workload_of,
)
from tests.e2e.test_preemption import (
    SETUP,
    OverCommitWatch,
    cluster_queue,
    install_rack_pool,
    is_admitted,
    job,
    local_queue,
    racks_of,
    running_pods,
)

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("jobs_removed")]


@pytest.fixture(scope="module")
def installed(request: pytest.FixtureRequest, cluster: str, kubectl: Kubectl) -> Iterator[None]:
    """CRDs, the GPU nodes (`hack/realcluster/up` made them on the real control plane), the topology,
    the flavor over racks b1-r1 and b1-r2, the PriorityClasses."""
    close = install_rack_pool(request, cluster, kubectl, SETUP)
    yield
    close()


def partial_job(name: str, namespace: str, queue: str, pods: int, min_pods: int, gpus: int) -> str:
    """preemption's Indexed Job (one rack required) with `kueue.x-k8s.io/job-min-parallelism`."""
    obj: dict[str, Any] = json.loads(job(name, namespace, queue, pods, gpus, "e2e-low"))
    obj["metadata"]["annotations"][c.ANNOTATION_JOB_MIN_PARALLELISM] = str(min_pods)
    return json.dumps(obj)


def test_a_job_too_big_for_any_rack_runs_reduced_in_one_rack_and_gets_its_parallelism_back_when_suspended(
        tasq: Process, kubectl: Kubectl, namespace: str) -> None:
    kubectl("apply", "-f", "-", stdin=cluster_queue("partial", 96, {}))
    kubectl("apply", "-f", "-", stdin=local_queue(namespace, "lq", "partial"))
    watch = OverCommitWatch(kubectl, namespace, {"partial": 96})
    try:
        for name, pods, rack in (("filler-1", 1, "b1-r1"), ("filler-2", 2, "b1-r2")):
            kubectl("create", "-f", "-", stdin=job(name, namespace, "lq", pods, 8, "e2e-low", rack=rack))
            watch.until(functools.partial(running_pods, kubectl, namespace, name, pods), 60, f"{name} running")
        kubectl("create", "-f", "-", stdin=partial_job("train", namespace, "lq", 8, 4, 4))
        wl = watch.until(lambda: (w := workload_of(kubectl, namespace, "train")) and is_admitted(w) and w, 60,
                         "train admitted")
        assert wl["spec"]["podSets"][0]["count"] == 8 and wl["spec"]["podSets"][0]["minCount"] == 4
        psa = wl["status"]["admission"]["podSetAssignments"][0]
        assert (psa["count"], psa["resourceUsage"][GPU]) == (6, "24"), psa
        pods = watch.until(lambda: running_pods(kubectl, namespace, "train", 6), 60, "6 pods of train running")
        assert racks_of(kubectl, pods) == {"b1-r1"}
        spec = get(kubectl, "job", "train", "-n", namespace)["spec"]
        assert (spec["parallelism"], spec["completions"]) == (6, 8)  # completions follow only with the annotation
        # Deactivating the Workload evicts it: the Job is suspended and its pod template and parallelism
        # are put back as its author wrote them.
        kubectl("patch", "workload", wl["metadata"]["name"], "-n", namespace, "--type=merge",
                "-p", json.dumps({"spec": {"active": False}}))

        def restored() -> dict[str, Any] | None:
            found = get(kubectl, "job", "train", "-n", namespace)
            template_meta = found["spec"]["template"].get("metadata") or {}
            done = (found["spec"]["suspend"] and found["spec"]["parallelism"] == 8
                    and c.ANNOTATION_TOPOLOGY_WORKLOAD not in (template_meta.get("annotations") or {}))
            return found if done else None

        watch.until(restored, 90, "train suspended with parallelism 8 again")
        assert not [p for p in pods_of(kubectl, namespace, "train")
                    if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]
        reserved = watch.until(lambda: (r := condition(workload_of(kubectl, namespace, "train"), "QuotaReserved"))
                               and r["status"] == "False" and r, 60, "train's quota released")
        assert reserved["status"] == "False"
    except AssertionError as e:
        raise AssertionError(f"{e}\n--- tasq run:\n{tasq.tail()}") from None
    assert not watch.problems


def test_a_job_whose_minimum_fits_no_rack_waits_saying_how_far_it_got(
        tasq: Process, kubectl: Kubectl, namespace: str) -> None:
    kubectl("apply", "-f", "-", stdin=cluster_queue("partial", 96, {}))
    kubectl("apply", "-f", "-", stdin=local_queue(namespace, "lq", "partial"))
    watch = OverCommitWatch(kubectl, namespace, {"partial": 96})
    try:
        kubectl("create", "-f", "-", stdin=job("filler", namespace, "lq", 1, 8, "e2e-low", rack="b1-r1"))
        watch.until(functools.partial(running_pods, kubectl, namespace, "filler", 1), 60, "filler running")
        kubectl("create", "-f", "-", stdin=partial_job("big", namespace, "lq", 10, 9, 4))
        pending = watch.until(lambda: (r := condition(workload_of(kubectl, namespace, "big"), "QuotaReserved"))
                              and r["status"] == "False" and r, 60, "big pending")
        assert 'partial admission: not even 9 of the 10 pod(s) of pod set "main" fit (minCount 9)' \
            in pending["message"], pending
        assert get(kubectl, "job", "big", "-n", namespace)["spec"]["suspend"] is True
    except AssertionError as e:
        raise AssertionError(f"{e}\n--- tasq run:\n{tasq.tail()}") from None
    assert not watch.problems


def test_the_webhook_refuses_a_minimum_not_below_the_parallelism(
        tasq: Process, kubectl: Kubectl, namespace: str) -> None:
    out = kubectl("create", "-f", "-", stdin=partial_job("bad", namespace, "lq", 4, 4, 1), check=False)
    assert out.returncode != 0
    assert (f"metadata.annotations[{c.ANNOTATION_JOB_MIN_PARALLELISM}]: Invalid value: 4: must be greater than 0 "
            "and less than the Job's pod count 4") in out.stderr, out.stderr
