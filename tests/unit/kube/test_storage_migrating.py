"""kube.storage_migrating against the devcluster: objects an earlier tasq stored as v1beta1 rewritten
in v1beta2 and storedVersions set, a conflict retried, a dry run that writes nothing, and each refusal
(no CRD, no permission, a CRD that cannot convert what it stored) as a named problem."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes.aio import config as aconfig
from kubernetes.aio.client import ApiClient

from controller.api import constants as c
from controller.api.crds import crd, kind_spec
from controller.kube.api import ApiError, KubeApi
from controller.kube.storage_migrating import (
    CRDS,
    REASON_CANNOT_CONVERT,
    REASON_FORBIDDEN,
    REASON_NOT_INSTALLED,
    REASON_OTHER_STORAGE,
    REASON_REFUSED,
    check_crd,
    migrate_kind,
    migrate_storage,
)
from devcluster.cluster import DevCluster
from devcluster.server.faults import CONFLICT, FORBIDDEN

EARLIER = Path(__file__).resolve().parents[2] / "data" / "earlier-tasq" / "crds"
FLAVORS = (c.API_VERSION_V1BETA1, c.PLURAL_RESOURCE_FLAVORS)


def earlier_crd(kind: str) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((EARLIER / kind_spec(kind).file_name).read_text())
    return loaded


def installed(kind: str, stored: list[str], strategy: str = "None") -> dict[str, Any]:
    """This tasq's CRD of `kind` as the API server holds it after an upgrade."""
    obj = crd(kind_spec(kind))
    obj["spec"]["conversion"] = {"strategy": strategy}
    obj["status"] = {"storedVersions": stored}
    return obj


@dataclass(frozen=True)
class CheckCase:
    name: str
    kind: str
    crd: dict[str, Any]
    want: str | None


CHECK_CASES = [
    CheckCase("the earlier CRD, still storing v1beta1", c.KIND_CLUSTER_QUEUE,
              {**earlier_crd(c.KIND_CLUSTER_QUEUE), "status": {"storedVersions": ["v1beta1"]}}, REASON_OTHER_STORAGE),
    CheckCase("renamed fields stored as v1beta1 and no webhook to convert them", c.KIND_CLUSTER_QUEUE,
              installed(c.KIND_CLUSTER_QUEUE, ["v1beta1", "v1beta2"]), REASON_CANNOT_CONVERT),
    CheckCase("the conversion webhook converts them", c.KIND_CLUSTER_QUEUE,
              installed(c.KIND_CLUSTER_QUEUE, ["v1beta1", "v1beta2"], "Webhook"), None),
    CheckCase("no webhook needed where both versions have the same fields", c.KIND_RESOURCE_FLAVOR,
              installed(c.KIND_RESOURCE_FLAVOR, ["v1beta1", "v1beta2"]), None),
    CheckCase("only v1beta2 stored: nothing to convert", c.KIND_CLUSTER_QUEUE,
              installed(c.KIND_CLUSTER_QUEUE, ["v1beta2"]), None),
]


@pytest.mark.parametrize("case", CHECK_CASES, ids=lambda case: case.name)
def test_check_crd(case: CheckCase) -> None:
    problem = check_crd(kind_spec(case.kind), case.crd)
    assert (problem.reason if problem else None) == case.want
    if problem is not None:
        assert kind_spec(case.kind).crd_name in problem.message


@pytest.fixture
async def api(tmp_path: Path) -> AsyncIterator[tuple[DevCluster, KubeApi]]:
    async with DevCluster() as cluster:
        client: ApiClient = await aconfig.new_client_from_config(  # type: ignore[no-untyped-call]
            config_file=str(cluster.write_kubeconfig(tmp_path / "kc")))
        async with client:
            yield cluster, KubeApi(client)


async def upgraded_flavors(api: KubeApi, names: tuple[str, ...]) -> None:
    """The earlier ResourceFlavor CRD, `names` created through it, then this tasq's CRD over it."""
    created = await api.create(CRDS, None, earlier_crd(c.KIND_RESOURCE_FLAVOR))
    for name in names:
        await api.create(FLAVORS, None, {"apiVersion": FLAVORS[0], "kind": c.KIND_RESOURCE_FLAVOR,
                                         "metadata": {"name": name}, "spec": {"nodeLabels": {"pool": name}}})
    await api.replace(CRDS, None, created["metadata"]["name"],
                      {**crd(kind_spec(c.KIND_RESOURCE_FLAVOR)), "metadata": created["metadata"]})


async def stored_versions(api: KubeApi, kind: str) -> list[str]:
    got = await api.get(CRDS, None, kind_spec(kind).crd_name)
    return list(got["status"]["storedVersions"])


async def test_every_object_is_rewritten_then_only_v1beta2_is_stored(api: tuple[DevCluster, KubeApi]) -> None:
    cluster, door = api
    await upgraded_flavors(door, ("a", "b", "c"))
    assert await stored_versions(door, c.KIND_RESOURCE_FLAVOR) == ["v1beta1", "v1beta2"]
    cluster.faults.inject(CONFLICT, "update", c.PLURAL_RESOURCE_FLAVORS, name="b")
    lines: list[str] = []
    result = await migrate_kind(door, kind_spec(c.KIND_RESOURCE_FLAVOR), False, lines.append)
    assert result.problem is None, result.problem
    assert (result.rewritten, result.conflicts, result.gone) == (3, 1, 0)
    assert result.stored_before == ["v1beta1", "v1beta2"] and result.stored_after == ["v1beta2"]
    assert await stored_versions(door, c.KIND_RESOURCE_FLAVOR) == ["v1beta2"]
    assert lines == ["ResourceFlavor: 3 rewritten so far"]
    flavor = await door.get(FLAVORS, None, "b")  # still served as v1beta1, its fields intact
    assert flavor["spec"]["nodeLabels"] == {"pool": "b"}
    again = await migrate_kind(door, kind_spec(c.KIND_RESOURCE_FLAVOR), False, lines.append)
    assert again.problem is None and again.rewritten == 0  # nothing left to do


async def test_a_dry_run_lists_and_writes_nothing(api: tuple[DevCluster, KubeApi]) -> None:
    _, door = api
    await upgraded_flavors(door, ("a", "b"))
    before = {f["metadata"]["name"]: f["metadata"]["resourceVersion"] for f in await door.list(FLAVORS)}
    result = await migrate_kind(door, kind_spec(c.KIND_RESOURCE_FLAVOR), True, lambda _: None)
    assert result.problem is None and result.names == ["a", "b"] and result.rewritten == 0
    assert {f["metadata"]["name"]: f["metadata"]["resourceVersion"] for f in await door.list(FLAVORS)} == before
    assert await stored_versions(door, c.KIND_RESOURCE_FLAVOR) == ["v1beta1", "v1beta2"]


async def test_refusals_are_named_per_kind_and_do_not_stop_the_others(api: tuple[DevCluster, KubeApi]) -> None:
    cluster, door = api
    await upgraded_flavors(door, ("a",))
    await door.create(CRDS, None, installed(c.KIND_CLUSTER_QUEUE, []))  # strategy None over renamed fields...
    cq_crd = await door.get(CRDS, None, kind_spec(c.KIND_CLUSTER_QUEUE).crd_name)
    await door.merge_patch(CRDS, None, cq_crd["metadata"]["name"],  # ...after objects were stored as v1beta1
                           {"status": {"storedVersions": ["v1beta1", "v1beta2"]}}, subresource="status")
    converted = crd(kind_spec(c.KIND_LOCAL_QUEUE), {"strategy": "Webhook", "webhook": {  # never called: no list
        "conversionReviewVersions": ["v1"], "clientConfig": {"url": "https://127.0.0.1:1/convert"}}})
    await door.create(CRDS, None, converted)
    cluster.faults.inject(FORBIDDEN, "list", c.PLURAL_LOCAL_QUEUES, count=None)
    await door.merge_patch(CRDS, None, kind_spec(c.KIND_LOCAL_QUEUE).crd_name,
                           {"status": {"storedVersions": ["v1beta1", "v1beta2"]}}, subresource="status")
    kinds = tuple(kind_spec(k) for k in (c.KIND_RESOURCE_FLAVOR, c.KIND_CLUSTER_QUEUE, c.KIND_LOCAL_QUEUE,
                                         c.KIND_WORKLOAD))
    results = {r.kind: r for r in await migrate_storage(door, False, lambda _: None, kinds)}
    assert results[c.KIND_RESOURCE_FLAVOR].problem is None and results[c.KIND_RESOURCE_FLAVOR].rewritten == 1
    reasons = {k: (r.problem.reason if r.problem else None) for k, r in results.items()}
    assert reasons == {c.KIND_RESOURCE_FLAVOR: None, c.KIND_CLUSTER_QUEUE: REASON_CANNOT_CONVERT,
                       c.KIND_LOCAL_QUEUE: REASON_FORBIDDEN, c.KIND_WORKLOAD: REASON_NOT_INSTALLED}
    forbidden = results[c.KIND_LOCAL_QUEUE].problem
    assert forbidden is not None and forbidden.message.startswith("not allowed to rewrite localqueues.kueue.x-k8s.io")
    assert await stored_versions(door, c.KIND_LOCAL_QUEUE) == ["v1beta1", "v1beta2"]  # left as it was


class RefusingApi(KubeApi):
    """The door, with the update of one object refused as an admission webhook would refuse it."""

    def __init__(self, door: KubeApi, refused: str) -> None:
        super().__init__(door.api_client)
        self.refused = refused

    async def replace(self, resource: tuple[str, str], namespace: str | None, name: str,
                      obj: Any) -> dict[str, Any]:
        if name == self.refused:
            raise ApiError(422, f'ResourceFlavor.kueue.x-k8s.io "{name}" is invalid: spec: refused by a webhook')
        return await super().replace(resource, namespace, name, obj)


async def test_an_object_refused_is_named_the_others_are_rewritten_and_storage_is_left_as_it_was(
        api: tuple[DevCluster, KubeApi]) -> None:
    _, door = api
    await upgraded_flavors(door, ("a", "b", "c"))
    result = await migrate_kind(RefusingApi(door, "b"), kind_spec(c.KIND_RESOURCE_FLAVOR), False, lambda _: None)
    assert result.rewritten == 2 and result.refused == [
        'b: ResourceFlavor.kueue.x-k8s.io "b" is invalid: spec: refused by a webhook']
    assert result.problem is not None and result.problem.reason == REASON_REFUSED
    assert result.problem.message.startswith("1 object(s) could not be rewritten, so storedVersions is left as it is")
    assert await stored_versions(door, c.KIND_RESOURCE_FLAVOR) == ["v1beta1", "v1beta2"]
