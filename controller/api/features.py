"""Kueue's feature gates that change placement or admission, by Kueue's names, with Kueue 0.19's
defaults, and the parsing of `--feature-gates=A=true,B=false` (the flag of `tasq simulate`, `run` and `dev`). Pure. Gates tasq does
not implement are refused, never silently accepted. Read by the commands that take the flag and
passed to the admission core as a `FeatureGates` value.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from controller.api import constants as c

DEFAULTS: Final[Mapping[str, bool]] = {
    c.FEATURE_TAS_BALANCED_PLACEMENT: False,   # alpha since Kueue 0.15
    c.FEATURE_TAS_MULTI_LAYER_TOPOLOGY: True,  # beta, on by default since Kueue 0.19
    c.FEATURE_PARTIAL_ADMISSION: True,         # beta, on by default since Kueue 0.5
}
"""Every gate tasq knows, with its default."""

FLAG_HELP: Final = ("Kueue's placement feature gates: " + ", ".join(
    f"{name} (default {str(on).lower()})" for name, on in sorted(DEFAULTS.items())))
"""The `--feature-gates` help text every command shares."""

_TRUE, _FALSE = ("true",), ("false",)


class FeatureGateError(ValueError):
    """A `--feature-gates` value that cannot be parsed; the message names the item and what is allowed."""


@dataclass(frozen=True, slots=True)
class FeatureGates:
    """The gates' values: the defaults, overridden by what the flag set."""

    overrides: Mapping[str, bool] = field(default_factory=dict)

    def enabled(self, name: str) -> bool:
        """Whether a known gate is on (KeyError for a name tasq does not know: a programming error)."""
        return self.overrides.get(name, DEFAULTS[name])

    @property
    def balanced_placement(self) -> bool:
        return self.enabled(c.FEATURE_TAS_BALANCED_PLACEMENT)

    @property
    def multi_layer_topology(self) -> bool:
        return self.enabled(c.FEATURE_TAS_MULTI_LAYER_TOPOLOGY)

    @property
    def partial_admission(self) -> bool:
        return self.enabled(c.FEATURE_PARTIAL_ADMISSION)


def parse_feature_gates(text: str) -> FeatureGates:
    """`Name=true,Other=false` (spaces around items ignored, an empty text means the defaults).
    Raises FeatureGateError for an item without `=`, an unknown gate, a value other than true or
    false (case-insensitive, as Kubernetes' parser), or a gate given twice."""
    overrides: dict[str, bool] = {}
    known = ", ".join(sorted(DEFAULTS))
    for raw in text.split(","):
        item = raw.strip()
        if not item:
            continue
        name, eq, value = item.partition("=")
        name, value = name.strip(), value.strip().lower()
        if not eq:
            raise FeatureGateError(f"--feature-gates: {item!r} is not Name=true|false")
        if name not in DEFAULTS:
            raise FeatureGateError(f"--feature-gates: unknown feature gate {name!r}; known gates: {known}")
        if value not in _TRUE + _FALSE:
            raise FeatureGateError(f"--feature-gates: {name}={value!r}: the value must be true or false")
        if name in overrides:
            raise FeatureGateError(f"--feature-gates: {name} is given more than once")
        overrides[name] = value in _TRUE
    return FeatureGates(overrides)
