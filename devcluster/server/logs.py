"""`kubectl logs`: what the apiserver answers for a pod's log when no kubelet has real containers.

The simulated kubelet runs no processes, so a started container's log is empty (200, text/plain);
the errors are the apiserver's: no container named, an unknown container, one not started yet.
Called by the HTTP front for GET pods/{name}/log.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from devcluster.server.errors import bad_request


def pod_log(pod: Mapping[str, Any], container: str) -> str:
    """The log text of one container of `pod` ("" once it started); ApiError 400 otherwise."""
    name = str((pod.get("metadata") or {}).get("name") or "")
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    names = [str(c.get("name")) for c in spec.get("containers") or ()]
    init_names = [str(c.get("name")) for c in spec.get("initContainers") or ()]
    if not container:
        if len(names) != 1:
            choices = " ".join(names)
            raise bad_request(f"a container name must be specified for pod {name}, choose one of: [{choices}]"
                              + (f" or one of the init containers: [{' '.join(init_names)}]" if init_names else ""))
        container = names[0]
    if container not in names and container not in init_names:
        raise bad_request(f"container {container} is not valid for pod {name}")
    statuses = [*(status.get("containerStatuses") or ()), *(status.get("initContainerStatuses") or ())]
    state = next((s.get("state") or {} for s in statuses if s.get("name") == container), {})
    if "running" not in state and "terminated" not in state:
        reason = (state.get("waiting") or {}).get("reason") or "ContainerCreating"
        raise bad_request(f'container "{container}" in pod "{name}" is waiting to start: {reason}')
    return ""
