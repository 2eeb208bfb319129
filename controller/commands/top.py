"""`tasq top` (also `kubectl tasq top`): a topology occupancy view of a live cluster or a simulate input.

Reads the cluster once (`controller.kube.reading`), or simulates `-f` files as `tasq simulate` does,
then draws each topology flavor as blocks > racks > nodes: the headline resource (GPUs) used/free per
domain and node, and the Workloads placed there (the pure model: `core.topology.occupancy`). Fits 100
columns: small clusters get a line per node, larger ones a glyph per node in each rack's row, and when
racks are too many to list, a glyph per rack in each block's row. Colour on a terminal only (rich
honours NO_COLOR and pipes); `--output svg` prints an SVG a person can paste into a ticket. Exit 0
when drawn, 2 for unusable input or an unreachable API. Loaded by controller.cli.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from controller.api.quantity import format_milli
from controller.commands import terminal
from controller.commands.explain import kubeconfig_path
from controller.commands.simulate import read_step
from controller.commands.terminal import WIDTH
from controller.core.simulating import Simulation
from controller.core.topology.assigning import level_noun
from controller.core.topology.occupancy import DomainOccupancy, FlavorOccupancy, NodeOccupancy, occupancy_of

NODE_LINES_MAX = 64
"""A flavor of at most this many nodes is drawn a line per node; above, a glyph per node."""
ROWS_MAX = 160
"""Rows a flavor's domains may take; past it the deepest level is folded into glyphs of its parent."""
STRIP_MAX = 40
"""Glyphs a row's strip may hold; a domain with more children shows counts instead."""
BAR = 16
FULL, PARTLY, FREE = "█", "▓", "░"


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "top", help="topology occupancy: GPUs used/free per block, rack and node, and the Workloads there",
        description="Without -f: the live cluster of the kubeconfig. With -f: the state after simulating "
                    "the files (each -f one step, as tasq simulate).")
    parser.add_argument("-f", "--filename", dest="files", action="append", default=None, metavar="FILE|DIR|-",
                        help="simulate these manifests instead of reading a cluster (repeatable)")
    parser.add_argument("--flavor", default=None, help="only this ResourceFlavor (default: every topology flavor)")
    parser.add_argument("--resource", default=None,
                        help="the resource drawn (default: a GPU resource the nodes have, else cpu)")
    parser.add_argument("-o", "--output", choices=("text", "svg"), default="text",
                        help="text (colour on a terminal) or an SVG picture on stdout")
    parser.add_argument("--kubeconfig", type=Path, default=None,
                        help="kubeconfig to use (default: $KUBECONFIG, ~/.kube/config, or in-cluster)")
    parser.set_defaults(handler=run)


# -- inputs ---------------------------------------------------------------------------------------

def occupancies(sim: Simulation, flavor: str | None = None, resource: str | None = None) -> list[FlavorOccupancy]:
    """Every topology flavor of a run simulation (or only `flavor`), by flavor name."""
    state = sim.state
    if state is None:
        return []
    snapshot = state.snapshot
    keys = list(state.admitted)
    return [occupancy_of(name, info.topology, snapshot.usage, keys, resource)
            for name, info in sorted(snapshot.flavors.items())
            if info.topology is not None and (flavor is None or name == flavor)]


def live_occupancies(objects: Iterable[dict[str, Any]], flavor: str | None = None,
                     resource: str | None = None) -> list[FlavorOccupancy]:
    """A live cluster's objects as they are: admitted Workloads keep their places, none is admitted."""
    sim = Simulation(preempting=False, admitting=False)
    sim.apply(objects)
    sim.run()
    return occupancies(sim, flavor, resource)


def simulated_occupancies(files: Sequence[str], flavor: str | None = None,
                          resource: str | None = None) -> tuple[list[FlavorOccupancy], list[str]]:
    """The state after simulating `files` (each one step), or the input's errors (nothing simulated)."""
    steps = [read_step(spec, sys.stdin) for spec in files]
    errors = [line for step in steps for line in step.errors]
    if errors:
        return [], errors
    sim = Simulation()
    for step in steps:
        sim.apply(step.objects)
        sim.run()
    return occupancies(sim, flavor, resource), []


# -- drawing --------------------------------------------------------------------------------------

def _fill_style(used: int, capacity: int) -> str:
    if capacity <= 0 or used <= 0:
        return "green"
    return "red" if used >= capacity else "yellow"


def glyph(used: int, capacity: int) -> Text:
    """One node or domain: full, partly used or free (nothing to hold: a space)."""
    if capacity <= 0:
        return Text(" ")
    char = FULL if used >= capacity else PARTLY if used > 0 else FREE
    return Text(char, style=_fill_style(used, capacity))


def bar(used: int, capacity: int, width: int = BAR) -> Text:
    """A bar of `width` cells, the used share filled (a partial use shows at least one cell)."""
    filled = 0 if capacity <= 0 else min(width, (used * width + capacity - 1) // capacity)
    style = "red" if capacity and used >= capacity else "yellow" if capacity and used * 10 >= capacity * 9 else "cyan"
    return Text(FULL * filled, style=style) + Text(FREE * (width - filled), style="dim")


def amount(milli: int, resource: str) -> str:
    return format_milli(milli, resource)


def short(key: str, namespace: str | None) -> str:
    """A Workload key as shown: the name alone when every Workload drawn is in `namespace`."""
    ns, _, name = key.partition("/")
    return name if ns == namespace else key


def common_namespace(occ: FlavorOccupancy) -> str | None:
    """The namespace of every Workload drawn, when they share one."""
    namespaces = {k.partition("/")[0] for d in occ.domains for k in d.workloads}
    return namespaces.pop() if len(namespaces) == 1 else None


def strip(cells: Sequence[tuple[int, int]]) -> Text:
    """Glyphs of children (used, capacity), or their counts when more than STRIP_MAX."""
    if len(cells) <= STRIP_MAX:
        return Text("").join(glyph(u, cap) for u, cap in cells)
    full = sum(1 for u, cap in cells if cap > 0 and u >= cap)
    partly = sum(1 for u, cap in cells if 0 < u < cap)
    free = sum(1 for u, cap in cells if cap > 0 and u == 0)
    return (Text(f"{full}{FULL} ", style="red") + Text(f"{partly}{PARTLY} ", style="yellow")
            + Text(f"{free}{FREE}", style="green"))


@dataclass(frozen=True, slots=True)
class Layout:
    """How one flavor is drawn: `depth` levels of domains as rows (the deepest of them with a strip
    of its children), or a line per node under the deepest level when `node_lines`."""

    depth: int
    node_lines: bool


def layout_of(occ: FlavorOccupancy) -> Layout:
    """A line per node when few; else the deepest level whose rows (with every wider one) fit ROWS_MAX."""
    if occ.node_count <= NODE_LINES_MAX:
        return Layout(len(occ.levels), True)
    rows, level, depth = 0, list(occ.domains), 0
    while level and depth < len(occ.levels) and rows + len(level) <= ROWS_MAX:
        rows += len(level)
        depth += 1
        level = [child for d in level for child in d.children]
    return Layout(max(depth, 1), False)


def _workload_text(keys: Sequence[str], namespace: str | None) -> Text:
    return Text(", ".join(short(k, namespace) for k in keys), style="bold") if keys else Text("-", style="dim")


def flavor_table(occ: FlavorOccupancy, width: int = WIDTH) -> tuple[Text, Table, Text]:
    """(headline, table, legend) of one flavor."""
    layout = layout_of(occ)
    percent = 0 if occ.capacity <= 0 else occ.used * 100 // occ.capacity
    workloads = sorted({k for d in occ.domains for k in d.workloads})
    namespace = common_namespace(occ)
    head = Text.assemble(
        (occ.flavor, "bold"), (f" (flavor, topology {occ.topology}): ", "dim"),
        (f"{occ.resource} {amount(occ.used, occ.resource)}/{amount(occ.capacity, occ.resource)} used "
         f"({percent}%)", "bold"),
        f", {occ.node_count} nodes, {len(workloads)} Workloads", f" in {namespace}" if namespace else "")
    if occ.unplaced:
        head.append(f"  {occ.unplaced} without the level labels (not drawn)", style="yellow")
    # Every column but WORKLOADS keeps its measured width; WORKLOADS takes what is left, cut with "…".
    table = Table(box=None, show_header=True, header_style="dim", pad_edge=False, width=width, expand=True)
    table.add_column("DOMAIN", no_wrap=True, overflow="ellipsis", max_width=24)
    table.add_column("USE", no_wrap=True, width=BAR, min_width=BAR)
    table.add_column("USED/ALL", no_wrap=True, justify="right", min_width=len("USED/ALL"))
    per = "node" if layout.depth == len(occ.levels) else level_noun(occ.levels[layout.depth])
    table.add_column("FREE" if layout.node_lines else f"EACH {per.upper()}", no_wrap=True)
    table.add_column("WORKLOADS", no_wrap=True, overflow="ellipsis", ratio=1)
    for domain in occ.domains:
        _rows(table, occ, domain, 0, layout)
    if layout.node_lines:
        legend = Text.assemble((FULL, "cyan"), f" {occ.resource} used  ", (FREE, "dim"), " free", style="dim")
    else:
        legend = Text.assemble(
            f"each {per}: ", (FULL, "red"), " full  ", (PARTLY, "yellow"), " partly used  ", (FREE, "green"),
            f" free  (more than {STRIP_MAX}: their counts)", style="dim")
    return head, table, legend


def _rows(table: Table, occ: FlavorOccupancy, domain: DomainOccupancy, depth: int, layout: Layout) -> None:
    """The row of one domain, then its children's rows (or its nodes' lines) down to the layout's depth."""
    deepest = depth == layout.depth - 1
    cells: list[tuple[int, int]] = []
    if deepest and not layout.node_lines:
        cells = ([(n.used, n.capacity) for n in domain.nodes] if domain.nodes
                 else [(c.used, c.capacity) for c in domain.children])
    table.add_row(
        Text("  " * depth + domain.name, style="bold" if depth == 0 else ""), bar(domain.used, domain.capacity),
        f"{amount(domain.used, occ.resource)}/{amount(domain.capacity, occ.resource)}",
        strip(cells) if cells else _free_text(domain.capacity - domain.used, domain.used, domain.capacity, occ.resource),
        _workload_text(domain.workloads, common_namespace(occ)))
    if not deepest:
        for child in domain.children:
            _rows(table, occ, child, depth + 1, layout)
        return
    if layout.node_lines:
        for node in domain.nodes:
            _node_row(table, occ, node, depth + 1)


def _free_text(free: int, used: int, capacity: int, resource: str) -> Text:
    return Text(f"{amount(max(free, 0), resource)} free", style=_fill_style(used, capacity))


def _node_row(table: Table, occ: FlavorOccupancy, node: NodeOccupancy, depth: int) -> None:
    table.add_row(Text("  " * depth + node.name), bar(node.used, node.capacity),
                  f"{amount(node.used, occ.resource)}/{amount(node.capacity, occ.resource)}",
                  _free_text(node.free, node.used, node.capacity, occ.resource),
                  _workload_text(node.workloads, common_namespace(occ)))


def render(console: Console, flavors: Sequence[FlavorOccupancy]) -> None:
    """Every flavor, one after another, on `console`."""
    if not flavors:
        console.print("no topology flavor: nothing to draw (a ResourceFlavor with topologyName and its Topology)")
    for i, occ in enumerate(flavors):
        head, table, legend = flavor_table(occ, min(console.width, WIDTH))
        if i:
            console.print()
        console.print(head, no_wrap=True, overflow="ellipsis")
        console.print(table)
        console.print(legend)


def svg_of(flavors: Sequence[FlavorOccupancy], title: str = "tasq top") -> str:
    """The view as an SVG of WIDTH columns, with colour whatever stdout is."""
    console = Console(record=True, width=WIDTH, file=io.StringIO(), force_terminal=True,
                      color_system="truecolor", legacy_windows=False)
    render(console, flavors)
    return console.export_svg(title=title)


# -- command --------------------------------------------------------------------------------------

def run(args: argparse.Namespace) -> int:
    if args.files:
        flavors, errors = simulated_occupancies(args.files, args.flavor, args.resource)
        if errors:
            for line in errors:
                print(f"error: {line}", file=sys.stderr)
            print(f"{len(errors)} error(s); nothing drawn", file=sys.stderr)
            return 2
    else:
        from controller.kube.api import ApiError
        from controller.kube.reading import read_cluster_at

        path = kubeconfig_path(args.kubeconfig)
        if path is not None and not path.is_file():
            print(f"tasq top: kubeconfig {str(path)!r} is not a file", file=sys.stderr)
            return 2
        try:
            objects = asyncio.run(read_cluster_at(path))
        except (ApiError, OSError) as e:
            detail = e.message if isinstance(e, ApiError) and e.status == 0 else f"cannot read the cluster: {e}"
            print(f"tasq top: {detail}", file=sys.stderr)
            return 2
        flavors = live_occupancies(objects, args.flavor, args.resource)
    if args.flavor is not None and not flavors:
        print(f'tasq top: no topology flavor "{args.flavor}"', file=sys.stderr)
        return 2
    if args.output == "svg":
        sys.stdout.write(svg_of(flavors))
        return 0
    render(terminal.console(), flavors)
    return 0
