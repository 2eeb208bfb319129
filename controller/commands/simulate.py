"""`tasq simulate`: what-if admission on manifests, no cluster needed.

Reads each `-f FILE|DIR|-` as one step (multi-document YAML or JSON, `kind: List` expanded), passes
every object through the boundary (`manifests.documents`, `manifests.kube_objects`), applies the steps
to a `Simulation` only when no step has an error, and prints the Workloads as a table (`kubectl get
workloads` plus FLAVOR, PLACEMENT and the reason a pending one waits for, then the preemptions: victim, preemptor, reason) or a `kind:
List` in v1beta2 (`--api-version` for v1beta1; victims carry Kueue's Evicted/Preempted conditions;
`preemptions` lists them). tasq's kinds may be written in any served version, mixed (converted to
v1beta2 at the boundary, errors named in the version written). A document of a kind tasq does not
read is skipped with a warning on stderr (and in the List's `warnings`). Exit codes: 0 done, 2 invalid
input (every error as `file:document: path: message`), 1 a Workload that cannot be printed in the
version asked for.
"""

from __future__ import annotations

import argparse
import errno
import functools
import json
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import yaml

from controller.api import constants as c
from controller.api.conversion import ConversionFailure, convert, served_versions
from controller.api.features import FLAG_HELP, FeatureGateError, parse_feature_gates
from controller.api.workload import Workload
from controller.core.simulating import PreemptionRecord, Simulation
from controller.manifests.documents import MAX_INPUT_BYTES, decode, parse_documents
from controller.manifests.kube_objects import check_object

_SUFFIXES = (".yaml", ".yml", ".json")
_COLUMNS = ("NAMESPACE", "NAME", "QUEUE", "RESERVED IN", "ADMITTED", "FINISHED", "FLAVOR", "PLACEMENT", "WAITS FOR")


SKIPPED_MESSAGE = "skipped: tasq does not read this kind"
OUTPUT_API_VERSIONS = served_versions(c.KIND_WORKLOAD)
"""What -o yaml|json can print Workloads as: v1beta2 (the hub, default) or v1beta1."""


@dataclass(frozen=True, slots=True)
class Skipped:
    """A document of a kind tasq does not read: where it is and what it is."""

    file: str
    document: int
    item: str
    """The List item path (`items[2]`) when the document came from a List, else ""."""
    api_version: str
    kind: str

    @property
    def line(self) -> str:
        where = f"{self.file}:{self.document}" + (f": {self.item}" if self.item else "")
        return f"{where}: {SKIPPED_MESSAGE} ({self.api_version} {self.kind})"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"file": self.file, "document": self.document}
        if self.item:
            out["item"] = self.item
        out.update({"apiVersion": self.api_version, "kind": self.kind, "message": SKIPPED_MESSAGE})
        return out


@dataclass(slots=True)
class Step:
    """One -f argument after the boundary: the objects to apply, every error, the skipped documents."""

    objects: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "simulate", help="what-if: run admission on manifests (Nodes, Pods, queues, Jobs...) offline",
        description="Each -f is one step, applied in order; admission runs until quiet after each. "
                    "A Workload given with status.admission keeps its quota and nodes (slices naming a "
                    "rack or block take that domain's nodes); a Job or Workload changed in a later step "
                    "updates the Workload while it waits, never once admitted; objects with "
                    "metadata.generateName get a generated name (seeded, so runs repeat). Input is "
                    "checked as the API server would (kubectl's strict field validation); a document of "
                    "a kind tasq does not read is skipped with a warning.")
    parser.add_argument("-f", "--filename", dest="files", action="append", required=True,
                        metavar="FILE|DIR|-", help="manifests to apply (repeatable; - reads stdin)")
    parser.add_argument("-o", "--output", choices=("table", "yaml", "json"), default="table",
                        help="table (default) or the Workloads as a kind: List")
    parser.add_argument("--api-version", choices=OUTPUT_API_VERSIONS, default=c.API_VERSION,
                        help=f"the version the Workloads of -o yaml|json are printed in (default {c.API_VERSION}; "
                             "the table is the same in both); input may mix every served version")
    parser.add_argument("--explain", action="store_true",
                        help="print why each pending Workload waits")
    parser.add_argument("--feature-gates", default="", metavar="NAME=true|false,...",
                        help=FLAG_HELP)
    parser.set_defaults(handler=run)


def _files(spec: str) -> list[Path]:
    path = Path(spec)
    if path.is_dir():
        return sorted(p for p in path.iterdir() if p.is_file() and p.suffix in _SUFFIXES)
    return [path]


def read_step(spec: str, stdin: TextIO) -> Step:
    """Every document of one -f argument (a file, the sorted files of a directory, or stdin), each
    checked at the boundary as soon as it is parsed so only the kept fields stay in memory."""
    step = Step()
    if spec == "-":
        _check_into(step, "<stdin>", *_text(lambda: _stdin_bytes(stdin)))
        return step
    for path in _files(spec):
        _check_into(step, str(path), *_text(functools.partial(_file_bytes, path)))
    return step


def _file_bytes(path: Path) -> bytes:
    """The file's bytes; one larger than the boundary accepts is refused before it is read."""
    size = path.stat().st_size
    if size > MAX_INPUT_BYTES:
        raise OSError(errno.EFBIG, f"{size} bytes is more than the {MAX_INPUT_BYTES} accepted")
    return path.read_bytes()


def _stdin_bytes(stdin: TextIO) -> bytes:
    buffer = getattr(stdin, "buffer", None)
    return buffer.read() if buffer is not None else stdin.read().encode()


def _text(read: Callable[[], bytes]) -> tuple[str | None, str | None]:
    """(text, problem) of one input; its bytes are released as soon as they are decoded."""
    try:
        data = read()
    except OSError as err:
        return None, err.strerror or str(err)
    return decode(data)


def _check_into(step: Step, origin: str, text: str | None, problem: str | None) -> None:
    """Parse and check one input document by document, keeping what the boundary returns."""
    if text is None:
        step.errors.append(f"{origin}: {problem}")
        return
    for doc in parse_documents(origin, text):
        if isinstance(doc, str):
            step.errors.append(doc)
            continue
        checked = check_object(doc.obj)
        step.errors.extend(doc.where(err.path) + f": {err.message}" for err in checked.errors)
        if checked.obj is not None:
            step.objects.append(checked.obj)
        elif checked.ignored:
            file, _, number = doc.origin.rpartition(":")  # an origin is always `file:document`
            step.skipped.append(Skipped(file, int(number), doc.item, doc.obj["apiVersion"], doc.obj["kind"]))


def run(args: argparse.Namespace) -> int:
    """Read every step, validate everything before simulating anything, then apply and run each step."""
    try:
        features = parse_feature_gates(args.feature_gates)
    except FeatureGateError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    steps = [read_step(spec, sys.stdin) for spec in args.files]
    skipped = [doc for step in steps for doc in step.skipped]
    for doc in skipped:
        print(f"warning: {_printable(doc.line)}", file=sys.stderr)
    errors = [line for step in steps for line in step.errors]
    if errors:
        for line in errors:
            print(f"error: {_printable(line)}", file=sys.stderr)
        print(f"{len(errors)} error(s); nothing simulated", file=sys.stderr)
        return 2
    sim = Simulation(features=features)
    for step in steps:
        sim.apply(step.objects)
        step.objects = []
        sim.run()
    for (kind, namespace, name), why in sorted(sim.refused_jobs.items()):
        print(f"warning: {kind} {namespace}/{name}: {why}", file=sys.stderr)
    return _print(sim, args.output, args.api_version, args.explain, skipped)


_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def _printable(line: str) -> str:
    """One line whatever the input held: control characters (in keys or values) escaped."""
    return _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), line)


def _print(sim: Simulation, output: str, api_version: str, with_explain: bool, skipped: Sequence[Skipped]) -> int:
    """The table or the kind: List of Workloads in `api_version` (with `warnings`, one per skipped
    document, when there are any); explanations follow the table, or go to stderr for -o yaml|json.
    The exit code: 0, or 1 when a Workload cannot be printed in `api_version` (nothing printed)."""
    workloads = sim.workloads()
    explain_to = sys.stdout
    if output == "table":
        reasons = {why.key: why.detail for why in sim.explanations()}
        sys.stdout.write(render_table(workloads, reasons))
        if sim.preemptions:
            sys.stdout.write("\n" + render_preemptions(sim.preemptions))
    else:
        items = []
        for w in workloads:
            item = convert(w.to_dict(), api_version)
            if isinstance(item, ConversionFailure):
                print(f"error: cannot print as {api_version}: {_printable(item.message)}", file=sys.stderr)
                return 1
            items.append(item)
        listing: dict[str, Any] = {"apiVersion": "v1", "kind": "List", "items": items,
                                   "metadata": {"resourceVersion": ""}}
        if skipped:
            listing["warnings"] = [doc.to_dict() for doc in skipped]
        if sim.preemptions:
            listing["preemptions"] = [record.to_dict() for record in sim.preemptions]
        if output == "json":
            sys.stdout.write(json.dumps(listing, indent=4) + "\n")
        else:
            sys.stdout.write(yaml.safe_dump(listing, sort_keys=True, default_flow_style=False))
        explain_to = sys.stderr  # keep stdout parseable
    if with_explain:
        for why in sim.explanations():
            print(f"{why.key}: {why.detail}: {why.message}", file=explain_to)
    return 0


def _condition(w: Workload, type_: str) -> str:
    cond = w.condition(type_)
    return cond.status if cond is not None else ""


def placement_summary(w: Workload) -> str:
    """`b1/r3:6 b1/r4:2` per pod set: slice label values in level order; hostname slices are summed
    into their parent domain when there is one (the full form is in `-o yaml`). A pod set admitted
    with fewer pods than it asks for (partial admission) adds `(6 of 8 pods)`."""
    admission = w.admission
    if admission is None:
        return ""
    wanted = {ps.name: ps.count for ps in w.spec.pod_sets}
    parts = []
    for psa in admission.pod_set_assignments:
        counts: dict[str, int] = {}
        for sl in psa.topology_assignment.domains() if psa.topology_assignment else []:
            values = [v for k, v in sl.node_labels.items() if k != c.LABEL_HOSTNAME] or \
                list(sl.node_labels.values())
            path = "/".join(values)
            counts[path] = counts.get(path, 0) + sl.count
        text = " ".join(f"{path}:{n}" for path, n in counts.items()) or "-"
        if psa.count is not None and psa.count < wanted.get(psa.name, psa.count):
            text += f" ({psa.count} of {wanted[psa.name]} pods)"
        parts.append(text if len(admission.pod_set_assignments) == 1 else f"{psa.name}({text})")
    return " ".join(parts)


def render_table(workloads: Sequence[Workload], reasons: Mapping[str, str] | None = None) -> str:
    """`kubectl get workloads` plus FLAVOR, PLACEMENT and, for a pending row, the PascalCase reason
    it waits for (`reasons`: `namespace/name` -> reason, from the simulation's explanations)."""
    reasons = reasons or {}
    rows = [_COLUMNS]
    for w in workloads:
        admission = w.admission if w.has_quota_reservation else None
        flavors = sorted({f for psa in (admission.pod_set_assignments if admission else [])
                          for f in psa.flavors.values()})
        rows.append((w.namespace, w.name, w.queue_name, admission.cluster_queue if admission else "",
                     _condition(w, c.CONDITION_ADMITTED), _condition(w, c.CONDITION_FINISHED),
                     ",".join(flavors), placement_summary(w) if admission else "",
                     reasons.get(f"{w.namespace or 'default'}/{w.name}", "")))
    widths = [max(len(r[i]) for r in rows) for i in range(len(_COLUMNS))]
    return "".join("   ".join(cell.ljust(widths[i]) for i, cell in enumerate(r)).rstrip() + "\n" for r in rows)


_PREEMPTION_COLUMNS = ("STEP", "PREEMPTED", "IN", "BY", "IN", "REASON", "MESSAGE")


def render_preemptions(records: Sequence[PreemptionRecord]) -> str:
    """One row per victim: at which step (1 = the first -f), who, by whom, why."""
    rows = [_PREEMPTION_COLUMNS]
    for r in records:
        rows.append((str(r.step), r.victim, r.victim_cluster_queue, r.preemptor, r.preemptor_cluster_queue,
                     r.reason, r.message))
    widths = [max(len(row[i]) for row in rows) for i in range(len(_PREEMPTION_COLUMNS))]
    return "".join("   ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() + "\n" for row in rows)
