"""The CRD conversion caller against an in-process API server and a real HTTPS webhook: objects stored in
the storage version, served in the requested one; a webhook answer kube-apiserver would refuse is
refused in its words; a watch whose object cannot be converted ends with an ERROR event."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from devcluster.server.apiserver import ApiServer
from devcluster.server.converting import ConversionFailed
from devcluster.server.errors import ApiError
from devcluster.webhooking.certificates import CertificateAuthority
from devcluster.webhooking.conversion import ConversionWebhooks
from tests.builders.conversion import GROUP, PLURAL, SERVED, STORED, ConversionServer, gadget, gadget_crd

Respond = Callable[[dict[str, Any]], Any]


async def started(respond: Respond | None = None) -> tuple[ApiServer, ConversionServer, ConversionWebhooks]:
    ca = CertificateAuthority("unit-conversion-ca")
    server = await ConversionServer(ca.issue(["127.0.0.1"]), respond).start()
    api = ApiServer()
    caller = ConversionWebhooks(api).install()
    await api.create(api.resource("apiextensions.k8s.io/v1", "customresourcedefinitions"), "",
                     gadget_crd("Webhook", server.url, ca.ca_bundle))
    return api, server, caller


@pytest.fixture
async def cluster() -> AsyncIterator[tuple[ApiServer, ConversionServer]]:
    api, server, caller = await started()
    yield api, server
    await caller.aclose()
    await server.stop()


async def test_an_object_is_stored_in_the_storage_version_and_served_in_the_requested_one(
        cluster: tuple[ApiServer, ConversionServer]) -> None:
    api, server = cluster
    v1 = api.resource(f"{GROUP}/{SERVED}", PLURAL)
    created = await api.create(v1, "default", gadget("a", SERVED, "big"))
    assert created["apiVersion"] == f"{GROUP}/{SERVED}" and created["spec"] == {"size": "big"}
    (stored,) = api.store.items((GROUP, PLURAL))
    assert stored["apiVersion"] == f"{GROUP}/{STORED}" and stored["spec"] == {"width": "big"}
    assert [r["request"]["desiredAPIVersion"] for r in server.reviews] == [f"{GROUP}/{STORED}", f"{GROUP}/{SERVED}"]


def answer(review: dict[str, Any], objects: list[dict[str, Any]] | None = None, **result: Any) -> dict[str, Any]:
    response: dict[str, Any] = {"uid": review["request"]["uid"], "result": result or {"status": "Success"}}
    if objects is not None:
        response["convertedObjects"] = objects
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview", "response": response}


def renamed(review: dict[str, Any]) -> list[dict[str, Any]]:
    return [{**o, "apiVersion": review["request"]["desiredAPIVersion"]} for o in review["request"]["objects"]]


FOR = f"conversion webhook for {GROUP}/{STORED}, Kind=Gadget"


@pytest.mark.parametrize(("respond", "expected"), [
    pytest.param(lambda r: answer(r, [], status="Failure", message="no way"), f"{FOR} failed: no way",
                 id="a failure's message"),
    pytest.param(lambda r: answer(r, [], status="Failure"),
                 f"{FOR} failed: response.result.status was 'Failure', not 'Success'", id="a failure without message"),
    pytest.param(lambda r: {**answer(r, renamed(r)), "response": {**answer(r, renamed(r))["response"], "uid": "x"}},
                 f'{FOR} failed: expected response.uid="', id="another uid"),
    pytest.param(lambda r: answer(r, []), f"{FOR} returned 0 objects, expected 1", id="too few objects"),
    pytest.param(lambda r: answer(r, [{**o, "apiVersion": f"{GROUP}/v9"} for o in r["request"]["objects"]]),
                 f"{FOR} returned invalid converted object at index 0: invalid groupVersion "
                 f"(expected {GROUP}/{SERVED}, received {GROUP}/v9)", id="the wrong version"),
    pytest.param(lambda r: answer(r, [{**o, "metadata": {**o["metadata"], "name": "other"}} for o in renamed(r)]),
                 f"{FOR} returned invalid metadata in object at index 0: must have the same name: a != other",
                 id="a renamed object"),
    pytest.param(lambda r: {"kind": "AdmissionReview"},
                 f"{FOR} failed: expected webhook response of apiextensions.k8s.io/v1, Kind=ConversionReview",
                 id="not a ConversionReview"),
])
async def test_an_answer_kube_apiserver_refuses_is_refused_in_its_words(respond: Respond, expected: str) -> None:
    api, server, caller = await started(respond)
    try:
        api.store.put((GROUP, PLURAL), {**gadget("a", STORED, "w"), "metadata": {"name": "a", "namespace": "default"}})
        with pytest.raises(ApiError) as refused:
            await api.get(api.resource(f"{GROUP}/{SERVED}", PLURAL), "default", "a")
        assert refused.value.code == 500 and expected in refused.value.message
    finally:
        await caller.aclose()
        await server.stop()


async def test_an_unreachable_webhook_fails_with_the_address() -> None:
    api = ApiServer()
    caller = ConversionWebhooks(api)
    crd = gadget_crd("Webhook", "https://127.0.0.1:1/convert", "")
    with pytest.raises(ConversionFailed) as failed:
        await caller.convert(crd, [gadget("a", STORED, "w")], f"{GROUP}/{SERVED}")
    assert failed.value.detail.startswith(f'{FOR} failed: Post "https://127.0.0.1:1/convert?timeout=30s": ')
    await caller.aclose()


async def test_a_watch_whose_object_cannot_be_converted_ends_with_an_error_event(
        cluster: tuple[ApiServer, ConversionServer]) -> None:
    api, _ = cluster
    v1, v2 = api.resource(f"{GROUP}/{SERVED}", PLURAL), api.resource(f"{GROUP}/{STORED}", PLURAL)
    watch = api.watch(v1, "default", resource_version=str(api.store.revision))
    await api.create(v2, "default", gadget("good", STORED, "w"))
    await api.create(v2, "default", gadget("bad", STORED, "w", fail=True))
    first = await watch.next(timeout=5)
    assert first is not None and first["type"] == "ADDED" and first["object"]["spec"] == {"size": "w"}
    second = await watch.next(timeout=5)
    assert second is not None and second["type"] == "ERROR" and second["object"]["code"] == 500
    assert "Gadget default/bad: spec: refused by the test webhook" in second["object"]["message"]
    assert await watch.next(timeout=1) is None and watch.closed
