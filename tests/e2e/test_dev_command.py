"""`tasq dev` as a user runs it: a subprocess that writes a kubeconfig and stops cleanly on SIGINT."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

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
        assert len(crds) == len(list((REPO / "crds").glob("*.yaml")))
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err
    assert "kubectl --kubeconfig" in out and out.strip().endswith("devcluster stopped")
