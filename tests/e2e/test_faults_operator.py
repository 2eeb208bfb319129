"""The operator's writes when the connection drops in the middle, as a restarting kube-apiserver drops
it: for each write kind tasq makes (Workload status patch, Job patch, pod patch, Event create), a
devcluster fault drops the connection before the write is applied (DISCONNECT) or after it is
applied, with the answer lost (DISCONNECT_AFTER). The client sees `ServerDisconnectedError` either
way; nothing may be lost for good. Devcluster only (the faults are its hooks); the real control
plane's kube-apiserver restarts are in test_apiserver_restart_operator.

Same nodes and queue as test_operator (8 hosts of 8 GPUs; 48 GPUs of quota).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from devcluster.cluster import DevCluster
from devcluster.server import faults
from tests.e2e.conftest import Kubectl
from tests.e2e.test_operator import (
    RunningOperator,
    condition,
    get,
    installed,
    job,
    local_queue,
    seeded,
    wait_for,
    workload_of,
)
from tests.e2e.test_operator_recovery import (
    admitted,
    admitted_events,
    gated_job,
    gpu_usage,
    is_gated,
    operators,
    pods_of,
    start,
)

pytestmark = pytest.mark.e2e
__all__ = ["installed", "operators", "seeded"]  # the fixtures, shared with test_operator

BOTH = pytest.mark.parametrize("kind", [faults.DISCONNECT, faults.DISCONNECT_AFTER],
                               ids=["dropped-before-applying", "applied-then-answer-lost"])


@pytest.fixture(autouse=True)
def clean_faults(seeded: DevCluster) -> Iterator[None]:
    yield
    seeded.faults.clear()


def finished(kubectl: Kubectl, namespace: str, name: str, timeout: float = 45) -> None:
    done = wait_for(lambda: condition(workload_of(kubectl, namespace, name), "Finished"), timeout, f"{name} finished")
    assert done["reason"] == "Succeeded"


@BOTH
@pytest.mark.parametrize(("resource", "name"), [("jobs", "j"), ("workloads/status", faults.ANY)],
                         ids=["the-job-patch-that-starts-it", "the-status-write-of-its-admission"])
def test_a_write_dropped_mid_flight_is_made_again_and_the_job_runs_once(
        seeded: DevCluster, kubeconfig: Path, kubectl: Kubectl, namespace: str,
        operators: list[RunningOperator], kind: str, resource: str, name: str) -> None:
    kubectl("apply", "-f", "-", stdin=local_queue(namespace))
    start(operators, kubeconfig)
    rule = seeded.faults.inject(kind, "patch", resource, namespace=namespace, name=name)

    kubectl("apply", "-f", "-", stdin=job("j", namespace, 2, 8, run_seconds=1))

    wl = admitted(kubectl, namespace, "j")
    finished(kubectl, namespace, "j")
    assert rule.hits == 1
    assert admitted_events(kubectl, namespace, wl["metadata"]["name"]) == 1
    wait_for(lambda: gpu_usage(kubectl, namespace) == "0", what="usage released")


def test_an_admission_lost_for_good_is_rolled_back_and_admitted_once_writes_succeed(
        seeded: DevCluster, kubeconfig: Path, kubectl: Kubectl, namespace: str,
        operators: list[RunningOperator]) -> None:
    kubectl("apply", "-f", "-", stdin=local_queue(namespace))
    start(operators, kubeconfig)
    # Every status write of the namespace drops until cleared: far more than one write's retries.
    rule = seeded.faults.inject(faults.DISCONNECT, "patch", "workloads/status", namespace=namespace, count=None)
    kubectl("apply", "-f", "-", stdin=job("big", namespace, 5, 8, run_seconds=1))  # 40 of the 48 GPUs
    wait_for(lambda: rule.hits >= 12, 60, "two admission writes of big given up")
    assert condition(workload_of(kubectl, namespace, "big"), "Admitted") is None
    # Each given-up write hands the reservation back in the operator's cache, so big is decided and
    # written again once writes succeed (an admission left in the cache was never written again).
    seeded.faults.clear()

    wl = admitted(kubectl, namespace, "big")
    finished(kubectl, namespace, "big")
    assert admitted_events(kubectl, namespace, wl["metadata"]["name"]) == 1
    wait_for(lambda: gpu_usage(kubectl, namespace) == "0", what="usage released")


@BOTH
def test_an_ungate_patch_dropped_mid_flight_still_releases_every_pod_once(
        seeded: DevCluster, kubeconfig: Path, kubectl: Kubectl, namespace: str,
        operators: list[RunningOperator], kind: str) -> None:
    kubectl("apply", "-f", "-", stdin=local_queue(namespace))
    start(operators, kubeconfig)
    rule = seeded.faults.inject(kind, "patch", "pods", namespace=namespace, count=2)

    kubectl("apply", "-f", "-", stdin=gated_job("g", namespace, 4, 4, {}))

    admitted(kubectl, namespace, "g")
    bound = wait_for(lambda: (ps := pods_of(kubectl, namespace)) and len(ps) == 4 and
                     all(not is_gated(p) and p["spec"].get("nodeName") for p in ps) and ps, 60,
                     "every pod ungated and bound")
    assert rule.hits == 2
    assert {p["spec"]["nodeName"] for p in bound} <= {n["metadata"]["name"] for n in get(kubectl, "nodes")["items"]}
    kubectl("delete", "job", "g", "-n", namespace)
    wait_for(lambda: gpu_usage(kubectl, namespace) == "0", what="usage released")


@BOTH
def test_dropped_event_posts_are_logged_once_each_and_nothing_else_fails(
        seeded: DevCluster, kubeconfig: Path, kubectl: Kubectl, namespace: str,
        operators: list[RunningOperator], kind: str, caplog: pytest.LogCaptureFixture) -> None:
    kubectl("apply", "-f", "-", stdin=local_queue(namespace))
    caplog.set_level(logging.WARNING)
    start(operators, kubeconfig)
    rule = seeded.faults.inject(kind, "create", "events", namespace=namespace, count=None)

    kubectl("apply", "-f", "-", stdin=job("e", namespace, 2, 8, run_seconds=1))

    admitted(kubectl, namespace, "e")
    finished(kubectl, namespace, "e")
    wait_for(lambda: rule.hits >= 4, what="the Events of e tried (created Workload, admitted, started, finished)")
    operators.pop().stop()  # every Event sent or given up
    failures = [r for r in caplog.records if r.name == "controller.kube.events"]
    unexpected = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert not unexpected, [r.getMessage() for r in unexpected]
    assert len(failures) == rule.hits, [r.getMessage() for r in failures]
    assert all("cannot post event" in r.getMessage() for r in failures)
