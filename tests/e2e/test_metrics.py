"""`tasq run`'s /metrics scraped with ServiceAccount tokens, on either control plane.

tasq runs on this machine with the cluster's admin kubeconfig, /metrics on HTTPS with a certificate
the test made, the probes on their own plain port. Two ServiceAccounts get tokens from `kubectl
create token`; one is bound to config/rbac's tasq-metrics-reader ClusterRole (the shipped file). The
API server itself answers tasq's TokenReviews and SubjectAccessReviews: 200 for the bound account,
403 for the other, 401 without a token or with a forged one.
"""

from __future__ import annotations

import itertools
import os
import re
import signal
import socket
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest
from cryptography import x509

from controller.api import constants as c
from controller.commands.crds import DEFAULT_DIR
from tests.e2e.conftest import Kubectl, wait_for
from webhooks.certificates import write_serving_files

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
TASQ = Path(sys.executable).parent / "tasq"
READER_ROLE = REPO / "config" / "rbac" / "metrics_reader_role.yaml"
_bindings = itertools.count(1)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Tasq:
    proc: subprocess.Popen[bytes]
    log: Path
    metrics_port: int
    probe_port: int
    ca_pem: bytes

    def output(self) -> str:
        return self.log.read_text()[-4000:]

    def get(self, url: str, token: str | None = None, context: ssl.SSLContext | None = None) -> tuple[int, str]:
        request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
        try:
            with urllib.request.urlopen(request, timeout=10, context=context) as answer:
                return int(answer.status), answer.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def scrape(self, token: str | None) -> tuple[int, str]:
        """GET /metrics over HTTPS, verifying tasq's certificate against the test's CA."""
        return self.get(f"https://127.0.0.1:{self.metrics_port}/metrics", token,
                        ssl.create_default_context(cadata=self.ca_pem.decode()))

    def probe(self, path: str) -> int:
        return self.get(f"http://127.0.0.1:{self.probe_port}{path}")[0]


@pytest.fixture(scope="module")
def tasq(kubectl: Kubectl, kubeconfig: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tasq]:
    kubectl("apply", "-f", str(DEFAULT_DIR))
    kubectl("apply", "-f", str(READER_ROLE))
    wait_for(lambda: kubectl("get", "workloads", "-A", check=False).returncode == 0, 60, "the CRDs served")
    work = tmp_path_factory.mktemp("tasq-metrics")
    ca = write_serving_files(work / "certs", datetime.now(UTC))
    log = work / "tasq.log"
    running = Tasq(subprocess.Popen(
        [str(TASQ), "run", "--kubeconfig", str(kubeconfig), "--lease-namespace", "default", "-v",
         "--metrics-host", "127.0.0.1", "--metrics-port", str(metrics_port := free_port()),
         "--metrics-cert-dir", str(work / "certs"),
         "--probe-host", "127.0.0.1", "--probe-port", str(probe_port := free_port())],
        stdout=log.open("w"), stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"}),
        log, metrics_port, probe_port, ca.cert_pem)
    try:
        wait_for(lambda: _answers(running), 60, "tasq's probes", logs=running.output)
        yield running
    finally:
        if running.proc.poll() is None:
            running.proc.send_signal(signal.SIGTERM)
            try:
                running.proc.wait(30)
            except subprocess.TimeoutExpired:
                running.proc.kill()


def _answers(tasq: Tasq) -> bool:
    try:
        return tasq.probe(c.PROBE_PATH_READYZ) == 200
    except OSError:
        return False


def account_token(kubectl: Kubectl, namespace: str, name: str, *, reader: bool) -> str:
    """A token of a new ServiceAccount, bound to tasq-metrics-reader when `reader`."""
    kubectl("create", "serviceaccount", name, "-n", namespace)
    if reader:
        kubectl("create", "clusterrolebinding", f"tasq-metrics-e2e-{next(_bindings)}-{namespace}",
                f"--clusterrole={c.METRICS_READER_ROLE}", f"--serviceaccount={namespace}:{name}")
    return kubectl("create", "token", name, "-n", namespace).stdout.strip()


def test_a_metrics_reader_scrapes_and_others_are_refused(tasq: Tasq, kubectl: Kubectl, namespace: str) -> None:
    reader = account_token(kubectl, namespace, "prometheus", reader=True)
    stranger = account_token(kubectl, namespace, "stranger", reader=False)

    def scraped() -> str | None:
        status, text = tasq.scrape(reader)
        return text if status == 200 else None
    # a new binding may take a moment to reach the real API server's RBAC cache (tasq keeps a denial 10 s)
    text = wait_for(scraped, 30, "a scrape with the bound account's token", logs=tasq.output)
    assert f"# TYPE {c.METRIC_ADMISSION_ATTEMPTS} counter" in text
    # the leader's own series: it leads (the only replica), its build, its certificate's end
    assert "\ntasq_leader 1.0\n" in text
    commit = subprocess.run([str(TASQ), "version"], capture_output=True, text=True, check=True).stdout.split()[3]
    assert f'git_commit="{commit}"' in text and 'kueue_build_info{' in text
    served = x509.load_pem_x509_certificate((tasq.log.parent / "certs" / c.WEBHOOK_CERT_FILE).read_bytes())
    expiry = re.search(r'^tasq_certificate_expiry_timestamp_seconds\{certificate="metrics"\} (\S+)$', text, re.M)
    assert expiry is not None and float(expiry[1]) == served.not_valid_after_utc.timestamp()
    status, text = tasq.scrape(stranger)
    assert status == 403, text
    assert f"system:serviceaccount:{namespace}:stranger" in text and "may not get /metrics" in text
    assert "tasq_" not in text and "kueue_" not in text
    status, text = tasq.scrape(None)
    assert status == 401 and "no bearer token" in text
    status, text = tasq.scrape(reader[:-4] + "AAAA")  # the signature (or payload) no longer matches
    assert status == 401 and "not accepted" in text
    assert "Traceback" not in tasq.output()


def test_the_probes_are_plain_http_on_their_own_port_and_do_not_serve_metrics(tasq: Tasq) -> None:
    assert tasq.probe(c.PROBE_PATH_HEALTHZ) == 200
    assert tasq.probe(c.PROBE_PATH_READYZ) == 200
    assert tasq.probe(c.PROBE_PATH_METRICS) == 404
    with pytest.raises((urllib.error.URLError, ConnectionError)):  # plain HTTP on the TLS port
        tasq.get(f"http://127.0.0.1:{tasq.metrics_port}/metrics")
