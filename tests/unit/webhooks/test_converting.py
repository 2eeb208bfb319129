"""ConversionReviews answered as kube-apiserver expects: the request's uid, every object converted in
order, or a Failure naming the object and field; 400 only when there is no request to answer. The
converter here is a stand-in renaming one field (the pure conversion is tested on its own)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from tests.builders.conversion import V1BETA1 as V1
from tests.builders.conversion import V1BETA2 as V2
from tests.builders.conversion import Failure, rename_cohort
from webhooks.converting import (
    MAX_FAILURES_SHOWN,
    answer_conversion,
    convert_all,
    failure_message,
    review_problems,
)


def queue(name: str, cohort: Any = "pool", version: str = V1) -> dict[str, Any]:
    field = "cohort" if version == V1 else "cohortName"
    return {"apiVersion": version, "kind": "ClusterQueue", "metadata": {"name": name, "uid": f"uid-{name}"},
            "spec": {field: cohort}}


def conversion_review(objects: list[Any], desired: str = V2, uid: str = "review-1") -> dict[str, Any]:
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
            "request": {"uid": uid, "desiredAPIVersion": desired, "objects": objects}}


def test_every_object_is_converted_in_order_under_the_requests_uid() -> None:
    status, body = answer_conversion(conversion_review([queue("a"), queue("b", "other"), queue("c")]), rename_cohort)
    assert status == 200
    assert body["apiVersion"] == "apiextensions.k8s.io/v1" and body["kind"] == "ConversionReview"
    response = body["response"]
    assert response["uid"] == "review-1" and response["result"] == {"status": "Success"}
    assert [o["metadata"]["name"] for o in response["convertedObjects"]] == ["a", "b", "c"]
    assert [o["spec"] for o in response["convertedObjects"]] == [
        {"cohortName": "pool"}, {"cohortName": "other"}, {"cohortName": "pool"}]
    assert {o["apiVersion"] for o in response["convertedObjects"]} == {V2}


def test_a_review_in_v1beta1_is_answered_in_v1beta1() -> None:
    review = {**conversion_review([queue("a")]), "apiVersion": "apiextensions.k8s.io/v1beta1"}
    status, body = answer_conversion(review, rename_cohort)
    assert status == 200 and body["apiVersion"] == "apiextensions.k8s.io/v1beta1"


def test_an_empty_list_converts_to_an_empty_list() -> None:
    _, body = answer_conversion(conversion_review([]), rename_cohort)
    assert body["response"]["result"] == {"status": "Success"} and body["response"]["convertedObjects"] == []


@pytest.mark.parametrize(("objects", "expected"), [
    pytest.param([queue("a"), queue("bad", 7)], "ClusterQueue bad: spec.cohort: must be a string",
                 id="the converter's own failure names object and field"),
    pytest.param([queue("a"), "not an object"],
                 "request.objects[1]: must be an object with a string apiVersion and kind",
                 id="an object that is not one names its index"),
    pytest.param([{"metadata": {"name": "x"}}],
                 "request.objects[0]: must be an object with a string apiVersion and kind",
                 id="an object without apiVersion or kind"),
])
def test_an_object_that_cannot_be_converted_fails_the_whole_review(objects: list[Any], expected: str) -> None:
    status, body = answer_conversion(conversion_review(objects), rename_cohort)
    assert status == 200
    assert body["response"]["uid"] == "review-1"
    assert body["response"]["result"] == {"status": "Failure", "message": expected}
    assert body["response"]["convertedObjects"] == []


def test_many_failures_are_counted_and_the_first_named() -> None:
    objects = [queue(f"bad-{i}", i) for i in range(MAX_FAILURES_SHOWN + 2)] + [queue("good")]
    _, body = answer_conversion(conversion_review(objects), rename_cohort)
    message = body["response"]["result"]["message"]
    assert message.startswith(f"{MAX_FAILURES_SHOWN + 2} of {MAX_FAILURES_SHOWN + 3} objects cannot be converted: ")
    assert "ClusterQueue bad-0: spec.cohort" in message and "and 2 more" in message
    assert "bad-4" not in message


def test_a_converter_that_raises_is_a_failure_not_a_500(caplog: pytest.LogCaptureFixture) -> None:
    def broken(obj: Mapping[str, Any], desired: str) -> dict[str, Any]:
        raise KeyError("spec")
    status, body = answer_conversion(conversion_review([queue("a")]), broken)
    assert status == 200 and body["response"]["result"] == {
        "status": "Failure", "message": f"ClusterQueue a: cannot be converted to {V2}: internal error (KeyError)"}
    assert "Traceback" in caplog.text  # a bug in the converter is logged with its traceback


@pytest.mark.parametrize(("change", "expected"), [
    pytest.param(lambda o: o["metadata"].update(name="other"), f"conversion to {V2} changed metadata.name",
                 id="renamed"),
    pytest.param(lambda o: o["metadata"].update(uid="other"), f"conversion to {V2} changed metadata.uid",
                 id="uid changed"),
    pytest.param(lambda o: o.update(apiVersion=V1), f"converted to apiVersion '{V1}', not {V2}",
                 id="left in the old version"),
])
def test_a_converter_breaking_what_kube_apiserver_checks_is_a_failure(change: Any, expected: str) -> None:
    def sloppy(obj: Mapping[str, Any], desired: str) -> dict[str, Any] | Failure:
        out = rename_cohort(obj, desired)
        assert isinstance(out, dict)
        change(out)
        return out
    _, body = answer_conversion(conversion_review([queue("a")]), sloppy)
    assert body["response"]["result"] == {"status": "Failure", "message": f"ClusterQueue a: {expected}"}


@pytest.mark.parametrize(("review", "problem"), [
    pytest.param([1], "the body must be a JSON object", id="a list"),
    pytest.param({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": "u"}},
                 "ConversionReview", id="an AdmissionReview"),
    pytest.param({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview"}, "request must be an object",
                 id="no request"),
    pytest.param({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
                  "request": {"desiredAPIVersion": V2, "objects": []}}, "request.uid", id="no uid"),
])
def test_a_body_with_no_request_to_answer_is_a_400(review: Any, problem: str) -> None:
    status, body = answer_conversion(review, rename_cohort)
    assert status == 400 and problem in body["message"]


@pytest.mark.parametrize(("request_", "problem"), [
    pytest.param({"uid": "u", "objects": []}, "request.desiredAPIVersion", id="no desired version"),
    pytest.param({"uid": "u", "desiredAPIVersion": "v1beta2", "objects": []}, "request.desiredAPIVersion",
                 id="a version without its group"),
    pytest.param({"uid": "u", "desiredAPIVersion": V2, "objects": {"a": 1}}, "request.objects must be a list",
                 id="objects not a list"),
])
def test_a_malformed_review_with_a_uid_gets_a_failure_saying_what(request_: dict[str, Any], problem: str) -> None:
    review = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview", "request": request_}
    status, body = answer_conversion(review, rename_cohort)
    assert status == 200 and body["response"]["uid"] == "u"
    assert body["response"]["result"]["status"] == "Failure"
    assert body["response"]["result"]["message"].startswith("malformed ConversionReview: ")
    assert problem in body["response"]["result"]["message"]


def test_without_a_converter_every_review_fails_saying_so() -> None:
    _, body = answer_conversion(conversion_review([queue("a")]), None)
    assert body["response"]["result"]["status"] == "Failure"
    assert "no converter" in body["response"]["result"]["message"]


def test_review_problems_of_a_well_formed_review_are_none() -> None:
    assert review_problems(conversion_review([queue("a")])) == []


def test_convert_all_keeps_what_converted_and_lists_what_did_not() -> None:
    converted, failures = convert_all(rename_cohort, [queue("a"), queue("b", None), queue("c")], V2)
    assert [o["metadata"]["name"] for o in converted] == ["a", "c"]
    assert failures == ["ClusterQueue b: spec.cohort: must be a string"]
    assert failure_message(failures, 3) == failures[0]
