"""Generated CRDs: `tasq crds` output matches crds/, schemas are structural and accept the examples."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from controller.api import constants as c
from controller.api.conversion import convert
from controller.api.crds import KINDS, all_crds, crd_json_schema, kind_spec
from controller.cli import main
from controller.commands.crds import DEFAULT_DIR
from tests.unit.api import examples
from tests.unit.api.structural_rules import check_crd

CRDS = all_crds()


def _validator(kind: str, version: str) -> jsonschema.Draft202012Validator:
    schema = crd_json_schema(CRDS[kind_spec(kind).file_name], version, reject_unknown=True)
    return jsonschema.Draft202012Validator(schema)


def test_regenerating_into_a_temp_dir_gives_exactly_the_checked_in_files(tmp_path: Path) -> None:
    assert main(["crds", "--dir", str(tmp_path)]) == 0
    generated = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    checked_in = {p.name: p.read_bytes() for p in DEFAULT_DIR.glob("*.yaml")}
    assert generated == checked_in
    assert sorted(generated) == sorted(spec.file_name for spec in KINDS)


def test_check_passes_on_the_checked_in_files(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["crds", "--check"]) == 0
    out = capsys.readouterr().out
    # crds/ and its kustomize copy config/crd/bases/, one line each
    assert [line.split(" in ")[0] for line in out.splitlines()] == [f"crds OK: {len(KINDS)} file(s)"] * 2


@dataclass(frozen=True)
class StaleCase:
    name: str
    damage: Callable[[Path], object]  # the return value (unlink, write_text) is ignored
    want_named: str


def _edit_workloads(d: Path) -> None:
    path = d / "kueue.x-k8s.io_workloads.yaml"
    path.write_text(path.read_text().replace("minItems: 1", "minItems: 2", 1))


STALE_CASES = [
    StaleCase("an edited file differs", _edit_workloads, "kueue.x-k8s.io_workloads.yaml (differs)"),
    StaleCase("a deleted file is missing", lambda d: (d / "kueue.x-k8s.io_topologies.yaml").unlink(),
              "kueue.x-k8s.io_topologies.yaml (missing)"),
    StaleCase("a stray file is not generated", lambda d: (d / "kueue.x-k8s.io_old.yaml").write_text("x"),
              "kueue.x-k8s.io_old.yaml (not generated, remove it)"),
]


@pytest.mark.parametrize("case", STALE_CASES, ids=lambda case: case.name)
def test_check_fails_and_names_each_stale_file(case: StaleCase, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["crds", "--dir", str(tmp_path)]) == 0
    case.damage(tmp_path)
    capsys.readouterr()
    assert main(["crds", "--check", "--dir", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert case.want_named in err
    named = [name for name in [*CRDS, "kueue.x-k8s.io_old.yaml"] if name in err]
    assert named == [case.want_named.split(" ")[0]]


@pytest.mark.parametrize("file_name", sorted(CRDS))
def test_every_crd_is_structural(file_name: str) -> None:
    assert check_crd(CRDS[file_name]) == []


def test_checked_in_yaml_parses_back_to_the_generated_crds() -> None:
    for name, crd in CRDS.items():
        assert yaml.safe_load((DEFAULT_DIR / name).read_text()) == crd


@dataclass(frozen=True)
class KindCase:
    kind: str
    want_scope: str
    want_short: tuple[str, ...]
    want_versions: tuple[tuple[str, bool], ...]  # (name, storage)
    want_columns: tuple[str, ...]
    want_status: bool


V2, V1, V1A1 = c.VERSION_V1BETA2, c.VERSION_V1BETA1, c.VERSION_V1ALPHA1
KIND_CASES = [
    KindCase(c.KIND_TOPOLOGY, "Cluster", ("topo",), ((V2, True), (V1, False), (V1A1, False)),
             ("Age",), want_status=False),
    KindCase(c.KIND_RESOURCE_FLAVOR, "Cluster", ("flavor", "flavors", "rf"), ((V2, True), (V1, False)), ("Age",),
             want_status=False),
    KindCase(c.KIND_CLUSTER_QUEUE, "Cluster", ("cq",), ((V2, True), (V1, False)),
             ("Cohort", "Strategy", "Pending Workloads", "Admitted Workloads"), want_status=True),
    KindCase(c.KIND_LOCAL_QUEUE, "Namespaced", ("queue", "queues", "lq"), ((V2, True), (V1, False)),
             ("ClusterQueue", "Pending Workloads", "Admitted Workloads"), want_status=True),
    KindCase(c.KIND_WORKLOAD, "Namespaced", ("kwl", "kueueworkload", "kueueworkloads", "wl"), ((V2, True), (V1, False)),
             ("Queue", "Reserved in", "Admitted", "Finished", "Age"), want_status=True),
]


@pytest.mark.parametrize("case", KIND_CASES, ids=lambda case: case.kind)
def test_crd_names_scope_versions_and_columns(case: KindCase) -> None:
    crd = CRDS[kind_spec(case.kind).file_name]
    spec = crd["spec"]
    assert (spec["group"], spec["scope"], spec["names"]["kind"]) == (c.GROUP, case.want_scope, case.kind)
    assert tuple(spec["names"]["shortNames"]) == case.want_short
    assert spec["names"]["categories"] == ["kueue"]
    assert spec["conversion"] == {"strategy": "None"}
    assert tuple((v["name"], v["storage"]) for v in spec["versions"]) == case.want_versions
    for version in spec["versions"]:
        assert version["served"] is True
        assert tuple(col["name"] for col in version["additionalPrinterColumns"]) == case.want_columns
        assert ("subresources" in version) == case.want_status


def test_the_cohort_column_reads_each_versions_field() -> None:
    versions = CRDS[kind_spec(c.KIND_CLUSTER_QUEUE).file_name]["spec"]["versions"]
    paths = {v["name"]: v["additionalPrinterColumns"][0]["jsonPath"] for v in versions}
    assert paths == {V2: ".spec.cohortName", V1: ".spec.cohort"}


def _missing_descriptions(node: Any, path: str) -> list[str]:
    """Paths of schema properties without a description (kubectl explain would show nothing)."""
    if not isinstance(node, dict):
        return []
    out = []
    for name, sub in (node.get("properties") or {}).items():
        if name != "metadata" and not sub.get("description"):
            out.append(f"{path}.{name}")
        out.extend(_missing_descriptions(sub, f"{path}.{name}"))
    for key in ("items", "additionalProperties"):
        if isinstance(node.get(key), dict):
            out.extend(_missing_descriptions(node[key], f"{path}[]"))
    return out


@pytest.mark.parametrize("file_name", sorted(CRDS))
def test_every_field_of_every_version_has_a_description(file_name: str) -> None:
    for version in CRDS[file_name]["spec"]["versions"]:
        schema = version["schema"]["openAPIV3Schema"]
        assert schema.get("description")
        assert _missing_descriptions(schema, version["name"]) == []


def test_workload_columns_read_kueue_paths() -> None:
    columns = {col["name"]: col for col in CRDS[kind_spec(c.KIND_WORKLOAD).file_name]["spec"]["versions"][0]
               ["additionalPrinterColumns"]}
    assert columns["Admitted"]["jsonPath"] == '.status.conditions[?(@.type=="Admitted")].status'
    assert columns["Reserved in"]["jsonPath"] == ".status.admission.clusterQueue"
    assert columns["Age"]["type"] == "date"


def test_strategy_column_is_wide_only() -> None:
    columns = CRDS[kind_spec(c.KIND_CLUSTER_QUEUE).file_name]["spec"]["versions"][0]["additionalPrinterColumns"]
    assert [col.get("priority", 0) for col in columns] == [0, 1, 0, 1]  # Kueue's: Admitted only in -o wide


# -- the schemas accept what the models write and refuse what the API server refuses -----------


@dataclass(frozen=True)
class ExampleCase:
    name: str
    kind: str
    example: Callable[[], dict[str, Any]]


EXAMPLE_CASES = [
    ExampleCase("topology", c.KIND_TOPOLOGY, examples.topology),
    ExampleCase("flavor, Kueue form", c.KIND_RESOURCE_FLAVOR, examples.flavor_kueue_form),
    ExampleCase("flavor, KEP inline form", c.KIND_RESOURCE_FLAVOR, examples.flavor_inline_form),
    ExampleCase("cluster queue", c.KIND_CLUSTER_QUEUE, examples.cluster_queue),
    ExampleCase("local queue", c.KIND_LOCAL_QUEUE, examples.local_queue),
    ExampleCase("workload", c.KIND_WORKLOAD, examples.workload),
]


@pytest.mark.parametrize("case", EXAMPLE_CASES, ids=lambda case: case.name)
def test_every_example_validates_against_every_served_version(case: ExampleCase) -> None:
    spec = kind_spec(case.kind)
    for version in spec.served_versions:
        obj = convert(case.example(), f"{c.GROUP}/{version}")
        assert isinstance(obj, dict)
        errors = [e.message for e in _validator(case.kind, version).iter_errors(obj)]
        assert errors == []


def test_integer_quantities_pass_the_schema_like_strings() -> None:
    obj = examples.cluster_queue()
    obj["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = 10
    assert list(_validator(c.KIND_CLUSTER_QUEUE, c.VERSION_V1BETA2).iter_errors(obj)) == []


@dataclass(frozen=True)
class RejectCase:
    name: str
    kind: str
    break_it: Callable[[dict[str, Any]], None]
    want_path: str


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    """A mutation writing `value` at a dotted path (integers index lists)."""
    def apply(obj: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node: Any = obj
        for part in parents:
            node = node[int(part)] if part.isdigit() else node[part]
        if last.isdigit():
            node[int(last)] = value
        else:
            node[last] = value
    return apply


REJECT_CASES = [
    RejectCase("a topology without levels", c.KIND_TOPOLOGY, _set("spec.levels", []), "spec.levels"),
    RejectCase("a topology with 17 levels", c.KIND_TOPOLOGY,
               _set("spec.levels", [{"nodeLabel": f"l{i}"} for i in range(17)]), "spec.levels"),
    RejectCase("a level label with a space", c.KIND_TOPOLOGY, _set("spec.levels.0.nodeLabel", "a b"),
               "spec.levels.0.nodeLabel"),
    RejectCase("an unknown queueing strategy", c.KIND_CLUSTER_QUEUE, _set("spec.queueingStrategy", "Random"),
               "spec.queueingStrategy"),
    RejectCase("a quota that is not a quantity", c.KIND_CLUSTER_QUEUE,
               _set("spec.resourceGroups.0.flavors.0.resources.0.nominalQuota", "lots"),
               "spec.resourceGroups.0.flavors.0.resources.0.nominalQuota"),
    RejectCase("an upper-case flavor name", c.KIND_CLUSTER_QUEUE,
               _set("spec.resourceGroups.0.flavors.0.name", "H100"), "spec.resourceGroups.0.flavors.0.name"),
    RejectCase("a negative pod count", c.KIND_WORKLOAD, _set("spec.podSets.0.count", -1), "spec.podSets.0.count"),
    RejectCase("a zero minCount", c.KIND_WORKLOAD, _set("spec.podSets.0.minCount", 0), "spec.podSets.0.minCount"),
    RejectCase("a workload without pod sets", c.KIND_WORKLOAD, _set("spec.podSets", []), "spec.podSets"),
    RejectCase("a topology slice of no domain", c.KIND_WORKLOAD,
               _set("status.admission.podSetAssignments.0.topologyAssignment.slices.0.domainCount", 0),
               "status.admission.podSetAssignments.0.topologyAssignment.slices.0.domainCount"),
    RejectCase("a domain of no pod", c.KIND_WORKLOAD,
               _set("status.admission.podSetAssignments.0.topologyAssignment.slices.0.podCounts.individual.1", 0),
               "status.admission.podSetAssignments.0.topologyAssignment.slices.0.podCounts.individual.1"),
    RejectCase("a condition status that is not True/False/Unknown", c.KIND_WORKLOAD,
               _set("status.conditions.0.status", "Yes"), "status.conditions.0.status"),
    RejectCase("an unknown spec field", c.KIND_LOCAL_QUEUE, _set("spec.colour", "blue"), "spec"),
    RejectCase("a taint with an unknown effect", c.KIND_RESOURCE_FLAVOR,
               _set("spec.nodeTaints", [{"key": "k", "effect": "Sometimes"}]), "spec.nodeTaints.0.effect"),
]
_EXAMPLE_BY_KIND = {c.KIND_TOPOLOGY: examples.topology, c.KIND_CLUSTER_QUEUE: examples.cluster_queue,
                    c.KIND_WORKLOAD: examples.workload, c.KIND_LOCAL_QUEUE: examples.local_queue,
                    c.KIND_RESOURCE_FLAVOR: examples.flavor_kueue_form}


@pytest.mark.parametrize("case", REJECT_CASES, ids=lambda case: case.name)
def test_schema_rejects_what_kueue_rejects(case: RejectCase) -> None:
    obj = _EXAMPLE_BY_KIND[case.kind]()
    case.break_it(obj)
    paths = [".".join(str(p) for p in e.absolute_path)
             for e in _validator(case.kind, kind_spec(case.kind).storage_version).iter_errors(obj)]
    assert paths == [case.want_path]


def test_json_schema_refuses_an_unserved_version() -> None:
    with pytest.raises(KeyError, match="v1alpha1"):
        crd_json_schema(CRDS[kind_spec(c.KIND_WORKLOAD).file_name], c.VERSION_V1ALPHA1)


# -- the OpenAPI -> JSON Schema converter on its own -------------------------------------------


@dataclass(frozen=True)
class ConvertCase:
    name: str
    node: dict[str, Any]
    value: Any
    want_valid: bool


CONVERT_CASES = [
    ConvertCase("nullable string accepts null", {"type": "string", "nullable": True}, None, True),
    ConvertCase("a string without nullable refuses null", {"type": "string"}, None, False),
    ConvertCase("nullable enum accepts null", {"type": "string", "enum": ["A"], "nullable": True}, None, True),
    ConvertCase("nullable enum still refuses other strings",
                {"type": "string", "enum": ["A"], "nullable": True}, "B", False),
    ConvertCase("int-or-string without anyOf accepts an integer", {"x-kubernetes-int-or-string": True}, 3, True),
    ConvertCase("int-or-string refuses a list", {"x-kubernetes-int-or-string": True}, [3], False),
    ConvertCase("exclusive minimum refuses the bound itself",
                {"type": "integer", "minimum": 0, "exclusiveMinimum": True}, 0, False),
    ConvertCase("exclusive minimum accepts above the bound",
                {"type": "integer", "minimum": 0, "exclusiveMinimum": True}, 1, True),
    ConvertCase("inclusive maximum accepts the bound",
                {"type": "integer", "maximum": 5, "exclusiveMaximum": False}, 5, True),
    ConvertCase("a preserved object keeps unknown fields even when rejecting unknowns",
                {"type": "object", "properties": {"a": {"type": "string"}},
                 "x-kubernetes-preserve-unknown-fields": True}, {"b": 1}, True),
    ConvertCase("a listed object refuses unknown fields",
                {"type": "object", "properties": {"a": {"type": "string"}}}, {"b": 1}, False),
    ConvertCase("any integer fits int64: 2^63 - 1 passes", {"type": "integer"}, 2**63 - 1, True),
    ConvertCase("any integer fits int64: 2^63 is refused", {"type": "integer"}, 2**63, False),
    ConvertCase("any integer fits int64: -2^63 - 1 is refused", {"type": "integer"}, -(2**63) - 1, False),
    ConvertCase("a schema's own bound stays", {"type": "integer", "minimum": 0}, -1, False),
]


@pytest.mark.parametrize(("path", "want"), [
    pytest.param(("spec", "podSets", "items", "count"), {"minimum": 0, "maximum": 2**31 - 1},
                 id="a pod set count: its own minimum, int32's maximum"),
    pytest.param(("spec", "priority"), {"minimum": -(2**31), "maximum": 2**31 - 1}, id="priority: int32"),
    pytest.param(("status", "requeueState", "count"), {"minimum": 0, "maximum": 2**31 - 1},
                 id="requeueState.count"),
])
def test_int32_fields_carry_int32_bounds_in_the_crd(path: tuple[str, ...], want: dict[str, int]) -> None:
    """The API server checks no integer format, so the generated schema states Go's int32 range."""
    node = CRDS[kind_spec(c.KIND_WORKLOAD).file_name]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    for step in path:
        node = node[step] if step == "items" else node["properties"][step]
    assert node["format"] == "int32"
    assert {k: node[k] for k in want} == want


@pytest.mark.parametrize("case", CONVERT_CASES, ids=lambda case: case.name)
def test_crd_json_schema_converts_openapi_keywords(case: ConvertCase) -> None:
    crd = {"metadata": {"name": "things.example.com"}, "spec": {"versions": [
        {"name": "v1", "schema": {"openAPIV3Schema": {"type": "object", "properties": {"f": case.node}}}}]}}
    validator = jsonschema.Draft202012Validator(crd_json_schema(crd, "v1", reject_unknown=True))
    assert validator.is_valid({"f": case.value}) == case.want_valid
