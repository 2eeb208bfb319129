"""CRD conversion as kube-apiserver does it, on both clusters: a two-version CRD (`Gadget`: v1 served,
v2 stored; v1's `spec.size` is v2's `spec.width`) whose conversion webhook is a test server. Objects are
stored in the storage version and read, listed, watched, patched and deleted in either version through
the webhook; strategy None rewrites only apiVersion; `status.storedVersions` records every storage
version; a conversion the webhook refuses is a 500 naming the object and the webhook's message, and a
write in the other version cannot be stored at all."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, cast

import pytest
from kubernetes import client, watch

from devcluster.webhooking.certificates import CertificateAuthority
from tests.builders.conversion import (
    FAIL_LABEL,
    GROUP,
    PLURAL,
    SERVED,
    STORED,
    ConversionServer,
    gadget,
    gadget_crd,
)
from tests.client_models import as_body, present
from tests.conformance.conftest import eventually, status_body

CRD_NAME = f"{PLURAL}.{GROUP}"


class Gadgets:
    """The CustomObjectsApi calls on Gadgets of one namespace, in a version, typed as dicts."""

    def __init__(self, custom: client.CustomObjectsApi, namespace: str) -> None:
        self.custom = custom
        self.namespace = namespace

    def create(self, version: str, body: dict[str, Any]) -> dict[str, Any]:
        return cast(dict[str, Any], self.custom.create_namespaced_custom_object(
            GROUP, version, self.namespace, PLURAL, body))

    def get(self, version: str, name: str) -> dict[str, Any]:
        return cast(dict[str, Any], self.custom.get_namespaced_custom_object(GROUP, version, self.namespace, PLURAL, name))

    def list(self, version: str) -> dict[str, Any]:
        return cast(dict[str, Any], self.custom.list_namespaced_custom_object(GROUP, version, self.namespace, PLURAL))

    def patch(self, version: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        return cast(dict[str, Any], self.custom.patch_namespaced_custom_object(
            GROUP, version, self.namespace, PLURAL, name, body))

    def delete(self, version: str, name: str) -> dict[str, Any]:
        return cast(dict[str, Any], self.custom.delete_namespaced_custom_object(
            GROUP, version, self.namespace, PLURAL, name))


class Webhook:
    """The test conversion webhook on a loop of its own thread."""

    def __init__(self) -> None:
        self.ca = CertificateAuthority("conformance-conversion-ca")
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, daemon=True).start()
        self.server = self._run(ConversionServer(self.ca.issue(["127.0.0.1"])).start())

    def _run(self, coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout=30)

    def stop(self) -> None:
        self._run(self.server.stop())
        self.loop.call_soon_threadsafe(self.loop.stop)

    def desired(self, since: int) -> list[tuple[str, int]]:
        """(desiredAPIVersion, object count) of each review after the first `since`."""
        return [(r["request"]["desiredAPIVersion"], len(r["request"]["objects"])) for r in self.server.reviews[since:]]


@pytest.fixture(scope="module")
def webhook() -> Iterator[Webhook]:
    hook = Webhook()
    try:
        yield hook
    finally:
        hook.stop()


def served(custom: client.CustomObjectsApi, namespace: str) -> bool:
    try:
        for version in (SERVED, STORED):
            custom.list_namespaced_custom_object(GROUP, version, namespace, PLURAL)
    except client.ApiException:
        return False
    return True


@pytest.fixture
def gadgets(extensions: client.ApiextensionsV1Api, custom: client.CustomObjectsApi, webhook: Webhook,
            namespace: str) -> Iterator[Gadgets]:
    """The Gadget CRD with the test webhook; yields the Gadgets of `namespace`. Removed afterwards."""
    extensions.create_custom_resource_definition(as_body(gadget_crd("Webhook", webhook.server.url,
                                                                     webhook.ca.ca_bundle)))
    try:
        eventually(lambda: served(custom, namespace), "both Gadget versions are served", timeout=30)
        yield Gadgets(custom, namespace)
    finally:
        extensions.delete_custom_resource_definition(CRD_NAME)
        eventually(lambda: not any(present(c.metadata).name == CRD_NAME
                                   for c in extensions.list_custom_resource_definition().items),
                   "the Gadget CRD is gone", timeout=60)


def test_an_object_written_in_either_version_is_stored_once_and_read_in_both(
        gadgets: Gadgets, webhook: Webhook) -> None:
    before = len(webhook.server.reviews)
    created = gadgets.create(SERVED, gadget("old", SERVED, "big"))
    assert created["apiVersion"] == f"{GROUP}/{SERVED}" and created["spec"] == {"size": "big"}
    # written in v1: converted to the storage version v2 before it is stored
    assert (f"{GROUP}/{STORED}", 1) in webhook.desired(before)
    as_v2 = gadgets.get(STORED, "old")
    assert as_v2["apiVersion"] == f"{GROUP}/{STORED}" and as_v2["spec"] == {"width": "big"}
    assert as_v2["metadata"]["uid"] == created["metadata"]["uid"]
    gadgets.create(STORED, gadget("new", STORED, "wide"))
    before = len(webhook.server.reviews)
    as_v1 = gadgets.get(SERVED, "new")
    assert as_v1["apiVersion"] == f"{GROUP}/{SERVED}" and as_v1["spec"] == {"size": "wide"}
    # a read in v1 asks the webhook (kube-apiserver's watch cache of v1 may also convert the object
    # just written, one review of one object, in the same window)
    assert (f"{GROUP}/{SERVED}", 1) in webhook.desired(before)
    assert set(webhook.desired(before)) == {(f"{GROUP}/{SERVED}", 1)}
    before = len(webhook.server.reviews)
    gadgets.get(STORED, "new")
    assert (f"{GROUP}/{STORED}", 1) not in webhook.desired(before)  # a read in the storage version does not


def test_lists_in_both_versions_hold_the_same_objects_converted(
        gadgets: Gadgets) -> None:
    for i in range(3):
        gadgets.create(SERVED if i % 2 else STORED, gadget(f"g{i}", SERVED if i % 2 else STORED, f"v{i}"))
    v1 = gadgets.list(SERVED)
    v2 = gadgets.list(STORED)
    assert v1["apiVersion"] == f"{GROUP}/{SERVED}" and v2["apiVersion"] == f"{GROUP}/{STORED}"
    assert [(o["metadata"]["name"], o["apiVersion"], o["spec"]) for o in v1["items"]] == [
        (f"g{i}", f"{GROUP}/{SERVED}", {"size": f"v{i}"}) for i in range(3)]
    assert [(o["metadata"]["name"], o["apiVersion"], o["spec"]) for o in v2["items"]] == [
        (f"g{i}", f"{GROUP}/{STORED}", {"width": f"v{i}"}) for i in range(3)]


def watched(gadgets: Gadgets, version: str, resource_version: str,
            events: list[tuple[str, str, str, dict[str, Any]]], until: int) -> None:
    stream = watch.Watch()  # type: ignore[no-untyped-call]  # kubernetes' watch module is unannotated
    for event in stream.stream(gadgets.custom.list_namespaced_custom_object, GROUP, version,  # type: ignore[no-untyped-call]
                               gadgets.namespace, PLURAL, resource_version=resource_version, timeout_seconds=20):
        obj = event["object"]
        events.append((event["type"], obj["metadata"]["name"], obj["apiVersion"], obj.get("spec") or {}))
        if len(events) >= until:
            stream.stop()  # type: ignore[no-untyped-call]


def test_watches_in_both_versions_see_every_change_converted(gadgets: Gadgets) -> None:
    since = gadgets.list(STORED)["metadata"]["resourceVersion"]
    seen: dict[str, list[tuple[str, str, str, dict[str, Any]]]] = {SERVED: [], STORED: []}
    watchers = [threading.Thread(target=watched, args=(gadgets, v, since, seen[v], 3)) for v in seen]
    for w in watchers:
        w.start()
    gadgets.create(SERVED, gadget("w", SERVED, "s"))
    gadgets.patch(STORED, "w", {"spec": {"width": "m"}})
    gadgets.delete(SERVED, "w")
    for w in watchers:
        w.join(30)
    assert seen[SERVED] == [("ADDED", "w", f"{GROUP}/{SERVED}", {"size": "s"}),
                            ("MODIFIED", "w", f"{GROUP}/{SERVED}", {"size": "m"}),
                            ("DELETED", "w", f"{GROUP}/{SERVED}", {"size": "m"})]
    assert seen[STORED] == [("ADDED", "w", f"{GROUP}/{STORED}", {"width": "s"}),
                            ("MODIFIED", "w", f"{GROUP}/{STORED}", {"width": "m"}),
                            ("DELETED", "w", f"{GROUP}/{STORED}", {"width": "m"})]


def test_a_patch_in_the_served_version_changes_the_stored_object(gadgets: Gadgets) -> None:
    gadgets.create(STORED, gadget("p", STORED, "s"))
    patched = gadgets.patch(SERVED, "p", {"spec": {"size": "xl"}})
    assert patched["apiVersion"] == f"{GROUP}/{SERVED}" and patched["spec"] == {"size": "xl"}
    assert gadgets.get(STORED, "p")["spec"] == {"width": "xl"}


def test_a_refused_conversion_is_a_500_naming_the_object_and_the_webhooks_message(
        gadgets: Gadgets) -> None:
    gadgets.create(STORED, gadget("bad", STORED, "s", fail=True))
    why = (f"conversion webhook for {GROUP}/{STORED}, Kind=Gadget failed: "
           f"Gadget {gadgets.namespace}/bad: spec: refused by the test webhook")
    # the storage version needs no conversion: still readable there
    assert gadgets.get(STORED, "bad")["spec"] == {"width": "s"}
    calls: tuple[tuple[str, Callable[[], dict[str, Any]]], ...] = (
        ("get", lambda: gadgets.get(SERVED, "bad")),
        ("list", lambda: gadgets.list(SERVED)),
        ("patch", lambda: gadgets.patch(SERVED, "bad", {"metadata": {"annotations": {"a": "b"}}})),
        ("delete", lambda: gadgets.delete(SERVED, "bad")))
    for verb, call in calls:
        with pytest.raises(client.ApiException) as refused:
            call()
        body = status_body(refused.value)
        assert (refused.value.status, body["code"]) == (500, 500), verb
        assert body["message"].endswith(why), (verb, body["message"])
        assert "object not decodable revision=" in body["message"], verb
    with pytest.raises(client.ApiException) as refused:
        gadgets.create(SERVED, gadget("bad-v1", SERVED, "s", fail=True))
    assert refused.value.status == 500
    assert status_body(refused.value)["message"] == (
        f"conversion webhook for {GROUP}/{SERVED}, Kind=Gadget failed: "
        f"Gadget {gadgets.namespace}/bad-v1: spec: refused by the test webhook")
    with pytest.raises(client.ApiException):
        gadgets.get(STORED, "bad-v1")  # nothing was stored
    # the object is still there in the storage version and can be fixed there
    gadgets.patch(STORED, "bad", {"metadata": {"labels": {FAIL_LABEL: None}}})
    assert gadgets.get(SERVED, "bad")["spec"] == {"size": "s"}


def test_an_unreachable_webhook_is_a_500_saying_so(gadgets: Gadgets,
                                                   extensions: client.ApiextensionsV1Api) -> None:
    gadgets.create(STORED, gadget("u", STORED, "s"))
    crd = extensions.read_custom_resource_definition(CRD_NAME)
    present(present(present(crd.spec.conversion).webhook).client_config).url = "https://127.0.0.1:1/convert"
    extensions.replace_custom_resource_definition(CRD_NAME, crd)

    def refused() -> str | None:
        try:
            gadgets.create(SERVED, gadget(f"u{time.monotonic_ns()}",
                                                                                           SERVED, "s"))
        except client.ApiException as e:
            return str(status_body(e)["message"]) if e.status == 500 else None
        return None
    message = eventually(refused, "a write in v1 fails while the webhook is unreachable", timeout=30)
    assert message.startswith(f'conversion webhook for {GROUP}/{SERVED}, Kind=Gadget failed: '
                              f'Post "https://127.0.0.1:1/convert?timeout=30s": ')


def test_strategy_none_rewrites_only_the_api_version(gadgets: Gadgets,
                                                     extensions: client.ApiextensionsV1Api) -> None:
    crd = extensions.read_custom_resource_definition(CRD_NAME)
    crd.spec.conversion = client.V1CustomResourceConversion(strategy="None")
    extensions.replace_custom_resource_definition(CRD_NAME, crd)
    gadgets.create(STORED, gadget("n", STORED, "s"))

    def as_v1() -> dict[str, Any] | None:
        obj = gadgets.get(SERVED, "n")
        return obj if obj["apiVersion"] == f"{GROUP}/{SERVED}" else None
    obj = eventually(as_v1, "the object read in v1", timeout=30)
    assert obj["spec"] == {}  # v2's width is not in v1's schema: pruned, not renamed


def test_stored_versions_lists_every_version_that_was_the_storage_version(
        gadgets: Gadgets, extensions: client.ApiextensionsV1Api) -> None:
    assert present(extensions.read_custom_resource_definition(CRD_NAME).status).stored_versions == [STORED]
    crd = extensions.read_custom_resource_definition(CRD_NAME)
    for version in crd.spec.versions:
        version.storage = version.name == SERVED
    extensions.replace_custom_resource_definition(CRD_NAME, crd)
    assert present(extensions.read_custom_resource_definition(CRD_NAME).status).stored_versions == [STORED, SERVED]
