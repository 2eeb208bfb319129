"""Fault rules against the in-process API: which requests they hit, how many times, and that a
refused request leaves the store exactly as it was."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pytest

from devcluster.server import faults
from devcluster.server.apiserver import PATCH_MERGE, ApiServer, RequestInfo
from devcluster.server.errors import ApiError
from devcluster.server.faults import Fault, Faults
from devcluster.server.resources import BUILTIN_RESOURCES

PODS = next(r for r in BUILTIN_RESOURCES if r.plural == "pods")


@dataclass
class MatchCase:
    name: str
    fault: Fault
    info: RequestInfo
    want: bool


@pytest.mark.parametrize("case", [
    MatchCase("wildcards hit anything", Fault(faults.ERROR), RequestInfo("get", PODS, "ns", "p"), True),
    MatchCase("verb", Fault(faults.ERROR, verb="create"), RequestInfo("get", PODS, "ns", "p"), False),
    MatchCase("resource by plural covers its subresources", Fault(faults.ERROR, resource="pods"),
              RequestInfo("patch", PODS, "ns", "p", "status"), True),
    MatchCase("a subresource rule skips the main resource", Fault(faults.ERROR, resource="pods/status"),
              RequestInfo("patch", PODS, "ns", "p"), False),
    MatchCase("the subresource", Fault(faults.ERROR, resource="pods/status"),
              RequestInfo("patch", PODS, "ns", "p", "status"), True),
    MatchCase("name", Fault(faults.ERROR, name="q"), RequestInfo("get", PODS, "ns", "p"), False),
    MatchCase("namespace", Fault(faults.ERROR, namespace="other"), RequestInfo("get", PODS, "ns", "p"), False),
], ids=lambda c: c.name)
def test_fault_matching(case: MatchCase) -> None:
    assert case.fault.matches(case.info) is case.want


def test_unknown_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="fault kind 'boom'"):
        Fault("boom")


async def setup() -> tuple[ApiServer, Faults]:
    api = ApiServer()
    injected = Faults(api).install()
    await api.create(api.resource("v1", "configmaps"), "default", {"metadata": {"name": "c"}, "data": {"a": "1"}})
    return api, injected


async def test_count_limits_the_hits_and_the_store_is_untouched() -> None:
    api, injected = await setup()
    r = api.resource("v1", "configmaps")
    before = api.store.get(r.storage_key, ("default", "c"))
    revision = api.store.revision
    rule = injected.inject(faults.CONFLICT, "patch", "configmaps", name="c", count=2)

    for _ in range(2):
        with pytest.raises(ApiError) as err:
            await api.patch(r, "default", "c", PATCH_MERGE, {"data": {"a": "2"}})
        assert err.value.code == 409
    assert api.store.get(r.storage_key, ("default", "c")) is before
    assert api.store.revision == revision

    await api.patch(r, "default", "c", PATCH_MERGE, {"data": {"a": "2"}})
    assert rule.hits == 2 and rule.spent


@pytest.mark.parametrize(("kind", "want_code", "want_reason"), [
    (faults.ERROR, 500, "InternalError"), (faults.GONE, 410, "Expired"), (faults.CONFLICT, 409, "Conflict"),
    (faults.FORBIDDEN, 403, "Forbidden"),
])
async def test_error_kinds(kind: str, want_code: int, want_reason: str) -> None:
    api, injected = await setup()
    injected.inject(kind, "delete")
    with pytest.raises(ApiError) as err:
        await api.delete(api.resource("v1", "configmaps"), "default", "c")
    assert (err.value.code, err.value.reason) == (want_code, want_reason)
    assert api.store.get(("", "configmaps"), ("default", "c")) is not None


async def test_watch_faults_refuse_or_drop() -> None:
    api, injected = await setup()
    r = api.resource("v1", "configmaps")
    injected.inject(faults.GONE, "watch", "configmaps")
    with pytest.raises(ApiError) as err:
        api.watch(r, "default")
    assert err.value.code == 410

    injected.inject(faults.DROP_WATCH, "watch", "configmaps")
    dropped = api.watch(r, "default")
    assert dropped.dropped and dropped.closed

    alive = api.watch(r, "default")
    assert not alive.closed
    assert injected.drop_watches("pods") == 0
    assert injected.drop_watches("configmaps") == 1
    assert alive.dropped


async def test_webhook_timeout_rule_names_a_webhook() -> None:
    _api, injected = await setup()
    injected.inject(faults.WEBHOOK_TIMEOUT, name="slow.test", count=1)
    assert not injected.webhook_times_out("other.test")
    assert injected.webhook_times_out("slow.test")
    assert not injected.webhook_times_out("slow.test")  # count 1: spent


async def test_a_delayed_request_never_takes_a_rule_added_while_it_slept() -> None:
    api, injected = await setup()
    r = api.resource("v1", "configmaps")
    injected.inject(faults.LATENCY, "get", "configmaps", seconds=0.2)
    slow = asyncio.create_task(api.get(r, "default", "c"))
    await asyncio.sleep(0.05)  # the slow get is asleep
    rule = injected.inject(faults.GONE, "get", "configmaps")

    assert (await slow)["data"] == {"a": "1"}
    assert rule.hits == 0
    with pytest.raises(ApiError) as err:
        await api.get(r, "default", "c")
    assert err.value.code == 410


@pytest.mark.parametrize("kind", [faults.DISCONNECT, faults.DISCONNECT_AFTER])
async def test_dropped_connections_hit_http_requests_only_and_say_when(kind: str) -> None:
    api, injected = await setup()
    r = api.resource("v1", "configmaps")
    injected.inject(kind, "patch", "configmaps", count=2)
    patch = {"data": {"a": "2"}}

    await api.patch(r, "default", "c", PATCH_MERGE, patch)  # in-process: not a connection, untouched
    connection = faults.Connection()
    token = faults.CONNECTION.set(connection)
    try:
        if kind == faults.DISCONNECT:
            with pytest.raises(faults.Disconnect):
                await api.patch(r, "default", "c", PATCH_MERGE, {"data": {"a": "3"}})
        else:
            await api.patch(r, "default", "c", PATCH_MERGE, {"data": {"a": "3"}})
    finally:
        faults.CONNECTION.reset(token)

    assert injected.rules[0].hits == 1
    assert connection.drop_answer is (kind == faults.DISCONNECT_AFTER)  # the front drops it after applying
    assert (await api.get(r, "default", "c"))["data"] == {"a": "3" if kind == faults.DISCONNECT_AFTER else "2"}
