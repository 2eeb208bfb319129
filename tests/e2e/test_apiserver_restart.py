"""Restarting the API server from a test (`restart_apiserver`): it comes back on the same address with
the same credentials, the objects stored before are there, and writes work again.

On the real control plane kube-apiserver (or etcd) is restarted with the same flags through
`hack/realcluster/up`'s control endpoint; on the devcluster its HTTP front is. The operator's restart
tests (test_apiserver_restart_operator.py) build on this.
"""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Callable

import pytest

from tests.e2e.conftest import KUBECTL, Kubectl, wait_for


def configmap_yaml(name: str, namespace: str) -> str:
    return f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: {namespace}}}\ndata: {{a: '1'}}\n"


@pytest.mark.parametrize(("component", "kill"), [
    ("kube-apiserver", False),  # a rollout: SIGTERM, in-flight requests drained
    ("kube-apiserver", True),   # a crash
    ("etcd", False),            # storage gone for a moment, kube-apiserver keeps running
], ids=["apiserver-term", "apiserver-kill", "etcd"])
def test_objects_survive_a_restart_and_writes_work_after_it(
        kubectl: Kubectl, namespace: str, restart_apiserver: Callable[..., float], component: str, kill: bool) -> None:
    kubectl("create", "-f", "-", stdin=configmap_yaml("before", namespace))

    seconds = restart_apiserver(component, kill=kill)

    assert seconds < 120
    got = kubectl("get", "configmap", "before", "-n", namespace, "-o", "jsonpath={.data.a}")
    assert got.stdout == "1"
    # writes go through again (etcd may take a moment to be written to after its restart)
    wait_for(lambda: kubectl("create", "-f", "-", stdin=configmap_yaml("after", namespace), check=False).returncode == 0,
             timeout=30, what="a create after the restart")
    names = kubectl("get", "configmaps", "-n", namespace, "-o", "jsonpath={.items[*].metadata.name}").stdout.split()
    assert {"before", "after"} <= set(names)


def test_a_restart_drops_the_connections_of_the_server(
        kubectl: Kubectl, namespace: str, restart_apiserver: Callable[..., float]) -> None:
    # kubectl get --watch holds one connection; the restart ends it (kubectl exits, no hang)
    kubectl("create", "-f", "-", stdin=configmap_yaml("cm", namespace))
    watcher = subprocess.Popen([str(KUBECTL), "--kubeconfig", str(kubectl.kubeconfig), "get", "configmaps", "-n",
                                namespace, "--watch", "--request-timeout=0"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    printed: list[str] = []
    assert watcher.stdout is not None
    reader = threading.Thread(target=lambda: printed.extend(watcher.stdout or ()), daemon=True)
    reader.start()
    try:
        wait_for(lambda: any(line.startswith("cm ") for line in printed), 60, "the listed ConfigMap printed")
        # kubectl lists, prints, then opens its watch: a change it prints proves the watch is open (a
        # restart before that would leave kubectl watching the restarted server, never dropped)
        kubectl("create", "-f", "-", stdin=configmap_yaml("watched", namespace))
        wait_for(lambda: any(line.startswith("watched ") for line in printed), 60, "the watch printing a change")
        restart_apiserver("kube-apiserver")
        watcher.wait(timeout=60)
    finally:
        watcher.kill()
        watcher.wait()
        reader.join(timeout=10)
