"""`--feature-gates` parsing: Kueue's names and defaults, every malformed item refused by name."""

from __future__ import annotations

import pytest

from controller.api.features import FeatureGateError, FeatureGates, parse_feature_gates


def test_defaults_are_kueue_0_19s() -> None:
    gates = parse_feature_gates("")
    assert (gates.balanced_placement, gates.multi_layer_topology, gates.partial_admission) == (False, True, True)
    assert gates == FeatureGates()


def test_partial_admission_can_be_turned_off() -> None:
    assert parse_feature_gates("PartialAdmission=false").partial_admission is False


@pytest.mark.parametrize(("text", "balanced", "multi_layer"), [
    pytest.param("TASBalancedPlacement=true", True, True, id="one gate on"),
    pytest.param(" TASBalancedPlacement=True , TASMultiLayerTopology=FALSE ", True, False,
                 id="spaces and case are ignored, as Kubernetes' parser does"),
    pytest.param("TASMultiLayerTopology=false,", False, False, id="a trailing comma is an empty item"),
])
def test_values_override_the_defaults(text: str, balanced: bool, multi_layer: bool) -> None:
    gates = parse_feature_gates(text)
    assert (gates.balanced_placement, gates.multi_layer_topology) == (balanced, multi_layer)


@pytest.mark.parametrize(("text", "message"), [
    pytest.param("TASBalancedPlacment=true", "--feature-gates: unknown feature gate 'TASBalancedPlacment'; "
                 "known gates: PartialAdmission, TASBalancedPlacement, TASMultiLayerTopology", id="a misspelt gate"),
    pytest.param("TASBalancedPlacement", "--feature-gates: 'TASBalancedPlacement' is not Name=true|false",
                 id="no value"),
    pytest.param("TASBalancedPlacement=yes", "--feature-gates: TASBalancedPlacement='yes': the value must be "
                 "true or false", id="not a boolean"),
    pytest.param("TASBalancedPlacement=true,TASBalancedPlacement=false",
                 "--feature-gates: TASBalancedPlacement is given more than once", id="twice"),
])
def test_malformed_items_are_refused_with_what_is_allowed(text: str, message: str) -> None:
    with pytest.raises(FeatureGateError) as raised:
        parse_feature_gates(text)
    assert str(raised.value) == message
