"""The validators and the generated CRDs agree: whatever the CRD refuses (its OpenAPI schema, with
Kueue's CEL rules evaluated by cel-python) the validators refuse too, and whatever the validators
pass builds its model. Objects come from the CRD schemas themselves, and from valid examples with
one node replaced (by a value drawn from that node's schema, by arbitrary JSON, or removed).

The converse cannot hold: the webhook keeps the rules a schema cannot say (a resource in one
group only, quantities, lendingLimit <= nominalQuota, label syntax beyond a pattern...).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from datetime import datetime
from functools import cache
from typing import Any, Final

import jsonschema
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from controller.api import constants as c
from controller.api.conversion import ConversionFailure, convert
from controller.api.crds import (
    INT_OR_STRING,
    PRESERVE_UNKNOWN,
    KindSpec,
    all_crds,
    crd_json_schema,
    kind_spec,
)
from tests.unit.api import examples
from tests.unit.api.cel_evaluation import cel_failures
from tests.unit.webhooks.test_robustness import EXAMPLES, json_values
from webhooks.validation import validate, validate_update

CRDS = all_crds()
TEMPLATE: Final = {"spec": {"containers": [{"name": "main", "image": "busybox",
                                            "resources": {"requests": {"cpu": "1"}}}]}}
TIMES: Final = ("2026-01-02T03:04:05Z", "2026-01-02T03:04:05.5+02:00")
QUANTITIES: Final = ("0", "1", "500m", "2Gi", 3, "1e3")
_DATE_TIME: Final = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})")
FORMATS = jsonschema.FormatChecker(formats=())


def _is_date_time(value: object) -> bool:
    """RFC 3339 as the API server's strfmt reads it (an independent check from the validators')."""
    if not isinstance(value, str):
        return True  # a type error is the schema's `type` to report
    if not _DATE_TIME.fullmatch(value):
        return False
    try:
        datetime.strptime(value[:19], "%Y-%m-%dT%H:%M:%S")
    except ValueError:
        return False
    return True


FORMATS.checks("date-time")(_is_date_time)


def _schema(spec: KindSpec, version: str) -> Mapping[str, Any]:
    for v in CRDS[spec.file_name]["spec"]["versions"]:
        if v["name"] == version:
            schema: Mapping[str, Any] = v["schema"]["openAPIV3Schema"]
            return schema
    raise KeyError(version)


# -- drawing values from an OpenAPI schema node ----------------------------------------------------

def _string(node: Mapping[str, Any]) -> st.SearchStrategy[Any]:
    if node.get("format") == "date-time":
        return st.sampled_from(TIMES)
    limit = min(node.get("maxLength", 12), 12)
    if "pattern" in node:
        return st.from_regex(node["pattern"], fullmatch=True).filter(lambda s: len(s) <= node.get("maxLength", 1e9))
    return st.text(min_size=node.get("minLength", 0), max_size=max(limit, node.get("minLength", 0)))


def from_schema(node: Mapping[str, Any], field: str = "") -> st.SearchStrategy[Any]:
    """Values the schema node accepts (mostly: patterns and bounds are drawn, CEL is not)."""
    if "enum" in node:
        return st.sampled_from(node["enum"])
    if node.get(INT_OR_STRING):
        return st.sampled_from(QUANTITIES)
    kind = node.get("type")
    if kind == "string":
        return _string(node)
    if kind == "integer":
        return st.integers(max(node.get("minimum", -3), -3), min(node.get("maximum", 40), 40))
    if kind == "boolean":
        return st.booleans()
    if kind == "array":
        low = node.get("minItems", 0)
        return st.lists(from_schema(node["items"]), min_size=low, max_size=max(low, min(node.get("maxItems", 3), 3)))
    if kind == "object" and "properties" in node:
        props = node["properties"]
        required = set(node.get("required", ()))
        return st.fixed_dictionaries({k: from_schema(v, k) for k, v in props.items() if k in required},
                                     optional={k: from_schema(v, k) for k, v in props.items() if k not in required})
    if kind == "object" and isinstance(node.get("additionalProperties"), Mapping):
        return st.dictionaries(st.from_regex(r"[a-z]([a-z0-9.-]{0,8}[a-z0-9])?(/[a-z0-9]{1,8})?", fullmatch=True),
                               from_schema(node["additionalProperties"]), max_size=3)
    if node.get(PRESERVE_UNKNOWN):
        return st.just(copy.deepcopy(TEMPLATE)) if field == "template" else st.just({})
    return st.none()


@st.composite
def generated(draw: st.DrawFn) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """(None, an object drawn from its CRD's schema) for a random kind and served version."""
    spec = draw(st.sampled_from([kind_spec(d["kind"]) for d in EXAMPLES]))
    version = draw(st.sampled_from(spec.served_versions))
    root = _schema(spec, version)["properties"]
    obj = {"apiVersion": f"{spec.crd_name.split('.', 1)[1]}/{version}", "kind": spec.kind,
           "metadata": {"name": "obj", **({"namespace": "ns"} if spec.namespaced else {})},
           "spec": draw(from_schema(root["spec"]))}
    if "status" in root and draw(st.booleans()):
        obj["status"] = draw(from_schema(root["status"]))
    return None, obj


def _nodes(value: Any, schema: Mapping[str, Any], path: tuple[Any, ...] = ()) -> list[tuple[tuple[Any, ...], Any]]:
    """(path, schema node) of every value in an object that its schema describes."""
    out = [(path, schema)] if path else []
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        for key, child in value.items():
            sub = props.get(key) or (extra if isinstance(extra, Mapping) else None)
            if sub is not None:
                out.extend(_nodes(child, sub, (*path, key)))
    elif isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for i, item in enumerate(value):
            out.extend(_nodes(item, schema["items"], (*path, i)))
    return out


@st.composite
def mutated(draw: st.DrawFn) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """(a valid example, the example with one described node redrawn from its schema, replaced by
    arbitrary JSON, or removed)."""
    old = draw(st.sampled_from(EXAMPLES))
    spec = kind_spec(old["kind"])
    nodes = [n for n in _nodes(old, _schema(spec, old["apiVersion"].split("/")[1])) if n[0][0] in ("spec", "status")]
    path, node = draw(st.sampled_from(nodes))
    new = copy.deepcopy(old)
    holder: Any = new
    for key in path[:-1]:
        holder = holder[key]
    how = draw(st.sampled_from(["schema", "json", "remove"]))
    event(f"mutation: {how}")
    if how == "remove":
        holder.pop(path[-1])
    else:
        holder[path[-1]] = draw(from_schema(node, str(path[-1])) if how == "schema" else json_values)
    return old, new


# -- the two verdicts --------------------------------------------------------------------------------

def _pruned(value: Any, schema: Mapping[str, Any]) -> Any:
    """The object as the API server stores it: nulls in non-nullable fields are dropped, and so are
    fields a structural schema does not list."""
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        closed = bool(props) and extra is None and not schema.get(PRESERVE_UNKNOWN)
        out = {}
        for key, child in value.items():
            sub = props.get(key) if isinstance(key, str) else None
            if sub is None and closed:
                continue
            sub = sub if sub is not None else (extra if isinstance(extra, Mapping) else None)
            if child is None and sub is not None and not sub.get("nullable"):
                continue
            out[key] = _pruned(child, sub) if sub is not None else child
        return out
    if isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        return [_pruned(item, schema["items"]) for item in value]
    return value


@cache
def _validator(file_name: str, version: str) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(crd_json_schema(CRDS[file_name], version), format_checker=FORMATS)


def crd_refusals(obj: dict[str, Any], old: dict[str, Any] | None) -> list[str]:
    """What the API server with tasq's CRD would say: schema errors, then CEL rule messages."""
    spec = kind_spec(obj["kind"])
    version = obj["apiVersion"].split("/")[1]
    stored = _pruned(obj, _schema(spec, version))
    validator = _validator(spec.file_name, version)
    refusals = [f"{'.'.join(map(str, e.absolute_path))}: {e.message[:120]}" for e in validator.iter_errors(stored)]
    if not refusals:
        old_stored = None if old is None else _pruned(old, _schema(spec, version))
        refusals = [f"{f.path}: {f.message}" for f in cel_failures(CRDS[spec.file_name], version, stored, old_stored)]
    return refusals


def _check(pair: tuple[dict[str, Any] | None, dict[str, Any]]) -> None:
    old, new = pair
    errs = validate(new) if old is None else validate_update(old, new)
    refusals = crd_refusals(new, old)
    event(f"crd {'refuses' if refusals else 'accepts'}, validators {'refuse' if errs else 'accept'}")
    if refusals:
        assert errs, f"the CRD refuses what the validators pass: {refusals}"
    if not errs:
        # The models are v1beta2's: what the validators pass in another served version is what the
        # API server stores, and the models read it after conversion (as the operator and the
        # webhooks, which convert a v1beta1 request under matchPolicy Equivalent, do).
        hub = convert(new, c.API_VERSION)
        assert not isinstance(hub, ConversionFailure), f"the validators pass what cannot convert: {hub.message}"
        kind_spec(new["kind"]).model.model_validate(hub)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_mutated_examples_get_the_same_refusal_from_crd_and_validators(
        pair: tuple[dict[str, Any] | None, dict[str, Any]]) -> None:
    _check(pair)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(generated())
def test_objects_drawn_from_the_crd_schemas_get_the_same_refusal(
        pair: tuple[dict[str, Any] | None, dict[str, Any]]) -> None:
    _check(pair)


def test_the_examples_pass_both() -> None:
    for doc in EXAMPLES:
        assert crd_refusals(doc, None) == [] and validate(doc) == []
        assert crd_refusals(doc, copy.deepcopy(doc)) == []


def test_a_crd_refusal_is_seen() -> None:
    """The harness itself can fail: a bad level in a Topology is a schema refusal, a duplicate a CEL one."""
    topo = examples.topology()
    topo["spec"]["levels"][0]["nodeLabel"] = "not a label"
    assert crd_refusals(topo, None)[0].startswith("spec.levels.0.nodeLabel: ")
    topo["spec"]["levels"][0]["nodeLabel"] = "cloud.com/rack"
    assert crd_refusals(topo, None) == ["spec.levels: must be unique"]


EDGE_VALUES: Final[tuple[Any, ...]] = (None, "", "Bogus Value", "a" * 400, "2026-13-01T00:00:00Z", -1, 0, 2**31, 2**63, True, 1.5,
                      [], {}, {"x": 1}, ["x"])
REMOVED: Final = object()


def _edge_cases() -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(example, the example with one spec/status node set to an edge value or removed), for every node."""
    out = []
    for old in EXAMPLES:
        spec = kind_spec(old["kind"])
        for path, _ in _nodes(old, _schema(spec, old["apiVersion"].split("/")[1])):
            if path[0] not in ("spec", "status"):
                continue
            for value in (*EDGE_VALUES, REMOVED):
                new = copy.deepcopy(old)
                holder: Any = new
                for key in path[:-1]:
                    holder = holder[key]
                if value is REMOVED:
                    holder.pop(path[-1])
                else:
                    holder[path[-1]] = copy.deepcopy(value)
                out.append((old, new))
    return out


def test_every_node_of_every_example_set_to_each_edge_value() -> None:
    """The exhaustive sweep the random tests sample from: all disagreements listed at once."""
    disagreements = []
    for old, new in _edge_cases():
        if validate(new):  # validate_update refuses it too: nothing the CRD says can disagree
            continue
        for stored in (None, old):
            if stored is not None and validate_update(stored, new):
                continue
            disagreements.extend(crd_refusals(new, stored)[:1])
    assert disagreements == []
