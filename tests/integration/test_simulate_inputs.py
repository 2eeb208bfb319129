"""`tasq simulate` on bad input: one minimal document per root cause found by mutating the samples.

Every case used to crash (traceback or segfault) or was silently accepted; each must now exit 2
with the file and the field path of the problem, and simulate nothing.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from controller.cli import main

NODE = "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n"
POD = "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: default}\n"
JOB = "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j, namespace: default}\n"
CONTAINERS = "containers: [{name: c, image: x}]"
JOB_SPEC = f"spec:\n  template:\n    spec: {{restartPolicy: Never, {CONTAINERS}}}\n"


@dataclass(frozen=True)
class Case:
    name: str
    text: bytes
    expected: re.Pattern[str]
    """What follows `error: FILE` on the error line: the document, the field path, the problem."""


def case(name: str, text: str | bytes, expected: str | re.Pattern[str]) -> Case:
    pattern = re.compile(re.escape(expected)) if isinstance(expected, str) else expected
    return Case(name, text.encode() if isinstance(text, str) else text, pattern)


CRASHED = [
    case("a file that is not UTF-8", b"apiVersion: v1\nkind: Node\nmetadata: {name: \xff}\n",
         ": not UTF-8 text: byte 43 (0xff)"),
    case("apiVersion given as a list", "apiVersion: [v1]\nkind: Node\n", ":1: apiVersion: Required value"),
    case("kind given as a map", "apiVersion: v1\nkind: {a: b}\n", ":1: kind: Required value"),
    case("Job completions not a number", JOB + "spec: {completions: many}\n", ":1: spec.completions: Invalid value"),
    case("Job status not an object", JOB + JOB_SPEC + "status: 3\n", ":1: status: Invalid value: 3"),
    case("Node status.conditions not a list", NODE + "status: {conditions: Ready}\n",
         ":1: status.conditions: Invalid value"),
    case("Pod overhead quantity is a list", POD + f"spec: {{{CONTAINERS}, overhead: {{cpu: [1]}}}}\n",
         ":1: spec.overhead[cpu]: Invalid value"),
    case("ownerReferences not a list", POD.replace("default}", "default, ownerReferences: x}")
         + f"spec: {{{CONTAINERS}}}\n", ":1: metadata.ownerReferences: Invalid value"),
    case("affinity values, deep inside, not a list", POD + f"spec: {{{CONTAINERS}, affinity: {{nodeAffinity: "
         "{requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: "
         "[{key: a, operator: In, values: 3}]}]}}}}\n",
         ":1: spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"
         ".matchExpressions[0].values: Invalid value: 3"),
    case("Pod status a list", POD + f"spec: {{{CONTAINERS}}}\nstatus: []\n", ":1: status: Invalid value"),
    case("schedulingGates of strings", POD + f"spec: {{{CONTAINERS}, schedulingGates: [a]}}\n",
         ':1: spec.schedulingGates[0]: Invalid value: "a"'),
    case("a date-only YAML timestamp as creationTimestamp",
         NODE.replace("n1}", "n1, creationTimestamp: 2026-01-01}"), ':1: metadata.creationTimestamp: Invalid value: "2026-01-01"'),
    case("priorityClassName a list", JOB + "spec:\n  template:\n    spec: {priorityClassName: [a], " + CONTAINERS + "}\n",
         ":1: spec.template.spec.priorityClassName: Invalid value"),
    case("Lists nested 1,000 deep", "apiVersion: v1\nkind: List\nitems:\n" + "".join(
        "  " * i + "- apiVersion: v1\n" + "  " * i + "  kind: List\n" + "  " * i + "  items:\n" for i in range(1, 1000)),
         ": line 151: nested deeper than 100 levels"),
    case("a value nested 500 deep (JSON)", '{"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Workload", '
         '"metadata": {"name": "w"}, "spec": ' + "[" * 500 + "]" * 500 + "}",
         ":1: Invalid value: \"...\": nested deeper than 100 levels"),
    case("a value nested 100,000 deep (JSON)", '{"a": ' + "[" * 100_000 + "]" * 100_000 + "}",
         ": nested deeper than the JSON parser's limit"),
    case("a document nested 100,000 deep (YAML flow)", "a: " + "[" * 100_000 + "]" * 100_000,
         re.compile(r": (line 1: nested deeper than 100 levels|not YAML or JSON: .*maximum nesting depth)")),
    case("a document nested 100,000 deep (YAML block)", "- " * 100_000 + "x\n", ": line 1: nested deeper"),
    case("kind: List whose items is a map", "apiVersion: v1\nkind: List\nitems: {a: 1}\n",
         ":1: items: Invalid value: dict: must be a list"),
    case("a map mixing key types", NODE.replace("{name: n1}", "{name: n1, labels: {1: a, b: c}}"),
         ": line 3: mapping key 1 is not a string"),
]

ACCEPTED = [
    case("an invalid Node label key (it names a topology domain)",
         NODE.replace("n1}", "n1, labels: {'cloud/rack/x': r1}}"), ":1: metadata.labels[cloud/rack/x]: Invalid value"),
    case("an invalid Node label value", NODE.replace("n1}", "n1, labels: {rack: 'r 1'}}"),
         ":1: metadata.labels[rack]: Invalid value"),
    case("an invalid Namespace label value", "apiVersion: v1\nkind: Namespace\nmetadata: {name: a, labels: {t: -x-}}\n",
         ":1: metadata.labels[t]: Invalid value"),
    case("negative Job completions", JOB + JOB_SPEC + "  completions: -1\n", ":1: spec.completions: Invalid value: -1"),
    case('suspend: "yes"', JOB + 'spec: {suspend: "yes"}\n', ':1: spec.suspend: Invalid value: "yes": must be a boolean'),
    case("int32 overflow of parallelism", JOB + "spec: {parallelism: 2147483648}\n",
         ":1: spec.parallelism: Invalid value: 2147483648: must be between"),
    case("int32 overflow of a Pod's priority", POD + f"spec: {{{CONTAINERS}, priority: 4294967296}}\n",
         ":1: spec.priority: Invalid value: 4294967296"),
    case("an unknown field (kubectl's strict validation refuses it)", NODE + "spec: {unschedulabel: true}\n",
         ':1: spec.unschedulabel: unknown field "unschedulabel"'),
    case("duplicate YAML keys", NODE + "metadata: {name: n2}\n", ": line 4: duplicate key 'metadata'"),
    case("duplicate JSON keys", '{"apiVersion": "v1", "kind": "Node", "kind": "Pod"}', ": not JSON: duplicate key 'kind'"),
    case("negative Pod overhead", POD + f"spec: {{{CONTAINERS}, overhead: {{cpu: '-1'}}}}\n",
         ':1: spec.overhead[cpu]: Invalid value: "-1": must be greater than or equal to 0'),
    case('PriorityClass globalDefault "false" (a string)',
         "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: p}\nvalue: 10\nglobalDefault: 'false'\n",
         ':1: globalDefault: Invalid value: "false": must be a boolean'),
    case("a user PriorityClass above one billion",
         "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: p}\nvalue: 1000000001\n",
         ":1: value: Invalid value: 1000000001: must be no greater than 1000000000"),
]


def simulate(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["simulate", *args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("case", CRASHED + ACCEPTED, ids=lambda c: c.name)
def test_bad_input_exits_2_naming_the_file_and_the_field(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                        case: Case) -> None:
    path = tmp_path / "input.yaml"
    path.write_bytes(case.text)
    code, out, err = simulate(capsys, "-f", str(path))
    assert (code, out) == (2, ""), err
    assert re.search(re.escape(f"error: {path}") + case.expected.pattern, err), err
    assert err.splitlines()[-1].endswith("error(s); nothing simulated")


def test_non_utf8_stdin_is_an_error(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"kind: \xfe\n")))
    code, out, err = simulate(capsys, "-f", "-")
    assert (code, out) == (2, "")
    assert "error: <stdin>: not UTF-8 text: byte 6 (0xfe) is invalid" in err


def test_an_unquoted_timestamp_is_read_as_the_string_kubernetes_reads(capsys: pytest.CaptureFixture[str],
                                                                      tmp_path: Path) -> None:
    path = tmp_path / "node.yaml"
    path.write_text(NODE.replace("n1}", "n1, creationTimestamp: 2026-01-01T00:00:00Z}"), encoding="utf-8")
    code, _, err = simulate(capsys, "-f", str(path))
    assert (code, err) == (0, "")


def test_a_file_above_the_size_limit_is_refused_before_it_is_read(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("controller.commands.simulate.MAX_INPUT_BYTES", 10)
    path = tmp_path / "big.yaml"
    path.write_text(NODE, encoding="utf-8")
    code, out, err = simulate(capsys, "-f", str(path))
    assert (code, out) == (2, "")
    assert f"error: {path}: 47 bytes is more than the 10 accepted" in err
