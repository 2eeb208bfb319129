"""hack/realcluster/up.py: the nodes it creates are `tasq dev`'s, and its kwok stages read the
devcluster's test annotations (the parts that run without Go or a cluster)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from controller.api import constants as c
from controller.commands.dev import DEFAULT_TOPOLOGY

UP_PY = Path(__file__).resolve().parents[3] / "hack" / "realcluster" / "up.py"


@pytest.fixture(scope="module")
def up() -> ModuleType:
    spec = importlib.util.spec_from_file_location("realcluster_up", UP_PY)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["realcluster_up"] = module
    spec.loader.exec_module(module)
    return module


def test_default_nodes_are_tasq_devs_sample_nodes_marked_for_kwok(up: ModuleType) -> None:
    nodes = up.sample_nodes(None, [])
    assert up.DEFAULT_TOPOLOGY == DEFAULT_TOPOLOGY
    assert len(nodes) == 32
    first = nodes[0]
    assert first["metadata"]["name"] == "gpu-b1-r1-n1"
    assert first["metadata"]["annotations"] == {"kwok.x-k8s.io/node": "fake"}
    assert first["status"]["allocatable"] == {"cpu": "96", "memory": "1Ti", "pods": "110", "nvidia.com/gpu": "8"}


def test_a_bad_topology_is_an_error_naming_the_flag(up: ModuleType) -> None:
    with pytest.raises(up.UpError, match=r"^--topology: topology shape '2x0x1x1'"):
        up.sample_nodes("2x0x1x1", [])


def test_pod_stages_read_the_devcluster_annotations(up: ModuleType) -> None:
    stages = {s["metadata"]["name"]: s["spec"] for s in up.pod_stages()}
    assert set(stages) == {"tasq-pod-start", "tasq-pod-start-unready", "tasq-pod-fail", "tasq-pod-succeed",
                           "tasq-pod-delete", "tasq-node-managed"}
    for name, operator in (("tasq-pod-start", "NotIn"), ("tasq-pod-start-unready", "In")):
        (not_ready,) = [e for e in stages[name]["selector"]["matchExpressions"]
                        if c.ANNOTATION_DEVCLUSTER_NOT_READY in e["key"]]
        assert not_ready["operator"] == operator
    unready = stages["tasq-pod-start-unready"]["next"]["statusTemplate"]
    assert '- type: Ready\n  status: "False"' in unready and "ready: true" not in unready.split("initContainerStatuses")[0]
    keys = [e["key"] for e in stages["tasq-pod-succeed"]["selector"]["matchExpressions"]]
    assert any(c.ANNOTATION_DEVCLUSTER_RUN_SECONDS in k for k in keys)
    assert any(c.ANNOTATION_DEVCLUSTER_FAIL in k for k in keys)
    assert c.ANNOTATION_DEVCLUSTER_RUN_SECONDS in stages["tasq-pod-succeed"]["delay"]["durationFrom"]["expressionFrom"]
    fail_keys = [e["key"] for e in stages["tasq-pod-fail"]["selector"]["matchExpressions"]]
    assert any(c.ANNOTATION_DEVCLUSTER_FAIL in k for k in fail_keys)


def test_jobsets_webhooks_point_at_its_loopback_server_and_touch_only_jobset_pods(up: ModuleType) -> None:
    configs = dict(up.jobset_webhook_configurations(9443, b"CA"))
    mutating = configs["/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"]
    validating = configs["/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"]
    hooks = {h["name"]: h for cfg in (mutating, validating) for h in cfg["webhooks"]}
    assert set(hooks) == {"mjobset.kb.io", "mpod.kb.io", "vjobset.kb.io", "vpod.kb.io"}
    assert hooks["mjobset.kb.io"]["clientConfig"] == {
        "url": "https://127.0.0.1:9443/mutate-jobset-x-k8s-io-v1alpha2-jobset", "caBundle": "Q0E="}
    for name in ("mpod.kb.io", "vpod.kb.io"):  # an outage of JobSet's controller never blocks other pods
        assert hooks[name]["objectSelector"] == {
            "matchExpressions": [{"key": "jobset.sigs.k8s.io/jobset-name", "operator": "Exists"}]}
    assert "objectSelector" not in hooks["vjobset.kb.io"]
    assert hooks["vjobset.kb.io"]["rules"][0]["operations"] == ["CREATE", "UPDATE"]


def test_jobset_has_a_cache_key_of_its_own(up: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(up, "run_go", lambda args, **_: "go version go1.26.8 linux/amd64")
    assert up.cache_key(up.JOBSET_PINNED_FILES, "") != up.cache_key()
    assert up.cache_key(up.JOBSET_PINNED_FILES, "") == up.cache_key(up.JOBSET_PINNED_FILES, "")


def test_kube_apiserver_calls_apiservices_with_a_front_proxy_client_cert_it_publishes_the_ca_of(
        up: ModuleType, tmp_path: Path) -> None:
    """The aggregator's client certificate is signed by the front-proxy CA (not the cluster CA, whose
    certificates name users), carries the one allowed name, and every flag names a file written."""
    from cryptography import x509
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    pki = tmp_path / "pki"
    pki.mkdir()
    up.write_certificates(pki)
    client = x509.load_pem_x509_certificate((pki / "front-proxy-client.crt").read_bytes())
    proxy_ca = x509.load_pem_x509_certificate((pki / "front-proxy-ca.crt").read_bytes())
    cluster_ca = x509.load_pem_x509_certificate((pki / "ca.crt").read_bytes())
    client.verify_directly_issued_by(proxy_ca)
    assert proxy_ca.subject != cluster_ca.subject
    assert client.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == up.FRONT_PROXY_CLIENT
    assert ExtendedKeyUsageOID.CLIENT_AUTH in client.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    argv = up.component_argv(Path("/bin/realcluster"), Path("/bin/kwok"), tmp_path,
                             {"etcd": 1, "etcd-peer": 2, "apiserver": 3, "kwok": 4})["kube-apiserver"]
    flags = dict(arg.removeprefix("--").split("=", 1) for arg in argv if arg.startswith("--requestheader-")
                 or arg.startswith("--proxy-client-"))
    assert flags["requestheader-allowed-names"] == up.FRONT_PROXY_CLIENT
    assert flags["requestheader-username-headers"] == "X-Remote-User"
    for key in ("requestheader-client-ca-file", "proxy-client-cert-file", "proxy-client-key-file"):
        assert Path(flags[key]).is_file(), key
    assert Path(flags["requestheader-client-ca-file"]).read_bytes() == (pki / "front-proxy-ca.crt").read_bytes()


@pytest.mark.parametrize(("argv", "profiling"), [([], "false"), (["--profiling"], "true")],
                         ids=["no-profiles-by-default", "profiles-when-asked"])
def test_kube_apiserver_serves_profiles_only_when_asked(up: ModuleType, tmp_path: Path, argv: list[str],
                                                      profiling: str) -> None:
    args = up.parse_args(["--kubeconfig", str(tmp_path / "kc"), *argv])
    apiserver = up.component_argv(Path("/bin/realcluster"), Path("/bin/kwok"), tmp_path,
                                  {"etcd": 1, "etcd-peer": 2, "apiserver": 3, "kwok": 4},
                                  args.profiling)["kube-apiserver"]
    assert f"--profiling={profiling}" in apiserver
