"""Kueue's CEL validation rules (`x-kubernetes-validations`) for tasq's CRDs, with Kueue's messages.

The rules are those Kueue's v1beta2 types (and, for the v1beta1 schemas, its v0.19 v1beta1 types)
declare for these kinds, read from its API and written here for tasq's schema: guarded with `has()` where tasq's schema has no default, toleration
operator and effect "" accepted as core/v1 accepts them, and the ResourceFlavor rules covering
the KEP's inline `spec.topology` too. A rule naming `oldSelf` is a transition rule: the API server
checks it on updates only. `controller.api.crds` attaches them; the webhook keeps every rule
CEL cannot say (uniqueness across lists, quantities, label syntax).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from controller.api import constants as c


@dataclass(frozen=True, slots=True)
class CelRule:
    """One `x-kubernetes-validations` entry: a CEL expression over `self` (and `oldSelf`)."""

    rule: str
    message: str

    def to_dict(self) -> dict[str, str]:
        return {"message": self.message, "rule": self.rule}


ITEMS: Final = "[]"
"""A path step into the items of a list."""

# -- Topology ---------------------------------------------------------------------------------

MSG_IMMUTABLE: Final = "field is immutable"
MSG_LEVELS_UNIQUE: Final = "must be unique"
MSG_HOSTNAME_LOWEST: Final = (f"the {c.LABEL_HOSTNAME} label can only be used at the lowest level of "
                              "topology")
TOPOLOGY_LEVELS: Final = (
    CelRule("self == oldSelf", MSG_IMMUTABLE),
    CelRule("size(self.filter(i, size(self.filter(j, j == i)) > 1)) == 0", MSG_LEVELS_UNIQUE),
    CelRule(f"size(self.filter(i, i.nodeLabel == '{c.LABEL_HOSTNAME}')) == 0 || "
            f"self[size(self) - 1].nodeLabel == '{c.LABEL_HOSTNAME}'", MSG_HOSTNAME_LOWEST),
)

# -- ResourceFlavor ---------------------------------------------------------------------------

MSG_NODE_LABEL_REQUIRED: Final = "at least one nodeLabel is required when topology is set"
_EFFECTS: Final = "['NoSchedule', 'PreferNoSchedule', 'NoExecute']"
MSG_TAINT_EFFECTS: Final = "supported taint effect values: 'NoSchedule', 'PreferNoSchedule', 'NoExecute'"


def _frozen_with_topology(field: str, message: str) -> CelRule:
    """Kueue: once a flavor names a topology, `field` keeps its presence and its value."""
    return CelRule(f"!has(oldSelf.topologyName) || (has(self.{field}) == has(oldSelf.{field}) && "
                   f"(!has(self.{field}) || self.{field} == oldSelf.{field}))", message)


FLAVOR_SPEC: Final = (
    CelRule("!(has(self.topologyName) || has(self.topology)) || "
            "(has(self.nodeLabels) && size(self.nodeLabels) >= 1)", MSG_NODE_LABEL_REQUIRED),
    _frozen_with_topology("nodeLabels", "nodeLabels are immutable when topologyName is set"),
    _frozen_with_topology("tolerations", "tolerations are immutable when topologyName is set"),
    CelRule("!has(oldSelf.topologyName) || (has(self.topologyName) && self.topologyName == oldSelf.topologyName)",
            "topologyName is immutable when topologyName is set"),
)
FLAVOR_TAINTS: Final = (
    CelRule(f"self.all(x, x.effect in {_EFFECTS})", MSG_TAINT_EFFECTS),
)
TOLERATIONS: Final = (
    CelRule("self.all(x, (has(x.key) && x.key != '') || (has(x.operator) && x.operator == 'Exists'))",
            "operator must be Exists when 'key' is empty, which means 'match all values and all keys'"),
    CelRule("self.all(x, has(x.tolerationSeconds) ? (has(x.effect) && x.effect == 'NoExecute') : true)",
            "effect must be 'NoExecute' when 'tolerationSeconds' is set"),
    CelRule("self.all(x, !has(x.operator) || x.operator in ['', 'Equal', 'Exists'])",
            "supported toleration values: 'Equal'(default), 'Exists'"),
    CelRule("self.all(x, has(x.operator) && x.operator == 'Exists' ? (!has(x.value) || x.value == '') : true)",
            "a value must be empty when 'operator' is 'Exists'"),
    CelRule(f"self.all(x, !has(x.effect) || x.effect == '' || x.effect in {_EFFECTS})", MSG_TAINT_EFFECTS),
)

# -- ClusterQueue and LocalQueue --------------------------------------------------------------

def _no_borrowing_without(cohort_field: str) -> CelRule:
    return CelRule(f"!has(self.{cohort_field}) && has(self.resourceGroups) ? self.resourceGroups.all(rg, "
                   "rg.flavors.all(f, f.resources.all(r, !has(r.borrowingLimit)))) : true",
                   "borrowingLimit must be nil when cohort is empty")


CLUSTER_QUEUE_SPEC: Final = (_no_borrowing_without("cohortName"),)
CLUSTER_QUEUE_SPEC_V1BETA1: Final = (_no_borrowing_without("cohort"),)
RESOURCE_GROUP: Final = (
    CelRule("self.flavors.all(x, size(x.resources) == size(self.coveredResources))",
            "flavors must have the same number of resources as the coveredResources"),
)
PREEMPTION: Final = (
    # Kueue's schema defaults both fields to Never; tasq's has no defaults, so absent reads as Never.
    CelRule("!((!has(self.reclaimWithinCohort) || self.reclaimWithinCohort == 'Never') && "
            "has(self.borrowWithinCohort) && has(self.borrowWithinCohort.policy) && "
            "self.borrowWithinCohort.policy != 'Never')",
            "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never"),
)
LOCAL_QUEUE_CLUSTER_QUEUE: Final = (CelRule("self == oldSelf", MSG_IMMUTABLE),)

# -- Workload ---------------------------------------------------------------------------------

WORKLOAD_SPEC: Final = (
    CelRule("!has(self.priorityClassRef) || has(self.priority)",
            "priority should not be nil when priorityClassRef is set"),
)
WORKLOAD_SPEC_V1BETA1: Final = (
    CelRule("has(self.priorityClassName) ? has(self.priority) : true",
            "priority should not be nil when priorityClassName is set"),
)
PRIORITY_CLASS_REF: Final = (
    CelRule(f"(self.group == '{c.PRIORITY_CLASS_GROUP}') ? self.kind == '{c.KIND_PRIORITY_CLASS}' : true",
            f"only the {c.KIND_PRIORITY_CLASS} kind is allowed for the {c.PRIORITY_CLASS_GROUP} group"),
    CelRule(f"(self.group == '{c.GROUP}') ? self.kind == '{c.KIND_WORKLOAD_PRIORITY_CLASS}' : true",
            f"only the {c.KIND_WORKLOAD_PRIORITY_CLASS} kind is allowed for the {c.GROUP} group"),
)
POD_SET: Final = (
    CelRule("has(self.minCount) ? self.minCount <= (has(self.count) ? self.count : 1) : true",
            "minCount should be positive and less or equal to count"),
)

MSG_EXACTLY_ONE_VALUE: Final = "exactly one of the fields in [universal individual] must be set"
TOPOLOGY_ASSIGNMENT: Final = (
    CelRule("!has(self.slices) || self.slices.all(x, (has(x.valuesPerLevel) ? size(x.valuesPerLevel) : 0) == "
            "(has(self.levels) ? size(self.levels) : 0))",
            "valuesPerLevel must have the same length as the number of levels in this TopologyAssignment"),
)
TOPOLOGY_ASSIGNMENT_SLICE: Final = (
    CelRule("!has(self.podCounts) || !has(self.podCounts.individual) || "
            "size(self.podCounts.individual) == self.domainCount",
            "podCounts.individual must have length equal to domainCount"),
    CelRule("!has(self.valuesPerLevel) || self.valuesPerLevel.all(x, !has(x.individual) || "
            "(has(x.individual.roots) ? size(x.individual.roots) : 0) == self.domainCount)",
            "valuesPerLevel.individual, if set, must have roots of length equal to domainCount of this "
            "TopologyAssignmentSlice"),
)
EXACTLY_ONE_VALUE: Final = (CelRule("has(self.universal) != has(self.individual)", MSG_EXACTLY_ONE_VALUE),)
EXACTLY_ONE_COUNT: Final = (  # the rule kubebuilder's ExactlyOneOf marker generates, as on Kueue's podCounts
    CelRule("[has(self.universal),has(self.individual)].filter(x,x==true).size() == 1", MSG_EXACTLY_ONE_VALUE),)
"""Kueue's rules on v1beta2's compact TopologyAssignment (guarded where tasq's schema has no default)."""
_ASSIGNMENT: Final = ("status", "admission", "podSetAssignments", ITEMS, "topologyAssignment")


def _reserved(obj: str) -> str:
    """`obj` (self or oldSelf) has a QuotaReserved condition that is True."""
    return (f"has({obj}.status) && has({obj}.status.conditions) && {obj}.status.conditions.exists(c, "
            f"c.type == '{c.CONDITION_QUOTA_RESERVED}' && c.status == 'True')")


_PODSETS_MATCH_ASSIGNMENTS: Final = CelRule(
    f"{_reserved('self')} && has(self.status.admission) ? "
    "size(self.spec.podSets) == size(self.status.admission.podSetAssignments) : true",
    "podSetAssignments must have the same number of podSets as the spec")
_QUEUE_NAME_FROZEN: Final = CelRule(
    f"(({_reserved('oldSelf')}) && ({_reserved('self')})) ? "
    "((has(oldSelf.spec.queueName) == has(self.spec.queueName)) && "
    "(!has(oldSelf.spec.queueName) || oldSelf.spec.queueName == self.spec.queueName)) : true",
    "queueName is immutable while workload quota reserved")
_BOTH_REFS: Final = "has(oldSelf.spec.priorityClassRef) && has(self.spec.priorityClassRef)"

WORKLOAD: Final = (
    _PODSETS_MATCH_ASSIGNMENTS,
    CelRule(f"({_reserved('oldSelf')}) ? (!has(oldSelf.spec.priorityClassRef) && !has(self.spec.priorityClassRef)) "
            f"|| ({_BOTH_REFS}) : true",
            "priorityClassRef is immutable while workload quota reserved"),
    CelRule(f"({_reserved('oldSelf')} && {_BOTH_REFS}) ? "
            "oldSelf.spec.priorityClassRef.group == self.spec.priorityClassRef.group : true",
            "priorityClassRef.group is immutable while workload quota reserved"),
    CelRule(f"({_reserved('oldSelf')} && {_BOTH_REFS}) ? "
            "oldSelf.spec.priorityClassRef.kind == self.spec.priorityClassRef.kind : true",
            "priorityClassRef.kind is immutable while workload quota reserved"),
    CelRule(f"({_reserved('oldSelf')} && {_BOTH_REFS} && "
            f"self.spec.priorityClassRef.group == '{c.PRIORITY_CLASS_GROUP}' && "
            f"self.spec.priorityClassRef.kind == '{c.KIND_PRIORITY_CLASS}') ? "
            "oldSelf.spec.priorityClassRef.name == self.spec.priorityClassRef.name : true",
            "priorityClassRef.name is immutable for scheduling.k8s.io/priorityclass while workload quota reserved"),
    _QUEUE_NAME_FROZEN,
)
WORKLOAD_V1BETA1: Final = (
    _PODSETS_MATCH_ASSIGNMENTS,
    CelRule(f"({_reserved('oldSelf')} && has(oldSelf.spec.priorityClassSource) && "
            "has(self.spec.priorityClassSource)) ? "
            "(oldSelf.spec.priorityClassSource == self.spec.priorityClassSource) : true",
            "priorityClassSource is immutable while workload quota reserved"),
    CelRule(f"({_reserved('oldSelf')} && has(oldSelf.spec.priorityClassSource) && "
            "has(self.spec.priorityClassSource) && "
            f"(self.spec.priorityClassSource != '{c.PRIORITY_SOURCE_WORKLOAD}') && "
            "has(oldSelf.spec.priorityClassName) && has(self.spec.priorityClassName)) ? "
            "(oldSelf.spec.priorityClassName == self.spec.priorityClassName) : true",
            "priorityClassName is immutable while workload quota reserved and priorityClassSource is "
            f"not equal to {c.PRIORITY_SOURCE_WORKLOAD}"),
    _QUEUE_NAME_FROZEN,
)

RulePlacement = tuple[tuple[str, ...], tuple[CelRule, ...]]
"""(the property path from the object's root, `[]` for list items; the rules at that node)."""

RULES: Final[dict[str, tuple[RulePlacement, ...]]] = {
    c.KIND_TOPOLOGY: ((("spec", "levels"), TOPOLOGY_LEVELS),),
    c.KIND_RESOURCE_FLAVOR: (
        (("spec",), FLAVOR_SPEC),
        (("spec", "nodeTaints"), FLAVOR_TAINTS),
        (("spec", "tolerations"), TOLERATIONS),
    ),
    c.KIND_CLUSTER_QUEUE: (
        (("spec",), CLUSTER_QUEUE_SPEC),
        (("spec", "resourceGroups", ITEMS), RESOURCE_GROUP),
        (("spec", "preemption"), PREEMPTION),
    ),
    c.KIND_LOCAL_QUEUE: ((("spec", "clusterQueue"), LOCAL_QUEUE_CLUSTER_QUEUE),),
    # Kueue's Cohort declares the ClusterQueue's resource-group rule and nothing else.
    c.KIND_COHORT: ((("spec", "resourceGroups", ITEMS), RESOURCE_GROUP),),
    c.KIND_WORKLOAD: (
        ((), WORKLOAD),
        (("spec",), WORKLOAD_SPEC),
        (("spec", "priorityClassRef"), PRIORITY_CLASS_REF),
        (("spec", "podSets", ITEMS), POD_SET),
        (_ASSIGNMENT, TOPOLOGY_ASSIGNMENT),
        ((*_ASSIGNMENT, "slices", ITEMS), TOPOLOGY_ASSIGNMENT_SLICE),
        ((*_ASSIGNMENT, "slices", ITEMS, "valuesPerLevel", ITEMS), EXACTLY_ONE_VALUE),
        ((*_ASSIGNMENT, "slices", ITEMS, "podCounts"), EXACTLY_ONE_COUNT),
    ),
}
"""The rules of each kind's v1beta2 schema (Topology and ResourceFlavor: of every version)."""

RULES_V1BETA1: Final[dict[str, tuple[RulePlacement, ...]]] = {
    **RULES,
    c.KIND_CLUSTER_QUEUE: ((("spec",), CLUSTER_QUEUE_SPEC_V1BETA1), *RULES[c.KIND_CLUSTER_QUEUE][1:]),
    c.KIND_WORKLOAD: (
        ((), WORKLOAD_V1BETA1),
        (("spec",), WORKLOAD_SPEC_V1BETA1),
        (("spec", "podSets", ITEMS), POD_SET),
    ),
}
"""The rules of each kind's v1beta1 (and Topology's v1alpha1) schema."""


def rules_for(kind: str, version: str) -> tuple[RulePlacement, ...]:
    """The rule placements of one served version of a kind."""
    table = RULES if version == c.VERSION_V1BETA2 else RULES_V1BETA1
    return table.get(kind, ())
