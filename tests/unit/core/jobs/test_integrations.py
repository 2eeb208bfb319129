"""The registry of integrated kinds: the pod controllers the plain-pod integration leaves alone are
exactly those its single-object integrations claim, so adding a kind needs no list kept by hand."""

from __future__ import annotations

from typing import Any

import pytest

from controller.api import constants as c
from controller.core.jobs.integrations import (
    ALL_INTEGRATIONS,
    COMPOSABLE_INTEGRATIONS,
    INTEGRATED_POD_OWNERS,
    INTEGRATIONS,
    POD_GROUP,
)
from controller.core.jobs.pod_group import PodGroupJob
from tests.builders.cluster import make_pod


def controlled_by(api_version: str, kind: str) -> dict[str, Any]:
    """A queued plain-looking pod whose controller is `kind`."""
    pod = make_pod("p").label(c.LABEL_QUEUE_NAME, "q").build()
    pod["metadata"]["ownerReferences"] = [{"apiVersion": api_version, "kind": kind, "name": "o", "uid": "u",
                                           "controller": True}]
    return pod


def test_the_pod_owners_left_alone_are_the_union_of_what_each_single_object_integration_claims() -> None:
    claimed = set().union(*(integration.pod_owner_kinds for integration in INTEGRATIONS))
    assert claimed == INTEGRATED_POD_OWNERS
    # each integration claims at least the pods its own kind controls
    for integration in INTEGRATIONS:
        assert (integration.gvk.group, integration.gvk.kind) in integration.pod_owner_kinds, integration.gvk
    assert POD_GROUP.integrated_owners is INTEGRATED_POD_OWNERS


@pytest.mark.parametrize("integration", INTEGRATIONS, ids=lambda i: i.gvk.kind)
def test_a_queued_pod_controlled_by_an_integrated_kind_is_that_kind_s_not_a_plain_pod(integration: Any) -> None:
    gvk = integration.gvk
    pod = controlled_by(f"{gvk.group}/{gvk.version}" if gvk.group else gvk.version, gvk.kind)
    assert not POD_GROUP.is_managed(pod)
    assert POD_GROUP.member_key(pod) is None


def test_a_kind_an_adapter_claims_is_left_alone_once_the_registry_passes_it_on() -> None:
    # a new integration claiming its Trainer's pods: the plain-pod adapter built with its claim skips them
    trainer = controlled_by("example.com/v1", "Trainer")
    assert POD_GROUP.is_managed(trainer)  # not integrated today: a plain pod
    with_trainer = PodGroupJob(INTEGRATED_POD_OWNERS | {("example.com", "Trainer")})
    assert not with_trainer.is_managed(trainer)
    assert with_trainer.is_managed(controlled_by("apps/v1", "StatefulSet"))


def test_every_integration_is_listed_once_single_object_kinds_first() -> None:
    assert (*INTEGRATIONS, *COMPOSABLE_INTEGRATIONS) == ALL_INTEGRATIONS
    assert POD_GROUP in COMPOSABLE_INTEGRATIONS
    assert len({i.gvk for i in ALL_INTEGRATIONS}) == len(ALL_INTEGRATIONS)
