"""The direct reviewer against kopf's admission engine, its oracle: for any review on any path (fuzzed
objects, every operation, subresources, resources the path does not serve) both answer with the same
HTTP status, verdict, denial message and code, warnings and patched object; a crashing handler keeps
kopf's meaning (a 500 denial, logged); the table holds every path the configurations call."""

from __future__ import annotations

import asyncio
import copy
import logging
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controller.api import constants as c
from tests.builders.cluster import make_pod
from tests.unit.webhooks.manifests import valid_job, valid_workload
from tests.unit.webhooks.reviews import Admission, patch_of, patched, review
from tests.unit.webhooks.test_handlers import json_values
from tests.unit.webhooks.test_robustness import value_paths
from webhooks.configurations import MUTATING_ROUTES, VALIDATING_ROUTES
from webhooks.handlers import AdmissionRequest, Handler, Verdict, handler_table

PATHS = sorted(route.handler_id for route in (*MUTATING_ROUTES, *VALIDATING_ROUTES))


def queued_pod(name: str, total: str = "2") -> dict[str, Any]:
    """A plain pod in group g of queue team-a (the queued-pod webhooks' object)."""
    return (make_pod(name).label(c.LABEL_QUEUE_NAME, "team-a").label(c.LABEL_POD_GROUP_NAME, "g")
            .annotate(c.ANNOTATION_POD_GROUP_TOTAL_COUNT, total).obj())


def members(key: str) -> Sequence[Mapping[str, Any]]:
    """The operator's cache as the queued-pod validator sees it: group g holds pod a, of 2."""
    return [queued_pod("a")] if key.endswith("/g") else []


SAMPLES = [
    valid_job().set("spec.suspend", False).obj(),
    make_pod("p").annotation(c.ANNOTATION_TOPOLOGY_PODSET, "main").gate("x/y").obj(),
    queued_pod("b", total="3"),
    valid_workload().admitted().obj(),
]


@st.composite
def reviews(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    """(path, review): a sample, perhaps with one field replaced by any JSON, under any operation
    and subresource, posted to any of tasq's paths (mostly not the one that serves its kind)."""
    doc = copy.deepcopy(draw(st.sampled_from(SAMPLES)))
    if draw(st.booleans()):
        path = draw(st.sampled_from([p for p in value_paths(doc) if p[0] not in ("apiVersion", "kind")]))
        holder: Any = doc
        for key in path[:-1]:
            holder = holder[key]
        holder[path[-1]] = draw(json_values)
    operation = draw(st.sampled_from(["CREATE", "UPDATE", "DELETE", "CONNECT"]))
    old = copy.deepcopy(draw(st.sampled_from(SAMPLES))) if operation in ("UPDATE", "DELETE") else None
    if old is not None:
        old["apiVersion"], old["kind"] = doc["apiVersion"], doc["kind"]
    body = review(doc, operation, old, dry_run=draw(st.booleans()),
                  subresource=draw(st.sampled_from(["", "status"])))
    if operation == "DELETE" and draw(st.booleans()):
        body["request"]["object"] = None
    return draw(st.sampled_from(PATHS)), body


def same_answers(path: str, body: dict[str, Any], direct: Admission, oracle: Admission) -> None:
    status, got = asyncio.run(direct.answer(path, copy.deepcopy(body)))
    want_status, want = asyncio.run(oracle.answer(path, copy.deepcopy(body)))
    assert status == want_status, (got, want)
    if status != 200:
        assert got == want
        return
    got_response, want_response = dict(got["response"]), dict(want["response"])
    obj = body["request"]["object"] or body["request"]["oldObject"]
    assert patched(obj, got_response) == patched(obj, want_response)
    assert bool(patch_of(got_response)) == bool(patch_of(want_response))
    for response in (got_response, want_response):
        response.pop("patch", None)
    assert got_response == want_response
    assert (got["apiVersion"], got["kind"]) == (want["apiVersion"], want["kind"])


@pytest.fixture(scope="module")
def engines() -> tuple[Admission, Admission]:
    return Admission(members), Admission(members, kopf_engine=True)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(reviews())
def test_every_review_is_answered_as_kopfs_engine_answers_it(
        engines: tuple[Admission, Admission], case: tuple[str, dict[str, Any]]) -> None:
    path, body = case
    same_answers(path, body, *engines)


@pytest.mark.parametrize(("path", "obj"), [
    pytest.param(c.WEBHOOK_MUTATE_JOB, SAMPLES[0], id="a queued Job suspended"),
    pytest.param(c.WEBHOOK_MUTATE_POD, SAMPLES[1], id="a pod of an admitted pod set gated"),
    pytest.param(c.WEBHOOK_MUTATE_QUEUED_POD, SAMPLES[2], id="a queued pod gated, labelled, hashed"),
    pytest.param(c.WEBHOOK_VALIDATE_QUEUED_POD, SAMPLES[2], id="a pod disagreeing with its group denied"),
    pytest.param(c.WEBHOOK_VALIDATE_JOB, valid_job().annotate(c.ANNOTATION_REQUIRE_TOPOLOGY, "").obj(),
                 id="an invalid Job denied"),
])
def test_the_answers_that_matter_agree_with_kopf(engines: tuple[Admission, Admission], path: str,
                                                 obj: dict[str, Any]) -> None:
    """The fuzz's anchors: each of these is a patch or a denial, not a bare allow."""
    body = review(obj)
    direct = asyncio.run(engines[0].admit(path, body))
    assert patch_of(direct) or direct["allowed"] is False, direct
    same_answers(path, body, *engines)


def _crashing(request: AdmissionRequest) -> Verdict:
    raise RuntimeError("boom")


def test_a_crashing_handler_is_a_500_denial_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR)
    table = (*handler_table(), Handler("extra", "batch", "v1", "jobs", True, ("CREATE",), None, _crashing))
    body = review(valid_job().obj())
    got = asyncio.run(Admission(handlers=table).admit("extra", copy.deepcopy(body)))
    want = asyncio.run(Admission(handlers=table, kopf_engine=True).admit("extra", copy.deepcopy(body)))
    assert got == want and got["status"] == {"message": "boom", "code": 500}
    assert "Admission handler extra failed" in caplog.text and "RuntimeError: boom" in caplog.text


def test_the_table_holds_every_path_the_configurations_call() -> None:
    assert {handler.path for handler in handler_table()} == set(PATHS)
