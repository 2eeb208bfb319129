"""The `kueue.x-k8s.io/resource-in-use` finalizer end to end on either control plane, with the operator
of test_operator (same nodes, flavor `h100` and ClusterQueue `team`): the operator puts it on the
flavor and the queue; deleting them while a Job runs in the queue leaves both Terminating, and the
queue admits no new Job meanwhile; once the running Job finishes the queue goes, and then the flavor
it named."""

from __future__ import annotations

import json
from typing import Any

from controller.api import constants as c
from tests.e2e.conftest import Kubectl, wait_for
from tests.e2e.test_operator import RunningOperator, condition, job, local_queue, workload_of
from tests.e2e.test_operator import installed as installed  # module fixtures, re-exported
from tests.e2e.test_operator import operator as operator


def found(kubectl: Kubectl, kind: str, name: str) -> dict[str, Any] | None:
    out = kubectl("get", kind, name, "-o", "json", "--ignore-not-found")
    return json.loads(out.stdout) if out.stdout.strip() else None


def test_a_flavor_and_a_queue_in_use_stay_terminating_until_nothing_uses_them(
        operator: RunningOperator, kubectl: Kubectl, namespace: str) -> None:
    def finalized(kind: str, name: str) -> bool:
        return c.FINALIZER_RESOURCE_IN_USE in ((found(kubectl, kind, name) or {}).get("metadata", {})
                                               .get("finalizers") or [])
    wait_for(lambda: finalized("resourceflavor", "h100"), what="the finalizer on the flavor")
    wait_for(lambda: finalized("clusterqueue", "team"), what="the finalizer on the queue")
    kubectl("apply", "-f", "-", stdin=local_queue(namespace))
    kubectl("apply", "-f", "-", stdin=job("long", namespace, 1, 8, run_seconds=5))
    wait_for(lambda: condition(workload_of(kubectl, namespace, "long"), "Admitted"), what="the Job admitted")
    kubectl("delete", "clusterqueue", "team", "--wait=false")
    kubectl("delete", "resourceflavor", "h100", "--wait=false")
    cq, flavor = found(kubectl, "clusterqueue", "team"), found(kubectl, "resourceflavor", "h100")
    still_running = condition(workload_of(kubectl, namespace, "long"), "Finished") is None
    assert still_running, "the Job finished before the deletions could be observed; make it run longer"
    assert cq is not None and cq["metadata"].get("deletionTimestamp"), "a queue holding quota was deleted"
    assert flavor is not None and flavor["metadata"].get("deletionTimestamp"), "a flavor in use was deleted"
    kubectl("apply", "-f", "-", stdin=job("late", namespace, 1, 8, run_seconds=1))
    late = wait_for(lambda: (cond := condition(workload_of(kubectl, namespace, "late"), "QuotaReserved"))
                    and cond["status"] == "False" and cond, what="the late Job's Workload told why it waits",
                    logs=lambda: json.dumps(workload_of(kubectl, namespace, "late")))
    assert 'ClusterQueue "team" is terminating' in late["message"]  # a queue being deleted admits nothing new
    wait_for(lambda: condition(workload_of(kubectl, namespace, "long"), "Finished"), 60, "the Job finished")
    # generous: on a loaded 2-core machine the finished Workload's release and the finalizer's removal
    # each wait for the operator's next turn
    wait_for(lambda: found(kubectl, "clusterqueue", "team") is None, 90, "the queue's deletion completed",
             logs=lambda: json.dumps(found(kubectl, "clusterqueue", "team")))
    wait_for(lambda: found(kubectl, "resourceflavor", "h100") is None, 90, "the flavor's deletion completed",
             logs=lambda: json.dumps(found(kubectl, "resourceflavor", "h100")))
