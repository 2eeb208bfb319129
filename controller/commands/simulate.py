"""`tasq simulate`: what-if admission on manifests, no cluster needed.

Reads each `-f FILE|DIR|-` as one step (multi-document YAML or JSON, `kind: List` expanded), checks
every object (webhook validators; core kinds here), applies the steps to a `Simulation`, and prints
the Workloads as a table (`kubectl get workloads` plus FLAVOR and PLACEMENT) or a `kind: List`.
Exit codes: 0 done, 2 invalid input (every error as `file:document: path: message`).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import yaml

from controller.api import constants as c
from controller.api.workload import Workload
from controller.core.simulating import Simulation, is_known
from webhooks.validation import FieldError, formats, placement, shapes, validate
from webhooks.validation.errors import ROOT, required
from webhooks.validation.meta import METADATA, object_meta
from webhooks.validation.pod_templates import pod_template

_SUFFIXES = (".yaml", ".yml", ".json")
_COLUMNS = ("NAMESPACE", "NAME", "QUEUE", "RESERVED IN", "ADMITTED", "FINISHED", "FLAVOR", "PLACEMENT")


@dataclass(frozen=True, slots=True)
class Document:
    """One object and where it came from: `file:document` plus the List item path when expanded."""

    origin: str
    item: str
    obj: Any

    def where(self, path: str) -> str:
        inner = f"{self.item}.{path}" if self.item and path else (self.item or path)
        return f"{self.origin}: {inner}" if inner else self.origin


class InputError(Exception):
    """A file that cannot be read or parsed; carries the origin and the parser's message."""

    def __init__(self, origin: str, problem: str) -> None:
        super().__init__(f"{origin}: {problem}")
        self.origin = origin
        self.problem = problem


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "simulate", help="what-if: run admission on manifests (Nodes, Pods, queues, Jobs...) offline",
        description="Each -f is one step, applied in order; admission runs until quiet after each. "
                    "A Workload given with status.admission keeps its quota and nodes (slices naming a "
                    "rack or block take that domain's nodes); a Job changed in a later step rebuilds "
                    "its Workload while that waits, never once admitted.")
    parser.add_argument("-f", "--filename", dest="files", action="append", required=True,
                        metavar="FILE|DIR|-", help="manifests to apply (repeatable; - reads stdin)")
    parser.add_argument("-o", "--output", choices=("table", "yaml", "json"), default="table",
                        help="table (default) or the Workloads as a kind: List")
    parser.add_argument("--explain", action="store_true", help="print why each pending Workload waits")
    parser.set_defaults(handler=run)


def _files(spec: str) -> list[Path]:
    path = Path(spec)
    if path.is_dir():
        return sorted(p for p in path.iterdir() if p.is_file() and p.suffix in _SUFFIXES)
    return [path]


def _parse(origin: str, text: str) -> Iterator[Document]:
    """Documents of one file; `kind: List` (and `*List`) items become documents of their own."""
    try:
        loaded = list(yaml.load_all(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)))
    except yaml.YAMLError as err:
        raise InputError(origin, f"not YAML or JSON: {err}".replace("\n", " ")) from err
    for index, doc in enumerate(loaded, start=1):
        if doc is not None:
            yield from _flatten(f"{origin}:{index}", "", doc)


def _flatten(where: str, item: str, obj: Any) -> Iterator[Document]:
    """A List's items (Lists nested in Lists too, as kubectl flattens them) or the object itself."""
    if isinstance(obj, dict) and str(obj.get("kind", "")).endswith("List") and "items" in obj:
        for i, child in enumerate(obj.get("items") or []):
            yield from _flatten(where, f"{item}.items[{i}]" if item else f"items[{i}]", child)
    else:
        yield Document(where, item, obj)


def read_step(spec: str, stdin: TextIO) -> list[Document]:
    """Every document of one -f argument (a file, the sorted files of a directory, or stdin)."""
    if spec == "-":
        return list(_parse("<stdin>", stdin.read()))
    docs: list[Document] = []
    for path in _files(spec):
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as err:
            raise InputError(str(path), err.strerror or str(err)) from err
        docs.extend(_parse(str(path), text))
    return docs


def check(docs: Sequence[Document]) -> tuple[list[str], list[str]]:
    """(errors, notes): every validation error with its origin; unknown kinds to skip."""
    errors: list[str] = []
    notes: list[str] = []
    for doc in docs:
        if not isinstance(doc.obj, dict):
            errors.append(f"{doc.where('')}: not an object")
            continue
        if not is_known(doc.obj):
            kind = f"{doc.obj.get('apiVersion', '?')} {doc.obj.get('kind', '?')}"
            notes.append(f"{doc.where('')}: skipping unknown kind {kind}")
            continue
        for err in [*validate(doc.obj), *core_object_errors(doc.obj)]:
            errors.append(f"{doc.where(err.path)}: {err.message}")
    return errors, notes


def core_object_errors(obj: dict[str, Any]) -> list[FieldError]:
    """The core kinds tasq reads but its webhooks leave alone (Node, Pod, Namespace,
    PriorityClass): what simulation parses must be valid, so a bad manifest is an error with its
    field path instead of a crash. Names; node labels, taints and quantities; pod specs; values."""
    kind = obj.get("kind")
    if obj.get("apiVersion") not in ("v1", "scheduling.k8s.io/v1") or kind == c.KIND_WORKLOAD:
        return []
    errs: list[FieldError] = []
    meta = object_meta(obj, errs)
    shapes.string_map(meta, "labels", METADATA.child("labels"), errs)
    if kind == "Node":
        status_path, spec_path = ROOT.child("status"), ROOT.child("spec")
        status = shapes.mapping(obj, "status", status_path, errs)
        for key in ("allocatable", "capacity"):
            amounts = shapes.mapping(status, key, status_path.child(key), errs) or {}
            for resource in sorted(amounts, key=str):
                errs.extend(formats.quantity(status_path.child(key).key(str(resource)), amounts[resource]))
        spec = shapes.mapping(obj, "spec", spec_path, errs)
        errs.extend(placement.taints(spec_path.child("taints"),
                                     shapes.sequence(spec, "taints", spec_path.child("taints"), errs)))
    elif kind == "Pod":
        errs.extend(pod_template(ROOT, obj))
    elif kind == "PriorityClass" and shapes.integer(obj, "value", ROOT.child("value"), errs) is None \
            and "value" not in obj:
        errs.append(required(ROOT.child("value")))
    return errs


def run(args: argparse.Namespace) -> int:
    """Read every step, validate everything before simulating anything, then apply and run each step."""
    steps: list[list[Document]] = []
    try:
        for spec in args.files:
            steps.append(read_step(spec, sys.stdin))
    except InputError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    errors: list[str] = []
    for docs in steps:
        step_errors, notes = check(docs)
        errors.extend(step_errors)
        for note in notes:
            print(note, file=sys.stderr)
    if errors:
        for line in errors:
            print(f"error: {line}", file=sys.stderr)
        print(f"{len(errors)} error(s); nothing simulated", file=sys.stderr)
        return 2
    sim = Simulation()
    for docs in steps:
        sim.apply(d.obj for d in docs if is_known(d.obj))
        sim.run()
    _print(sim, args.output, args.explain)
    return 0


def _print(sim: Simulation, output: str, with_explain: bool) -> None:
    """The table or the kind: List; explanations follow the table (or go to stderr for -o yaml|json)."""
    workloads = sim.workloads()
    explain_to = sys.stdout
    if output == "table":
        sys.stdout.write(render_table(workloads))
    else:
        items = [w.to_dict() for w in workloads]
        listing = {"apiVersion": "v1", "kind": "List", "items": items, "metadata": {"resourceVersion": ""}}
        if output == "json":
            sys.stdout.write(json.dumps(listing, indent=4) + "\n")
        else:
            sys.stdout.write(yaml.safe_dump(listing, sort_keys=True, default_flow_style=False))
        explain_to = sys.stderr  # keep stdout parseable
    if with_explain:
        for why in sim.explanations():
            print(f"{why.key}: {why.detail}: {why.message}", file=explain_to)


def _condition(w: Workload, type_: str) -> str:
    cond = w.condition(type_)
    return cond.status if cond is not None else ""


def placement_summary(w: Workload) -> str:
    """`b1/r3:6 b1/r4:2` per pod set: slice label values in level order; hostname slices are summed
    into their parent domain when there is one (the full form is in `-o yaml`)."""
    admission = w.admission
    if admission is None:
        return ""
    parts = []
    for psa in admission.pod_set_assignments:
        counts: dict[str, int] = {}
        for sl in psa.topology_assignment.slices if psa.topology_assignment else []:
            values = [v for k, v in sl.node_labels.items() if k != c.LABEL_HOSTNAME] or \
                list(sl.node_labels.values())
            path = "/".join(values)
            counts[path] = counts.get(path, 0) + sl.count
        text = " ".join(f"{path}:{n}" for path, n in counts.items()) or "-"
        parts.append(text if len(admission.pod_set_assignments) == 1 else f"{psa.name}({text})")
    return " ".join(parts)


def render_table(workloads: Sequence[Workload]) -> str:
    rows = [_COLUMNS]
    for w in workloads:
        admission = w.admission if w.has_quota_reservation else None
        flavors = sorted({f for psa in (admission.pod_set_assignments if admission else [])
                          for f in psa.flavors.values()})
        rows.append((w.namespace, w.name, w.queue_name, admission.cluster_queue if admission else "",
                     _condition(w, c.CONDITION_ADMITTED), _condition(w, c.CONDITION_FINISHED),
                     ",".join(flavors), placement_summary(w) if admission else ""))
    widths = [max(len(r[i]) for r in rows) for i in range(len(_COLUMNS))]
    return "".join("   ".join(cell.ljust(widths[i]) for i, cell in enumerate(r)).rstrip() + "\n" for r in rows)
