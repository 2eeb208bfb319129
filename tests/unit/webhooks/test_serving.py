"""The TLS admission server: real HTTPS on 127.0.0.1, 404 for a path that names no webhook, 400 for
malformed reviews without going down, a log line naming each object, certificate files reloaded
without a restart, connections closed after each answer while draining, and /convert answering
ConversionReviews on the same server."""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
from collections.abc import AsyncGenerator, AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from cryptography import x509

from controller.api import constants as c
from tests.builders.conversion import rename_cohort
from tests.unit.webhooks.manifests import valid_job
from tests.unit.webhooks.reviews import Admission, review
from tests.unit.webhooks.test_converting import conversion_review, queue
from webhooks.certificates import CertificateAuthority, write_serving_files
from webhooks.configurations import (
    CONVERSION_PATH,
    MUTATING_ROUTES,
    VALIDATING_ROUTES,
    service_client,
    webhook_configurations,
)
from webhooks.serving import (
    MAX_OBJECT_DEPTH,
    MAX_REVIEW_BYTES,
    AdmissionServer,
    TlsFiles,
    review_problems,
    too_deep,
)

NOW = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)


def tls_files(directory: Path) -> TlsFiles:
    return TlsFiles(directory / c.WEBHOOK_CERT_FILE, directory / c.WEBHOOK_KEY_FILE, directory / c.WEBHOOK_CA_FILE)


def trusting(ca_pem: bytes) -> ssl.SSLContext:
    return ssl.create_default_context(cadata=ca_pem.decode())


@pytest.fixture
async def running(tmp_path: Path) -> AsyncIterator[tuple[AdmissionServer, CertificateAuthority]]:
    ca = write_serving_files(tmp_path, datetime.now(UTC))
    server = AdmissionServer(tls_files(tmp_path), reload_interval=0.05)
    serving = server(Admission().fn)
    assert isinstance(serving, AsyncGenerator)  # AdmissionServer.__call__ is an async generator
    config = await anext(serving)
    assert config["url"] == server.url and config.get("caBundle") == tls_files(tmp_path).ca_bundle()
    task = asyncio.ensure_future(anext(serving))  # the server's reload loop
    try:
        yield server, ca
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await serving.aclose()


async def post(server: AdmissionServer, ca_pem: bytes, path: str, body: bytes) -> tuple[int, Any]:
    async with aiohttp.ClientSession() as session, session.post(
            f"{server.url}/{path}", data=body, ssl=trusting(ca_pem),
            headers={"Content-Type": "application/json"}) as resp:
        return resp.status, await resp.json(content_type=None)


async def served_serial(server: AdmissionServer, ca_pem: bytes) -> int:
    """The serial number of the certificate a new TLS handshake gets."""
    _, writer = await asyncio.open_connection("127.0.0.1", server.port, ssl=trusting(ca_pem))
    der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
    writer.close()
    await writer.wait_closed()
    return int(x509.load_der_x509_certificate(der).serial_number)


@pytest.mark.parametrize(("body", "problem"), [
    pytest.param(b"{not json", "not JSON", id="not JSON"),
    pytest.param(b"[" * 100_000 + b"]" * 100_000, "not JSON", id="JSON nested deeper than the decoder goes"),
    pytest.param(b"[1, 2]", "JSON object", id="a list"),
    pytest.param(b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}', "request must be",
                 id="no request"),
    pytest.param(json.dumps({**review(valid_job().obj()), "request": {"uid": "u"}}).encode(), "request.resource",
                 id="a request without resource, operation or object"),
])
async def test_malformed_reviews_get_400_and_the_server_keeps_serving(
        running: tuple[AdmissionServer, CertificateAuthority], body: bytes, problem: str) -> None:
    server, ca = running
    status, answer = await post(server, ca.cert_pem, c.WEBHOOK_MUTATE_JOB, body)
    assert status == 400 and problem in answer["message"]
    status, answer = await post(server, ca.cert_pem, c.WEBHOOK_MUTATE_JOB, json.dumps(review(valid_job().obj())).encode())
    assert status == 200 and answer["response"]["allowed"] is True


@pytest.mark.parametrize("path", [
    pytest.param("", id="the root"),
    pytest.param("mutate-apps-v1-deployment", id="a webhook tasq does not have"),
    pytest.param("healthz", id="a probe path"),
    pytest.param(f"{c.WEBHOOK_MUTATE_JOB}/extra", id="a known id with more after it"),
    pytest.param(c.WEBHOOK_MUTATE_JOB.upper(), id="a known id in other case"),
])
async def test_a_path_that_names_no_webhook_is_not_found_even_with_a_valid_review(
        running: tuple[AdmissionServer, CertificateAuthority], path: str) -> None:
    server, ca = running
    status, answer = await post(server, ca.cert_pem, path, json.dumps(review(valid_job().obj())).encode())
    assert status == 404 and answer == {"message": f"no webhook at /{path}"}
    status, _ = await post(server, ca.cert_pem, path, b"{not json")
    assert status == 404  # the path is checked before the body
    status, answer = await post(server, ca.cert_pem, c.WEBHOOK_MUTATE_JOB, json.dumps(review(valid_job().obj())).encode())
    assert status == 200 and answer["response"]["allowed"] is True


async def test_every_path_the_configurations_call_is_served(
        running: tuple[AdmissionServer, CertificateAuthority]) -> None:
    server, ca = running
    called = {hook["clientConfig"]["service"]["path"].lstrip("/")
              for configuration in webhook_configurations(service_client()) for hook in configuration["webhooks"]}
    assert called == {route.handler_id for route in (*MUTATING_ROUTES, *VALIDATING_ROUTES)}
    for path in sorted(called):  # a malformed body proves the request got past the path check
        status, answer = await post(server, ca.cert_pem, path, b"[1]")
        assert status == 400 and "JSON object" in answer["message"], path


async def test_a_resource_without_handlers_is_a_bad_request(running: tuple[AdmissionServer, CertificateAuthority]) -> None:
    server, ca = running
    request = review(valid_job().obj())
    request["request"]["resource"] = {"group": "apps", "version": "v1", "resource": "deployments"}
    status, _ = await post(server, ca.cert_pem, c.WEBHOOK_MUTATE_JOB, json.dumps(request).encode())
    assert status == 400


async def test_each_request_is_logged_with_its_object(running: tuple[AdmissionServer, CertificateAuthority],
                                                      caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="webhooks.serving")
    server, ca = running
    job = valid_job("logged").set("metadata.namespace", "team-a").annotate(c.ANNOTATION_REQUIRE_TOPOLOGY, "auto")
    request = review(job.obj())
    status, answer = await post(server, ca.cert_pem, c.WEBHOOK_VALIDATE_JOB, json.dumps(request).encode())
    assert status == 200 and answer["response"]["allowed"] is False
    uid = request["request"]["uid"]
    assert f"CREATE Job team-a/logged uid={uid}: denied 422" in caplog.text


async def test_an_allowed_request_is_logged_only_at_debug_and_each_answer_is_observed(
        running: tuple[AdmissionServer, CertificateAuthority], caplog: pytest.LogCaptureFixture) -> None:
    server, ca = running
    seen: list[tuple[str, int]] = []

    def observe(path: str, status: int, seconds: float) -> None:
        assert 0 <= seconds < 10
        seen.append((path, status))
    server.observe = observe
    caplog.set_level(logging.INFO, logger="webhooks.serving")
    request = review(valid_job("quiet").obj())
    status, answer = await post(server, ca.cert_pem, c.WEBHOOK_MUTATE_JOB, json.dumps(request).encode())
    assert status == 200 and answer["response"]["allowed"] is True
    assert "quiet" not in caplog.text  # a line per allowed request would flood the default log
    caplog.set_level(logging.DEBUG, logger="webhooks.serving")
    await post(server, ca.cert_pem, c.WEBHOOK_MUTATE_JOB, json.dumps(review(valid_job("loud").obj())).encode())
    assert "loud" in caplog.text and "allowed" in caplog.text
    await post(server, ca.cert_pem, c.WEBHOOK_MUTATE_JOB, b"{not json")
    await post(server, ca.cert_pem, "nowhere", b"{}")
    path = f"/{c.WEBHOOK_MUTATE_JOB}"
    assert seen == [(path, 200), (path, 200), (path, 400), ("/nowhere", 404)]


async def test_new_certificate_files_are_served_without_a_restart(
        running: tuple[AdmissionServer, CertificateAuthority], tmp_path: Path) -> None:
    server, ca = running
    first = await served_serial(server, ca.cert_pem)
    write_serving_files(tmp_path, datetime.now(UTC), ca=ca)  # a renewal by the same CA
    for _ in range(100):
        if server.reloads:
            break
        await asyncio.sleep(0.05)
    second = await served_serial(server, ca.cert_pem)
    assert server.reloads == 1 and second != first
    new_ca = write_serving_files(tmp_path, datetime.now(UTC))  # a new CA altogether
    for _ in range(100):
        if server.reloads == 2:
            break
        await asyncio.sleep(0.05)
    assert await served_serial(server, new_ca.cert_pem) not in (first, second)
    status, _ = await post(server, new_ca.cert_pem, c.WEBHOOK_MUTATE_JOB, json.dumps(review(valid_job().obj())).encode())
    assert status == 200


async def test_a_half_written_pair_keeps_the_old_certificate(
        running: tuple[AdmissionServer, CertificateAuthority], tmp_path: Path) -> None:
    server, ca = running
    first = await served_serial(server, ca.cert_pem)
    other = CertificateAuthority.create(NOW)
    cert_pem, _ = other.issue(["127.0.0.1"], datetime.now(UTC))
    (tmp_path / c.WEBHOOK_CERT_FILE).write_bytes(cert_pem)  # the key that goes with it is not there yet
    assert server.reload_if_changed() is False
    assert await served_serial(server, ca.cert_pem) == first


@pytest.mark.parametrize(("mutate", "problem"), [
    pytest.param(lambda r: r.update(kind="Review"), "apiVersion/kind", id="wrong kind"),
    pytest.param(lambda r: r["request"].update(uid=""), "request.uid", id="empty uid"),
    pytest.param(lambda r: r["request"].update(operation="PATCH"), "request.operation", id="unknown operation"),
    pytest.param(lambda r: r["request"].pop("userInfo"), "request.userInfo", id="no userInfo"),
    pytest.param(lambda r: r["request"].update(object=None), "request.object or", id="no object at all"),
    pytest.param(lambda r: r["request"].update(oldObject=[]), "request.oldObject must", id="oldObject a list"),
    pytest.param(lambda r: r["request"]["object"].update(metadata="x"), "metadata must", id="metadata a string"),
])
def test_review_problems_name_what_is_wrong(mutate: Any, problem: str) -> None:
    request = review(valid_job().obj())
    assert review_problems(request) == []
    mutate(request)
    assert any(problem in p for p in review_problems(request))


def _secret_volume_version(volume: Path, version: str, ca: CertificateAuthority | None) -> CertificateAuthority:
    """Write one version of a mounted Secret as the kubelet does: files in a timestamped directory,
    `..data` pointing at it (swapped in one rename), and each key a symlink through `..data`."""
    ca = write_serving_files(volume / version, datetime.now(UTC), ca=ca)
    tmp = volume / "..data_tmp"
    tmp.symlink_to(version)
    tmp.replace(volume / "..data")
    for name in (c.WEBHOOK_CERT_FILE, c.WEBHOOK_KEY_FILE, c.WEBHOOK_CA_FILE):
        if not (volume / name).is_symlink():
            (volume / name).symlink_to(Path("..data") / name)
    return ca


async def test_a_renewed_secret_volume_is_picked_up(tmp_path: Path) -> None:
    ca = _secret_volume_version(tmp_path, "..2026_11_24_12_00_00.1", None)
    server = AdmissionServer(tls_files(tmp_path), reload_interval=0.05)
    serving = server(Admission().fn)
    assert isinstance(serving, AsyncGenerator)  # AdmissionServer.__call__ is an async generator
    await anext(serving)
    try:
        first = await served_serial(server, ca.cert_pem)
        assert server.reload_if_changed() is False
        _secret_volume_version(tmp_path, "..2026_11_24_13_00_00.2", ca)
        assert server.reload_if_changed() is True
        assert await served_serial(server, ca.cert_pem) != first
    finally:
        await serving.aclose()


def nested(depth: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for _ in range(depth):
        out = {"a": out}
    return out


@pytest.mark.parametrize(("depth", "deep"), [(MAX_OBJECT_DEPTH - 3, False), (MAX_OBJECT_DEPTH - 2, True),
                                             (50_000, True)])
def test_too_deep_measures_any_depth_without_recursion(depth: int, deep: bool) -> None:
    """The wrapper adds three levels: the innermost value is at depth + 3; the limit is inclusive."""
    path = too_deep({"spec": {"x": [nested(depth)]}})
    assert (path is not None) is deep
    if path is not None:
        assert path.text.startswith("spec.x[0].a.a")


@pytest.mark.parametrize("handler_id", [c.WEBHOOK_VALIDATE_JOB, c.WEBHOOK_MUTATE_JOB])
async def test_an_object_too_deep_for_kopf_is_denied_with_its_path(handler_id: str) -> None:
    """kopf copies objects recursively and fails past ~500 levels; such an object is denied (422),
    naming where, instead of failing the call."""
    request = review(valid_job().obj())
    request["request"]["object"]["spec"]["template"]["spec"]["extra"] = nested(2_000)
    status, body = await Admission().answer(handler_id, request)
    assert status == 200 and body["response"]["allowed"] is False
    assert body["response"]["status"]["code"] == 422
    assert 'Job.batch "train" is invalid: spec.template.spec.extra.a.a' in body["response"]["status"]["message"]
    assert f"nested more than {MAX_OBJECT_DEPTH} levels" in body["response"]["status"]["message"]


async def test_a_draining_server_still_answers_and_closes_each_connection_it_answers_on(
        running: tuple[AdmissionServer, CertificateAuthority]) -> None:
    server, ca = running
    body = json.dumps(review(valid_job().obj())).encode()
    async with aiohttp.ClientSession() as session:
        for draining, closes in ((False, False), (True, True)):
            server.draining = draining
            async with session.post(f"{server.url}/{c.WEBHOOK_MUTATE_JOB}", data=body, ssl=trusting(ca.cert_pem),
                                    headers={"Content-Type": "application/json"}) as resp:
                assert resp.status == 200 and (await resp.json())["response"]["allowed"] is True
                assert (resp.headers.get("Connection", "").lower() == "close") is closes


@pytest.fixture
async def converting(tmp_path: Path) -> AsyncIterator[tuple[AdmissionServer, CertificateAuthority]]:
    ca = write_serving_files(tmp_path, datetime.now(UTC))
    server = AdmissionServer(tls_files(tmp_path), reload_interval=0.05, converter=rename_cohort)
    serving = server(Admission().fn)
    assert isinstance(serving, AsyncGenerator)
    await anext(serving)
    try:
        yield server, ca
    finally:
        await serving.aclose()


async def test_convert_answers_a_conversion_review_over_https(
        converting: tuple[AdmissionServer, CertificateAuthority], caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="webhooks.serving")
    server, ca = converting
    # more objects than are converted inline: the worker-thread path answers the same
    objects = [queue(f"q{i}") for i in range(40)]
    status, answer = await post(server, ca.cert_pem, CONVERSION_PATH, json.dumps(conversion_review(objects)).encode())
    assert status == 200 and answer["response"]["result"] == {"status": "Success"}
    assert [o["metadata"]["name"] for o in answer["response"]["convertedObjects"]] == [f"q{i}" for i in range(40)]
    assert "Conversion of 40 object(s) to kueue.x-k8s.io/v1beta2: done" in caplog.text


async def test_convert_answers_a_bad_object_with_a_failure_and_bad_bodies_with_400(
        converting: tuple[AdmissionServer, CertificateAuthority], caplog: pytest.LogCaptureFixture) -> None:
    server, ca = converting
    status, answer = await post(server, ca.cert_pem, CONVERSION_PATH,
                                json.dumps(conversion_review([queue("bad", 3)])).encode())
    assert status == 200 and answer["response"]["result"] == {
        "status": "Failure", "message": "ClusterQueue bad: spec.cohort: must be a string"}
    assert "Conversion of 1 object(s) to kueue.x-k8s.io/v1beta2: failed: ClusterQueue bad" in caplog.text
    for body, problem in ((b"{not json", "not JSON"), (b"[]", "JSON object")):
        status, answer = await post(server, ca.cert_pem, CONVERSION_PATH, body)
        assert status == 400 and problem in answer["message"]
    status, answer = await post(server, ca.cert_pem, CONVERSION_PATH, json.dumps(conversion_review([queue("a")])).encode())
    assert status == 200 and answer["response"]["result"]["status"] == "Success"  # still serving


async def test_admission_paths_still_refuse_a_review_over_their_limit(
        converting: tuple[AdmissionServer, CertificateAuthority]) -> None:
    server, ca = converting
    status, answer = await post(server, ca.cert_pem, c.WEBHOOK_MUTATE_JOB, b" " * (MAX_REVIEW_BYTES + 1))
    assert status == 413 and f"must not exceed {MAX_REVIEW_BYTES} bytes" in answer["message"]  # Content Too Large


async def test_by_default_convert_uses_tasqs_conversion(running: tuple[AdmissionServer, CertificateAuthority]) -> None:
    """The operator's server converts with controller.api.conversion: Kueue's rename, and a Failure
    naming object and field for a kind tasq does not serve."""
    server, ca = running
    queue_v1 = {"apiVersion": f"{c.GROUP}/v1beta1", "kind": "ClusterQueue", "metadata": {"name": "cq"},
                "spec": {"cohort": "pool"}}
    status, answer = await post(server, ca.cert_pem, CONVERSION_PATH,
                                json.dumps(conversion_review([queue_v1], f"{c.GROUP}/v1beta2")).encode())
    assert status == 200 and answer["response"]["result"] == {"status": "Success"}
    (converted,) = answer["response"]["convertedObjects"]
    assert converted["apiVersion"] == f"{c.GROUP}/v1beta2" and converted["spec"] == {"cohortName": "pool"}
    gizmo = {**queue_v1, "kind": "Gizmo"}
    status, answer = await post(server, ca.cert_pem, CONVERSION_PATH,
                                json.dumps(conversion_review([gizmo], f"{c.GROUP}/v1beta2")).encode())
    assert status == 200 and answer["response"]["result"]["status"] == "Failure"
    assert answer["response"]["result"]["message"].startswith("Gizmo cq: kind: must be one of ")
