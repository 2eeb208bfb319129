"""The door to the API: which failures are a conflict, a missing object or worth retrying (the one
mapping, as a table), and what a request meets on the wire: a scripted HTTP server that answers, refuses
or drops the connection the way a restarting kube-apiserver does, with `retrying` around it.
"""

from __future__ import annotations

import asyncio
import json
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from kubernetes.aio.client import ApiClient, ApiException, Configuration

from controller.kube.admitting import PARALLEL_WRITES
from controller.kube.api import (
    CONNECTIONS,
    PODS,
    WORKLOADS,
    ApiError,
    KubeApi,
    api_error,
    connect,
    refused,
    retrying,
)
from controller.kube.events import PARALLEL_POSTS
from controller.kube.job_reconciling import PARALLEL_RECONCILES
from controller.kube.watching import RESOURCES

# ------------------------------------------------------------------ the mapping, case by case

STATUS_CASES = [
    # (why, HTTP status, conflict, not_found, forbidden, transient)
    ("a stale resourceVersion or an existing name", 409, True, False, False, False),
    ("an object that is gone", 404, False, True, False, False),
    ("throttled by API priority and fairness", 429, False, False, False, True),
    ("an apiserver error", 500, False, False, False, True),
    ("a proxy in front of a restarting apiserver", 502, False, False, False, True),
    ("an apiserver that is not ready yet", 503, False, False, False, True),
    ("an etcd request that timed out", 504, False, False, False, True),
    ("an invalid object", 422, False, False, False, False),
    ("a bad request", 400, False, False, False, False),
    ("credentials refused", 401, False, False, False, False),
    ("RBAC refuses the verb", 403, False, False, True, False),
]


@pytest.mark.parametrize(("why", "status", "conflict", "not_found", "forbidden", "transient"), STATUS_CASES,
                         ids=[case[0] for case in STATUS_CASES])
def test_an_answer_outside_2xx_is_classified_by_its_status(why: str, status: int, conflict: bool, not_found: bool,
                                                          forbidden: bool, transient: bool) -> None:
    error = refused(status, json.dumps({"kind": "Status", "message": f"{why}: refused"}))
    assert (error.status, error.conflict, error.not_found, error.forbidden, error.transient) == (
        status, conflict, not_found, forbidden, transient)
    assert error.message == f"{why}: refused"


def test_an_answer_that_is_not_a_status_object_keeps_its_text() -> None:
    assert refused(502, "<html>Bad Gateway</html>").message == "<html>Bad Gateway</html>"


def _ssl_verification() -> ssl.SSLCertVerificationError:
    return ssl.SSLCertVerificationError(1, "certificate verify failed: self-signed certificate")


RAISED_CASES: list[tuple[str, Exception]] = [
    # every one of these is a request that got no answer: transient, status 0
    ("kube-apiserver restarted under a keep-alive connection", aiohttp.ServerDisconnectedError()),
    ("the connection was reset", aiohttp.ClientConnectionError("Connection reset by peer")),
    ("the answer was cut short", aiohttp.ClientPayloadError("Response payload is not completed")),
    ("the server is not listening", aiohttp.ClientOSError(111, "Connect call failed")),
    ("the request timed out (asyncio.TimeoutError is TimeoutError)", TimeoutError()),
    ("a socket error", ConnectionRefusedError(111, "Connection refused")),
    ("a TLS error", ssl.SSLError(1, "decryption failed or bad record mac")),
    ("a certificate that does not verify", _ssl_verification()),
]


@pytest.mark.parametrize(("why", "raised"), RAISED_CASES, ids=[case[0] for case in RAISED_CASES])
def test_every_transport_failure_is_transient_with_no_status(why: str, raised: Exception) -> None:
    error = api_error(raised, "PATCH /api/v1/namespaces/ns/pods/p")
    assert (error.status, error.transient, error.conflict, error.not_found) == (0, True, False, False), why
    assert error.message.startswith(f"PATCH /api/v1/namespaces/ns/pods/p: {type(raised).__name__}")


@pytest.mark.parametrize(("status", "conflict", "not_found", "forbidden", "transient"),
                         [(409, True, False, False, False), (404, False, True, False, False),
                          (403, False, False, True, False), (503, False, False, False, True),
                          (0, False, False, False, True)])
def test_the_kubernetes_clients_own_exception_keeps_its_status(status: int, conflict: bool, not_found: bool,
                                                               forbidden: bool, transient: bool) -> None:
    error = api_error(ApiException(status=status, reason="from the client"), "GET /api/v1/pods")
    assert (error.status, error.conflict, error.not_found, error.forbidden, error.transient) == (
        status, conflict, not_found, forbidden, transient)
    assert error.message == "GET /api/v1/pods: from the client"


def test_an_api_error_passes_the_mapping_unchanged() -> None:
    error = ApiError(409, "still conflicting")
    assert api_error(error, "PATCH x") is error


# ------------------------------------------------------------------ on the wire

@dataclass
class ScriptedServer:
    """An HTTP/1.1 server that plays `script` one request at a time: ("answer", status, body), ("answer",
    status, body, headers) or ("drop",) (read the request, then close the connection without a word, as a kube-apiserver going
    away does). `seen` notes (connection number, method, path) of every request read."""

    script: list[tuple[Any, ...]]
    seen: list[tuple[int, str, str]] = field(default_factory=list)
    connections: int = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        number = self.connections
        try:
            while head := await reader.readuntil(b"\r\n\r\n"):
                lines = head.decode().split("\r\n")
                method, target, _ = lines[0].split(" ", 2)
                length = next((int(line.split(":", 1)[1]) for line in lines[1:]
                               if line.lower().startswith("content-length:")), 0)
                await reader.readexactly(length)
                self.seen.append((number, method, target))
                action = self.script.pop(0)
                if action[0] == "drop":
                    return
                _, status, body, *more = action
                payload = body if isinstance(body, bytes) else json.dumps(body).encode()
                extra = "".join(f"{name}: {value}\r\n" for name, value in (more[0] if more else {}).items())
                writer.write(f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\n{extra}"
                             f"Content-Length: {len(payload)}\r\n\r\n".encode() + payload)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            return
        finally:
            writer.close()


@pytest.fixture
async def scripted() -> AsyncIterator[tuple[ScriptedServer, KubeApi]]:
    server = ScriptedServer([])
    listening = await asyncio.start_server(server.handle, "127.0.0.1", 0)
    port = listening.sockets[0].getsockname()[1]
    async with ApiClient(Configuration(host=f"http://127.0.0.1:{port}")) as client:
        api = KubeApi(client)
        yield server, api
        await api.close_raw()
    listening.close()
    await listening.wait_closed()


STATUS_PATH = "/apis/kueue.x-k8s.io/v1beta2/namespaces/ns/workloads/wl/status"


async def test_a_restart_that_drops_the_keep_alive_connection_mid_write_is_transient_and_retried(
        scripted: tuple[ScriptedServer, KubeApi]) -> None:
    """The Workload status write goes out on the connection the first write left open; the server
    closes it without answering (ServerDisconnectedError, which aiohttp does not retry for a PATCH);
    the door says transient and `retrying` sends it again, on a new connection, where it lands."""
    server, api = scripted
    server.script = [("answer", 200, {"n": 1}), ("drop",), ("answer", 200, {"n": 2})]
    await api.merge_patch(WORKLOADS, "ns", "wl", {"status": {}}, "status")
    with pytest.raises(ApiError) as dropped:
        await api.merge_patch(WORKLOADS, "ns", "wl", {"status": {}}, "status")
    assert (dropped.value.status, dropped.value.transient) == (0, True)
    assert isinstance(dropped.value.__cause__, aiohttp.ServerDisconnectedError)

    server.script = [("answer", 200, {"n": 2}), ("drop",), ("answer", 200, {"n": 3})]
    await api.merge_patch(WORKLOADS, "ns", "wl", {"status": {}}, "status")  # a new connection, kept open
    written = await retrying(lambda: api.merge_patch(WORKLOADS, "ns", "wl", {"status": {}}, "status"))
    assert written == {"n": 3}
    assert server.seen == [(1, "PATCH", STATUS_PATH), (1, "PATCH", STATUS_PATH), (2, "PATCH", STATUS_PATH),
                           (2, "PATCH", STATUS_PATH), (3, "PATCH", STATUS_PATH)]


async def test_a_dropped_connection_under_the_raw_pod_patch_is_transient_too(
        scripted: tuple[ScriptedServer, KubeApi]) -> None:
    server, api = scripted
    server.script = [("answer", 200, {}), ("drop",), ("answer", 404, {"kind": "Status", "message": "gone"})]
    await api.patch_raw(PODS, "ns", "p0", b"{}")
    with pytest.raises(ApiError) as dropped:
        await api.patch_raw(PODS, "ns", "p1", b"{}")
    with pytest.raises(ApiError) as gone:
        await api.patch_raw(PODS, "ns", "p2", b"{}")
    assert (dropped.value.status, dropped.value.transient) == (0, True)
    assert isinstance(dropped.value.__cause__, aiohttp.ServerDisconnectedError)
    assert (gone.value.not_found, gone.value.transient, gone.value.message) == (True, False, "gone")
    assert [(number, path) for number, _, path in server.seen] == [
        (1, "/api/v1/namespaces/ns/pods/p0"), (1, "/api/v1/namespaces/ns/pods/p1"), (2, "/api/v1/namespaces/ns/pods/p2")]


async def test_retrying_resends_throttled_and_failed_writes_but_not_a_conflict(
        scripted: tuple[ScriptedServer, KubeApi]) -> None:
    server, api = scripted
    server.script = [("answer", 429, {"message": "slow down"}), ("answer", 503, {"message": "not ready"}),
                     ("answer", 201, {"created": True})]
    assert await retrying(lambda: api.create(WORKLOADS, "ns", {"metadata": {"name": "wl"}})) == {"created": True}
    server.script = [("answer", 409, {"kind": "Status", "message": "workloads \"wl\" already exists"})]
    with pytest.raises(ApiError) as exists:
        await retrying(lambda: api.create(WORKLOADS, "ns", {"metadata": {"name": "wl"}}))
    assert (exists.value.conflict, exists.value.message) == (True, 'workloads "wl" already exists')
    assert len(server.seen) == 4  # three for the first write, one for the conflict


async def test_retrying_gives_up_after_its_attempts_with_the_last_error(
        scripted: tuple[ScriptedServer, KubeApi]) -> None:
    server, api = scripted
    server.script = [("answer", 500, {"message": f"etcd down {i}"}) for i in range(3)]
    with pytest.raises(ApiError) as failed:
        await retrying(lambda: api.delete(WORKLOADS, "ns", "wl"), attempts=3)
    assert (failed.value.status, failed.value.message, len(server.seen)) == (500, "etcd down 2", 3)


async def test_retrying_waits_as_long_as_retry_after_asks_when_that_is_longer_than_its_backoff(
        scripted: tuple[ScriptedServer, KubeApi], monkeypatch: pytest.MonkeyPatch) -> None:
    # kube-apiserver swapping a changed CRD's storage: 503 "apiserver is shutting down", Retry-After: 1
    # (then the same from the pod patch path); a 503 that names no wait is retried after the backoff
    server, api = scripted
    waits: list[float] = []
    real_sleep = asyncio.sleep

    async def sleep(seconds: float) -> None:
        waits.append(seconds)
        await real_sleep(0)
    monkeypatch.setattr("controller.kube.api.asyncio.sleep", sleep)
    shutting_down = {"kind": "Status", "message": "apiserver is shutting down", "code": 503}
    server.script = [("answer", 503, shutting_down, {"Retry-After": "1"}), ("answer", 503, shutting_down),
                     ("answer", 201, {"created": True})]
    assert await retrying(lambda: api.create(WORKLOADS, "ns", {"metadata": {"name": "wl"}})) == {"created": True}
    server.script = [("answer", 503, shutting_down, {"Retry-After": "2"}), ("answer", 200, {})]
    await retrying(lambda: api.patch_raw(PODS, "ns", "p", b"{}"))
    assert waits == [1.0, 0.1, 2.0]  # Retry-After, the second backoff (0.05 s doubled), Retry-After


@pytest.mark.parametrize(("retry_after", "seconds"), [
    ("1", 1.0),                                   # kube-apiserver's answer during a CRD storage swap
    ("0", 0.0),
    ("-3", 0.0),                                  # never a negative wait
    ("Fri, 27 Nov 2026 08:41:50 GMT", None),      # an HTTP date: not waited for, as client-go does not
    (None, None),
])
def test_the_retry_after_header_is_read_as_whole_seconds(retry_after: str | None, seconds: float | None) -> None:
    error = refused(503, '{"kind": "Status", "message": "apiserver is shutting down"}', retry_after)
    assert (error.status, error.message, error.transient, error.retry_after_s) == (
        503, "apiserver is shutting down", True, seconds)


async def test_a_server_that_is_not_listening_is_a_transient_error() -> None:
    probe = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = probe.sockets[0].getsockname()[1]
    probe.close()
    await probe.wait_closed()  # nothing listens on the port now
    async with ApiClient(Configuration(host=f"http://127.0.0.1:{port}")) as client:
        with pytest.raises(ApiError) as refused_:
            await KubeApi(client).get(WORKLOADS, "ns", "wl")
    assert (refused_.value.status, refused_.value.transient) == (0, True)
    assert refused_.value.message.startswith("GET /apis/kueue.x-k8s.io/v1beta2/namespaces/ns/workloads/wl: ")


async def test_a_2xx_answer_that_is_not_json_is_an_error_naming_the_request(
        scripted: tuple[ScriptedServer, KubeApi]) -> None:
    server, api = scripted
    server.script = [("answer", 200, b"<html>a proxy's page</html>")]
    with pytest.raises(ApiError) as bad:
        await api.get(WORKLOADS, "ns", "wl")
    assert (bad.value.status, bad.value.transient, bad.value.conflict, bad.value.not_found) == (200, False, False, False)
    assert bad.value.message == ("GET /apis/kueue.x-k8s.io/v1beta2/namespaces/ns/workloads/wl: the answer is not JSON: "
                                 "\"<html>a proxy's page</html>\"")


async def test_requests_are_counted_by_method_and_resource_without_names(
        scripted: tuple[ScriptedServer, KubeApi]) -> None:
    server, api = scripted
    server.script = [("answer", 200, {}), ("answer", 200, {}), ("answer", 201, {}), ("answer", 200, {"items": []})]
    await api.merge_patch(WORKLOADS, "ns", "wl", {"status": {}}, "status")
    await api.merge_patch(WORKLOADS, "other", "wl-2", {"status": {}}, "status")
    await api.create(("v1", "events"), "ns", {})
    await api.list(("v1", "nodes"))
    assert api.calls == 4
    assert dict(api.calls_by) == {"PATCH workloads/status": 2, "POST events": 1, "GET nodes": 1}


async def test_the_client_has_a_connection_for_every_writer_and_watch_of_a_burst_at_once(tmp_path: Path) -> None:
    """Over HTTP/1.1 a request in flight holds a connection: past the client's limit, an Admitted write
    waits for one behind every Workload create (the kubernetes client's default, 100, was fewer than
    the operator's writers and watch streams)."""
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:1"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}))
    client = await connect(kubeconfig)
    try:
        writers = PARALLEL_RECONCILES + PARALLEL_WRITES + PARALLEL_POSTS + len(RESOURCES)
        assert client.rest_client.maxsize == CONNECTIONS >= writers
    finally:
        await client.close()  # type: ignore[no-untyped-call]
