"""Shared pieces of every tasq API model: the pydantic base, ObjectMeta, Condition, quantities.

Field names are snake_case in Python and Kueue's camelCase on the wire; both are accepted on
input. Empty optional lists and maps are omitted on output, as Go's `omitempty` does. Used by the
kind modules (topology, flavor, queues, workload), by `controller.api.crds` and by all callers
that parse or write our objects.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Annotated, Any, Final, Literal, Self

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, JsonValue, WithJsonSchema, model_validator
from pydantic.alias_generators import to_camel

from controller.api.quantity import parse as parse_quantity_text
from controller.api.selectors import requirement_matches

ConditionStatus = Literal["True", "False", "Unknown"]


def _quantity_text(value: object) -> str:
    """Accept a quantity string or integer, keep the text as written (the API server keeps it)."""
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise ValueError(f"quantity must be a string or an integer, got {type(value).__name__}")
    parse_quantity_text(value)  # raises QuantityError (a ValueError) for non-quantities
    return str(value)


# The API server's quantity grammar (apimachinery's), as Kueue's CRDs carry it.
QUANTITY_PATTERN: Final = (r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|"
                           r"([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$")
DNS_LABEL_PATTERN: Final = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
DNS_SUBDOMAIN_PATTERN: Final = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
LABEL_KEY_PATTERN: Final = (r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                            r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$")
CONDITION_REASON_PATTERN: Final = r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"

QuantityStr = Annotated[str, BeforeValidator(_quantity_text), WithJsonSchema({
    "anyOf": [{"type": "integer"}, {"type": "string"}],
    "pattern": QUANTITY_PATTERN,
    "x-kubernetes-int-or-string": True,
})]
"""A resource quantity: a string on the wire, an integer accepted on input."""


def schema_only(**constraints: JsonValue) -> Any:
    """Constraints the CRD schema (and so the API server) enforces but parsing does not re-check.

    Parsing stays lenient and cheap: the server has already applied these to stored objects,
    and the validators report them with field paths for manifests that never met a server.
    """
    return Field(json_schema_extra=constraints)


DnsLabelStr = Annotated[str, schema_only(maxLength=63, pattern=DNS_LABEL_PATTERN)]
DnsSubdomainStr = Annotated[str, schema_only(maxLength=253, pattern=DNS_SUBDOMAIN_PATTERN)]
LabelKeyStr = Annotated[str, schema_only(maxLength=317, pattern=LABEL_KEY_PATTERN)]
DateTimeStr = Annotated[str, schema_only(format="date-time")]
"""metav1.Time on the wire: an RFC 3339 timestamp."""

INT32_MIN: Final = -(2**31)
INT32_MAX: Final = 2**31 - 1
INT64_MIN: Final = -(2**63)
INT64_MAX: Final = 2**63 - 1
Int32 = Annotated[int, schema_only(format="int32")]
"""Go's int32 (Kueue's counts and priorities); the CRD's JSON Schema bounds it to that range."""
Int64 = Annotated[int, schema_only(format="int64")]
"""Go's int64; every other integer on the wire is one too (JSON decoding refuses larger numbers)."""


def _is_empty(value: object) -> bool:
    return not value


def omitempty_list(**constraints: JsonValue) -> Any:
    """An optional list field that defaults to empty and is left out of the output when empty;
    `constraints` (e.g. maxItems) go to the CRD schema only, as in `schema_only`."""
    return Field(default_factory=list, exclude_if=_is_empty, json_schema_extra=constraints or None)


def omitempty_dict(**constraints: JsonValue) -> Any:
    """An optional map field that defaults to empty and is left out of the output when empty;
    `constraints` (e.g. maxProperties) go to the CRD schema only, as in `schema_only`."""
    return Field(default_factory=dict, exclude_if=_is_empty, json_schema_extra=constraints or None)


class ApiModel(BaseModel):
    """Base of every wire model: camelCase aliases, both names accepted, unknown fields dropped.

    Unknown fields are dropped because the API server prunes them too (structural schemas).
    """

    model_config = ConfigDict(
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
        extra="ignore",
        use_attribute_docstrings=True,  # a field's docstring is its description in the CRD schema
    )

    @model_validator(mode="before")
    @classmethod
    def _prune_nulls(cls, data: Any) -> Any:
        """A null field reads as absent, as the API server prunes nulls from non-nullable fields
        before defaulting (so `queueingStrategy: null` gets the default, not a type error)."""
        if isinstance(data, dict) and None in data.values():
            return {k: v for k, v in data.items() if v is not None}
        return data

    def to_dict(self) -> dict[str, Any]:
        """The wire form: camelCase keys, no nulls, no empty optional lists or maps."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


class OwnerReference(ApiModel):
    api_version: str
    kind: str
    name: str
    uid: str
    controller: bool | None = None
    block_owner_deletion: bool | None = None


class ObjectMeta(ApiModel):
    """metav1.ObjectMeta; fields tasq does not model (managedFields...) are kept as they came."""

    model_config = ConfigDict(extra="allow")

    name: str | None = None
    generate_name: str | None = None
    namespace: str | None = None
    uid: str | None = None
    resource_version: str | None = None
    generation: Int64 | None = None
    creation_timestamp: str | None = None
    deletion_timestamp: str | None = None
    labels: dict[str, str] = omitempty_dict()
    annotations: dict[str, str] = omitempty_dict()
    owner_references: list[OwnerReference] = omitempty_list()
    finalizers: list[str] = omitempty_list()


class LabelSelectorRequirement(ApiModel):
    key: str
    """The label key the requirement applies to."""
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    """How the key relates to the values: In, NotIn, Exists or DoesNotExist."""
    values: list[str] = omitempty_list()
    """The values for In and NotIn (at least one); empty for Exists and DoesNotExist."""


class LabelSelector(ApiModel):
    """metav1.LabelSelector; an empty selector matches everything (Kueue's namespaceSelector)."""

    match_labels: dict[str, str] = omitempty_dict()
    """Labels an object must have with exactly these values."""
    match_expressions: list[LabelSelectorRequirement] = omitempty_list()
    """Further requirements on labels; all must hold (together with matchLabels)."""

    def matches(self, labels: Mapping[str, str]) -> bool:
        """matchLabels AND every matchExpression (an empty selector matches everything)."""
        return (all(labels.get(k) == v for k, v in self.match_labels.items())
                and all(requirement_matches(labels, e.key, e.operator, e.values) for e in self.match_expressions))


class Condition(ApiModel):
    """metav1.Condition, with all the fields the API server requires of it."""

    type: Annotated[str, schema_only(maxLength=316, pattern=LABEL_KEY_PATTERN)]
    """The condition's type in CamelCase, e.g. QuotaReserved, Admitted, Finished or Active."""
    status: ConditionStatus
    """True, False or Unknown."""
    reason: Annotated[str, schema_only(minLength=1, maxLength=1024, pattern=CONDITION_REASON_PATTERN)]
    """A CamelCase word saying why the condition last changed."""
    message: Annotated[str, schema_only(maxLength=32768)]
    """What happened, for people."""
    last_transition_time: DateTimeStr
    """When the status last changed."""
    observed_generation: Int64 | None = Field(default=None, ge=0)
    """The object's metadata.generation the condition was computed from."""


def format_time(now: datetime) -> str:
    """RFC 3339 in UTC with second precision, as metav1.Time serialises."""
    if now.tzinfo is None:
        raise ValueError("format_time needs an aware datetime")
    return now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def find_condition(conditions: Sequence[Condition], type_: str) -> Condition | None:
    for cond in conditions:
        if cond.type == type_:
            return cond
    return None


def set_condition(conditions: list[Condition], type_: str, status: ConditionStatus, reason: str,
                  message: str, now: datetime, observed_generation: int | None = None) -> bool:
    """Add or update one condition in place, as meta.SetStatusCondition does; True when it changed.

    lastTransitionTime moves only when the status flips, so a message refresh keeps the time the
    condition became what it is.
    """
    existing = find_condition(conditions, type_)
    if existing is None:
        conditions.append(Condition(type=type_, status=status, reason=reason, message=message,
                                    last_transition_time=format_time(now),
                                    observed_generation=observed_generation))
        return True
    changed = False
    if existing.status != status:
        existing.status = status
        existing.last_transition_time = format_time(now)
        changed = True
    updates: tuple[tuple[str, object], ...] = (
        ("reason", reason), ("message", message), ("observed_generation", observed_generation))
    for field, value in updates:
        if getattr(existing, field) != value:
            setattr(existing, field, value)
            changed = True
    return changed


def object_key(obj: Mapping[str, Any]) -> str:
    """`namespace/name` of an object in its wire form (a watch event's body, an API answer), `name`
    of a cluster-scoped one: the key the operator's cache files it under (`KubeObject.key` once parsed)."""
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace")
    return f"{namespace}/{meta.get('name', '')}" if namespace else str(meta.get("name", ""))


class KubeObject(ApiModel):
    """apiVersion/kind/metadata, the envelope every kind shares."""

    api_version: str | None = None
    kind: str | None = None
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)

    @classmethod
    def from_dict(cls, obj: dict[str, Any]) -> Self:
        return cls.model_validate(obj)

    @property
    def name(self) -> str:
        return self.metadata.name or ""

    @property
    def namespace(self) -> str:
        return self.metadata.namespace or ""

    @property
    def key(self) -> str:
        """`namespace/name`, or `name` for cluster-scoped objects."""
        ns = self.metadata.namespace
        return f"{ns}/{self.name}" if ns else self.name

