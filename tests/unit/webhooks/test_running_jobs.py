"""A running Job's pod template keeps its scheduling directives; a suspended one may change them."""

from __future__ import annotations

from typing import Any

import pytest

from controller.api import constants as c
from tests.builders.kueue import make_job
from webhooks.running_jobs import IMMUTABLE_WHILE_RUNNING, validate_running_update

TPL = "spec.template"


def running() -> Any:
    return make_job("j").queue("q").set("spec.suspend", False)


@pytest.mark.parametrize(("old", "new", "paths"), [
    pytest.param(running().obj(), running().set(f"{TPL}.spec.nodeSelector", {"rack": "r2"}).obj(),
                 [f"{TPL}.spec.nodeSelector"], id="a nodeSelector added while running is refused"),
    pytest.param(running().set(f"{TPL}.spec.tolerations", [{"key": "a", "operator": "Exists"}]).obj(),
                 running().obj(), [f"{TPL}.spec.tolerations"], id="tolerations removed while running"),
    pytest.param(running().obj(),
                 running().template_annotate(c.ANNOTATION_TOPOLOGY_PODSET, "main")
                 .set(f"{TPL}.spec.affinity", {"nodeAffinity": {}}).obj(),
                 [f"{TPL}.metadata.annotations", f"{TPL}.spec.affinity"],
                 id="every changed directive is reported"),
    pytest.param(running().obj(), running().set(f"{TPL}.metadata.labels", {c.LABEL_TAS: "true"}).obj(),
                 [f"{TPL}.metadata.labels"], id="template labels are directives too"),
    pytest.param(running().obj(), running().set(f"{TPL}.spec.schedulingGates", [{"name": "g"}]).obj(),
                 [f"{TPL}.spec.schedulingGates"], id="scheduling gates while running"),
    pytest.param(running().set("spec.suspend", True).obj(),
                 running().set(f"{TPL}.spec.nodeSelector", {"rack": "r2"}).obj(), [],
                 id="admission writes the template while unsuspending: allowed"),
    pytest.param(running().set(f"{TPL}.spec.nodeSelector", {"rack": "r2"}).obj(),
                 running().set("spec.suspend", True).obj(), [],
                 id="eviction suspends and restores the template: allowed"),
    pytest.param(running().obj(), running().set("spec.parallelism", 3).obj(), [],
                 id="fields that are not scheduling directives are not this rule's"),
    pytest.param(running().obj(), running().set(f"{TPL}.spec.nodeSelector", {}).obj(), [],
                 id="an empty selector is the same as none"),
    pytest.param({"spec": "x"}, {"spec": {"template": 3}}, [], id="malformed objects do not raise"),
])
def test_scheduling_directives_are_fixed_while_running(old: Any, new: Any, paths: list[str]) -> None:
    errors = validate_running_update(old, new)
    assert [e.path for e in errors] == paths
    assert all(IMMUTABLE_WHILE_RUNNING in e.message for e in errors)
