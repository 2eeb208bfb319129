"""Kueue's CEL rules in the generated CRDs, evaluated with cel-python: each refuses what Kueue's
refuses with Kueue's message, passes the examples, and every refusal is one the webhook makes too."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from controller.api import constants as c
from controller.api.cel_rules import RULES, RULES_V1BETA1, rules_for
from controller.api.conversion import convert
from controller.api.crds import VALIDATIONS, all_crds, attach_rules, kind_spec
from tests.unit.api import examples
from tests.unit.api.cel_evaluation import cel_failures
from webhooks.validation import validate, validate_update

CRDS = all_crds()
HOST = c.LABEL_HOSTNAME
Doc = dict[str, Any]
_TA = "status.admission.podSetAssignments.0.topologyAssignment"


def _workload() -> Doc:
    wl = examples.workload()
    wl["spec"]["podSets"][1]["template"] = {"spec": {"containers": [{"name": "launcher", "image": "x"}]}}
    return wl


def _failures(obj: Doc, old: Doc | None = None) -> list[str]:
    crd = CRDS[kind_spec(obj["kind"]).file_name]
    return [f.message for f in cel_failures(crd, obj["apiVersion"].split("/")[1], obj, old)]


def _v1beta1(base: Callable[[], Doc]) -> Callable[[], Doc]:
    """The same object as a v1beta1 client writes it."""
    def converted() -> Doc:
        out = convert(base(), c.API_VERSION_V1BETA1)
        assert isinstance(out, dict)
        return out
    return converted


@dataclass(frozen=True)
class CelCase:
    name: str
    base: Callable[[], Doc]
    change: Callable[[Doc], object]  # edits the new object in place; its return value is ignored
    want: tuple[str, ...]
    update: bool = False  # when True the unchanged base is the stored (old) object


def _levels(*labels: str) -> Callable[[Doc], object]:
    return lambda d: d["spec"].__setitem__("levels", [{"nodeLabel": label} for label in labels])


def _set(path: str, value: Any) -> Callable[[Doc], object]:
    def change(d: Doc) -> None:
        *parents, last = path.split(".")
        holder: Any = d
        for key in parents:
            holder = holder[int(key)] if isinstance(holder, list) else holder[key]
        if isinstance(holder, list):
            holder[int(last)] = value
        else:
            holder[last] = value
    return change


def _drop(path: str) -> Callable[[Doc], object]:
    def change(d: Doc) -> None:
        *parents, last = path.split(".")
        holder: Any = d
        for key in parents:
            holder = holder[int(key)] if isinstance(holder, list) else holder[key]
        holder.pop(int(last) if isinstance(holder, list) else last)
    return change


TOL = "spec.tolerations.0"
RG = "spec.resourceGroups.0"
CASES = [
    # Topology: levels  block > rack > host, each once, the hostname last
    CelCase("a topology's levels are unique", examples.topology, _levels("a", "b", "a"), ("must be unique",)),
    CelCase("the hostname only as the lowest level", examples.topology, _levels(HOST, "rack"),
            (f"the {HOST} label can only be used at the lowest level of topology",)),
    CelCase("the hostname as the lowest level is fine", examples.topology, _levels("rack", HOST), ()),
    CelCase("a topology's levels are immutable", examples.topology, _levels("rack", HOST), ("field is immutable",),
            update=True),
    CelCase("a topology relabelled in metadata only", examples.topology,
            _set("metadata.labels", {"team": "a"}), (), update=True),
    # ResourceFlavor
    CelCase("a topology flavor needs a nodeLabel", examples.flavor_kueue_form, _drop("spec.nodeLabels"),
            ("at least one nodeLabel is required when topology is set",)),
    CelCase("so does the inline (KEP) form", examples.flavor_inline_form, _set("spec.nodeLabels", {}),
            ("at least one nodeLabel is required when topology is set",)),
    CelCase("topologyName is frozen", examples.flavor_kueue_form, _set("spec.topologyName", "other"),
            ("topologyName is immutable when topologyName is set",), update=True),
    CelCase("nodeLabels are frozen with a topology", examples.flavor_kueue_form,
            _set("spec.nodeLabels", {"cloud.com/gpu": "a100"}),
            ("nodeLabels are immutable when topologyName is set",), update=True),
    CelCase("tolerations are frozen with a topology", examples.flavor_kueue_form, _drop("spec.tolerations"),
            ("tolerations are immutable when topologyName is set",), update=True),
    CelCase("an empty toleration key needs Exists", examples.flavor_kueue_form, _set(TOL, {"operator": "Equal"}),
            ("operator must be Exists when 'key' is empty, which means 'match all values and all keys'",)),
    CelCase("tolerationSeconds needs NoExecute", examples.flavor_kueue_form,
            _set(TOL, {"key": "k", "operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": 5}),
            ("effect must be 'NoExecute' when 'tolerationSeconds' is set",)),
    CelCase("Exists takes no value", examples.flavor_kueue_form,
            _set(TOL, {"key": "k", "operator": "Exists", "value": "v"}),
            ("a value must be empty when 'operator' is 'Exists'",)),
    CelCase("operator and effect may be empty, as in core/v1", examples.flavor_kueue_form,
            _set(TOL, {"key": "k", "operator": "", "value": "v", "effect": ""}), ()),
    # ClusterQueue
    CelCase("borrowingLimit needs a cohort", examples.cluster_queue, _drop("spec.cohortName"),
            ("borrowingLimit must be nil when cohort is empty",)),
    CelCase("a flavor lists as many resources as are covered", examples.cluster_queue,
            _drop(f"{RG}.flavors.0.resources.1"),
            ("flavors must have the same number of resources as the coveredResources",)),
    CelCase("borrowing preemption needs reclaiming (absent reads as Never)", examples.cluster_queue,
            _drop("spec.preemption.reclaimWithinCohort"),
            ("reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never",)),
    # LocalQueue
    CelCase("a LocalQueue's clusterQueue is immutable", examples.local_queue, _set("spec.clusterQueue", "other"),
            ("field is immutable",), update=True),
    # Workload
    CelCase("priorityClassRef needs a priority", _workload, _drop("spec.priority"),
            ("priority should not be nil when priorityClassRef is set",)),
    CelCase("a pod PriorityClass group names the PriorityClass kind", _workload,
            _set("spec.priorityClassRef.kind", "WorkloadPriorityClass"),
            ("only the PriorityClass kind is allowed for the scheduling.k8s.io group",)),
    CelCase("minCount at most count", _workload, _set("spec.podSets.0.minCount", 9),
            ("minCount should be positive and less or equal to count",)),
    CelCase("a reserved Workload assigns every pod set", _workload, _drop("status.admission.podSetAssignments"),
            ("podSetAssignments must have the same number of podSets as the spec",)),
    CelCase("priorityClassRef stays set while reserved", _workload, _drop("spec.priorityClassRef"),
            ("priorityClassRef is immutable while workload quota reserved",), update=True),
    CelCase("priorityClassRef's group frozen while reserved", _workload,
            _set("spec.priorityClassRef", {"group": c.GROUP, "kind": "WorkloadPriorityClass", "name": "high"}),
            ("priorityClassRef.group is immutable while workload quota reserved",
             "priorityClassRef.kind is immutable while workload quota reserved"), update=True),
    CelCase("priorityClassRef's name frozen while reserved (pod PriorityClass)", _workload,
            _set("spec.priorityClassRef.name", "low"),
            ("priorityClassRef.name is immutable for scheduling.k8s.io/priorityclass while workload quota "
             "reserved",), update=True),
    # The v1beta1 schemas keep Kueue's v1beta1 rules.
    CelCase("v1beta1: borrowingLimit needs a cohort", _v1beta1(examples.cluster_queue), _drop("spec.cohort"),
            ("borrowingLimit must be nil when cohort is empty",)),
    CelCase("v1beta1: priorityClassName needs a priority", _v1beta1(_workload), _drop("spec.priority"),
            ("priority should not be nil when priorityClassName is set",)),
    CelCase("v1beta1: priorityClassSource frozen while reserved", _v1beta1(_workload),
            _set("spec.priorityClassSource", c.PRIORITY_SOURCE_WORKLOAD),
            ("priorityClassSource is immutable while workload quota reserved",), update=True),
    CelCase("v1beta1: priorityClassName frozen while reserved (pod PriorityClass)", _v1beta1(_workload),
            _set("spec.priorityClassName", "low"),
            ("priorityClassName is immutable while workload quota reserved and priorityClassSource is not "
             f"equal to {c.PRIORITY_SOURCE_WORKLOAD}",), update=True),
    CelCase("queueName frozen while reserved", _workload, _set("spec.queueName", "other"),
            ("queueName is immutable while workload quota reserved",), update=True),
    CelCase("a topology slice with values for fewer levels than the assignment names", _workload,
            _set(f"{_TA}.levels", ["cloud.com/block", "cloud.com/rack", HOST]),
            ("valuesPerLevel must have the same length as the number of levels in this TopologyAssignment",)),
    CelCase("fewer pod counts than the slice's domains", _workload, _set(f"{_TA}.slices.0.podCounts.individual", [8]),
            ("podCounts.individual must have length equal to domainCount",)),
    CelCase("fewer roots than the slice's domains", _workload,
            _set(f"{_TA}.slices.0.valuesPerLevel.1.individual.roots", ["3"]),
            ("valuesPerLevel.individual, if set, must have roots of length equal to domainCount of this "
             "TopologyAssignmentSlice",)),
    CelCase("a level with both a universal and individual values", _workload,
            _set(f"{_TA}.slices.0.valuesPerLevel.0.individual", {"roots": ["1", "1"]}),
            ("exactly one of the fields in [universal individual] must be set",)),
    CelCase("pod counts neither universal nor individual", _workload, _set(f"{_TA}.slices.0.podCounts", {}),
            ("exactly one of the fields in [universal individual] must be set",)),
]


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_cel_rule(case: CelCase) -> None:
    old = case.base()
    new = copy.deepcopy(old)
    case.change(new)
    assert _failures(new, old if case.update else None) == list(case.want)
    if case.want:  # the webhook refuses everything the CRD refuses
        assert (validate_update(old, new) if case.update else validate(new)) != []


@pytest.mark.parametrize("doc", [examples.topology(), examples.flavor_kueue_form(), examples.flavor_inline_form(),
                                 examples.cluster_queue(), examples.local_queue(), _workload()],
                         ids=lambda d: d["kind"] + "-" + d["metadata"]["name"])
def test_the_examples_pass_every_rule_on_create_and_unchanged_update(doc: Doc) -> None:
    assert _failures(doc) == []
    assert _failures(doc, copy.deepcopy(doc)) == []


def test_every_rule_is_in_its_crd_with_its_message() -> None:
    for kind, placements in [*RULES.items(), *RULES_V1BETA1.items()]:
        crd = CRDS[kind_spec(kind).file_name]
        text = repr(crd)
        for _, rules in placements:
            for rule in rules:
                assert {"message": rule.message, "rule": rule.rule} in _all_validations(crd), (kind, rule.message)
                versions = [v["name"] for v in crd["spec"]["versions"]
                            if any(rule in rs for _, rs in rules_for(kind, v["name"]))]
                assert text.count(rule.rule) == len(versions)


def _all_validations(node: Any) -> list[dict[str, str]]:
    if isinstance(node, dict):
        own = list(node.get(VALIDATIONS, []))
        return own + [v for key, child in node.items() if key != VALIDATIONS for v in _all_validations(child)]
    if isinstance(node, list):
        return [v for child in node for v in _all_validations(child)]
    return []


def test_a_rule_for_a_field_the_schema_lacks_fails_generation() -> None:
    with pytest.raises(KeyError, match="levels"):
        attach_rules({"type": "object", "properties": {"spec": {"type": "object", "properties": {}}}},
                     c.KIND_TOPOLOGY)
