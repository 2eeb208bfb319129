"""Priority admission on pod create: the class's value (or the global default's), unknown classes and
self-set numbers refused with the plugin's 403 message, system classes built in."""

from __future__ import annotations

from typing import Any

import pytest

from devcluster.server.apiserver import ApiServer
from devcluster.server.errors import ApiError


def pod(name: str, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "i"}], **spec}}


async def server(*classes: dict[str, Any]) -> ApiServer:
    api = ApiServer()
    for pc in classes:
        await api.create(api.resource("scheduling.k8s.io/v1", "priorityclasses"), "", pc)
    return api


HIGH = {"metadata": {"name": "high"}, "value": 1000, "preemptionPolicy": "Never"}
LOW_DEFAULT = {"metadata": {"name": "low"}, "value": 10, "globalDefault": True}
LOWER_DEFAULT = {"metadata": {"name": "lower"}, "value": 5, "globalDefault": True}


@pytest.mark.parametrize(("_name", "classes", "spec", "want"), [
    ("no class and no default: 0", [HIGH], {}, (0, None, "PreemptLowerPriority")),
    ("a named class gives its value and policy", [HIGH], {"priorityClassName": "high"}, (1000, "high", "Never")),
    ("the global default, the lowest of several", [HIGH, LOW_DEFAULT, LOWER_DEFAULT], {},
     (5, "lower", "PreemptLowerPriority")),
    ("a system class", [], {"priorityClassName": "system-node-critical"},
     (2000001000, "system-node-critical", "PreemptLowerPriority")),
    ("a number equal to the class's is accepted", [HIGH], {"priorityClassName": "high", "priority": 1000},
     (1000, "high", "Never")),
])
async def test_priority_comes_from_the_class(_name: str, classes: list[dict[str, Any]], spec: dict[str, Any],
                                             want: tuple[int, str | None, str]) -> None:
    api = await server(*classes)
    made = await api.create(api.resource("v1", "pods"), "default", pod("p", **spec))
    got = made["spec"]
    assert (got["priority"], got.get("priorityClassName"), got["preemptionPolicy"]) == want


@pytest.mark.parametrize(("_name", "spec", "message"), [
    ("an unknown class", {"priorityClassName": "nope"}, 'pods "p" is forbidden: no PriorityClass with name nope was found'),
    ("a self-set number", {"priority": 5}, "the integer value of priority (5) must not be provided in pod spec"),
])
async def test_refused_with_403(_name: str, spec: dict[str, Any], message: str) -> None:
    api = await server(HIGH)
    with pytest.raises(ApiError) as refused:
        await api.create(api.resource("v1", "pods"), "default", pod("p", **spec))
    assert refused.value.code == 403 and message in refused.value.message
