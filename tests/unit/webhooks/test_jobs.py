"""Job validation: the queue label, KEP Job annotations, Kueue pod-template annotations, template."""

from __future__ import annotations

import pytest

from controller.api import constants as c
from tests.unit.webhooks.manifests import BLOCK, RACK, Case, cases, valid_job
from webhooks.validation import validate, validate_update

JOB_NOTES = "metadata.annotations"
TPL_NOTES = "spec.template.metadata.annotations"
REQUIRE = f"{JOB_NOTES}[{c.ANNOTATION_REQUIRE_TOPOLOGY}]"
PREFER = f"{JOB_NOTES}[{c.ANNOTATION_PREFER_TOPOLOGY}]"
PS_REQUIRED = f"{TPL_NOTES}[{c.ANNOTATION_PODSET_REQUIRED_TOPOLOGY}]"
PS_PREFERRED = f"{TPL_NOTES}[{c.ANNOTATION_PODSET_PREFERRED_TOPOLOGY}]"
PS_UNCONSTRAINED = f"{TPL_NOTES}[{c.ANNOTATION_PODSET_UNCONSTRAINED_TOPOLOGY}]"


@cases(
    Case("a plain queued Job", valid_job()),
    Case("a Job without any tasq label is still checked but valid", valid_job().drop("metadata.labels")),
    Case("KEP require-topology at rack level", valid_job().annotate(c.ANNOTATION_REQUIRE_TOPOLOGY, RACK)),
    Case("KEP prefer-topology at block level", valid_job().annotate(c.ANNOTATION_PREFER_TOPOLOGY, BLOCK)),
    Case("KEP prefer-topology auto", valid_job().annotate(c.ANNOTATION_PREFER_TOPOLOGY, "auto")),
    Case("Kueue podset-required-topology", valid_job().template_annotate(c.ANNOTATION_PODSET_REQUIRED_TOPOLOGY, RACK)),
    Case("Kueue podset-preferred-topology",
         valid_job().template_annotate(c.ANNOTATION_PODSET_PREFERRED_TOPOLOGY, BLOCK)),
    Case("Kueue podset-unconstrained-topology true",
         valid_job().template_annotate(c.ANNOTATION_PODSET_UNCONSTRAINED_TOPOLOGY, "true")),
    Case("Kueue podset-unconstrained-topology false",
         valid_job().template_annotate(c.ANNOTATION_PODSET_UNCONSTRAINED_TOPOLOGY, "false")),
    Case("Kueue's unconstrained value capitalised as Go's ParseBool reads it",
         valid_job().template_annotate(c.ANNOTATION_PODSET_UNCONSTRAINED_TOPOLOGY, "True")),
    Case("a KEP annotation on the pod template is read there too",
         valid_job().template_annotate(c.ANNOTATION_PREFER_TOPOLOGY, "auto")),
    Case("a KEP annotation on the template is checked there",
         valid_job().template_annotate(c.ANNOTATION_REQUIRE_TOPOLOGY, "auto"),
         want_errors=(f"{TPL_NOTES}[{c.ANNOTATION_REQUIRE_TOPOLOGY}]",)),
    Case("a Kueue annotation on the Job is checked there",
         valid_job().annotate(c.ANNOTATION_PODSET_UNCONSTRAINED_TOPOLOGY, "yes"),
         want_errors=(f"{JOB_NOTES}[{c.ANNOTATION_PODSET_UNCONSTRAINED_TOPOLOGY}]",)),
    Case("a KEP and a Kueue annotation both on the template",
         valid_job().template_annotate(c.ANNOTATION_REQUIRE_TOPOLOGY, RACK)
         .template_annotate(c.ANNOTATION_PODSET_REQUIRED_TOPOLOGY, BLOCK), want_errors=(TPL_NOTES,)),
    Case("the same annotation on the Job and on its template",
         valid_job().annotate(c.ANNOTATION_PODSET_REQUIRED_TOPOLOGY, RACK)
         .template_annotate(c.ANNOTATION_PODSET_REQUIRED_TOPOLOGY, RACK), want_errors=(TPL_NOTES,)),
    Case("unrelated annotations do not count", valid_job().annotate("example.com/owner", "ml")
         .annotate(c.ANNOTATION_REQUIRE_TOPOLOGY, RACK).template_annotate("prometheus.io/scrape", "true")),
    Case("require-topology auto", valid_job().annotate(c.ANNOTATION_REQUIRE_TOPOLOGY, "auto"),
         want_errors=(REQUIRE,)),
    Case("require-topology with a space", valid_job().annotate(c.ANNOTATION_REQUIRE_TOPOLOGY, "my rack"),
         want_errors=(REQUIRE,)),
    Case("prefer-topology empty", valid_job().annotate(c.ANNOTATION_PREFER_TOPOLOGY, ""), want_errors=(PREFER,)),
    Case("podset-required-topology auto",
         valid_job().template_annotate(c.ANNOTATION_PODSET_REQUIRED_TOPOLOGY, "auto"), want_errors=(PS_REQUIRED,)),
    Case("podset-preferred-topology with two slashes",
         valid_job().template_annotate(c.ANNOTATION_PODSET_PREFERRED_TOPOLOGY, "a/b/c"),
         want_errors=(PS_PREFERRED,)),
    Case("podset-unconstrained-topology yes",
         valid_job().template_annotate(c.ANNOTATION_PODSET_UNCONSTRAINED_TOPOLOGY, "yes"),
         want_errors=(PS_UNCONSTRAINED,)),
    Case("both KEP annotations on the Job", valid_job().annotate(c.ANNOTATION_REQUIRE_TOPOLOGY, RACK)
         .annotate(c.ANNOTATION_PREFER_TOPOLOGY, BLOCK), want_errors=(JOB_NOTES,)),
    Case("a KEP Job annotation and a Kueue template annotation",
         valid_job().annotate(c.ANNOTATION_PREFER_TOPOLOGY, BLOCK)
         .template_annotate(c.ANNOTATION_PODSET_REQUIRED_TOPOLOGY, RACK), want_errors=(TPL_NOTES,)),
    Case("two Kueue template annotations",
         valid_job().template_annotate(c.ANNOTATION_PODSET_REQUIRED_TOPOLOGY, RACK)
         .template_annotate(c.ANNOTATION_PODSET_UNCONSTRAINED_TOPOLOGY, "true"), want_errors=(TPL_NOTES,)),
    Case("an invalid value and a conflict are both reported",
         valid_job().annotate(c.ANNOTATION_REQUIRE_TOPOLOGY, "auto")
         .template_annotate(c.ANNOTATION_PODSET_PREFERRED_TOPOLOGY, RACK), want_errors=(REQUIRE, TPL_NOTES)),
    Case("a queue label that is not a DNS name", valid_job().label(c.LABEL_QUEUE_NAME, "Training_Queue"),
         want_errors=(f"metadata.labels[{c.LABEL_QUEUE_NAME}]",)),
    Case("a negative parallelism", valid_job().set("spec.parallelism", -2), want_errors=("spec.parallelism",)),
    Case("a template without containers", valid_job().set("spec.template.spec.containers", []),
         want_errors=("spec.template.spec.containers",)),
    Case("a malformed gpu request", valid_job().set("spec.template.spec.containers.0.resources.requests",
                                                   {"nvidia.com/gpu": "1.2.3"}),
         want_errors=("spec.template.spec.containers[0].resources.requests[nvidia.com/gpu]",)),
    Case("a toleration with an unknown operator",
         valid_job().set("spec.template.spec.tolerations", [{"key": "gpu", "operator": "Is"}]),
         want_errors=("spec.template.spec.tolerations[0].operator",)),
    Case("annotations that are not strings", valid_job().set("metadata.annotations", {
        c.ANNOTATION_REQUIRE_TOPOLOGY: 3}), want_errors=(REQUIRE,)),
    # kube-apiserver's own rules on the template: on a cluster it refuses these before the webhook runs.
    Case("a template restarting OnFailure", valid_job().set("spec.template.spec.restartPolicy", "OnFailure")),
    Case("a template restarting Always (what the API server defaults an absent one to)",
         valid_job().set("spec.template.spec.restartPolicy", "Always"),
         want_errors=("spec.template.spec.restartPolicy",)),
    Case("a template without restartPolicy (an undefaulted manifest, as tasq simulate reads it)",
         valid_job().drop("spec.template.spec.restartPolicy"), want_errors=("spec.template.spec.restartPolicy",)),
    Case("OnFailure with a podFailurePolicy", valid_job().set("spec.template.spec.restartPolicy", "OnFailure")
         .set("spec.podFailurePolicy", {"rules": []}), want_errors=("spec.template.spec.restartPolicy",)),
    Case("a GPU request with its limit", valid_job().requests({"nvidia.com/gpu": "2"})),
    Case("a GPU request without a limit", valid_job().set("spec.template.spec.containers.0.resources",
                                                          {"requests": {"nvidia.com/gpu": "2"}}),
         want_errors=("spec.template.spec.containers[0].resources.limits",)),
    Case("a template bound to a node while gated (kube-apiserver allows it in a template)",
         valid_job().set("spec.template.spec.nodeName", "n1")
         .set("spec.template.spec.schedulingGates", [{"name": "a.io/x"}])),
    Case("a template with a gate twice", valid_job().set("spec.template.spec.schedulingGates",
                                                         [{"name": "a.io/x"}, {"name": "a.io/x"}]),
         want_errors=("spec.template.spec.schedulingGates[1]",)),
)
def test_job(case: Case) -> None:
    assert sorted(e.path for e in validate(case.manifest())) == sorted(case.want_errors)


def test_auto_on_require_says_where_it_is_allowed() -> None:
    errs = validate(valid_job().annotate(c.ANNOTATION_REQUIRE_TOPOLOGY, "auto").build())
    assert [str(e) for e in errs] == [
        f'{REQUIRE}: Invalid value: "auto": \'auto\' is only allowed for kueue.x-k8s.io/prefer-topology; '
        'use a topology level label such as "cloud.provider.com/topology-rack"']


def test_conflict_names_every_annotation_found() -> None:
    job = valid_job().annotate(c.ANNOTATION_PREFER_TOPOLOGY, "auto") \
        .template_annotate(c.ANNOTATION_PODSET_REQUIRED_TOPOLOGY, RACK) \
        .template_annotate(c.ANNOTATION_PODSET_UNCONSTRAINED_TOPOLOGY, "false")
    assert [str(e) for e in validate(job.build())] == [
        f"{TPL_NOTES}: Invalid value: must not contain more than one topology annotation, found 3: "
        f'"{PREFER}", "{PS_REQUIRED}", "{PS_UNCONSTRAINED}"']


def test_unconstrained_lists_the_allowed_values() -> None:
    errs = validate(valid_job().template_annotate(c.ANNOTATION_PODSET_UNCONSTRAINED_TOPOLOGY, "yes").build())
    assert [e.message for e in errs] == ['Unsupported value: "yes": supported values: "true", "false", "True", '
                                         '"False", "TRUE", "FALSE"']


@pytest.mark.parametrize(("old_suspend", "new_suspend", "new_queue", "want_errors"), [
    pytest.param(True, True, "other", [], id="a suspended Job may move to another queue"),
    pytest.param(False, False, "other", [f"metadata.labels[{c.LABEL_QUEUE_NAME}]"],
                 id="a running Job keeps its queue"),
    pytest.param(False, False, "training", [], id="a running Job with the same queue is fine"),
    pytest.param(False, True, "other", [], id="suspending a Job and moving it in one update (Kueue allows it)"),
    pytest.param(True, False, "other", [f"metadata.labels[{c.LABEL_QUEUE_NAME}]"],
                 id="resuming a Job and moving it in one update is refused"),
])
def test_job_queue_label_update(old_suspend: bool, new_suspend: bool, new_queue: str,
                                want_errors: list[str]) -> None:
    old = valid_job().set("spec.suspend", old_suspend).build()
    new = valid_job().set("spec.suspend", new_suspend).label(c.LABEL_QUEUE_NAME, new_queue).build()
    assert [e.path for e in validate_update(old, new)] == want_errors


MIN_PAR = f"{JOB_NOTES}[{c.ANNOTATION_JOB_MIN_PARALLELISM}]"
EQUAL = f"{JOB_NOTES}[{c.ANNOTATION_JOB_COMPLETIONS_EQUAL_PARALLELISM}]"


@cases(  # valid_job has parallelism 4
    Case("a minimum parallelism below the parallelism", valid_job().annotate(c.ANNOTATION_JOB_MIN_PARALLELISM, "2")),
    Case("the largest minimum: one below the parallelism",
         valid_job().annotate(c.ANNOTATION_JOB_MIN_PARALLELISM, "3")),
    Case("a minimum equal to the parallelism reduces nothing",
         valid_job().annotate(c.ANNOTATION_JOB_MIN_PARALLELISM, "4"), want_errors=(MIN_PAR,)),
    Case("a minimum of 0", valid_job().annotate(c.ANNOTATION_JOB_MIN_PARALLELISM, "0"), want_errors=(MIN_PAR,)),
    Case("a negative minimum", valid_job().annotate(c.ANNOTATION_JOB_MIN_PARALLELISM, "-1"), want_errors=(MIN_PAR,)),
    Case("a minimum that is not an integer", valid_job().annotate(c.ANNOTATION_JOB_MIN_PARALLELISM, "half"),
         want_errors=(MIN_PAR,)),
    Case("completions fewer than parallelism bound the minimum (Kueue's pod count)",
         valid_job().set("spec.completions", 2).annotate(c.ANNOTATION_JOB_MIN_PARALLELISM, "2"),
         want_errors=(MIN_PAR,)),
    Case("completions equal to parallelism on an Indexed Job",
         valid_job().set("spec.completionMode", "Indexed").set("spec.completions", 4)
         .annotate(c.ANNOTATION_JOB_COMPLETIONS_EQUAL_PARALLELISM, "true")),
    Case("completions equal to parallelism on a NonIndexed Job",
         valid_job().set("spec.completions", 4).annotate(c.ANNOTATION_JOB_COMPLETIONS_EQUAL_PARALLELISM, "true"),
         want_errors=(EQUAL,)),
    Case("completions-equal-parallelism with completions that differ",
         valid_job().set("spec.completionMode", "Indexed").set("spec.completions", 8)
         .annotate(c.ANNOTATION_JOB_COMPLETIONS_EQUAL_PARALLELISM, "true"), want_errors=("spec.completions",)),
    Case("completions-equal-parallelism false asks for nothing",
         valid_job().set("spec.completions", 8).annotate(c.ANNOTATION_JOB_COMPLETIONS_EQUAL_PARALLELISM, "false")),
    Case("completions-equal-parallelism not a boolean",
         valid_job().annotate(c.ANNOTATION_JOB_COMPLETIONS_EQUAL_PARALLELISM, "yes"), want_errors=(EQUAL,)),
)
def test_partial_admission_annotations(case: Case) -> None:
    assert sorted(e.path for e in validate(case.manifest())) == sorted(case.want_errors)


def test_a_minimum_out_of_range_says_the_allowed_range() -> None:
    errs = validate(valid_job().annotate(c.ANNOTATION_JOB_MIN_PARALLELISM, "4").build())
    assert [str(e) for e in errs] == [
        f"{MIN_PAR}: Invalid value: 4: must be greater than 0 and less than the Job's pod count 4 "
        "(its parallelism, or completions when fewer)"]


@pytest.mark.parametrize(("old", "new", "want_errors"), [
    pytest.param({"suspend": True, "parallelism": 8, "min": "4"}, {"suspend": False, "parallelism": 4, "min": "4"},
                 [], id="tasq starts a Job at its minimum: the unchanged annotation is not checked again"),
    pytest.param({"suspend": False, "parallelism": 6, "min": "4"}, {"suspend": False, "parallelism": 5, "min": "4"},
                 ["spec.parallelism"], id="a running partially admitted Job keeps its parallelism"),
    pytest.param({"suspend": True, "parallelism": 6, "min": "4"}, {"suspend": True, "parallelism": 8, "min": "4"},
                 [], id="tasq restores the parallelism of a suspended Job"),
    pytest.param({"suspend": False, "parallelism": 6, "min": None}, {"suspend": False, "parallelism": 5, "min": None},
                 [], id="a Job without the annotation is the Job controller's business"),
    pytest.param({"suspend": True, "parallelism": 4, "min": "2"}, {"suspend": True, "parallelism": 4, "min": "4"},
                 [MIN_PAR], id="a changed minimum is checked"),
])
def test_partial_admission_update(old: dict[str, object], new: dict[str, object], want_errors: list[str]) -> None:
    def job(fields: dict[str, object]) -> dict[str, object]:
        builder = valid_job().set("spec.suspend", fields["suspend"]).set("spec.parallelism", fields["parallelism"])
        if fields["min"] is not None:
            builder.annotate(c.ANNOTATION_JOB_MIN_PARALLELISM, str(fields["min"]))
        return builder.build()
    assert [e.path for e in validate_update(job(old), job(new))] == want_errors
