"""The visibility handlers on an insecure loopback server, answered from a ClusterCache: which
workloads wait, Kueue's Status errors, paging; and over HTTPS, who kube-apiserver's aggregator may
assert with its front-proxy client certificate. (Token authorization: test_authorizing; HTTPS with
tokens on both clusters: tests/e2e/test_visibility.py.)"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from controller.api import constants as c
from controller.cache.cluster import ClusterCache
from controller.core.request_headers import RequestHeaderConfig
from controller.kube.authorizing import AccessReviewer
from controller.kube.metrics import Metrics, serve_metrics
from controller.kube.visibility import PREFIX, cache_routes, queued_in
from tests.builders.kueue import ClusterQueueBuilder, LocalQueueBuilder, WorkloadBuilder
from tests.unit.kube.test_authorizing import ACCESS_REVIEW_PATH, READER, ReviewingApi
from webhooks.certificates import CertificateAuthority, write_serving_files
from webhooks.serving import ReloadingTls, TlsFiles


def queued_cache() -> ClusterCache:
    """cq <- team/red: `second` (priority 5) before `first` (0); `done` admitted, `off` stopped,
    `astray` in a LocalQueue that does not exist."""
    cache = ClusterCache()
    cache.upsert(c.KIND_CLUSTER_QUEUE, ClusterQueueBuilder("cq").build())
    cache.upsert(c.KIND_LOCAL_QUEUE, LocalQueueBuilder("red", "cq", "team").build())
    for builder in (WorkloadBuilder("first", "team").queue("red"),
                    WorkloadBuilder("second", "team").queue("red").priority(5),
                    WorkloadBuilder("done", "team").queue("red").admitted("cq").assignment(
                        "main", 1, ({}, 1), cluster_queue="cq"),
                    WorkloadBuilder("off", "team").queue("red").set("spec.active", False),
                    WorkloadBuilder("astray", "team").queue("nowhere")):
        cache.upsert(c.KIND_WORKLOAD, builder.pod_set("main").build())
    return cache


def test_only_active_workloads_without_quota_in_an_existing_queue_wait() -> None:
    assert sorted((info.name, cq) for info, cq in queued_in(queued_cache())) == [("first", "cq"), ("second", "cq")]


def test_the_workloads_of_a_stopped_local_queue_are_in_no_queue() -> None:
    # Kueue takes a stopped LocalQueue out of its queues; its ClusterQueue's other LocalQueues stay.
    cache = queued_cache()
    cache.upsert(c.KIND_LOCAL_QUEUE, LocalQueueBuilder("blue", "cq", "team").build())
    cache.upsert(c.KIND_WORKLOAD, WorkloadBuilder("blue-one", "team").queue("blue").pod_set("main").build())
    held = LocalQueueBuilder("red", "cq", "team").build()
    held["spec"]["stopPolicy"] = "Hold"
    held["metadata"]["resourceVersion"] = "99"
    cache.upsert(c.KIND_LOCAL_QUEUE, held)
    assert [(info.name, cq) for info, cq in queued_in(cache)] == [("blue-one", "cq")]


@asynccontextmanager
async def served(cache: ClusterCache) -> AsyncIterator[str]:
    server = await serve_metrics("127.0.0.1", 0, Metrics(), None, None, routes=partial(cache_routes, cache=cache))
    try:
        yield f"http://127.0.0.1:{server.port}{PREFIX}"
    finally:
        await server.close()


async def fetch(url: str) -> tuple[int, dict[str, Any]]:
    async with aiohttp.ClientSession() as http, http.get(url) as answer:
        return answer.status, await answer.json()


async def test_queues_answer_with_positions_and_errors_are_kubernetes_statuses() -> None:
    async with served(queued_cache()) as base:
        status, body = await fetch(f"{base}/clusterqueues/cq/pendingworkloads")
        assert status == 200
        assert [(i["metadata"]["name"], i["positionInClusterQueue"]) for i in body["items"]] == [
            ("second", 0), ("first", 1)]
        status, body = await fetch(f"{base}/namespaces/team/localqueues/red/pendingworkloads?offset=1")
        assert status == 200 and [i["metadata"]["name"] for i in body["items"]] == ["first"]
        status, body = await fetch(f"{base}/namespaces/other/localqueues/red/pendingworkloads")
        assert (status, body["kind"], body["reason"]) == (404, "Status", "NotFound")
        assert body["message"] == 'localqueues.visibility.kueue.x-k8s.io "red" in namespace "other" not found'
        status, body = await fetch(f"{base}/clusterqueues/cq/pendingworkloads?offset=x")
        assert (status, body["reason"], body["message"]) == (400, "BadRequest", "offset: 'x' is not an integer")


# --- kube-apiserver's aggregator: front-proxy client certificates over HTTPS -------------------------
#
#   front-proxy CA --signs--> client cert CN=front-proxy-client   (what kube-apiserver presents)
#   stray CA       --signs--> client cert CN=front-proxy-client   (anyone else's CA: no handshake)
#   serving CA     --signs--> tasq's serving cert for 127.0.0.1

ALICE = "alice"
CLUSTER_QUEUE_ASKED = "clusterqueues/pendingworkloads"


def client_certificate(ca: CertificateAuthority, name: str, directory: Path) -> tuple[Path, Path]:
    """(cert file, key file) of a client certificate with common name `name` signed by `ca`."""
    now = datetime.now(UTC)
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(ca.certificate.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - timedelta(minutes=5)).not_valid_after(now + timedelta(days=1))
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
            .sign(ca.key, hashes.SHA256()))
    cert_file, key_file = directory / f"{name}-{id(ca)}.crt", directory / f"{name}-{id(ca)}.key"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_file, key_file


@asynccontextmanager
async def served_https(cache: ClusterCache, api: ReviewingApi, directory: Path,
                       request_header: RequestHeaderConfig) -> AsyncIterator[str]:
    write_serving_files(directory, datetime.now(UTC))
    files = TlsFiles(directory / c.WEBHOOK_CERT_FILE, directory / c.WEBHOOK_KEY_FILE)
    reviewer = AccessReviewer(api, request_header=request_header)
    server = await serve_metrics("127.0.0.1", 0, Metrics(), reviewer,
                                 ReloadingTls(files, "metrics", request_header.client_ca),
                                 routes=partial(cache_routes, cache=cache))
    try:
        yield f"https://127.0.0.1:{server.port}{PREFIX}"
    finally:
        await server.close()


async def fetch_tls(url: str, ca_file: Path, cert: tuple[Path, Path] | None,
                    headers: dict[str, str]) -> tuple[int, dict[str, Any]]:
    context = ssl.create_default_context(cafile=str(ca_file))
    if cert is not None:
        context.load_cert_chain(*cert)
    async with aiohttp.ClientSession() as http, http.get(url, ssl=context, headers=headers) as answer:
        return answer.status, await answer.json()


async def test_the_aggregator_certificate_makes_the_remote_user_headers_count(tmp_path: Path) -> None:
    """Only a client certificate signed by the requestheader CA, with an allowed name, lets the
    X-Remote-* headers name the user; the same headers without it are ignored (401), and the user
    they name is still authorized by a SubjectAccessReview (no TokenReview is asked)."""
    front_proxy = CertificateAuthority.create(datetime.now(UTC), common_name="front-proxy-ca")
    stray = CertificateAuthority.create(datetime.now(UTC), common_name="stray-ca")
    config = RequestHeaderConfig(front_proxy.cert_pem.decode(), ("front-proxy-client",))
    aggregator = client_certificate(front_proxy, "front-proxy-client", tmp_path)
    kubelet = client_certificate(front_proxy, "kubelet", tmp_path)
    impostor = client_certificate(stray, "front-proxy-client", tmp_path)
    api = ReviewingApi()
    api.may_get = {(ALICE, CLUSTER_QUEUE_ASKED), (READER, CLUSTER_QUEUE_ASKED)}
    as_alice = {"X-Remote-User": ALICE, "X-Remote-Group": "devs"}
    async with served_https(queued_cache(), api, tmp_path / "serving", config) as base:
        url, ca_file = f"{base}/clusterqueues/cq/pendingworkloads", tmp_path / "serving" / c.WEBHOOK_CA_FILE

        status, body = await fetch_tls(url, ca_file, aggregator, as_alice)
        assert status == 200 and [i["metadata"]["name"] for i in body["items"]] == ["second", "first"]
        assert [(u, b["spec"]["user"], b["spec"]["groups"]) for u, b in api.sent] == [
            (ACCESS_REVIEW_PATH, ALICE, ["devs"])]

        status, body = await fetch_tls(url, ca_file, aggregator, {"X-Remote-User": "mallory"})
        assert (status, body["reason"]) == (403, "Forbidden")
        assert body["message"].startswith('user "mallory" may not get clusterqueues/cq/pendingworkloads')

        status, body = await fetch_tls(url, ca_file, None, as_alice)
        assert (status, body["reason"]) == (401, "Unauthorized")
        assert body["message"] == "no bearer token: send Authorization: Bearer <token>"

        status, body = await fetch_tls(url, ca_file, kubelet, as_alice)
        assert (status, body["reason"]) == (401, "Unauthorized")
        assert body["message"] == ('front-proxy client certificate refused: client certificate common name '
                                   '"kubelet" is not one of the allowed names front-proxy-client')

        with pytest.raises(aiohttp.ClientError):
            await fetch_tls(url, ca_file, impostor, as_alice)

        sent = len(api.sent)
        status, _ = await fetch_tls(url, ca_file, None, {"Authorization": "Bearer reader-token", **as_alice})
        assert status == 200
        assert [b["spec"].get("user") for _, b in api.sent[sent:]] == [None, READER]  # TokenReview, then READER's
