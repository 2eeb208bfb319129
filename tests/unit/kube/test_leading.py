"""Leader election against the devcluster's Lease API, driven round by round with a fake clock; its
requests go through the door (`KubeApi`), recorded; a missing namespace or a forbidden Lease reported
once with its fix, and what /readyz is told."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from kubernetes.aio import config as aconfig
from kubernetes.aio.client import ApiClient, CoordinationV1Api, CoreV1Api, V1Namespace, V1ObjectMeta

from controller.kube.api import LEASES, ApiError, KubeApi
from controller.kube.leading import EXPIRY_MARGIN_S, LeaderElector
from devcluster.cluster import DevCluster
from devcluster.server.faults import ERROR
from tests.unit.kube.recording import RecordingApi

NS, LEASE = "kube-system", "tasq-test"


class FakeClock:
    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


async def no_sleep(_: float) -> None:
    await asyncio.sleep(0)


@pytest.fixture
async def cluster() -> AsyncIterator[DevCluster]:
    async with DevCluster() as running:
        yield running


@pytest.fixture
async def api_client(cluster: DevCluster, tmp_path: Path) -> AsyncIterator[ApiClient]:
    client = await aconfig.new_client_from_config(config_file=str(cluster.write_kubeconfig(tmp_path / "kc")))  # type: ignore[no-untyped-call]  # kubernetes' config loaders are unannotated
    async with client:
        yield client


def elector(api_client: ApiClient, identity: str, clock: FakeClock, events: list[str] | None = None,
            **kw: Any) -> LeaderElector:
    log = events if events is not None else []
    return LeaderElector(RecordingApi(api_client), NS, LEASE, identity, clock=clock, sleep=no_sleep,
                         on_started=lambda: log.append(f"{identity} started"),
                         on_stopped=lambda: log.append(f"{identity} stopped"), **kw)


async def lease_spec(api_client: ApiClient) -> Any:
    return (await CoordinationV1Api(api_client).read_namespaced_lease(LEASE, NS)).spec


async def test_the_first_replica_creates_the_lease_and_the_second_waits_while_it_is_renewed(
        api_client: ApiClient) -> None:
    clock, events = FakeClock(), list[str]()
    a, b = elector(api_client, "a", clock, events), elector(api_client, "b", clock, events)
    await a.step()
    await b.step()
    for _ in range(3):
        clock.advance(10)  # each renewal comes before the 15 s lease runs out
        await a.step()
        await b.step()
    assert (a.is_leader, b.is_leader, events) == (True, False, ["a started"])
    spec = await lease_spec(api_client)
    assert (spec.holder_identity, spec.lease_duration_seconds, spec.lease_transitions) == ("a", 15, 0)
    assert spec.renew_time == clock.now and spec.acquire_time == clock.now - timedelta(seconds=30)


async def test_an_expired_lease_is_taken_over_and_the_old_leader_steps_down_when_it_sees_that(
        api_client: ApiClient) -> None:
    clock, events = FakeClock(), list[str]()
    a, b = elector(api_client, "a", clock, events), elector(api_client, "b", clock, events)
    await a.step()
    clock.advance(14.9)
    await b.step()
    assert not b.is_leader  # 14.9 s after the last renewal the lease still holds
    clock.advance(0.1)
    await b.step()
    await a.step()
    assert events == ["a started", "b started", "a stopped"]
    spec = await lease_spec(api_client)
    assert (spec.holder_identity, spec.lease_transitions, spec.acquire_time) == ("b", 1, clock.now)


async def test_a_released_lease_is_taken_at_the_next_retry_without_waiting_for_expiry(
        api_client: ApiClient) -> None:
    clock = FakeClock()
    a, b = elector(api_client, "a", clock), elector(api_client, "b", clock)
    await a.step()
    assert await a.release()
    assert not await b.release()  # not b's to release
    assert (await lease_spec(api_client)).holder_identity is None
    await b.step()
    assert b.is_leader


async def test_a_leader_that_cannot_renew_stops_after_the_renew_deadline(
        cluster: DevCluster, api_client: ApiClient) -> None:
    clock, events = FakeClock(), list[str]()
    a = elector(api_client, "a", clock, events)
    await a.step()
    cluster.faults.inject(ERROR, resource="leases", count=None)  # every request for the Lease answers 500 from now on
    clock.advance(10)
    await a.step()
    assert a.is_leader  # 10 s without renewal: still within the 10 s deadline
    clock.advance(0.5)
    await a.step()
    assert (a.is_leader, events) == (False, ["a started", "a stopped"])


async def test_losing_the_write_race_for_an_expired_lease_is_not_leadership(
        api_client: ApiClient, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = FakeClock()
    a, b = elector(api_client, "a", clock), elector(api_client, "b", clock)
    await a.step()
    clock.advance(20)
    stale = await KubeApi(api_client).get(LEASES, NS, LEASE)
    await a.step()  # a renews first: the resourceVersion b read is gone

    async def read_stale(*_: Any, **__: Any) -> Any:
        return stale
    monkeypatch.setattr(b.api, "get", read_stale)
    await b.step()
    assert (a.is_leader, b.is_leader) == (True, False)
    assert (await lease_spec(api_client)).holder_identity == "a"


async def test_cancelling_run_stops_leading_and_releases_the_lease(api_client: ApiClient) -> None:
    events: list[str] = []
    a = LeaderElector(KubeApi(api_client), NS, LEASE, "a", lease_duration_s=3, renew_deadline_s=2, retry_period_s=0.05,
                      on_stopped=lambda: events.append("stopped"))
    task = asyncio.create_task(a.run())
    await asyncio.wait_for(a.leading.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert (a.is_leader, events) == (False, ["stopped"])
    assert (await lease_spec(api_client)).holder_identity is None


def test_timings_must_be_ordered_retry_below_deadline_below_duration() -> None:
    with pytest.raises(ValueError, match=r"retry period \(2s\) < renew deadline \(20s\) < lease duration \(15s\)"):
        LeaderElector(None, NS, LEASE, "a", renew_deadline_s=20)  # type: ignore[arg-type]  # no client: timings are checked first


async def test_a_renewal_that_hangs_past_the_deadline_stops_leading_in_the_same_round(
        api_client: ApiClient, monkeypatch: pytest.MonkeyPatch) -> None:
    clock, events = FakeClock(), list[str]()
    a = elector(api_client, "a", clock, events, lease_duration_s=3, renew_deadline_s=0.2, retry_period_s=0.1)
    await a.step()

    async def hangs(*_: Any, **__: Any) -> Any:
        clock.advance(5)  # the clock moves on while the request hangs
        await asyncio.sleep(10)
    monkeypatch.setattr(a.api, "get", hangs)
    monkeypatch.setattr(a.api, "replace", hangs)
    await a.step()
    assert (a.is_leader, events) == (False, ["a started", "a stopped"])


async def test_a_missing_lease_namespace_blocks_with_the_fix_logged_once_until_the_namespace_exists(
        api_client: ApiClient, caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeClock()
    a = LeaderElector(KubeApi(api_client), "nowhere", LEASE, "a", clock=clock, sleep=no_sleep,
                      namespace_fix="create it with `kubectl create namespace nowhere`")
    with caplog.at_level(logging.WARNING, logger="controller.kube.leading"):
        for _ in range(3):
            await a.step()
            clock.advance(2)
    assert (a.is_leader, a.can_act) == (False, False)
    assert a.blocked == ("namespace nowhere of Lease tasq-test does not exist; "
                         "create it with `kubectl create namespace nowhere`")
    assert [r.getMessage() for r in caplog.records] == [
        f"a cannot take part in leader election, so it neither admits nor reports ready: {a.blocked}"]
    await CoreV1Api(api_client).create_namespace(V1Namespace(metadata=V1ObjectMeta(name="nowhere")))
    await a.step()
    blocked: str | None = a.blocked  # re-read: the step changed it
    assert (a.is_leader, a.can_act, blocked) == (True, True, None)
    assert caplog.records[-1].getMessage() == "a can read Lease nowhere/tasq-test again and takes part in leader election"


@pytest.mark.parametrize("verb", ["get", "create"])
async def test_a_forbidden_lease_blocks_naming_the_verb_the_api_message_and_the_role_to_grant(
        api_client: ApiClient, monkeypatch: pytest.MonkeyPatch, verb: str) -> None:
    a = elector(api_client, "a", FakeClock())
    message = 'leases.coordination.k8s.io "tasq-test" is forbidden: User "bob" cannot get resource "leases"'

    async def forbidden(*_: Any, **__: Any) -> Any:
        raise ApiError(403, message)
    monkeypatch.setattr(a.api, verb, forbidden)
    await a.step()
    assert (a.is_leader, a.can_act) == (False, False)
    assert a.blocked is not None
    assert a.blocked.startswith(f"forbidden to {verb} Lease "
                                f"{NS}/{LEASE} ({message}); grant get, create and update on leases in namespace {NS}")


async def test_a_standby_can_act_and_a_transient_failure_does_not_change_that(
        api_client: ApiClient, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = FakeClock()
    a, b = elector(api_client, "a", clock), elector(api_client, "b", clock)
    assert not b.can_act  # before its first round it knows nothing
    await a.step()
    await b.step()
    assert (a.can_act, b.can_act, b.is_leader) == (True, True, False)

    async def unavailable(*_: Any, **__: Any) -> Any:
        raise ApiError(503, "Service Unavailable")
    monkeypatch.setattr(b.api, "get", unavailable)
    await b.step()
    assert (b.can_act, b.blocked) == (True, None)


async def test_a_standby_sleeps_only_until_the_holders_lease_runs_out_when_that_is_sooner_than_a_retry(
        api_client: ApiClient) -> None:
    clock = FakeClock()
    a = elector(api_client, "a", clock, lease_duration_s=5, renew_deadline_s=4, retry_period_s=1)
    b = elector(api_client, "b", clock, lease_duration_s=5, renew_deadline_s=4, retry_period_s=1)
    await a.step()
    clock.advance(1)
    await b.step()
    assert b.next_wait() == 1  # a's lease runs 4 s more: a whole retry period first
    clock.advance(3.7)
    assert b.next_wait() == pytest.approx(0.3 + EXPIRY_MARGIN_S)  # 0.3 s left: no later than that
    clock.advance(0.3 + EXPIRY_MARGIN_S)
    await b.step()
    assert b.is_leader
    assert b.next_wait() == 1  # a leader renews every retry period


async def test_every_lease_read_and_write_goes_through_the_door(api_client: ApiClient) -> None:
    clock = FakeClock()
    a, b = elector(api_client, "a", clock), elector(api_client, "b", clock)
    await a.step()  # no Lease yet: created
    clock.advance(5)
    await a.step()  # renewed from the Lease as a wrote it: no read
    await b.step()  # held by a: only read
    assert await a.release()
    lease = f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases/{LEASE}"
    assert isinstance(a.api, RecordingApi) and isinstance(b.api, RecordingApi)
    assert a.api.seen == [("GET", lease), ("POST", f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases"),
                          ("PUT", lease), ("GET", lease), ("PUT", lease)]
    assert b.api.seen == [("GET", lease)]


async def test_a_refused_lease_write_is_a_failed_round_and_the_next_one_acquires(
        cluster: DevCluster, api_client: ApiClient) -> None:
    clock, events = FakeClock(), list[str]()
    a = elector(api_client, "a", clock, events)
    cluster.faults.inject(ERROR, "create", "leases", count=1)
    await a.step()
    assert not a.is_leader
    with pytest.raises(ApiError) as missing:
        await KubeApi(api_client).get(LEASES, NS, LEASE)
    assert missing.value.not_found
    await a.step()
    assert (a.is_leader, events) == (True, ["a started"])


async def test_an_api_server_out_of_reach_for_the_renew_deadline_is_logged_once_and_its_return_once(
        api_client: ApiClient, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeClock()
    a = elector(api_client, "a", clock, renew_deadline_s=10, retry_period_s=2)

    async def unreachable(*_: Any, **__: Any) -> Any:
        raise ApiError(0, "GET /apis/coordination.k8s.io/v1/...: ClientConnectorError: connection refused")
    with monkeypatch.context() as patched, caplog.at_level(logging.WARNING, logger="controller.kube.leading"):
        patched.setattr(a.api, "get", unreachable)
        for _ in range(5):  # 0..8 s: within the renew deadline, transient, not logged
            await a.step()
            clock.advance(2)
        assert caplog.records == []
        for _ in range(5):  # 10..18 s: said once
            await a.step()
            clock.advance(2)
        assert [r.getMessage() for r in caplog.records] == [
            f"a has had no usable answer about Lease {NS}/{LEASE} for 10s (get: GET /apis/coordination.k8s.io/v1/...: "
            "ClientConnectorError: connection refused), so it neither takes nor keeps the lead; retrying every 2s"]
    await a.step()
    assert a.is_leader
    assert caplog.records[-1].getMessage() == f"a gets answers about Lease {NS}/{LEASE} again"
    assert len(caplog.records) == 2


async def test_a_leader_renews_with_one_write_and_reads_the_lease_only_when_that_write_conflicts(
        api_client: ApiClient) -> None:
    clock = FakeClock()
    a = elector(api_client, "a", clock)
    await a.step()  # acquired: read (404), create
    assert isinstance(a.api, RecordingApi)
    a.api.seen.clear()
    for _ in range(3):
        clock.advance(2)
        await a.step()
    assert [method for method, _ in a.api.seen] == ["PUT", "PUT", "PUT"]
    # someone else writes the Lease (an administrator's edit): the renewal from a's copy conflicts
    lease = await KubeApi(api_client).get(LEASES, NS, LEASE)
    lease["metadata"].setdefault("labels", {})["edited"] = "yes"
    await KubeApi(api_client).replace(LEASES, NS, LEASE, lease)
    a.api.seen.clear()
    clock.advance(2)
    await a.step()
    assert [method for method, _ in a.api.seen] == ["PUT", "GET", "PUT"] and a.is_leader
    spec = await lease_spec(api_client)
    assert (spec.holder_identity, spec.renew_time, spec.lease_transitions) == ("a", clock.now, 0)
