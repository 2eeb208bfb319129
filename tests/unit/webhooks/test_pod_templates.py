"""Kueue's pod-set slice and group requests: as pod-template annotations on a Job, as a Workload's
topologyRequest fields, and the pod-set groups of a Workload. Every error, with its path and words."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from controller.api import constants as c
from tests.unit.webhooks.manifests import valid_job, valid_workload
from webhooks.validation.jobs import validate_job
from webhooks.validation.workload import validate_workload

NOTES = "spec.template.metadata.annotations"
SLICE = f"{NOTES}[{c.ANNOTATION_PODSET_SLICE_REQUIRED_TOPOLOGY}]"
SIZE = f"{NOTES}[{c.ANNOTATION_PODSET_SLICE_SIZE}]"
LAYERS = f"{NOTES}[{c.ANNOTATION_PODSET_SLICE_REQUIRED_TOPOLOGY_CONSTRAINTS}]"
GROUP = f"{NOTES}[{c.ANNOTATION_PODSET_GROUP_NAME}]"
RACK, HOST = "cloud.com/rack", "kubernetes.io/hostname"


@dataclass(frozen=True)
class NotesCase:
    name: str
    notes: dict[str, str]
    want: list[str] = field(default_factory=list)


# The Job runs 4 pods (parallelism 4).
NOTES_CASES = [
    NotesCase("a slice level with a size", {c.ANNOTATION_PODSET_REQUIRED_TOPOLOGY: RACK,
                                            c.ANNOTATION_PODSET_SLICE_REQUIRED_TOPOLOGY: HOST,
                                            c.ANNOTATION_PODSET_SLICE_SIZE: "2"}),
    NotesCase("a slice size equal to the pod count", {c.ANNOTATION_PODSET_SLICE_REQUIRED_TOPOLOGY: HOST,
                                                      c.ANNOTATION_PODSET_SLICE_SIZE: "4"}),
    NotesCase("a slice level without a size", {c.ANNOTATION_PODSET_SLICE_REQUIRED_TOPOLOGY: HOST},
              [f"{SIZE}: Required value: must be set when '{c.ANNOTATION_PODSET_SLICE_REQUIRED_TOPOLOGY}' is specified"]),
    NotesCase("a size without a slice level", {c.ANNOTATION_PODSET_SLICE_SIZE: "2"},
              [f"{SIZE}: Forbidden: may not be set when '{c.ANNOTATION_PODSET_SLICE_REQUIRED_TOPOLOGY}' is not "
               "specified"]),
    NotesCase("a size that is not a number, and a level that is not a label",
              {c.ANNOTATION_PODSET_SLICE_REQUIRED_TOPOLOGY: "a b", c.ANNOTATION_PODSET_SLICE_SIZE: "two"},
              [f'{SLICE}: Invalid value: "a b": name part must consist of alphanumeric characters, \'-\', \'_\' or '
               "'.', and must start and end with an alphanumeric character (e.g. 'MyName', 'my.name' or "
               "'123-abc')",
               f'{SIZE}: Invalid value: "two": must be a numeric value']),
    NotesCase("a size of 0", {c.ANNOTATION_PODSET_SLICE_REQUIRED_TOPOLOGY: HOST, c.ANNOTATION_PODSET_SLICE_SIZE: "0"},
              [f'{SIZE}: Invalid value: "0": must be greater than or equal to 1']),
    NotesCase("a size above the pod count (Kueue's upper bound)",
              {c.ANNOTATION_PODSET_SLICE_REQUIRED_TOPOLOGY: HOST, c.ANNOTATION_PODSET_SLICE_SIZE: "5"},
              [f'{SIZE}: Invalid value: "5": must not be greater than pod set count 4']),
    NotesCase("multi-layer constraints", {c.ANNOTATION_PODSET_REQUIRED_TOPOLOGY: "cloud.com/block",
                                          c.ANNOTATION_PODSET_SLICE_REQUIRED_TOPOLOGY_CONSTRAINTS:
                                              f'[{{"topology": "{RACK}", "size": 4}}, {{"topology": "{HOST}", '
                                              '"size": 2}]'}),
    NotesCase("constraints exclude the slice level and size",
              {c.ANNOTATION_PODSET_SLICE_REQUIRED_TOPOLOGY: HOST, c.ANNOTATION_PODSET_SLICE_SIZE: "2",
               c.ANNOTATION_PODSET_SLICE_REQUIRED_TOPOLOGY_CONSTRAINTS: f'[{{"topology": "{RACK}", "size": 2}}]'},
              [f"{LAYERS}: Forbidden: may not be set when '{c.ANNOTATION_PODSET_SLICE_REQUIRED_TOPOLOGY}' is "
               "specified",
               f"{LAYERS}: Forbidden: may not be set when '{c.ANNOTATION_PODSET_SLICE_SIZE}' is specified"]),
    NotesCase("constraints that are not JSON", {c.ANNOTATION_PODSET_SLICE_REQUIRED_TOPOLOGY_CONSTRAINTS: "[{"},
              [f'{LAYERS}: Invalid value: "[{{": must be a valid JSON array: Expecting property name enclosed in '
               "double quotes: line 1 column 3 (char 2)"]),
    NotesCase("four layers", {c.ANNOTATION_PODSET_SLICE_REQUIRED_TOPOLOGY_CONSTRAINTS: '[{"topology": "a", "size": 1},'
                              ' {"topology": "b", "size": 1}, {"topology": "c", "size": 1}, {"topology": "d", '
                              '"size": 1}]'},
              [f"{LAYERS}: Invalid value: topology constraints must contain between 1 and 3 entries"]),
    NotesCase("layers: a repeated level, a size that does not divide, a missing size, the first above the count",
              {c.ANNOTATION_PODSET_SLICE_REQUIRED_TOPOLOGY_CONSTRAINTS:
                  f'[{{"topology": "{RACK}", "size": 6}}, {{"topology": "{RACK}", "size": 4}}, {{"topology": "x"}}]'},
              [f'{LAYERS}[1].topology: Duplicate value: "{RACK} (also at index 0)"',
               f"{LAYERS}[2].size: Required value",
               f"{LAYERS}[1].size: Invalid value: 4: must evenly divide the parent layer size 6",
               f"{LAYERS}[0].size: Invalid value: 6: must not be greater than pod set count 4"]),
    NotesCase("a group with a required level", {c.ANNOTATION_PODSET_REQUIRED_TOPOLOGY: RACK,
                                                c.ANNOTATION_PODSET_GROUP_NAME: "g"}),
    NotesCase("a group named by a number, without a level, with slices",
              {c.ANNOTATION_PODSET_GROUP_NAME: "42", c.ANNOTATION_PODSET_SLICE_REQUIRED_TOPOLOGY: HOST,
               c.ANNOTATION_PODSET_SLICE_SIZE: "2"},
              [f'{GROUP}: Invalid value: "42": must not be a number',
               f"{GROUP}: Forbidden: may not be set when '{c.ANNOTATION_PODSET_SLICE_SIZE}' is specified",
               f"{GROUP}: Forbidden: may not be set when '{c.ANNOTATION_PODSET_SLICE_REQUIRED_TOPOLOGY}' is "
               "specified",
               f"{GROUP}: Forbidden: may not be set when neither a required nor a preferred topology is specified"]),
]


@pytest.mark.parametrize("case", NOTES_CASES, ids=lambda case: case.name)
def test_slice_and_group_annotations_on_a_job_template(case: NotesCase) -> None:
    job = valid_job()
    for key, value in case.notes.items():
        job = job.template_annotate(key, value)
    assert [str(e) for e in validate_job(job.build())] == case.want


def test_the_job_level_kep_annotation_counts_as_the_groups_level() -> None:
    job = valid_job().annotate(c.ANNOTATION_REQUIRE_TOPOLOGY, RACK).template_annotate(
        c.ANNOTATION_PODSET_GROUP_NAME, "g")
    assert validate_job(job.build()) == []


TR = "spec.podSets[{}].topologyRequest"


@pytest.mark.parametrize(("requests", "want"), [
    pytest.param([{"required": RACK, "podSetSliceRequiredTopology": HOST, "podSetSliceSize": 2}], [],
                 id="slice fields"),
    pytest.param([{"podSetSliceRequiredTopology": HOST, "podSetSliceSize": 3}],
                 [f"{TR.format(0)}.podSetSliceSize: Invalid value: 3: must not be greater than pod set count 2"],
                 id="a size above the count"),
    pytest.param([{"podsetSliceRequiredTopologyConstraints": [{"topology": RACK, "size": 2}],
                   "podSetSliceSize": 2}],
                 [f"{TR.format(0)}.podSetSliceSize: Forbidden: may not be set when 'podSetSliceRequiredTopology' "
                  "is not specified",
                  f"{TR.format(0)}.podsetSliceRequiredTopologyConstraints: Forbidden: may not be set when "
                  "'podSetSliceSize' is specified"],
                 id="constraints exclude a size"),
    pytest.param([{"required": RACK, "podSetGroupName": "g"}, {"required": RACK, "podSetGroupName": "g"},
                  {"required": RACK, "podSetGroupName": "g"}], [],
                 id="three pod sets in one group (Kueue allows two)"),
    pytest.param([{"required": RACK, "podSetGroupName": "g"}, {"preferred": RACK, "podSetGroupName": "g"}],
                 [f"{TR.format(0)}: Invalid value: must specify the same required or preferred topology as "
                  f'{TR.format(0)} in pod-set group "g"',
                  f"{TR.format(1)}: Invalid value: must specify the same required or preferred topology as "
                  f'{TR.format(0)} in pod-set group "g"'],
                 id="members asking for different levels"),
])
def test_slice_and_group_fields_of_a_workload(requests: list[dict[str, object]], want: list[str]) -> None:
    workload = valid_workload(pod_sets=False)
    for i, request in enumerate(requests):
        workload = workload.pod_set(f"ps{i}", 2, topologyRequest=request)
    assert [str(e) for e in validate_workload(workload.build())] == want
