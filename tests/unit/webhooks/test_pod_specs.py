"""pod_specs: kube-apiserver's rules on a Pod spec or a Job template, each at kube-apiserver's field path."""

from __future__ import annotations

from typing import Any

import pytest

from webhooks.validation.errors import ROOT
from webhooks.validation.pod_specs import job_restart_policy, overcommit_allowed, pod_spec

SPEC = ROOT.child("spec")
TERMS = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"


def spec(resources: dict[str, Any] | None = None, **fields: Any) -> dict[str, Any]:
    return {"containers": [{"name": "c", "image": "x", "resources": resources or {}}], **fields}


def term(*expressions: dict[str, Any], fields: tuple[dict[str, Any], ...] = ()) -> dict[str, Any]:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": list(expressions), "matchFields": list(fields)}]}}}


@pytest.mark.parametrize(("name", "allowed"), [
    ("cpu", True), ("memory", True), ("kubernetes.io/widget", True), ("example.kubernetes.io/x", True),
    ("nvidia.com/gpu", False), ("hugepages-2Mi", False),
])
def test_only_native_resources_but_hugepages_may_request_less_than_their_limit(name: str, allowed: bool) -> None:
    assert overcommit_allowed(name) is allowed


CASES: list[tuple[str, dict[str, Any], bool, list[str]]] = [
    ("GPUs requested and limited alike", spec({"requests": {"nvidia.com/gpu": "2"}, "limits": {"nvidia.com/gpu": "2"}}),
     True, []),
    ("a GPU limit alone (the request defaults to it)", spec({"limits": {"nvidia.com/gpu": "2"}}), True, []),
    ("cpu below its limit", spec({"requests": {"cpu": "1"}, "limits": {"cpu": "2"}}), True, []),
    ("two GPU resources without limits: one line, as the limit is one field",
     spec({"requests": {"nvidia.com/gpu": "1", "example.com/fpga": "1"}}), True,
     ["spec.containers[0].resources.limits: Required value: Limit must be set for non overcommitable resources"]),
    ("one GPU below its limit", spec({"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "2"}}), True,
     ['spec.containers[0].resources.requests: Invalid value: "1": must be equal to nvidia.com/gpu limit of 2']),
    ("a fractional GPU", spec({"limits": {"nvidia.com/gpu": "1.5"}}), True,
     ['spec.containers[0].resources.limits[nvidia.com/gpu]: Invalid value: "1.5": must be an integer']),
    ("hugepages alone", spec({"limits": {"hugepages-1Gi": "1Gi"}}), True,
     ["spec.containers[0].resources: Forbidden: HugePages require cpu or memory"]),
    ("hugepages with memory", spec({"limits": {"hugepages-1Gi": "1Gi", "memory": "2Gi"}}), True, []),
    ("a malformed quantity is pod_template's to report", spec({"requests": {"nvidia.com/gpu": "lots"}}), True, []),
    ("no image", {"containers": [{"name": "c"}]}, True, ["spec.containers[0].image: Required value"]),
    ("an unnamed gate", spec(schedulingGates=[{"name": ""}]), True,
     ['spec.schedulingGates[0]: Invalid value: "": name part must be non-empty']),
    ("a Pod bound while gated", spec(nodeName="n1", schedulingGates=[{"name": "a.io/x"}]), True,
     ["spec.nodeName: Forbidden: cannot be set until all schedulingGates have been cleared"]),
    ("a Job template bound while gated (allowed there)", spec(nodeName="n1", schedulingGates=[{"name": "a.io/x"}]),
     False, []),
    ("a Pod bound with an empty gate list", spec(nodeName="n1", schedulingGates=[]), True, []),
    ("a Pod restart policy that does not exist", spec(restartPolicy="Sometimes"), True,
     ['spec.restartPolicy: Unsupported value: "Sometimes": supported values: "Always", "OnFailure", "Never"']),
    ("an empty required term (it matches no node)", spec(affinity=term()), True, []),
    ("Gt with two values", spec(affinity=term({"key": "gen", "operator": "Gt", "values": ["1", "2"]})), True,
     [f"{TERMS}.matchExpressions[0].values: Required value: must be specified single value when `operator` is "
      "'Lt' or 'Gt'"]),
    ("Exists with a value", spec(affinity=term({"key": "gen", "operator": "Exists", "values": ["1"]})), True,
     [f"{TERMS}.matchExpressions[0].values: Forbidden: may not be specified when `operator` is 'Exists' or "
      "'DoesNotExist'"]),
    ("a field selector on labels", spec(affinity=term(fields=({"key": "metadata.labels", "operator": "In",
                                                               "values": ["a"]},))), True,
     [f'{TERMS}.matchFields[0].key: Invalid value: "metadata.labels": not a valid field selector key']),
    ("a preferred term weighing 0", spec(affinity={"nodeAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 0, "preference": {}}]}}), True,
     ["spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight: Invalid value: 0: "
      "must be in the range 1-100"]),
]


@pytest.mark.parametrize(("obj", "is_pod", "errors"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_pod_spec(obj: dict[str, Any], is_pod: bool, errors: list[str]) -> None:
    assert [str(e) for e in pod_spec(SPEC, obj, is_pod=is_pod)] == errors


@pytest.mark.parametrize(("policy", "pod_failure_policy", "error"), [
    (None, False, 'Required value: valid values: "OnFailure", "Never"'),
    ("Always", False, 'Required value: valid values: "OnFailure", "Never"'),
    ("Bogus", False, 'Unsupported value: "Bogus": supported values: "OnFailure", "Never"'),
    ("OnFailure", True, 'Invalid value: "OnFailure": only "Never" is supported when podFailurePolicy is specified'),
    ("OnFailure", False, None), ("Never", True, None),
], ids=["absent_reads_as_the_default_always", "always", "unknown", "on_failure_with_pod_failure_policy",
        "on_failure", "never_with_pod_failure_policy"])
def test_a_job_template_restarts_on_failure_or_never(policy: str | None, pod_failure_policy: bool,
                                                     error: str | None) -> None:
    path = SPEC.child("template").child("spec").child("restartPolicy")
    obj = spec() if policy is None else spec(restartPolicy=policy)
    want = [] if error is None else [f"spec.template.spec.restartPolicy: {error}"]
    assert [str(e) for e in job_restart_policy(path, obj, pod_failure_policy)] == want
