"""The admission webhook chain: calls the webhooks of Mutating/ValidatingWebhookConfigurations over HTTPS.

`WebhookChain(api).install()` plugs into `ApiServer.mutating_hooks`/`validating_hooks`, so every
create/update/patch/delete (HTTP or in-process) passes it before persistence. Matching (rules,
scope, namespace/object selectors), AdmissionReview v1, JSON patches, failurePolicy, timeouts,
sideEffects/dryRun and the denial text follow kube-apiserver (k8s.io/apiserver/pkg/admission/plugin/webhook).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp

from devcluster.server.apiserver import AdmissionRequest, ApiServer
from devcluster.server.collecting import NAMESPACES_KEY
from devcluster.server.errors import (
    BAD_REQUEST,
    CAUSE_DUPLICATE,
    CAUSE_INVALID,
    CAUSE_NOT_SUPPORTED,
    CAUSE_REQUIRED,
    INTERNAL_ERROR,
    ApiError,
    Cause,
    field_error,
    invalid,
)
from devcluster.server.faults import Faults
from devcluster.server.patching import PatchError, clone, json_patch
from devcluster.server.selecting import label_selector_matches
from devcluster.webhooking import warning

MUTATING_KEY = ("admissionregistration.k8s.io", "mutatingwebhookconfigurations")
VALIDATING_KEY = ("admissionregistration.k8s.io", "validatingwebhookconfigurations")
REVIEW_API_VERSION = "admission.k8s.io/v1"
DEFAULT_TIMEOUT = 10
MAX_TIMEOUT = 30
DRY_RUN_SAFE = frozenset({"None", "NoneOnDryRun"})
USER_INFO = {"username": "system:admin", "groups": ["system:masters", "system:authenticated"]}
_OPTIONS_KIND = {"CREATE": "CreateOptions", "UPDATE": "UpdateOptions", "DELETE": "DeleteOptions"}
# What admissionregistration/v1 validation accepts (k8s.io/kubernetes/pkg/apis/admissionregistration).
SIDE_EFFECTS_V1 = ("None", "NoneOnDryRun")
FAILURE_POLICIES = ("Fail", "Ignore")
MATCH_POLICIES = ("Exact", "Equivalent")
REINVOCATION_POLICIES = ("IfNeeded", "Never")
OPERATIONS = ("*", "CONNECT", "CREATE", "DELETE", "UPDATE")
SCOPES = ("*", "Cluster", "Namespaced")
REVIEW_VERSIONS = ("v1", "v1beta1")


class WebhookCallError(Exception):
    """Calling the webhook failed (unreachable, TLS, timeout, bad response): failurePolicy decides."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


@dataclass(frozen=True, slots=True)
class Webhook:
    """One webhook of a configuration, with the defaults kube-apiserver applies."""

    configuration: str
    name: str
    client_config: Mapping[str, Any]
    rules: tuple[Mapping[str, Any], ...]
    failure_policy: str
    namespace_selector: Mapping[str, Any] | None
    object_selector: Mapping[str, Any] | None
    side_effects: str
    timeout: int

    @classmethod
    def from_dict(cls, configuration: str, d: Mapping[str, Any]) -> Webhook:
        timeout = d.get("timeoutSeconds")
        return cls(configuration, str(d.get("name", "")), d.get("clientConfig") or {},
                   tuple(d.get("rules") or ()), str(d.get("failurePolicy") or "Fail"),
                   d.get("namespaceSelector"), d.get("objectSelector"), str(d.get("sideEffects") or "Unknown"),
                   min(max(int(timeout), 1), MAX_TIMEOUT) if isinstance(timeout, int) else DEFAULT_TIMEOUT)


# ---------------------------------------------------------------- matching


def _matches_any(values: Any, wanted: str) -> bool:
    items = [str(v) for v in values or []]
    return "*" in items or wanted in items


def _resource_matches(patterns: Any, plural: str, subresource: str) -> bool:
    """`pods` (main only), `pods/status`, `pods/*`, `*` (main resources), `*/status`, `*/*`."""
    for pattern in [str(p) for p in patterns or []]:
        res, _, sub = pattern.partition("/")
        if res not in ("*", plural):
            continue
        if (not sub and not subresource) or sub == "*" or (sub and sub == subresource):
            return True
    return False


def rule_matches(rule: Mapping[str, Any], req: AdmissionRequest) -> bool:
    r = req.resource
    if not _matches_any(rule.get("operations"), req.operation):
        return False
    if not (_matches_any(rule.get("apiGroups"), r.group) and _matches_any(rule.get("apiVersions"), r.version)):
        return False
    if not _resource_matches(rule.get("resources"), r.plural, req.subresource):
        return False
    scope = str(rule.get("scope") or "*")
    # Namespace objects count as cluster-scoped here, as in kube-apiserver.
    namespaced = r.namespaced and r.kind != "Namespace"
    return scope == "*" or (scope == "Namespaced") == namespaced


# ---------------------------------------------------------------- configuration validation


def _supported(path: str, value: Any, allowed: tuple[str, ...]) -> Cause:
    quoted = ", ".join(f'"{a}"' for a in allowed)
    return field_error(path, CAUSE_NOT_SUPPORTED, f"supported values: {quoted}", value, show_value=True)


def configuration_causes(obj: Mapping[str, Any], mutating: bool) -> list[Cause]:
    """Every field error kube-apiserver reports for a v1 Mutating/ValidatingWebhookConfiguration."""
    causes: list[Cause] = []
    seen: set[str] = set()
    for i, hook in enumerate(obj.get("webhooks") or []):
        path = f"webhooks[{i}]"
        if not isinstance(hook, Mapping):
            causes.append(field_error(path, CAUSE_INVALID, "must be an object"))
            continue
        name = str(hook.get("name") or "")
        if name in seen:
            causes.append(field_error(f"{path}.name", CAUSE_DUPLICATE, value=name, show_value=True))
        seen.add(name)
        causes += _webhook_causes(hook, path, mutating)
    return causes


def _webhook_causes(hook: Mapping[str, Any], path: str, mutating: bool) -> list[Cause]:
    """One webhook's own fields: name, review versions, policies, timeout, client config and rules."""
    causes: list[Cause] = []
    name = str(hook.get("name") or "")
    if not name:
        causes.append(field_error(f"{path}.name", CAUSE_REQUIRED))
    elif len(name.split(".")) < 3 or not all(name.split(".")):
        causes.append(field_error(f"{path}.name", CAUSE_INVALID,
                                  "should be a domain with at least three segments separated by dots", name, True))
    versions = [str(v) for v in hook.get("admissionReviewVersions") or []]
    if not versions:
        causes.append(field_error(f"{path}.admissionReviewVersions", CAUSE_REQUIRED,
                                  f"must specify one of {', '.join(REVIEW_VERSIONS)}"))
    elif not set(versions) & set(REVIEW_VERSIONS):
        causes.append(field_error(f"{path}.admissionReviewVersions", CAUSE_INVALID,
                                  f"must include at least one of {', '.join(REVIEW_VERSIONS)}", versions, True))
    side_effects = hook.get("sideEffects")
    if side_effects is None:
        causes.append(field_error(f"{path}.sideEffects", CAUSE_REQUIRED,
                                  f"must specify one of {', '.join(SIDE_EFFECTS_V1)}"))
    elif side_effects not in SIDE_EFFECTS_V1:
        causes.append(_supported(f"{path}.sideEffects", side_effects, SIDE_EFFECTS_V1))
    for key, allowed in (("failurePolicy", FAILURE_POLICIES), ("matchPolicy", MATCH_POLICIES),
                         *([("reinvocationPolicy", REINVOCATION_POLICIES)] if mutating else [])):
        if hook.get(key) is not None and hook.get(key) not in allowed:
            causes.append(_supported(f"{path}.{key}", hook.get(key), allowed))
    timeout = hook.get("timeoutSeconds")
    if timeout is not None and (not isinstance(timeout, int) or not 1 <= timeout <= MAX_TIMEOUT):
        causes.append(field_error(f"{path}.timeoutSeconds", CAUSE_INVALID,
                                  f"the timeout value must be between 1 and {MAX_TIMEOUT} seconds", timeout, True))
    causes += _client_config_causes(hook.get("clientConfig") or {}, f"{path}.clientConfig")
    for j, rule in enumerate(hook.get("rules") or []):
        causes += _rule_causes(rule if isinstance(rule, Mapping) else {}, f"{path}.rules[{j}]")
    return causes


def _client_config_causes(cfg: Mapping[str, Any], path: str) -> list[Cause]:
    """Exactly one of an https `url` or a `service` with name and namespace."""
    url, service = cfg.get("url"), cfg.get("service")
    if bool(url) == bool(service):
        return [field_error(path, CAUSE_REQUIRED, "exactly one of url or service is required")]
    if url:
        if not str(url).startswith("https://"):
            scheme = str(url).split("://", 1)[0] if "://" in str(url) else ""
            return [field_error(f"{path}.url", CAUSE_INVALID, "'https' is the only allowed URL scheme; desired "
                                "format: https://host[/path]", scheme, True)]
        return []
    causes = [field_error(f"{path}.service.{key}", CAUSE_REQUIRED) for key in ("name", "namespace")
              if not (service or {}).get(key)]
    port = (service or {}).get("port")
    if port is not None and (not isinstance(port, int) or not 1 <= port <= 65535):
        causes.append(field_error(f"{path}.service.port", CAUSE_INVALID,
                                  "port is not valid: must be between 1 and 65535, inclusive", port, True))
    return causes


def _rule_causes(rule: Mapping[str, Any], path: str) -> list[Cause]:
    """apiGroups, apiVersions, resources and operations present; known operations and scope."""
    causes = [field_error(f"{path}.{key}", CAUSE_REQUIRED) for key in ("apiGroups", "apiVersions", "resources",
                                                                       "operations") if not rule.get(key)]
    for k, op in enumerate(rule.get("operations") or []):
        if op not in OPERATIONS:
            causes.append(_supported(f"{path}.operations[{k}]", op, OPERATIONS))
    if rule.get("scope") is not None and rule.get("scope") not in SCOPES:
        causes.append(_supported(f"{path}.scope", rule.get("scope"), SCOPES))
    return causes


def _labels(obj: Mapping[str, Any] | None) -> dict[str, str]:
    return dict(((obj or {}).get("metadata") or {}).get("labels") or {})


class WebhookChain:
    """Mutating then validating webhooks from the configurations in the store.

    `services` maps `(namespace, name, port)` of a `clientConfig.service` to a base URL the runner
    serves it at (e.g. `https://127.0.0.1:8443`); the TLS name checked is `<name>.<namespace>.svc`.
    """

    def __init__(self, api: ApiServer, services: dict[tuple[str, str, int], str] | None = None,
                 faults: Faults | None = None) -> None:
        self.api = api
        self.services = services if services is not None else {}
        self.faults = faults
        self._session: aiohttp.ClientSession | None = None
        self._contexts: dict[str, ssl.SSLContext] = {}
        self.calls = 0

    def install(self) -> WebhookChain:
        self.api.mutating_hooks.append(self.mutate)
        self.api.validating_hooks.append(self.validate)
        return self

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    # ---------------------------------------------------------------- hooks

    def _webhooks(self, key: tuple[str, str], req: AdmissionRequest) -> list[Webhook]:
        """Webhooks whose rules and selectors match, configurations in name order (kube-apiserver's)."""
        if req.resource.storage_key in (MUTATING_KEY, VALIDATING_KEY):
            return []  # webhook configurations themselves are never sent to webhooks
        configurations = sorted(self.api.store.items(key), key=lambda o: str(o["metadata"]["name"]))
        out = []
        for cfg in configurations:
            for d in cfg.get("webhooks") or []:
                hook = Webhook.from_dict(str(cfg["metadata"]["name"]), d)
                if any(rule_matches(rule, req) for rule in hook.rules) and self._selected(hook, req):
                    out.append(hook)
        return out

    def _selected(self, hook: Webhook, req: AdmissionRequest) -> bool:
        """namespaceSelector (namespace labels; a Namespace's own labels) and objectSelector (new or old)."""
        if hook.object_selector is not None and not (
                label_selector_matches(hook.object_selector, _labels(req.object))
                or label_selector_matches(hook.object_selector, _labels(req.old_object))):
            return False
        if hook.namespace_selector is None:
            return True
        if req.resource.kind == "Namespace" and not req.resource.group:
            labels = _labels(req.object or req.old_object)
        elif req.resource.namespaced:
            ns = self.api.store.get(NAMESPACES_KEY, ("", req.namespace))
            labels = _labels(ns)
        else:
            return True  # cluster-scoped objects ignore namespaceSelector
        return label_selector_matches(hook.namespace_selector, labels)

    async def mutate(self, req: AdmissionRequest) -> dict[str, Any] | ApiError:
        """Each matching mutating webhook in turn; its JSON patch applies to what the next one sees.
        A DELETE has no object to patch: the old one is reviewed, and a patch is an internal error."""
        if req.object is None:
            return await self._mutate_delete(req)
        obj = req.object
        for hook in self._webhooks(MUTATING_KEY, req):
            current = AdmissionRequest(req.operation, req.resource, req.subresource, req.namespace, req.name,
                                       obj, req.old_object, req.dry_run, req.uid)
            response = await self._admit_one(hook, current)
            if isinstance(response, ApiError):
                return response
            if response is None:
                continue
            patched = _apply_patch(hook, obj, response)
            if isinstance(patched, ApiError):
                return patched
            obj = patched
        return obj

    async def _mutate_delete(self, req: AdmissionRequest) -> dict[str, Any] | ApiError:
        assert req.old_object is not None
        for hook in self._webhooks(MUTATING_KEY, req):
            response = await self._admit_one(hook, req)
            if isinstance(response, ApiError):
                return response
            if response is not None and response.get("patch"):
                return ApiError(500, INTERNAL_ERROR, f'Internal error occurred: admission webhook "{hook.name}" '
                                "attempted to modify the object, which is not supported for this operation")
        return req.old_object

    async def validate(self, req: AdmissionRequest) -> ApiError | None:
        """All matching validating webhooks at once (as kube-apiserver); the first denial in order wins.
        Webhook configurations themselves get kube-apiserver's field validation here instead."""
        key = req.resource.storage_key
        if key in (MUTATING_KEY, VALIDATING_KEY) and req.object is not None:
            causes = configuration_causes(req.object, mutating=key == MUTATING_KEY)
            return invalid(req.resource.kind, req.resource.group, req.name, causes) if causes else None
        hooks = self._webhooks(VALIDATING_KEY, req)
        if not hooks:
            return None
        results = await asyncio.gather(*(self._admit_one(h, req) for h in hooks))
        for result in results:
            if isinstance(result, ApiError):
                return result
        return None

    # ---------------------------------------------------------------- one call

    async def _admit_one(self, hook: Webhook, req: AdmissionRequest) -> dict[str, Any] | ApiError | None:
        """The webhook's allowed response, its denial as an ApiError, or None when skipped (Ignore)."""
        if req.dry_run and hook.side_effects not in DRY_RUN_SAFE:
            return ApiError(400, BAD_REQUEST, f'admission webhook "{hook.name}" does not support dry run')
        try:
            response = await self._call(hook, req)
        except WebhookCallError as e:
            if hook.failure_policy == "Ignore":
                return None
            return ApiError(500, INTERNAL_ERROR,
                            f'Internal error occurred: failed calling webhook "{hook.name}": {e.detail}')
        for text in response.get("warnings") or []:
            warning.add(str(text))  # also when denied: kube-apiserver records them before the verdict
        if not response.get("allowed"):
            return denial(hook.name, response.get("status") or {})
        return response

    async def _call(self, hook: Webhook, req: AdmissionRequest) -> dict[str, Any]:
        """POST the AdmissionReview; a WebhookCallError for anything but a well-formed response."""
        url, server_name = self._url(hook)
        shown = f'Post "{url}?timeout={hook.timeout}s"'
        self.calls += 1
        if self.faults is not None and self.faults.webhook_times_out(hook.name):
            raise WebhookCallError(f"failed to call webhook: {shown}: context deadline exceeded")
        try:
            context = self._context(hook)
            session = self._client()
            async with session.post(url, params={"timeout": f"{hook.timeout}s"}, json=review(req),
                                    ssl=context, server_hostname=server_name,
                                    timeout=aiohttp.ClientTimeout(total=hook.timeout)) as resp:
                if resp.status != 200:
                    raise WebhookCallError(f"failed to call webhook: the server responded with status {resp.status}")
                body = await resp.json(content_type=None)
        except WebhookCallError:
            raise
        except TimeoutError:
            raise WebhookCallError(f"failed to call webhook: {shown}: context deadline exceeded") from None
        except (aiohttp.ClientError, OSError, ssl.SSLError, ValueError) as e:
            raise WebhookCallError(f"failed to call webhook: {shown}: {e}") from None
        return _response(body, req.uid)

    def _url(self, hook: Webhook) -> tuple[str, str | None]:
        cfg = hook.client_config
        if cfg.get("url"):
            return str(cfg["url"]), None
        service = cfg.get("service") or {}
        ns, name, port = str(service.get("namespace", "")), str(service.get("name", "")), int(service.get("port") or 443)
        base = self.services.get((ns, name, port))
        if base is None:
            raise WebhookCallError(f'failed to call webhook: service "{name}" not found in namespace "{ns}" '
                                   f"(no URL registered for port {port})")
        return base.rstrip("/") + str(service.get("path") or "/"), f"{name}.{ns}.svc"

    def _context(self, hook: Webhook) -> ssl.SSLContext:
        bundle = str(hook.client_config.get("caBundle") or "")
        context = self._contexts.get(bundle)
        if context is None:
            try:
                cadata = base64.b64decode(bundle, validate=True).decode() if bundle else None
                context = ssl.create_default_context(cadata=cadata)
            except (binascii.Error, UnicodeDecodeError, ssl.SSLError) as e:
                raise WebhookCallError(f"failed to call webhook: invalid caBundle: {e}") from None
            self._contexts[bundle] = context
        return context

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession()
        return self._session


def review(req: AdmissionRequest) -> dict[str, Any]:
    """The AdmissionReview v1 request kube-apiserver sends."""
    r = req.resource
    kind = {"group": r.group, "version": r.version, "kind": r.kind}
    resource = {"group": r.group, "version": r.version, "resource": r.plural}
    request: dict[str, Any] = {
        "uid": req.uid, "kind": kind, "resource": resource, "requestKind": kind, "requestResource": resource,
        "name": req.name, "operation": req.operation, "userInfo": USER_INFO,
        "object": req.object, "oldObject": req.old_object, "dryRun": req.dry_run,
        "options": {"kind": _OPTIONS_KIND.get(req.operation, "CreateOptions"), "apiVersion": "meta.k8s.io/v1"},
    }
    if req.subresource:
        request["subResource"] = request["requestSubResource"] = req.subresource
    if r.namespaced:
        request["namespace"] = req.namespace
    return {"apiVersion": REVIEW_API_VERSION, "kind": "AdmissionReview", "request": request}


def _response(body: Any, uid: str) -> dict[str, Any]:
    if not isinstance(body, dict) or body.get("kind") != "AdmissionReview":
        raise WebhookCallError("failed to call webhook: the response is not an AdmissionReview")
    if body.get("apiVersion") != REVIEW_API_VERSION:
        raise WebhookCallError(f'failed to call webhook: expected webhook response of admission.k8s.io/v1, '
                               f'got {body.get("apiVersion")}')
    response = body.get("response")
    if not isinstance(response, dict):
        raise WebhookCallError("failed to call webhook: webhook response was absent")
    if response.get("uid") != uid:
        raise WebhookCallError(f"failed to call webhook: expected response.uid={uid!r}, "
                               f"got {response.get('uid')!r}")
    return response


def denial(name: str, status: Mapping[str, Any]) -> ApiError:
    """A webhook's `allowed: false` as kube-apiserver returns it (webhookerrors.ToStatusErr)."""
    denied = f'admission webhook "{name}" denied the request'
    code = int(status.get("code") or 0)
    if code < 400:
        code = 403
    reason = str(status.get("reason") or "")
    if status.get("message"):
        message = f"{denied}: {status['message']}"
    elif reason:
        message = f"{denied}: {reason}"
    else:
        message = f"{denied} without explanation"
    details = status.get("details") or {}
    causes = [Cause(str(cd.get("field", "")), str(cd.get("reason", "")), str(cd.get("message", "")))
              for cd in details.get("causes") or [] if isinstance(cd, Mapping)]
    return ApiError(code, reason, message, kind=str(details.get("kind", "")), name=str(details.get("name", "")),
                    group=str(details.get("group", "")), causes=causes)


def _apply_patch(hook: Webhook, obj: dict[str, Any], response: Mapping[str, Any]) -> dict[str, Any] | ApiError:
    """The response's base64 JSONPatch applied to `obj` (a broken patch is an internal error)."""
    raw = response.get("patch")
    if not raw:
        return obj
    if response.get("patchType") != "JSONPatch":
        return ApiError(500, INTERNAL_ERROR, f'Internal error occurred: admission webhook "{hook.name}": '
                        f'unsupported patch type "{response.get("patchType")}"')
    try:
        ops = json.loads(base64.b64decode(str(raw), validate=True))
        patched = json_patch(clone(obj), ops)
    except (binascii.Error, ValueError, PatchError) as e:
        return ApiError(500, INTERNAL_ERROR, f"Internal error occurred: {e}")
    if not isinstance(patched, dict):
        return ApiError(500, INTERNAL_ERROR, "Internal error occurred: the patched object is not an object")
    return patched
