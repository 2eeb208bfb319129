"""config/prometheus: every series the alerts and the Grafana dashboard query is one tasq exports,
every label they group or filter by is one that series carries, and Kueue's names are selected by
tasq's scrape job (an installed Kueue exports the same names)."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from controller.kube.metrics import Metrics, QueueFigures
from webhooks.certificates import write_serving_files

REPO = Path(__file__).resolve().parents[2]
PROMETHEUS = REPO / "config" / "prometheus"
SERIES = re.compile(r"\b((?:kueue|tasq|controller_runtime)_[a-z_]+)\b")
GROUPING = re.compile(r"\b(?:by|on)\s*\(([^)]*)\)")
SELECTOR = re.compile(r"\b((?:kueue|tasq|controller_runtime)_[a-z_]+)\{([^}]*)\}")
SCRAPE_LABELS = {"job", "instance", "pod", "namespace", "service", "endpoint", "container", "le"}
JOB = 'job="tasq-controller-manager-metrics"'


def alert_exprs() -> list[str]:
    rule = yaml.safe_load((PROMETHEUS / "rules.yaml").read_text())
    return [r["expr"] for group in rule["spec"]["groups"] for r in group["rules"]]


def dashboard_exprs() -> list[str]:
    dashboard = json.loads((PROMETHEUS / "dashboard.json").read_text())
    return [t["expr"].replace("$job", "tasq-controller-manager-metrics")
            for panel in dashboard["panels"] for t in panel["targets"]]


def populated(tmp_path: Path) -> Metrics:
    """Metrics with one recording of every kind, so each labelled series has a sample to scrape."""
    metrics = Metrics()
    metrics.leading(lambda: True)
    write_serving_files(tmp_path, datetime.now(UTC))
    metrics.certificate_watched("webhook", tmp_path / "tls.crt")
    metrics.admission_attempted("success", 0.1)
    metrics.workload_admitted("cq", "high", 3.0)
    metrics.cluster_queue_reported("cq", QueueFigures(cohort="c", pending_active=1, pending_inadmissible=1, admitted=1,
                                                      nominal={("f", "cpu"): 2}, usage={("f", "cpu"): 1}))
    metrics.fragmentation_reported(8, {("f", "rack"): 4})
    metrics.webhook_answered("/mutate-batch-v1-job", 200, 0.01)
    metrics.gate_removed(1.0)
    return metrics


def exported(tmp_path: Path) -> dict[str, set[str]]:
    """Every sample name tasq's registry exposes -> its label names (le included for buckets)."""
    out: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(populated(tmp_path).exposition().decode()):
        for sample in family.samples:
            out.setdefault(sample.name, set()).update(sample.labels)
    return out


EXPRS = [pytest.param(e, id=f"alert {i}") for i, e in enumerate(alert_exprs())] + \
        [pytest.param(e, id=f"panel {i}") for i, e in enumerate(dashboard_exprs())]


def test_there_are_alerts_and_panels_to_check() -> None:
    assert len(alert_exprs()) >= 5 and len(dashboard_exprs()) >= 10


@pytest.mark.parametrize("expr", EXPRS)
def test_every_series_queried_is_exported_with_the_labels_used(expr: str, tmp_path: Path) -> None:
    known = exported(tmp_path)
    used = set(SERIES.findall(expr))
    assert used, expr
    assert used <= known.keys(), f"not exported: {sorted(used - known.keys())}"
    labels = set().union(*(known[name] for name in used)) | SCRAPE_LABELS
    grouped = {label.strip() for group in GROUPING.findall(expr) for label in group.split(",") if label.strip()}
    assert grouped <= labels, f"grouped by labels no queried series has: {sorted(grouped - labels)}"
    for name, matchers in SELECTOR.findall(expr):
        for matcher in filter(None, (m.strip() for m in matchers.split(","))):
            label = re.split(r"[!=~]", matcher, maxsplit=1)[0]
            assert label in known[name] | SCRAPE_LABELS, f"{name} has no label {label}"


@pytest.mark.parametrize("expr", EXPRS)
def test_kueues_names_are_read_from_tasqs_job_only(expr: str) -> None:
    for name, matchers in SELECTOR.findall(expr):
        if not name.startswith("tasq_"):
            assert JOB in matchers, f"{name} in {expr!r} would mix in an installed Kueue's series"
    bare = [n for n in SERIES.findall(expr) if not n.startswith("tasq_") and not re.search(rf"\b{n}\{{", expr)]
    assert not bare, f"unselected Kueue-named series: {bare}"


def test_the_chart_reads_the_rules_and_dashboard_from_these_files() -> None:
    files = REPO / "charts" / "tasq" / "files"
    assert (files / "prometheus-rules.yaml").resolve() == (PROMETHEUS / "rules.yaml").resolve()
    assert (files / "grafana-dashboard.json").resolve() == (PROMETHEUS / "dashboard.json").resolve()
