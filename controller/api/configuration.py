"""Kueue's Configuration file (kind Configuration, group config.kueue.x-k8s.io, v1beta1 or v1beta2)
as far as tasq acts on it: `waitForPodsReady`, with Kueue's defaults for the version the file names.

Pure: `parse_configuration` turns the file's text into a `Configuration` or raises
`ConfigurationError` listing every problem with its field path. Read by `tasq run --config`,
`tasq dev`, `tasq demo` and `tasq simulate`; the operator gets the result through `OperatorOptions`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any, Final, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic.alias_generators import to_camel

GROUP: Final = "config.kueue.x-k8s.io"
KIND: Final = "Configuration"
VERSIONS: Final = ("v1beta1", "v1beta2")

TIMESTAMP_EVICTION: Final = "Eviction"
TIMESTAMP_CREATION: Final = "Creation"
RequeuingTimestamp = Literal["Eviction", "Creation"]

V1BETA1_TIMEOUT_S: Final = 300.0
"""Kueue's v1beta1 default `waitForPodsReady.timeout` (5m)."""
V1BETA2_TIMEOUT_S: Final = 1800.0
"""Kueue's v1beta2 default `waitForPodsReady.timeout` (30m)."""
BACKOFF_BASE_S: Final = 60
BACKOFF_MAX_S: Final = 3600

KUEUE_FIELDS: Final = frozenset({
    "namespace", "manageJobsWithoutQueueName", "managedJobsNamespaceSelector", "internalCertManagement",
    "clientConnection", "integrations", "queueVisibility", "multiKueue", "fairSharing", "admissionFairSharing",
    "resources", "featureGates", "objectRetentionPolicies", "health", "metrics", "webhook", "leaderElection",
    "controller", "pprofBindAddress", "visibility", "controllerManager",
})
"""Kueue's other top-level fields: accepted (a Kueue file applies unchanged) but not acted on by tasq."""

_DURATION = re.compile(r"^(?:(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h))+$")
_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_UNIT_S: Final = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str) -> float:
    """Go's `time.ParseDuration` as metav1.Duration reads it (`90s`, `5m`, `1h30m`, `0s`; a leading
    `-` for negative), in seconds. ValueError naming what is allowed."""
    body = text[1:] if text.startswith(("-", "+")) else text
    if body == "0":
        return 0.0
    if not _DURATION.match(body):
        raise ValueError(f"{text!r} is not a duration: want a number with a unit (ns, us, ms, s, m, h), "
                         f"e.g. 90s, 5m, 1h30m")
    seconds = sum(float(n) * _UNIT_S[u] for n, u in _DURATION_PART.findall(body))
    return -seconds if text.startswith("-") else seconds


class _Strict(BaseModel):
    """A section of the file: camelCase names only, unknown fields refused (a typo is never ignored)."""

    model_config = ConfigDict(alias_generator=to_camel, validate_by_name=False, validate_by_alias=True,
                              extra="forbid", frozen=True, strict=True)


def _duration(value: Any) -> float | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError(f"want a duration string such as 5m or 30s, got {type(value).__name__}")
    return parse_duration(value)


class _RequeuingStrategyFile(_Strict):
    timestamp: str | None = None
    backoff_limit_count: int | None = None
    backoff_base_seconds: int | None = None
    backoff_max_seconds: int | None = None


class _WaitForPodsReadyFile(_Strict):
    enable: bool | None = None
    timeout: float | None = None
    recovery_timeout: float | None = None
    block_admission: bool | None = None
    requeuing_strategy: _RequeuingStrategyFile | None = None

    @field_validator("timeout", "recovery_timeout", mode="before")
    @classmethod
    def _durations(cls, value: Any) -> float | None:
        return _duration(value)


class RequeuingStrategy(BaseModel):
    """How a Workload evicted for PodsReady is queued again (Kueue's `requeuingStrategy`, defaulted)."""

    model_config = ConfigDict(frozen=True)

    timestamp: RequeuingTimestamp = TIMESTAMP_EVICTION
    """Which time orders it in its queue: its eviction (default) or its creation."""
    backoff_limit_count: int | None = None
    """Requeues before it is deactivated; None: requeued for ever."""
    backoff_base_seconds: int = BACKOFF_BASE_S
    backoff_max_seconds: int = BACKOFF_MAX_S


class WaitForPodsReady(BaseModel):
    """Kueue's `waitForPodsReady`, every default applied: an admitted Workload whose pods are not all
    ready (or succeeded) within `timeout_s` is evicted and requeued with backoff."""

    model_config = ConfigDict(frozen=True)

    timeout_s: float = V1BETA2_TIMEOUT_S
    recovery_timeout_s: float | None = V1BETA2_TIMEOUT_S
    """After a Workload once ready loses a pod; None (or 0s in the file): not checked."""
    block_admission: bool = False
    """While an admitted Workload is not yet ready, admit nothing else (across ClusterQueues)."""
    requeuing_strategy: RequeuingStrategy = Field(default_factory=RequeuingStrategy)


class Configuration(BaseModel):
    """The parsed file; `wait_for_pods_ready` None means the feature is off."""

    model_config = ConfigDict(frozen=True)

    api_version: str = f"{GROUP}/v1beta2"
    wait_for_pods_ready: WaitForPodsReady | None = None


class ConfigurationError(ValueError):
    """A Configuration file tasq cannot use; `errors` holds one `path: what is wrong` line each."""

    def __init__(self, source: str, errors: list[str]) -> None:
        self.source, self.errors = source, errors
        super().__init__(f"{source}: " + "; ".join(errors))


def parse_configuration(text: str, source: str = "configuration") -> Configuration:
    """The Configuration in `text` (YAML or JSON, one document). Raises ConfigurationError with
    every problem found, each with its field path; nothing is half-applied."""
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise ConfigurationError(source, [f"not valid YAML{where}: {getattr(e, 'problem', None) or e}"]) from None
    if not isinstance(doc, Mapping):
        raise ConfigurationError(source, [f"want a mapping (kind: {KIND}), got {type(doc).__name__}"])
    return configuration_from(doc, source)


def configuration_from(doc: Mapping[str, Any], source: str = "configuration") -> Configuration:
    """The Configuration of one parsed document; see `parse_configuration`."""
    errors = _header_errors(doc)
    unknown = sorted(str(k) for k in doc if k not in KUEUE_FIELDS | {"apiVersion", "kind", "waitForPodsReady"})
    errors += [f"{k}: unknown field (Kueue's Configuration has no such field)" for k in unknown]
    raw = doc.get("waitForPodsReady")
    section: _WaitForPodsReadyFile | None = None
    if raw is not None:
        try:
            section = _WaitForPodsReadyFile.model_validate(raw)
        except ValidationError as e:
            errors += [_error_line(err) for err in e.errors()]
    version = str(doc.get("apiVersion", "")).rpartition("/")[2]
    if section is not None and section.enable is not None and version == "v1beta2":
        errors.append("waitForPodsReady.enable: not in v1beta2 (the section's presence enables it); "
                      "remove it, or use apiVersion config.kueue.x-k8s.io/v1beta1")
    if errors:
        raise ConfigurationError(source, errors)
    settings = _defaulted(version, section)
    if settings is not None:
        errors += _value_errors(settings, section)
    if errors:
        raise ConfigurationError(source, errors)
    return Configuration(api_version=str(doc["apiVersion"]), wait_for_pods_ready=settings)


def _header_errors(doc: Mapping[str, Any]) -> list[str]:
    errors = []
    allowed = ", ".join(f"{GROUP}/{v}" for v in VERSIONS)
    if doc.get("apiVersion") not in {f"{GROUP}/{v}" for v in VERSIONS}:
        errors.append(f"apiVersion: {doc.get('apiVersion')!r} is not supported; want one of {allowed}")
    if doc.get("kind") != KIND:
        errors.append(f"kind: {doc.get('kind')!r}; want {KIND}")
    return errors


def _error_line(err: Mapping[str, Any]) -> str:
    """One pydantic error as `waitForPodsReady.path: message`."""
    path = ".".join(["waitForPodsReady", *(str(p) for p in err["loc"])])
    message = str(err["msg"]).removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        message = "unknown field"
    return f"{path}: {message}"


def _defaulted(version: str, section: _WaitForPodsReadyFile | None) -> WaitForPodsReady | None:
    """Kueue's defaulting per version. v1beta1: on only with `enable: true`; timeout 5m,
    blockAdmission true. v1beta2: always on (Kueue's default since the field lost `enable`),
    timeout 30m, blockAdmission false. Both: recoveryTimeout defaults to timeout, 0s turns it off."""
    if version == "v1beta1" and (section is None or not section.enable):
        return None
    section = section if section is not None else _WaitForPodsReadyFile()
    v1beta1 = version == "v1beta1"
    timeout = section.timeout if section.timeout else (V1BETA1_TIMEOUT_S if v1beta1 else V1BETA2_TIMEOUT_S)
    recovery = section.recovery_timeout if section.recovery_timeout is not None else timeout
    strategy = section.requeuing_strategy or _RequeuingStrategyFile()
    timestamp = strategy.timestamp or TIMESTAMP_EVICTION
    return WaitForPodsReady(
        timeout_s=timeout, recovery_timeout_s=recovery if recovery != 0 else None,
        block_admission=section.block_admission if section.block_admission is not None else v1beta1,
        requeuing_strategy=RequeuingStrategy(
            timestamp=timestamp if timestamp in (TIMESTAMP_EVICTION, TIMESTAMP_CREATION) else TIMESTAMP_EVICTION,
            backoff_limit_count=strategy.backoff_limit_count,
            backoff_base_seconds=strategy.backoff_base_seconds if strategy.backoff_base_seconds else BACKOFF_BASE_S,
            backoff_max_seconds=strategy.backoff_max_seconds if strategy.backoff_max_seconds else BACKOFF_MAX_S))


def _value_errors(settings: WaitForPodsReady, section: _WaitForPodsReadyFile | None) -> list[str]:
    """Kueue's validation of the section: no negative durations or counts, a known timestamp."""
    errors = []
    path = "waitForPodsReady"
    if settings.timeout_s < 0 or not math.isfinite(settings.timeout_s):
        errors.append(f"{path}.timeout: must be greater than or equal to 0")
    if section is not None and section.recovery_timeout is not None and section.recovery_timeout < 0:
        errors.append(f"{path}.recoveryTimeout: must be greater than or equal to 0")
    strategy = section.requeuing_strategy if section is not None else None
    if strategy is not None:
        if strategy.timestamp is not None and strategy.timestamp not in (TIMESTAMP_EVICTION, TIMESTAMP_CREATION):
            errors.append(f"{path}.requeuingStrategy.timestamp: {strategy.timestamp!r} is not supported; "
                          f"want {TIMESTAMP_EVICTION} or {TIMESTAMP_CREATION}")
        for name, value in (("backoffLimitCount", strategy.backoff_limit_count),
                            ("backoffBaseSeconds", strategy.backoff_base_seconds),
                            ("backoffMaxSeconds", strategy.backoff_max_seconds)):
            if value is not None and value < 0:
                errors.append(f"{path}.requeuingStrategy.{name}: {value} must be greater than or equal to 0")
    return errors
