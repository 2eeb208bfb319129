"""Leases as tasq's leader election uses them: create, renew with the resourceVersion read (a stale one
is 409, so two candidates cannot both take the lease), and the fields keep their micro-second times."""

from __future__ import annotations

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.client_models import as_body, present
from tests.conformance.conftest import status_body


def test_lease_takeover_is_guarded_by_the_resource_version(api_client: client.ApiClient, namespace: str) -> None:
    leases = client.CoordinationV1Api(api_client)
    created = leases.create_namespaced_lease(namespace, as_body({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "tasq"},
        "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15, "acquireTime": "2026-01-01T00:00:00.123456Z",
                 "renewTime": "2026-01-01T00:00:00.123456Z", "leaseTransitions": 0}}))
    assert present(present(created.spec).renew_time).microsecond == 123456
    read = leases.read_namespaced_lease("tasq", namespace)
    present(read.spec).holder_identity = "b"
    present(read.spec).lease_transitions = 1
    taken = leases.replace_namespaced_lease("tasq", namespace, read)
    assert (present(taken.spec).holder_identity, present(taken.spec).lease_transitions) == ("b", 1)
    present(read.spec).holder_identity = "c"  # a second candidate with the same, now stale, read
    with pytest.raises(ApiException) as e:
        leases.replace_namespaced_lease("tasq", namespace, read)
    assert (e.value.status, status_body(e.value)["reason"]) == (409, "Conflict")
    assert present(leases.read_namespaced_lease("tasq", namespace).spec).holder_identity == "b"
