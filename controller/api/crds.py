"""CustomResourceDefinitions (apiextensions.k8s.io/v1) generated from the pydantic models.

Each served version of a kind (v1beta2, the storage version, from `controller.api`; v1beta1 and
Topology's v1alpha1 from `controller.api.v1beta1`) gets its own structural OpenAPI v3 schema (refs
inlined, optional not nullable, int-or-string quantities, preserved pod templates, field descriptions
from the models' docstrings), Kueue's printer columns for that version, names, scope and status
subresource; `crd_json_schema` turns one back into JSON Schema. Used by `tasq crds`, devcluster, tests.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import yaml

from controller.api import constants as c
from controller.api.cel_rules import ITEMS, rules_for
from controller.api.cohort import Cohort
from controller.api.flavor import ResourceFlavor
from controller.api.meta import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN, KubeObject
from controller.api.priority_class import WorkloadPriorityClass
from controller.api.queues import ClusterQueue, LocalQueue
from controller.api.topology import Topology
from controller.api.v1beta1 import flavor as v1beta1_flavor
from controller.api.v1beta1 import queues as v1beta1_queues
from controller.api.v1beta1 import topology as v1beta1_topology
from controller.api.v1beta1 import workload as v1beta1_workload
from controller.api.workload import Workload

CATEGORY: Final = "kueue"
INT_OR_STRING: Final = "x-kubernetes-int-or-string"
PRESERVE_UNKNOWN: Final = "x-kubernetes-preserve-unknown-fields"
VALIDATIONS: Final = "x-kubernetes-validations"

Schema = dict[str, Any]


@dataclass(frozen=True, slots=True)
class PrinterColumn:
    name: str
    type: str
    json_path: str
    description: str
    priority: int = 0

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"description": self.description, "jsonPath": self.json_path,
                               "name": self.name}
        if self.priority:
            out["priority"] = self.priority
        out["type"] = self.type
        return out


@dataclass(frozen=True, slots=True)
class ServedVersion:
    """One version of a kind: its name, the model its schema comes from, its printer columns."""

    name: str
    model: type[KubeObject]
    columns: tuple[PrinterColumn, ...]


@dataclass(frozen=True, slots=True)
class KindSpec:
    """Everything about one kind that is not in its models: names, scope, versions, columns.

    `versions` lists every served version, the storage version (v1beta2, the hub) first.
    """

    kind: str
    plural: str
    short_names: tuple[str, ...]
    namespaced: bool
    versions: tuple[ServedVersion, ...]
    has_status: bool
    description: str

    @property
    def crd_name(self) -> str:
        return f"{self.plural}.{c.GROUP}"

    @property
    def file_name(self) -> str:
        """controller-gen's naming, so the files sit where Kueue users look for them."""
        return f"{c.GROUP}_{self.plural}.yaml"

    @property
    def served_versions(self) -> tuple[str, ...]:
        return tuple(v.name for v in self.versions)

    @property
    def storage_version(self) -> str:
        return self.versions[0].name

    @property
    def model(self) -> type[KubeObject]:
        """The storage (hub) version's model."""
        return self.versions[0].model

    def version(self, name: str) -> ServedVersion:
        for v in self.versions:
            if v.name == name:
                return v
        raise KeyError(f"{self.kind} is not served as {name!r}")


AGE: Final = PrinterColumn("Age", "date", ".metadata.creationTimestamp", "When the object was created")
_PENDING: Final = PrinterColumn("Pending Workloads", "integer", ".status.pendingWorkloads",
                                "Workloads waiting for quota")
_ADMITTED: Final = PrinterColumn("Admitted Workloads", "integer", ".status.admittedWorkloads",
                                 "Admitted Workloads that are still running")


def _condition_column(name: str, condition: str, description: str) -> PrinterColumn:
    return PrinterColumn(name, "string", f'.status.conditions[?(@.type=="{condition}")].status', description)


def _cluster_queue_columns(cohort_field: str) -> tuple[PrinterColumn, ...]:
    """Kueue's ClusterQueue columns; only the cohort's field differs between versions."""
    return (PrinterColumn("Cohort", "string", f".spec.{cohort_field}", "Cohort the queue borrows and lends in"),
            PrinterColumn("Strategy", "string", ".spec.queueingStrategy",
                          "Order in which pending Workloads are tried", priority=1),
            _PENDING, PrinterColumn(_ADMITTED.name, _ADMITTED.type, _ADMITTED.json_path, _ADMITTED.description,
                                    priority=1))


_LOCAL_QUEUE_COLUMNS: Final = (
    PrinterColumn("ClusterQueue", "string", ".spec.clusterQueue", "ClusterQueue this queue feeds"),
    _PENDING, _ADMITTED)
_WORKLOAD_COLUMNS: Final = (
    PrinterColumn("Queue", "string", ".spec.queueName", "LocalQueue the Workload was submitted to"),
    PrinterColumn("Reserved in", "string", ".status.admission.clusterQueue",
                  "ClusterQueue holding quota for the Workload"),
    _condition_column("Admitted", c.CONDITION_ADMITTED, "Whether the Workload is admitted"),
    _condition_column("Finished", c.CONDITION_FINISHED, "Whether the Workload has finished"),
    AGE)

KINDS: Final[tuple[KindSpec, ...]] = (
    KindSpec(c.KIND_TOPOLOGY, c.PLURAL_TOPOLOGIES, ("topo",), namespaced=False, versions=(
        ServedVersion(c.VERSION_V1BETA2, Topology, (AGE,)),
        ServedVersion(c.VERSION_V1BETA1, v1beta1_topology.Topology, (AGE,)),
        ServedVersion(c.VERSION_V1ALPHA1, v1beta1_topology.Topology, (AGE,))), has_status=False,
        description="Topology lists the node labels of a topology's levels, widest first."),
    KindSpec(c.KIND_RESOURCE_FLAVOR, c.PLURAL_RESOURCE_FLAVORS, ("flavor", "flavors", "rf"), namespaced=False,
             versions=(ServedVersion(c.VERSION_V1BETA2, ResourceFlavor, (AGE,)),
                       ServedVersion(c.VERSION_V1BETA1, v1beta1_flavor.ResourceFlavor, (AGE,))), has_status=False,
             description="ResourceFlavor describes a kind of node: its labels, taints and topology."),
    KindSpec(c.KIND_CLUSTER_QUEUE, c.PLURAL_CLUSTER_QUEUES, ("cq",), namespaced=False, versions=(
        ServedVersion(c.VERSION_V1BETA2, ClusterQueue, _cluster_queue_columns("cohortName")),
        ServedVersion(c.VERSION_V1BETA1, v1beta1_queues.ClusterQueue, _cluster_queue_columns("cohort"))),
        has_status=True, description="ClusterQueue holds quota per flavor and admits Workloads against it."),
    KindSpec(c.KIND_LOCAL_QUEUE, c.PLURAL_LOCAL_QUEUES, ("queue", "queues", "lq"), namespaced=True, versions=(
        ServedVersion(c.VERSION_V1BETA2, LocalQueue, _LOCAL_QUEUE_COLUMNS),
        ServedVersion(c.VERSION_V1BETA1, v1beta1_queues.LocalQueue, _LOCAL_QUEUE_COLUMNS)), has_status=True,
        description="LocalQueue lets a namespace submit Workloads to a ClusterQueue."),
    # Kueue's short names for Workload (kwl, ...), and tasq's earlier `wl`.
    KindSpec(c.KIND_WORKLOAD, c.PLURAL_WORKLOADS, ("kwl", "kueueworkload", "kueueworkloads", "wl"), namespaced=True,
             versions=(ServedVersion(c.VERSION_V1BETA2, Workload, _WORKLOAD_COLUMNS),
                       ServedVersion(c.VERSION_V1BETA1, v1beta1_workload.Workload, _WORKLOAD_COLUMNS)),
             has_status=True, description="Workload is one Job's request for quota and where it was admitted."),
    # Kueue's Cohort has no columns; tasq shows its parent and its Active condition.
    KindSpec(c.KIND_COHORT, c.PLURAL_COHORTS, ("co",), namespaced=False, versions=(
        ServedVersion(c.VERSION_V1BETA2, Cohort, (
            PrinterColumn("Parent", "string", ".spec.parentName", "Parent cohort, none for a root"),
            _condition_column("Active", c.CONDITION_ACTIVE, "Whether the cohort's tree can admit"), AGE)),),
        has_status=True,
        description="Cohort is a node of a tree of cohorts: quota its subtree shares, and its limits."),
    # Both versions have the same fields, so the API server converts between them itself.
    KindSpec(c.KIND_WORKLOAD_PRIORITY_CLASS, c.PLURAL_WORKLOAD_PRIORITY_CLASSES, ("wpc",), namespaced=False,
             versions=tuple(ServedVersion(version, WorkloadPriorityClass, (
                 PrinterColumn("Value", "integer", ".value", "Value of workloadPriorityClass's Priority"),))
                 for version in (c.VERSION_V1BETA2, c.VERSION_V1BETA1)),
             has_status=False,
             description="WorkloadPriorityClass is a priority value Workloads take from their Job's label."),
)

# Lists that server-side apply should merge by key rather than replace whole (metav1 conventions).
_LIST_MAP_KEYS: Final = {"conditions": ("type",), "podSets": ("name",), "unhealthyNodes": ("name",)}

_ENVELOPE: Final[Schema] = {
    "apiVersion": {"description": "Group and version of the object's schema.", "type": "string"},
    "kind": {"description": "The object's kind, in CamelCase.", "type": "string"},
    "metadata": {"type": "object"},
}


def kind_spec(kind: str) -> KindSpec:
    for spec in KINDS:
        if spec.kind == kind:
            return spec
    raise KeyError(kind)


# ---------------------------------------------------------------------------------------------
# Phase 1: pydantic's JSON schema -> one self-contained tree (no $defs / $ref).


def _inline_refs(node: Any, defs: Mapping[str, Schema]) -> Any:
    """Replace every `$ref` by a copy of its definition; the result shares no nodes with `defs`.

    Pydantic emits a `$defs` table (models used more than once or nested); structural schemas
    forbid `$ref`, so each use gets its own copy. The models have no recursive types.
    """
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str):
            target = _inline_refs(defs[ref.rsplit("/", 1)[-1]], defs)
            siblings = {k: _inline_refs(v, defs) for k, v in node.items() if k != "$ref"}
            return {**target, **siblings}
        return {k: _inline_refs(v, defs) for k, v in node.items() if k != "$defs"}
    if isinstance(node, list):
        return [_inline_refs(v, defs) for v in node]
    return node


# ---------------------------------------------------------------------------------------------
# Phase 2: JSON Schema idioms -> OpenAPI v3 structural idioms, node by node.


def _unwrap_optional(node: Schema) -> Schema:
    """`anyOf: [X, {type: null}]` (pydantic's `X | None`) becomes X, optional but not nullable.

    As in Kueue's CRDs: the API server prunes a null in a non-nullable field (then defaults it), so a
    null reads as absent everywhere: in the store, in CEL rules, in the models and the validators.
    A nullable enum would instead refuse null (`Unsupported value: null`) on a real API server.
    """
    options = node.get("anyOf")
    if not isinstance(options, list) or {"type": "null"} not in options:
        return node
    rest = [o for o in options if o != {"type": "null"}]
    merged = {k: v for k, v in node.items() if k != "anyOf"}
    if len(rest) == 1:
        merged = {**rest[0], **merged}
    else:
        merged["anyOf"] = rest
    return merged


def _structural(node: Any, field: str = "") -> Any:
    """One node rewritten for the API server; `field` is the property name that holds it.

    Drops titles and `default: null` (descriptions stay: `kubectl explain` shows them); a free-form object
    (`additionalProperties: true`, e.g. a pod template) keeps unknown fields instead.
    """
    if not isinstance(node, dict):
        return node
    node = _unwrap_optional(node)
    out: Schema = {}
    for key, value in node.items():
        if key == "title" or (key == "default" and value is None):
            continue
        if key == "properties":
            out[key] = {name: _structural(sub, name) for name, sub in value.items()}
        elif key == "additionalProperties" and value is True:
            out[PRESERVE_UNKNOWN] = True
        elif key in ("items", "additionalProperties", "not"):
            out[key] = _structural(value)
        elif key in ("anyOf", "allOf", "oneOf"):
            out[key] = [_structural(v) for v in value]
        else:
            out[key] = value
    if out.get("type") == "object" and "properties" not in out and "additionalProperties" not in out:
        out[PRESERVE_UNKNOWN] = True
    if out.get("type") == "integer" and out.get("format") == "int32":
        # The API server checks no integer format; explicit bounds make it refuse what Kueue's
        # Go types could not decode.
        out.setdefault("minimum", INT32_MIN)
        out.setdefault("maximum", INT32_MAX)
    keys = _LIST_MAP_KEYS.get(field)
    if keys is not None and out.get("type") == "array":
        out["x-kubernetes-list-map-keys"] = list(keys)
        out["x-kubernetes-list-type"] = "map"
    return _sorted(out)


def _sorted(node: Schema) -> Schema:
    """Keys in alphabetical order, as controller-gen writes them, so output is byte-stable."""
    return {k: node[k] for k in sorted(node)}


# ---------------------------------------------------------------------------------------------
# Phase 3: the kind's object schema with Kubernetes' envelope and the CRD around it.


def openapi_schema(model: type[KubeObject], description: str = "") -> Schema:
    """The structural openAPIV3Schema of one kind: envelope fields fixed, spec/status from the model."""
    raw = model.model_json_schema(by_alias=True, mode="validation")
    tree = _structural(_inline_refs(raw, raw.get("$defs", {})))
    props = dict(tree.get("properties", {}))
    props.update(_ENVELOPE)
    tree["properties"] = _sorted(props)
    tree["type"] = "object"
    if description:
        tree["description"] = description
    if tree.get("required"):
        tree["required"] = sorted(tree["required"])
    return _sorted(tree)


def attach_rules(schema: Schema, kind: str, version: str = c.VERSION_V1BETA2) -> Schema:
    """The CEL rules of one version of a kind (`controller.api.cel_rules`) put on the schema nodes
    they guard, in place.

    Raises KeyError naming the path when the schema lacks a node a rule is written for, so a model
    change that moves a field cannot silently drop its rules.
    """
    for path, rules in rules_for(kind, version):
        node = schema
        for step in path:
            node = node["items"] if step == ITEMS else node["properties"][step]
        ordered = _sorted({**node, VALIDATIONS: [rule.to_dict() for rule in rules]})
        node.clear()
        node.update(ordered)
    return schema


def _version(spec: KindSpec, served: ServedVersion) -> dict[str, Any]:
    schema = attach_rules(openapi_schema(served.model, spec.description), spec.kind, served.name)
    version: dict[str, Any] = {}
    if served.columns:
        version["additionalPrinterColumns"] = [col.to_dict() for col in served.columns]
    version["name"] = served.name
    version["schema"] = {"openAPIV3Schema": schema}
    version["served"] = True
    version["storage"] = served.name == spec.storage_version
    if spec.has_status:
        version["subresources"] = {"status": {}}
    return version


def crd(spec: KindSpec, conversion: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The full CustomResourceDefinition of one kind.

    `conversion` is its `spec.conversion` (default: strategy None, the API server only rewrites
    apiVersion); the install sets the Webhook strategy here, the one place a CRD is built.
    """
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": spec.crd_name},
        "spec": {
            "conversion": dict(conversion) if conversion is not None else {"strategy": "None"},
            "group": c.GROUP,
            "names": {
                "categories": [CATEGORY],
                "kind": spec.kind,
                "listKind": f"{spec.kind}List",
                "plural": spec.plural,
                "shortNames": list(spec.short_names),
                "singular": spec.kind.lower(),
            },
            "scope": "Namespaced" if spec.namespaced else "Cluster",
            "versions": [_version(spec, served) for served in spec.versions],
        },
    }


def all_crds() -> dict[str, dict[str, Any]]:
    """Every CRD tasq serves, by file name, in KINDS order."""
    return {spec.file_name: crd(spec) for spec in KINDS}


def render_yaml(obj: Mapping[str, Any]) -> str:
    """Byte-stable YAML: key order as built (already fixed), no aliases, wide lines."""

    class _NoAliases(yaml.SafeDumper):
        def ignore_aliases(self, data: Any) -> bool:
            return True

    text: str = yaml.dump(dict(obj), Dumper=_NoAliases, sort_keys=False, default_flow_style=False,
                          width=120, allow_unicode=True)
    return "---\n" + text


# ---------------------------------------------------------------------------------------------
# The reverse: a CRD version's schema as plain JSON Schema (for `jsonschema` validators).


def _to_json_schema(node: Any, reject_unknown: bool) -> Any:
    """OpenAPI v3 node -> JSON Schema node: nullable admits null, int-or-string becomes
    integer|string, boolean exclusive bounds become numeric ones, and (when asked) objects with
    listed properties refuse other fields.
    """
    if not isinstance(node, dict):
        return node
    out: Schema = {}
    for key, value in node.items():
        if key.startswith("x-kubernetes-") or key == "nullable":
            continue
        if key == "properties":
            out[key] = {k: _to_json_schema(v, reject_unknown) for k, v in value.items()}
        elif key in ("items", "additionalProperties", "not") and isinstance(value, dict):
            out[key] = _to_json_schema(value, reject_unknown)
        elif key in ("anyOf", "allOf", "oneOf"):
            out[key] = [_to_json_schema(v, reject_unknown) for v in value]
        elif key in ("exclusiveMinimum", "exclusiveMaximum") and isinstance(value, bool):
            continue  # OpenAPI 3.0's boolean form; turned into the numeric form below
        else:
            out[key] = value
    for bound, flag in (("minimum", "exclusiveMinimum"), ("maximum", "exclusiveMaximum")):
        if node.get(flag) is True and bound in out:
            out[flag] = out.pop(bound)
    if out.get("type") == "integer":
        # The API server decodes JSON numbers into int64: anything wider is refused before the schema.
        out.setdefault("minimum", INT64_MIN)
        out.setdefault("maximum", INT64_MAX)
    if node.get(INT_OR_STRING) and "anyOf" not in out and "allOf" not in out:
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if reject_unknown and "properties" in out and "additionalProperties" not in out \
            and not node.get(PRESERVE_UNKNOWN):
        out["additionalProperties"] = False
    if node.get("nullable"):
        _allow_null(out)
    return out


def _allow_null(out: Schema) -> None:
    """Let a converted node accept null while keeping its errors at its own path."""
    if isinstance(out.get("type"), str):
        out["type"] = [out["type"], "null"]
    if "enum" in out and None not in out["enum"]:
        out["enum"] = [*out["enum"], None]
    if "anyOf" in out:
        out["anyOf"] = [*out["anyOf"], {"type": "null"}]


def crd_json_schema(crd_obj: Mapping[str, Any], version: str, *, reject_unknown: bool = False) -> Schema:
    """The JSON Schema (draft 2020-12 compatible) of one served version of a CRD.

    `reject_unknown=True` makes fields the schema does not list an error instead of being
    silently accepted (the API server would prune them), which is what a round-trip test wants.
    Raises KeyError when the CRD does not serve `version`.
    """
    for v in crd_obj["spec"]["versions"]:
        if v["name"] == version:
            root = v["schema"]["openAPIV3Schema"]
            out: Schema = _to_json_schema(root, reject_unknown)
            return out
    raise KeyError(f"{crd_obj['metadata']['name']} does not serve version {version!r}")
