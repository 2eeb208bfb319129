"""Queued plain pods: the validator of their group metadata (Kueue's pod webhook rules), the group
name kept on update, the conflicts with their group, and both Pod webhooks through kopf."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from controller.api import constants as c
from controller.core.jobs import pod_group
from tests.builders.cluster import PodBuilder, make_pod
from tests.unit.webhooks.reviews import Admission, patched, review
from webhooks.validation import validate, validate_update
from webhooks.validation.pods import conflicts_with_group, validate_pod

TOTAL = f"metadata.annotations[{c.ANNOTATION_POD_GROUP_TOTAL_COUNT}]"
GROUP = f"metadata.labels[{c.LABEL_POD_GROUP_NAME}]"
MIN = f"metadata.labels[{c.LABEL_COSCHEDULING_MIN_AVAILABLE}]"


def queued(name: str = "p", queue: str = "team-a") -> PodBuilder:
    return make_pod(name).requests(cpu="1").label(c.LABEL_QUEUE_NAME, queue)


def paths(errors: Sequence[Any]) -> list[str]:
    return [e.path for e in errors]


@pytest.mark.parametrize(("pod", "expected"), [
    pytest.param(queued(), [], id="a single queued pod"),
    pytest.param(queued().label(c.LABEL_POD_GROUP_NAME, "g").annotate(c.ANNOTATION_POD_GROUP_TOTAL_COUNT, "8"), [],
                 id="a Kueue group"),
    pytest.param(queued().label(c.LABEL_POD_GROUP_NAME, "g"), [TOTAL], id="a Kueue group without its total"),
    pytest.param(queued().annotate(c.ANNOTATION_POD_GROUP_TOTAL_COUNT, "8"), [GROUP], id="a total without a group"),
    pytest.param(queued().label(c.LABEL_POD_GROUP_NAME, "g").annotate(c.ANNOTATION_POD_GROUP_TOTAL_COUNT, "0"),
                 [TOTAL], id="a total of zero"),
    pytest.param(queued().label(c.LABEL_POD_GROUP_NAME, "g").annotate(c.ANNOTATION_POD_GROUP_TOTAL_COUNT, "eight"),
                 [TOTAL], id="a total in words"),
    pytest.param(queued().label(c.LABEL_POD_GROUP_NAME, "G_1").annotate(c.ANNOTATION_POD_GROUP_TOTAL_COUNT, "2"),
                 [GROUP], id="a group name that cannot name a Workload"),
    pytest.param(queued().label(c.LABEL_COSCHEDULING_NAME, "g").label(c.LABEL_COSCHEDULING_MIN_AVAILABLE, "4"), [],
                 id="the coscheduling plugin's pair"),
    pytest.param(queued().label(c.LABEL_COSCHEDULING_NAME, "g"), [MIN], id="a coscheduling name without a minimum"),
    pytest.param(queued().label(c.LABEL_COSCHEDULING_NAME, "g").label(c.LABEL_COSCHEDULING_MIN_AVAILABLE, "7")
                 .annotate(c.ANNOTATION_POD_GROUP_TOTAL_COUNT, "6"), [MIN], id="a minimum above the total"),
    pytest.param(queued().label(c.LABEL_COSCHEDULING_MIN_AVAILABLE, "2"),
                 [f"metadata.labels[{c.LABEL_COSCHEDULING_NAME}]"], id="a minimum without a group"),
    pytest.param(queued().label(c.LABEL_SCHEDULING_POD_GROUP, "g"), [TOTAL],
                 id="the PodGroup-CRD label needs the total (tasq reads no PodGroup)"),
    pytest.param(queued().label(c.LABEL_MANAGED, "false"), [f"metadata.labels[{c.LABEL_MANAGED}]"],
                 id="the managed label only true"),
    pytest.param(queued(queue="Team_A"), [f"metadata.labels[{c.LABEL_QUEUE_NAME}]"], id="a queue that cannot exist"),
    pytest.param(make_pod("p").label(c.LABEL_POD_GROUP_NAME, "g"), [], id="an unqueued pod is not tasq's"),
])
def test_a_queued_pod_s_metadata(pod: PodBuilder, expected: list[str]) -> None:
    assert paths(validate_pod(pod.build())) == expected
    assert paths(validate(pod.build())) == expected  # the dispatcher sends Pods here


def test_the_messages_say_what_is_allowed() -> None:
    (error,) = validate_pod(queued().label(c.LABEL_POD_GROUP_NAME, "g").build())
    assert str(error) == (f"{TOTAL}: Required value: both the '{c.ANNOTATION_POD_GROUP_TOTAL_COUNT}' annotation "
                          f"and the '{c.LABEL_POD_GROUP_NAME}' label should be set")
    (error,) = validate_pod(queued().label(c.LABEL_POD_GROUP_NAME, "g")
                            .annotate(c.ANNOTATION_POD_GROUP_TOTAL_COUNT, "0").build())
    assert str(error) == f'{TOTAL}: Invalid value: "0": the group\'s total count must be a positive integer written in decimal'


def test_a_pod_keeps_its_group() -> None:
    old = queued().label(c.LABEL_POD_GROUP_NAME, "g").annotate(c.ANNOTATION_POD_GROUP_TOTAL_COUNT, "2").build()
    moved = queued().label(c.LABEL_POD_GROUP_NAME, "h").annotate(c.ANNOTATION_POD_GROUP_TOTAL_COUNT, "2").build()
    assert [str(e) for e in validate_update(old, moved)] == [f'{GROUP}: Invalid value: "h": field is immutable']
    assert validate_update(old, old) == []


def group_member(name: str, total: str = "3", queue: str = "team-a") -> dict[str, Any]:
    return queued(name, queue).label(c.LABEL_POD_GROUP_NAME, "g").annotate(
        c.ANNOTATION_POD_GROUP_TOTAL_COUNT, total).build()


def test_a_pod_disagreeing_with_its_group_names_itself_the_field_and_the_other_pod() -> None:
    members = [group_member("a"), group_member("b")]
    (error,) = conflicts_with_group(group_member("c", total="4"), members)
    assert str(error) == f"{TOTAL}: pod c: 4 differs from 3 of pod a in the same group"
    (error,) = conflicts_with_group(group_member("c", queue="team-b"), members)
    assert error.path == f"metadata.labels[{c.LABEL_QUEUE_NAME}]"
    assert conflicts_with_group(group_member("c"), members) == []
    assert conflicts_with_group(group_member("a", total="4"), members[:1]) == []  # itself is not its group
    failed = group_member("x", total="9")
    failed["status"]["phase"] = "Failed"
    assert conflicts_with_group(group_member("c"), [failed]) == []  # a failed pod no longer counts


# -- through kopf ------------------------------------------------------------------------------------

def admit(hooks: Admission, handler_id: str, obj: Mapping[str, Any], operation: str = "CREATE",
          old: Mapping[str, Any] | None = None) -> dict[str, Any]:
    return asyncio.run(hooks.admit(handler_id, review(dict(obj), operation, dict(old) if old else None, False)))


def test_a_queued_pod_is_stored_behind_both_gates_labelled_managed_with_its_role() -> None:
    pod = group_member("a")
    pod["spec"]["schedulingGates"] = [{"name": "example.com/other"}]
    out = patched(pod, admit(Admission(), c.WEBHOOK_MUTATE_QUEUED_POD, pod))
    assert out["spec"]["schedulingGates"] == [{"name": "example.com/other"}, {"name": c.SCHEDULING_GATE_ADMISSION},
                                              {"name": c.SCHEDULING_GATE_TOPOLOGY}]
    assert out["metadata"]["labels"][c.LABEL_MANAGED] == "true"
    assert out["metadata"]["annotations"][c.ANNOTATION_ROLE_HASH] == pod_group.role_hash(pod)


def test_the_validating_webhook_refuses_a_pod_its_group_disagrees_with_when_it_knows_the_group() -> None:
    members = {"default/g": [group_member("a")]}
    hooks = Admission(lambda key: members.get(key, []))
    response = admit(hooks, c.WEBHOOK_VALIDATE_QUEUED_POD, group_member("b", total="4"))
    assert response["allowed"] is False
    assert response["status"]["message"] == (f'Pod "b" is invalid: {TOTAL}: pod b: 4 differs from 3 of pod a '
                                              "in the same group")
    assert admit(hooks, c.WEBHOOK_VALIDATE_QUEUED_POD, group_member("b"))["allowed"] is True
    # an update is checked for its own metadata only: the group was checked when the pod came
    old = group_member("b", total="4")
    assert admit(hooks, c.WEBHOOK_VALIDATE_QUEUED_POD, old, "UPDATE", old)["allowed"] is True
    # a process without a cache (webhooks only) checks each pod alone
    assert admit(Admission(), c.WEBHOOK_VALIDATE_QUEUED_POD, group_member("b", total="4"))["allowed"] is True
