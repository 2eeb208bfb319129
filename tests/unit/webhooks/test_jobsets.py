"""JobSet validation: the queue label, and each replicatedJob's pod-template topology annotations named
by their field path under spec.replicatedJobs[i]; the queue label's immutability; the suspend default."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from controller.api import constants as c
from webhooks.defaulting import applied, suspend_job
from webhooks.validation import validate, validate_update

RACK, BLOCK = "cloud.provider.com/topology-rack", "cloud.provider.com/topology-block"


def jobset(*annotations: dict[str, str], replicas: int = 2, parallelism: int = 4) -> dict[str, Any]:
    """A queued JobSet of one replicatedJob per annotations map (leader, workers, ...)."""
    names = ["leader", "workers", "extra"]
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": "train", "namespace": "ns", "labels": {c.LABEL_QUEUE_NAME: "lq"}},
            "spec": {"replicatedJobs": [
                {"name": names[i], "replicas": replicas, "template": {"spec": {
                    "parallelism": parallelism, "completions": parallelism,
                    "template": {"metadata": {"annotations": notes},
                                 "spec": {"restartPolicy": "Never",
                                          "containers": [{"name": "c", "image": "busybox"}]}}}}}
                for i, notes in enumerate(annotations)]}}


def notes_path(i: int, key: str) -> str:
    return f"spec.replicatedJobs[{i}].template.spec.template.metadata.annotations[{key}]"


@pytest.mark.parametrize(("obj", "paths"), [
    (jobset({c.ANNOTATION_PODSET_REQUIRED_TOPOLOGY: RACK}), []),
    (jobset({}, {c.ANNOTATION_PODSET_PREFERRED_TOPOLOGY: BLOCK}), []),
    (jobset({}, {c.ANNOTATION_PODSET_REQUIRED_TOPOLOGY: "not a label!"}),
     [notes_path(1, c.ANNOTATION_PODSET_REQUIRED_TOPOLOGY)]),
    (jobset({c.ANNOTATION_PODSET_UNCONSTRAINED_TOPOLOGY: "maybe"}),
     [notes_path(0, c.ANNOTATION_PODSET_UNCONSTRAINED_TOPOLOGY)]),
    # 2 Jobs x 4 pods = 8 pods: a slice of 9 is more than the pod set has
    (jobset({c.ANNOTATION_PODSET_REQUIRED_TOPOLOGY: BLOCK, c.ANNOTATION_PODSET_SLICE_REQUIRED_TOPOLOGY: RACK,
             c.ANNOTATION_PODSET_SLICE_SIZE: "9"}),
     [notes_path(0, c.ANNOTATION_PODSET_SLICE_SIZE)]),
    (jobset({c.ANNOTATION_PODSET_REQUIRED_TOPOLOGY: BLOCK, c.ANNOTATION_PODSET_SLICE_REQUIRED_TOPOLOGY: RACK,
             c.ANNOTATION_PODSET_SLICE_SIZE: "4"}), []),
    (jobset({c.ANNOTATION_PODSET_REQUIRED_TOPOLOGY: BLOCK, c.ANNOTATION_PODSET_GROUP_NAME: "g"},
            {c.ANNOTATION_PODSET_REQUIRED_TOPOLOGY: BLOCK, c.ANNOTATION_PODSET_GROUP_NAME: "g"}), []),
    (jobset({c.ANNOTATION_PODSET_REQUIRED_TOPOLOGY: BLOCK, c.ANNOTATION_PODSET_GROUP_NAME: "g"},
            {c.ANNOTATION_PODSET_REQUIRED_TOPOLOGY: RACK, c.ANNOTATION_PODSET_GROUP_NAME: "g"}),
     [notes_path(0, c.ANNOTATION_PODSET_GROUP_NAME), notes_path(1, c.ANNOTATION_PODSET_GROUP_NAME)]),
], ids=["required_rack", "preferred_block_on_the_second", "bad_level_on_the_second",
        "unconstrained_not_a_boolean", "slice_larger_than_replicas_times_pods", "slices_within",
        "a_group_in_one_block", "a_group_asking_two_levels"])
def test_each_replicated_jobs_annotations_are_checked_at_their_path(obj: dict[str, Any], paths: list[str]) -> None:
    assert sorted(e.path for e in validate(obj)) == sorted(paths)


def test_two_levels_on_one_template_are_refused() -> None:
    errors = validate(jobset({c.ANNOTATION_PODSET_REQUIRED_TOPOLOGY: RACK,
                              c.ANNOTATION_PODSET_PREFERRED_TOPOLOGY: BLOCK}))
    assert [e.path for e in errors] == ["spec.replicatedJobs[0].template.spec.template.metadata.annotations"]
    assert "more than one topology annotation, found 2" in errors[0].message


def test_a_bad_queue_label_is_refused() -> None:
    obj = jobset({})
    obj["metadata"]["labels"][c.LABEL_QUEUE_NAME] = "Not_A_Name"
    assert [e.path for e in validate(obj)] == [f"metadata.labels[{c.LABEL_QUEUE_NAME}]"]


@pytest.mark.parametrize(("suspend", "refused"), [(True, False), (False, True)])
def test_the_queue_label_changes_only_while_suspended(suspend: bool, refused: bool) -> None:
    old = jobset({})
    new = copy.deepcopy(old)
    new["metadata"]["labels"][c.LABEL_QUEUE_NAME] = "other"
    new["spec"]["suspend"] = suspend
    assert bool(validate_update(old, new)) is refused


def test_a_queued_jobset_is_created_suspended_and_an_unqueued_one_untouched() -> None:
    assert applied(jobset({}), suspend_job(jobset({})))["spec"]["suspend"] is True
    unqueued = jobset({})
    del unqueued["metadata"]["labels"]
    assert suspend_job(unqueued) == []
