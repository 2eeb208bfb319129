"""The webhook process: it serves reviews over HTTPS from a child process, reports each answer to
the operator's metrics, asks the operator for a queued pod's group, drains when told, and is
restarted on the same port when it dies, saying why until it listens again; it never loads kopf,
a client, numpy or aiohttp."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import ssl
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from controller.api import constants as c
from controller.kube.webhook_serving import ChildConfig, WebhookProcess, _members_of
from tests.builders.cluster import make_pod
from tests.unit.webhooks.manifests import valid_job, valid_workload
from tests.unit.webhooks.reviews import review
from webhooks.certificates import CertificateAuthority, write_serving_files
from webhooks.serving import TlsFiles


def queued_pod(name: str, total: str) -> dict[str, Any]:
    return (make_pod(name).label(c.LABEL_QUEUE_NAME, "team-a").label(c.LABEL_POD_GROUP_NAME, "g")
            .annotate(c.ANNOTATION_POD_GROUP_TOTAL_COUNT, total).obj())


class Operator:
    """What the operator gives the process: its cache's groups, its metrics."""

    def __init__(self) -> None:
        self.asked: list[str] = []
        self.observed: list[tuple[str, int]] = []

    def group_members(self, key: str) -> Sequence[Mapping[str, Any]]:
        self.asked.append(key)
        return [queued_pod("a", "2")] if key.endswith("/g") else []

    def observe(self, path: str, status: int, seconds: float) -> None:
        assert 0 <= seconds < 10
        self.observed.append((path, status))


@pytest.fixture
async def running(tmp_path: Path) -> AsyncIterator[tuple[WebhookProcess, CertificateAuthority, Operator]]:
    ca = write_serving_files(tmp_path, datetime.now(UTC))
    process = WebhookProcess(TlsFiles(tmp_path / c.WEBHOOK_CERT_FILE, tmp_path / c.WEBHOOK_KEY_FILE,
                                      tmp_path / c.WEBHOOK_CA_FILE))
    operator = Operator()
    process.observe = operator.observe
    task = asyncio.create_task(process.serve_reviews(operator.group_members))
    try:
        await asyncio.wait_for(process.wait_listening(), 60)
        yield process, ca, operator
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def post(process: WebhookProcess, ca: CertificateAuthority, path: str, body: Any) -> tuple[int, Any, str]:
    context = ssl.create_default_context(cadata=ca.cert_pem.decode())
    async with aiohttp.ClientSession() as session, session.post(
            f"{process.url}/{path}", data=json.dumps(body).encode(), ssl=context,
            headers={"Content-Type": "application/json"}) as resp:
        return resp.status, await resp.json(content_type=None), resp.headers.get("Connection", "")


async def eventually(condition: Any, timeout: float = 30.0) -> None:
    for _ in range(int(timeout / 0.05)):
        if condition():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("condition not met in time")


async def test_reviews_are_answered_by_the_child_and_observed_by_the_operator(
        running: tuple[WebhookProcess, CertificateAuthority, Operator]) -> None:
    process, ca, operator = running
    assert process.pid is not None and process.pid != os.getpid() and process.failure is None
    status, answer, _ = await post(process, ca, c.WEBHOOK_MUTATE_JOB, review(valid_job().set("spec.suspend", False).obj()))
    assert status == 200 and answer["response"]["allowed"] is True and answer["response"]["patch"]
    status, _, _ = await post(process, ca, "nowhere", {})
    assert status == 404
    await eventually(lambda: len(operator.observed) == 2)
    assert operator.observed == [(f"/{c.WEBHOOK_MUTATE_JOB}", 200), ("/nowhere", 404)]


async def test_a_queued_pods_group_comes_from_the_operators_cache(
        running: tuple[WebhookProcess, CertificateAuthority, Operator]) -> None:
    process, ca, operator = running
    status, answer, _ = await post(process, ca, c.WEBHOOK_VALIDATE_QUEUED_POD, review(queued_pod("b", "3")))
    assert status == 200 and answer["response"]["allowed"] is False, answer
    assert "differs from 2 of pod a in the same group" in answer["response"]["status"]["message"]
    assert operator.asked == ["default/g"]
    status, answer, _ = await post(process, ca, c.WEBHOOK_VALIDATE_QUEUED_POD, review(queued_pod("c", "2")))
    assert status == 200 and answer["response"]["allowed"] is True


async def test_a_draining_process_closes_each_connection_it_answers_on(
        running: tuple[WebhookProcess, CertificateAuthority, Operator]) -> None:
    process, ca, _ = running
    body = review(valid_job().obj())
    assert (await post(process, ca, c.WEBHOOK_MUTATE_JOB, body))[2].lower() != "close"
    process.draining = True  # reaches the child in a message: the next answers close their connections
    for _ in range(100):
        status, _, connection = await post(process, ca, c.WEBHOOK_MUTATE_JOB, body)
        assert status == 200
        if connection.lower() == "close":
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the child never drained")


async def test_a_dead_process_is_reported_and_restarted_on_the_same_port(
        running: tuple[WebhookProcess, CertificateAuthority, Operator],
        caplog: pytest.LogCaptureFixture) -> None:
    process, ca, _ = running
    url, first = process.url, process.pid
    assert first is not None
    os.kill(first, signal.SIGKILL)
    await eventually(lambda: process.failure is not None)
    assert process.failure == f"the webhook process exited with code -{int(signal.SIGKILL)}"
    assert "Admission webhooks are not served: the webhook process exited" in caplog.text
    await eventually(lambda: process.failure is None and process.pid != first)
    assert process.url == url and process.restarts == 1
    status, answer, _ = await post(process, ca, c.WEBHOOK_MUTATE_JOB, review(valid_job().obj()))
    assert status == 200 and answer["response"]["allowed"] is True


def test_a_group_the_operator_cannot_read_is_sent_empty_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    def broken(key: str) -> Sequence[Mapping[str, Any]]:
        raise KeyError(key)
    assert _members_of(broken, "default/g") == []
    assert "Cannot read the pods of group default/g" in caplog.text
    assert _members_of(None, "default/g") == []
    assert _members_of(Operator().group_members, "default/g")[0]["metadata"]["name"] == "a"


def test_the_child_never_loads_kopf_a_client_numpy_or_aiohttp_even_while_answering() -> None:
    """What the child runs (its module, then Job, Pod and Workload reviews answered), in a fresh
    interpreter: none of kopf, the kubernetes client, numpy, jsonpatch or aiohttp is ever imported (each
    costs the process memory it never uses; a package's __init__ counts, which import-linter misses)."""
    probe = textwrap.dedent("""
        import asyncio, json, sys
        import controller.kube.webhook_serving as serving
        from webhooks.serving import answer
        reviews = json.loads(sys.stdin.read())
        async def ask(keys):
            return {key: () for key in keys}
        async def main():
            fn = serving.ChildReviewer(ask)
            return [(await answer(fn, body, path))[0] for path, body in reviews]
        statuses = asyncio.run(main())
        print(json.dumps([statuses, sorted({m.split(".")[0] for m in sys.modules})]))
        """)
    bodies = [(c.WEBHOOK_MUTATE_JOB, review(valid_job().obj())), (c.WEBHOOK_VALIDATE_JOB, review(valid_job().obj())),
              (c.WEBHOOK_VALIDATE_QUEUED_POD, review(queued_pod("b", "3"))),
              (c.WEBHOOK_VALIDATE_WORKLOAD, review(valid_workload().obj()))]
    out = subprocess.run([sys.executable, "-c", probe], input=json.dumps(bodies), capture_output=True, text=True,
                         check=True, timeout=120)
    statuses, loaded = json.loads(out.stdout)
    assert statuses == [200, 200, 200, 200]
    assert "webhooks" in loaded and not {"kopf", "kubernetes", "numpy", "jsonpatch", "aiohttp"} & set(loaded), loaded


@pytest.mark.parametrize("ca", [Path("/certs/ca.crt"), None], ids=["with a CA file", "without one"])
def test_the_childs_configuration_survives_its_command_line(ca: Path | None) -> None:
    """The child gets its configuration as a command-line argument, not pickled: every field comes back."""
    config = ChildConfig(TlsFiles(Path("/certs/tls.crt"), Path("/certs/tls.key"), ca), "0.0.0.0", 9443, 2.5,
                         "debug", "json", reuse_port=True)
    assert ChildConfig.from_json(config.to_json()) == config
