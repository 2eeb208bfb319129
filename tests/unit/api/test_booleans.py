"""The shared boolean parser, and that the Job validator and the Job -> Workload conversion agree."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from controller.api import constants as c
from controller.api.booleans import parse_boolean
from controller.api.workload import Workload
from controller.core.admission.workloads import workload_info
from controller.core.jobs.batch_job import workload_from_job
from controller.core.topology import TopologyRequest
from tests.builders.kueue import make_job
from webhooks.validation import validate


@dataclass
class BoolCase:
    name: str
    text: str
    want: bool | None


BOOL_CASES = [
    BoolCase("lower-case true", "true", True),
    BoolCase("capitalised True", "True", True),
    BoolCase("upper-case TRUE", "TRUE", True),
    BoolCase("lower-case false", "false", False),
    BoolCase("capitalised False", "False", False),
    BoolCase("upper-case FALSE", "FALSE", False),
    BoolCase("mixed case is not a spelling Go's ParseBool knows", "tRuE", None),
    BoolCase("mixed-case false is not either", "fAlse", None),
    BoolCase("yes is not a boolean", "yes", None),
    BoolCase("an empty value is not a boolean", "", None),
    BoolCase("surrounding blanks are not trimmed", " true", None),
]


@pytest.mark.parametrize("case", BOOL_CASES, ids=lambda case: case.name)
def test_parse_boolean(case: BoolCase) -> None:
    assert parse_boolean(case.text) is case.want


@pytest.mark.parametrize("case", BOOL_CASES, ids=lambda case: case.name)
def test_validator_and_admission_read_the_unconstrained_annotation_alike(case: BoolCase) -> None:
    job = make_job("a").queue("q").template_annotate(c.ANNOTATION_PODSET_UNCONSTRAINED_TOPOLOGY, case.text)
    accepted = not validate(job.obj())
    topology = workload_info(Workload.from_dict(workload_from_job(job.obj(), {}))).pod_sets[0].topology
    assert accepted == (case.want is not None)
    assert (topology == TopologyRequest("unconstrained", None)) == (case.want is True)
