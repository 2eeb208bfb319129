"""A small kopf operator run in-process against the devcluster.

Each handler must run exactly once per change, and a forced 410 Gone (watch streams dropped,
history compacted, an object changed meanwhile) must make kopf relist without losing the update.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import kopf
import pytest

from devcluster.cluster import DevCluster

pytestmark = pytest.mark.e2e

GROUP, VERSION, PLURAL = "example.com", "v1", "gadgets"
CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": f"{PLURAL}.{GROUP}"},
    "spec": {"group": GROUP, "scope": "Namespaced",
             "names": {"plural": PLURAL, "singular": "gadget", "kind": "Gadget"},
             "versions": [{"name": VERSION, "served": True, "storage": True, "subresources": {"status": {}},
                           "schema": {"openAPIV3Schema": {"type": "object",
                                                          "x-kubernetes-preserve-unknown-fields": True}}}]},
}


@dataclass
class Calls:
    """What the handlers saw: (handler, name, spec.size), in order."""

    seen: list[tuple[str, str, int]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, kind: str, name: str, size: int) -> None:
        with self.lock:
            self.seen.append((kind, name, size))

    def snapshot(self) -> list[tuple[str, str, int]]:
        with self.lock:
            return list(self.seen)


def wait_for(predicate: Callable[[], bool], timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError("condition not reached in time")


@pytest.fixture(scope="module")
def operator(devcluster: DevCluster) -> Iterator[Calls]:
    api = devcluster.api
    devcluster.call(lambda: api.create(api.resource("apiextensions.k8s.io/v1", "customresourcedefinitions"), "", CRD))
    calls = Calls()
    registry = kopf.OperatorRegistry()

    @kopf.on.login(registry=registry)
    def login(**_: Any) -> kopf.ConnectionInfo:
        return kopf.ConnectionInfo(server=devcluster.url, token="devcluster", insecure=True)

    @kopf.on.startup(registry=registry)
    def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
        settings.watching.server_timeout = 2  # watches end often, so kopf re-watches from its last rv
        settings.posting.level = logging.WARNING

    @kopf.on.create(GROUP, VERSION, PLURAL, registry=registry)
    def created(name: str, spec: kopf.Spec, **_: Any) -> None:
        calls.add("create", name, int(spec.get("size", 0)))

    @kopf.on.update(GROUP, VERSION, PLURAL, field="spec", registry=registry)
    def updated(name: str, new: Any, **_: Any) -> None:
        calls.add("update", name, int(new.get("size", 0)))

    stop, ready = threading.Event(), threading.Event()
    thread = threading.Thread(target=lambda: asyncio.run(kopf.operator(
        registry=registry, clusterwide=True, standalone=True, stop_flag=stop, ready_flag=ready)), daemon=True)
    thread.start()
    assert ready.wait(20)
    try:
        yield calls
    finally:
        stop.set()
        thread.join(20)


def gadget(name: str, size: int) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Gadget", "metadata": {"name": name}, "spec": {"size": size}}


def test_each_handler_runs_once_per_change(devcluster: DevCluster, operator: Calls, namespace: str) -> None:
    api = devcluster.api
    gadgets = api.resource(f"{GROUP}/{VERSION}", PLURAL)
    devcluster.call(lambda: api.create(gadgets, namespace, gadget("a", 1)))
    wait_for(lambda: ("create", "a", 1) in operator.snapshot())
    devcluster.call(lambda: api.patch(gadgets, namespace, "a", "application/merge-patch+json", {"spec": {"size": 2}}))
    wait_for(lambda: ("update", "a", 2) in operator.snapshot())
    time.sleep(2.5)  # a full server_timeout cycle: re-watching must not replay anything
    mine = [c for c in operator.snapshot() if c[1] == "a"]
    assert mine == [("create", "a", 1), ("update", "a", 2)]


def test_forced_410_relists_and_loses_no_update(devcluster: DevCluster, operator: Calls, namespace: str,
                                               caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="kopf")
    api = devcluster.api
    gadgets = api.resource(f"{GROUP}/{VERSION}", PLURAL)
    devcluster.call(lambda: api.create(gadgets, namespace, gadget("b", 1)))
    wait_for(lambda: ("create", "b", 1) in operator.snapshot())
    time.sleep(0.5)  # let kopf's own progress patches settle before the streams go away

    async def change_unseen() -> None:
        # Drop every watch stream, change the object while nobody watches, then compact so the
        # re-watch from kopf's last resourceVersion is answered with 410 Gone.
        devcluster.http.close_watches()
        await api.patch(gadgets, namespace, "b", "application/merge-patch+json", {"spec": {"size": 5}})
        api.compact()

    devcluster.call(change_unseen)
    wait_for(lambda: ("update", "b", 5) in operator.snapshot())
    assert f"Restarting the watch-stream for {PLURAL}.{VERSION}.{GROUP}" in caplog.text  # kopf saw the 410
    time.sleep(2.5)
    mine = [c for c in operator.snapshot() if c[1] == "b"]
    assert mine == [("create", "b", 1), ("update", "b", 5)]
