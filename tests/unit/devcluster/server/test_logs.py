"""Pod logs as the apiserver answers them when no container produces output."""

from __future__ import annotations

from typing import Any

import pytest

from devcluster.server.errors import ApiError
from devcluster.server.logs import pod_log


def pod(*names: str, running: tuple[str, ...] = (), init: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"metadata": {"name": "p"},
            "spec": {"containers": [{"name": n} for n in names], "initContainers": [{"name": n} for n in init]},
            "status": {"containerStatuses": [{"name": n, "state": {"running": {}}} for n in running]}}


@pytest.mark.parametrize(("_name", "obj", "container", "error"), [
    ("one running container needs no name", pod("a", running=("a",)), "", None),
    ("several containers need a name", pod("a", "b", init=("i",)), "",
     "a container name must be specified for pod p, choose one of: [a b] or one of the init containers: [i]"),
    ("an unknown container", pod("a"), "x", "container x is not valid for pod p"),
    ("a container not started yet", pod("a"), "a", 'container "a" in pod "p" is waiting to start: ContainerCreating'),
])
def test_pod_log(_name: str, obj: dict[str, Any], container: str, error: str | None) -> None:
    if error is None:
        assert pod_log(obj, container) == ""
        return
    with pytest.raises(ApiError) as refused:
        pod_log(obj, container)
    assert (refused.value.code, refused.value.message) == (400, error)
