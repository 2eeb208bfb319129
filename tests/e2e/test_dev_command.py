"""`tasq dev` as a user runs it: a subprocess that writes a kubeconfig and stops cleanly on SIGINT."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from controller import cli
from controller.commands import dev
from devcluster.cluster import DevCluster
from tests.e2e.conftest import REPO, Kubectl

pytestmark = pytest.mark.e2e


def test_tasq_dev_serves_sample_gpu_nodes_and_crds_until_interrupted(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    proc = subprocess.Popen([sys.executable, "-m", "controller.cli", "dev", "--kubeconfig", str(kubeconfig)],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 20
        while not kubeconfig.exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.1)
        kubectl = Kubectl(kubeconfig, tmp_path / "cache")
        nodes = kubectl("get", "nodes", "-L", "cloud.provider.com/topology-rack", "--no-headers").stdout
        racks = sorted(line.split()[-1] for line in nodes.splitlines())
        # the sample topology: 2 blocks x 4 racks x 4 nodes x 8 GPUs
        assert racks == sorted(f"b{b}-r{r}" for b in (1, 2) for r in (1, 2, 3, 4) for _ in range(4))
        gpus = kubectl("get", "nodes", "-o", "jsonpath={.items[*].status.allocatable.nvidia\\.com/gpu}").stdout
        assert gpus.split() == ["8"] * 32
        # the simulated scheduler and kubelet run in real time
        kubectl("run", "probe", "--image=busybox", "--restart=Never")
        phase = ""
        while phase != "Running" and time.monotonic() < deadline + 10:
            phase = kubectl("get", "pod", "probe", "-o", "jsonpath={.status.phase}").stdout
            time.sleep(0.1)
        assert phase == "Running"
        crds = kubectl("get", "crd", "-o", "name").stdout.split()
        # tasq's, and the simulated JobSet controller's
        assert len(crds) == len(list((REPO / "crds").glob("*.yaml"))) + 1
        assert "customresourcedefinition.apiextensions.k8s.io/jobsets.jobset.x-k8s.io" in crds
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)  # tasq's operator takes seconds to stop; a hang is what this catches
    assert proc.returncode == 0, err
    assert "kubectl --kubeconfig" in out and out.strip().endswith("devcluster stopped")


@dataclass
class BadSetupCase:
    name: str
    args: Callable[[Path, int], list[str]]
    want_message: Callable[[Path, int], str]
    existing_kubeconfig: str | None = None  # written at <tmp>/config first; must survive unchanged


OTHER_KUBECONFIG = yaml.safe_dump({"apiVersion": "v1", "kind": "Config", "current-context": "prod",
                                   "clusters": [{"name": "prod", "cluster": {"server": "https://prod:6443"}},
                                                {"name": "devcluster", "cluster": {"server": "http://x"}}]})


def _write(tmp: Path, text: str) -> str:
    (tmp / "dump.yaml").write_text(text)
    return str(tmp / "dump.yaml")


def _busy_port_args(tmp: Path, port: int) -> list[str]:
    return ["--kubeconfig", str(tmp / "config"), "--port", str(port)]


BAD_SETUPS = [
    BadSetupCase("kubeconfig_is_an_existing_directory",
                 lambda tmp, _: ["--kubeconfig", str(tmp)],
                 lambda tmp, _: f"tasq dev: --kubeconfig '{tmp}' is a directory; give a file path, "
                                f"e.g. '{tmp / 'config'}'"),
    BadSetupCase("crds_directory_does_not_exist",
                 lambda tmp, _: ["--kubeconfig", str(tmp / "config"), "--crds", str(tmp / "missing")],
                 lambda tmp, _: f"tasq dev: --crds '{tmp / 'missing'}' is not a directory of CRD YAML files"),
    BadSetupCase("port_already_taken", _busy_port_args,
                 lambda _, port: f"tasq dev: cannot listen on 127.0.0.1:{port}: "),
    BadSetupCase("kubeconfig_of_another_cluster_is_not_overwritten",
                 lambda tmp, _: ["--kubeconfig", str(tmp / "config")],
                 lambda tmp, _: f"tasq dev: --kubeconfig '{tmp / 'config'}' already holds another kubeconfig "
                                f"(cluster(s) 'prod'); give a new path so it is not overwritten",
                 existing_kubeconfig=OTHER_KUBECONFIG),
    BadSetupCase("nodes_file_missing",
                 lambda tmp, _: ["--kubeconfig", str(tmp / "config"), "--nodes", str(tmp / "nodes.yaml")],
                 lambda tmp, _: f"tasq dev: --nodes '{tmp / 'nodes.yaml'}': cannot read it: No such file or directory"),
    BadSetupCase("nodes_file_is_not_yaml",
                 lambda tmp, _: ["--kubeconfig", str(tmp / "config"), "--nodes", _write(tmp, "kind: List\nitems: [\n")],
                 lambda tmp, _: f"tasq dev: --nodes '{tmp / 'dump.yaml'}': invalid YAML at line 3, column 1: "),
    BadSetupCase("nodes_file_holds_pods",
                 lambda tmp, _: ["--kubeconfig", str(tmp / "config"), "--nodes",
                                 _write(tmp, "kind: List\nitems:\n- {kind: Pod, metadata: {name: p}}\n")],
                 lambda tmp, _: f"tasq dev: --nodes '{tmp / 'dump.yaml'}': document 0 item 0: kind 'Pod' is not Node"),
    BadSetupCase("nodes_file_empty",
                 lambda tmp, _: ["--kubeconfig", str(tmp / "config"), "--nodes", _write(tmp, "")],
                 lambda tmp, _: f"tasq dev: --nodes '{tmp / 'dump.yaml'}': holds no Node; "
                                "want the output of `kubectl get nodes -o yaml`"),
    BadSetupCase("topology_shape_malformed",
                 lambda tmp, _: ["--kubeconfig", str(tmp / "config"), "--topology", "2x4"],
                 lambda _, __: "tasq dev: "),
]


@pytest.mark.parametrize("case", BAD_SETUPS, ids=lambda c: c.name)
def test_unusable_arguments_exit_2_with_one_clear_line(case: BadSetupCase, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "config"
    if case.existing_kubeconfig is not None:
        config.write_text(case.existing_kubeconfig)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code = cli.main(["dev", *case.args(tmp_path, port)])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith(case.want_message(tmp_path, port)) and err.count("\n") == 1, err
    assert "Traceback" not in err
    assert (config.read_text() if config.exists() else None) == case.existing_kubeconfig


def test_a_kubeconfig_written_by_tasq_dev_may_be_replaced(tmp_path: Path) -> None:
    config = tmp_path / "config"
    config.write_text(yaml.safe_dump(DevCluster().kubeconfig()))
    dev.check_paths(config, REPO / "crds")  # no DevSetupError: the next `tasq dev` rewrites it


DUMP_LIST = """apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Node
  metadata:
    name: cp-1
    uid: 6f1c
    resourceVersion: "812"
    labels: {kubernetes.io/hostname: cp-1, node-role.kubernetes.io/control-plane: ""}
  spec:
    taints: [{key: node-role.kubernetes.io/control-plane, effect: NoSchedule}]
  status:
    allocatable: {cpu: "4", memory: 16Gi, pods: "110"}
    conditions: [{type: Ready, status: "True"}]
"""
DUMP_DOCUMENTS = """kind: Node
metadata: {name: gpu-a, labels: {kubernetes.io/hostname: gpu-a}}
status: {allocatable: {cpu: "64", memory: 512Gi, pods: "110", nvidia.com/gpu: "8"}, conditions: [{type: Ready, status: "True"}]}
---
kind: Node
metadata: {name: gpu-b, labels: {kubernetes.io/hostname: gpu-b}}
status: {allocatable: {cpu: "64", memory: 512Gi, pods: "110", nvidia.com/gpu: "4"}, conditions: [{type: Ready, status: "True"}]}
"""


def test_tasq_dev_serves_the_nodes_of_dumps_instead_of_the_sample_topology(tmp_path: Path) -> None:
    (tmp_path / "list.yaml").write_text(DUMP_LIST)
    (tmp_path / "docs.yaml").write_text(DUMP_DOCUMENTS)
    kubeconfig = tmp_path / "kubeconfig"
    proc = subprocess.Popen([sys.executable, "-m", "controller.cli", "dev", "--kubeconfig", str(kubeconfig),
                             "--no-components", "--nodes", str(tmp_path / "list.yaml"),
                             "--nodes", str(tmp_path / "docs.yaml")],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 20
        while not kubeconfig.exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.1)
        kubectl = Kubectl(kubeconfig, tmp_path / "cache")
        rows = [line.split() for line in kubectl("get", "nodes", "--no-headers").stdout.splitlines()]
        assert [(r[0], r[2]) for r in rows] == [("cp-1", "control-plane"), ("gpu-a", "<none>"), ("gpu-b", "<none>")]
        gpus = kubectl("get", "nodes", "-o", "jsonpath={.items[*].status.allocatable.nvidia\\.com/gpu}").stdout
        assert gpus.split() == ["8", "4"]
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)  # tasq's operator takes seconds to stop; a hang is what this catches
    assert proc.returncode == 0, err
    assert "devcluster serving at http://127.0.0.1:" in out and ": 3 node(s)," in out
