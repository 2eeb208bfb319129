"""Defaulting rules: a queued Job is created suspended; a pod of an admitted pod set gets the gate once."""

from __future__ import annotations

from typing import Any

import jsonpatch
import pytest

from controller.api import constants as c
from controller.core.jobs.pod_group import role_hash
from tests.builders.cluster import make_pod
from tests.builders.kueue import make_job
from webhooks.defaulting import applied, gate_pod, manage_pod, suspend_job

GATE = {"name": c.SCHEDULING_GATE_TOPOLOGY}
OTHER_GATE = {"name": "example.com/quota"}


def admitted_pod() -> Any:
    return make_pod("p").annotation(c.ANNOTATION_TOPOLOGY_PODSET, "main")


@pytest.mark.parametrize(("job", "suspend"), [
    pytest.param(make_job("j").queue("q").obj(), True, id="a queued Job without suspend is suspended"),
    pytest.param(make_job("j").queue("q").set("spec.suspend", False).obj(), True,
                 id="a queued Job asking to run is suspended anyway"),
    pytest.param(make_job("j").queue("q").drop("spec").obj(), True, id="a queued Job without a spec gets one"),
    pytest.param(make_job("j").obj(), None, id="a Job without the queue label is left alone"),
    pytest.param(make_job("j").set("spec.suspend", False).obj(), False, id="an unqueued running Job stays"),
])
def test_queued_jobs_are_created_suspended(job: dict[str, Any], suspend: bool | None) -> None:
    out = applied(job, suspend_job(job))
    assert out.get("spec", {}).get("suspend") is suspend


def test_an_already_suspended_job_needs_no_patch() -> None:
    assert suspend_job(make_job("j").queue("q").set("spec.suspend", True).obj()) == []


@pytest.mark.parametrize("job", [
    pytest.param("not an object", id="a string"),
    pytest.param({"metadata": {"labels": ["x"]}}, id="labels as a list"),
    pytest.param({"metadata": {"labels": {c.LABEL_QUEUE_NAME: "q"}}, "spec": [1]}, id="spec as a list"),
    pytest.param({"metadata": None}, id="metadata null"),
])
def test_malformed_jobs_get_no_patch(job: Any) -> None:
    assert suspend_job(job) == []


@pytest.mark.parametrize(("pod", "gates"), [
    pytest.param(admitted_pod().obj(), [GATE], id="an admitted pod gets the gate"),
    pytest.param(admitted_pod().gate(OTHER_GATE["name"]).obj(), [OTHER_GATE, GATE],
                 id="other gates are kept, in order, ours appended"),
    pytest.param(admitted_pod().gate().obj(), [GATE], id="a pod already gated is not gated twice"),
    pytest.param(admitted_pod().gate(OTHER_GATE["name"]).gate().obj(), [OTHER_GATE, GATE],
                 id="our gate among others is not added again"),
    pytest.param(admitted_pod().drop("spec").obj(), [GATE], id="a pod without a spec gets one"),
    pytest.param(make_pod("p").obj(), None, id="a pod without the podset annotation is not gated"),
    pytest.param(make_pod("p").annotation(c.ANNOTATION_TOPOLOGY_WORKLOAD, "wl").obj(), None,
                 id="the workload annotation alone does not gate"),
])
def test_pods_of_admitted_pod_sets_get_the_gate_once(pod: dict[str, Any], gates: list[Any] | None) -> None:
    out = applied(pod, gate_pod(pod))
    assert out.get("spec", {}).get("schedulingGates") == gates


def test_gating_twice_is_idempotent() -> None:
    pod = admitted_pod().obj()
    once = applied(pod, gate_pod(pod))
    assert gate_pod(once) == []


@pytest.mark.parametrize("pod", [
    pytest.param({"metadata": {"annotations": {c.ANNOTATION_TOPOLOGY_PODSET: "m"}}, "spec": {"schedulingGates": "x"}},
                 id="gates as a string"),
    pytest.param({"metadata": {"annotations": "x"}}, id="annotations as a string"),
    pytest.param([], id="a list"),
])
def test_malformed_pods_get_no_patch(pod: Any) -> None:
    assert gate_pod(pod) == []


@pytest.mark.parametrize("obj", [
    make_job("j").queue("q").obj(), make_job("j").queue("q").drop("spec").obj(),
    admitted_pod().obj(), admitted_pod().gate(OTHER_GATE["name"]).obj(), admitted_pod().drop("spec").obj(),
], ids=["job", "job without spec", "pod", "pod with a gate", "pod without spec"])
def test_patches_are_valid_rfc6902_and_applied_agrees(obj: dict[str, Any]) -> None:
    """An independent JSON patch implementation gives the same object, and the input is untouched."""
    ops = suspend_job(obj) if obj["kind"] == "Job" else gate_pod(obj)
    before = jsonpatch.apply_patch(obj, [])
    assert ops
    assert applied(obj, ops) == jsonpatch.apply_patch(obj, ops)
    assert obj == before


# -- queued plain pods ----------------------------------------------------------------------------

def queued_pod(name: str = "p") -> Any:
    return make_pod(name).requests(cpu="1").label(c.LABEL_QUEUE_NAME, "q")


@pytest.mark.parametrize(("pod", "gates"), [
    pytest.param(queued_pod().obj(), [c.SCHEDULING_GATE_ADMISSION, c.SCHEDULING_GATE_TOPOLOGY], id="no gates yet"),
    pytest.param(queued_pod().gate("example.com/quota").obj(),
                 ["example.com/quota", c.SCHEDULING_GATE_ADMISSION, c.SCHEDULING_GATE_TOPOLOGY], id="after others"),
    pytest.param(queued_pod().gate(c.SCHEDULING_GATE_ADMISSION).obj(),
                 [c.SCHEDULING_GATE_ADMISSION, c.SCHEDULING_GATE_TOPOLOGY], id="never twice"),
    pytest.param(make_pod("p").obj(), None, id="an unqueued pod is left alone"),
    pytest.param(queued_pod().set("metadata.ownerReferences", [
        {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "u", "controller": True}]).obj(), None,
                 id="a queued Job's pod is the Job's"),
])
def test_a_queued_plain_pod_is_created_behind_the_admission_and_topology_gates(pod: Any, gates: list[str] | None) -> None:
    out = applied(pod, manage_pod(pod))
    got = [g["name"] for g in out["spec"].get("schedulingGates") or []] or None
    assert got == gates
    assert (out["metadata"]["labels"].get(c.LABEL_MANAGED) == "true") is (gates is not None)


def test_a_grouped_pod_gets_its_role_hash_and_a_label_key_with_a_slash_is_escaped() -> None:
    pod = queued_pod().drop("metadata.annotations").label(c.LABEL_POD_GROUP_NAME, "g").obj()
    ops = manage_pod(pod)
    assert {"op": "add", "path": "/metadata/labels/kueue.x-k8s.io~1managed", "value": "true"} in ops
    assert applied(pod, ops)["metadata"]["annotations"] == {c.ANNOTATION_ROLE_HASH: role_hash(pod)}
    assert jsonpatch.apply_patch(pod, ops) == applied(pod, ops)  # a valid RFC 6902 patch


@pytest.mark.parametrize(("finalizers", "expected"), [
    pytest.param(None, [c.LABEL_MANAGED], id="none yet: the list is created"),
    pytest.param(["example.com/keep"], ["example.com/keep", c.LABEL_MANAGED], id="after another's"),
    pytest.param([c.LABEL_MANAGED], [c.LABEL_MANAGED], id="never twice"),
])
def test_a_queued_plain_pod_gets_kueue_s_pod_finalizer_once(finalizers: list[str] | None,
                                                            expected: list[str]) -> None:
    pod = queued_pod().obj() if finalizers is None else queued_pod().set("metadata.finalizers", finalizers).obj()
    ops = manage_pod(pod)
    assert applied(pod, ops)["metadata"]["finalizers"] == expected
    assert jsonpatch.apply_patch(pod, ops) == applied(pod, ops)
