"""What an update may not change in a running (admitted, not suspended) Job's pod template.

Admission placed the pods by the template's scheduling directives; changing them while the Job
runs would let new pods land outside the admitted domains. Kueue treats a Job that is not
suspended as admitted, and so does this rule: it applies when neither the old nor the new object
is suspended. Pure; called by the Job validating handler next to `validate_update`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from webhooks.validation.errors import SPEC, FieldError, invalid_omitted

TEMPLATE = SPEC.child("template")
# The template fields that steer pods to nodes (those Kubernetes lets a suspended Job change).
SCHEDULING_DIRECTIVES: Final = (
    (("metadata", "labels"), TEMPLATE.child("metadata").child("labels")),
    (("metadata", "annotations"), TEMPLATE.child("metadata").child("annotations")),
    (("spec", "nodeSelector"), TEMPLATE.child("spec").child("nodeSelector")),
    (("spec", "tolerations"), TEMPLATE.child("spec").child("tolerations")),
    (("spec", "affinity"), TEMPLATE.child("spec").child("affinity")),
    (("spec", "schedulingGates"), TEMPLATE.child("spec").child("schedulingGates")),
)
IMMUTABLE_WHILE_RUNNING: Final = "field is immutable while the Job is not suspended"


def _get(obj: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(obj, (dict, Mapping)):
            return None
        obj = obj.get(key)
    return obj


def _running(job: Any) -> bool:
    return _get(job, "spec", "suspend") is not True


def validate_running_update(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[FieldError]:
    """Every scheduling directive of the pod template that changed while the Job kept running."""
    if not (_running(old) and _running(new)):
        return []
    template_old, template_new = _get(old, "spec", "template"), _get(new, "spec", "template")
    return [invalid_omitted(path, IMMUTABLE_WHILE_RUNNING)
            for keys, path in SCHEDULING_DIRECTIVES
            if (_get(template_old, *keys) or None) != (_get(template_new, *keys) or None)]
