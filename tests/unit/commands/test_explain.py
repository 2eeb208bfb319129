"""`tasq explain workload`'s verdict from a cluster's objects: the same words `tasq simulate --explain` prints."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import yaml

from controller.api import constants as c
from controller.api.configuration import WaitForPodsReady
from controller.api.workload import Workload
from controller.bundled import sample_nodes_file, samples_dir
from controller.commands.explain import explain_workload, kubeconfig_path
from controller.core.admission.conditions import mark_admitted, mark_eviction_done
from controller.core.admission.pods_ready import mark_pods_ready, mark_pods_ready_timeout
from controller.core.simulating import Simulation
from tests.builders.kueue import make_cluster_queue, make_flavor, make_local_queue, make_workload

GPU = "nvidia.com/gpu"


def _samples() -> list[dict[str, Any]]:
    docs = [d for d in yaml.safe_load_all(sample_nodes_file().read_text()) if d]
    for path in sorted(samples_dir().glob("*.yaml")):
        docs += [d for d in yaml.safe_load_all(path.read_text()) if d]
    return docs


def _cluster_after_admission() -> tuple[list[dict[str, Any]], dict[str, str]]:
    """The samples as a live cluster would hold them once admission ran: Workloads with statuses."""
    sim = Simulation()
    sim.apply(_samples())
    sim.run()
    workloads = [w.to_dict() for w in sim.workloads()]
    names = {w["metadata"]["ownerReferences"][0]["name"]: w["metadata"]["name"]
             for w in workloads if w["metadata"].get("ownerReferences")}
    rest = [d for d in _samples() if d["kind"] != c.KIND_WORKLOAD]
    return rest + [{**w, "kind": c.KIND_WORKLOAD} for w in workloads], names


def test_a_waiting_workload_is_explained_with_simulates_words() -> None:
    objects, names = _cluster_after_admission()
    code, lines = explain_workload(objects, "default", names["gang-b"])
    assert code == 0
    assert lines == [f'default/{names["gang-b"]}: QuotaExceeded: couldn\'t assign flavors to pod set "main": '
                     'insufficient quota for nvidia.com/gpu in flavor "a100": requests 32, available 0 '
                     '(nominal 32, used 32)',
                     f'default/{names["gang-b"]}: preemption would not help (PreemptionNever): ClusterQueue '
                     '"team-b" preempts nothing (withinClusterQueue and reclaimWithinCohort are Never)']


def test_a_workload_that_would_preempt_names_its_victims_and_nothing_is_evicted() -> None:
    queue = [make_cluster_queue("cq").preemption(within=c.PREEMPTION_LOWER_PRIORITY).flavor("a100", {GPU: 8}).obj(),
             make_flavor("a100").obj(), make_local_queue("lq", "cq").obj()]
    sim = Simulation()
    sim.apply([*queue, make_workload("low").queue("lq").priority(1).pod_set("main", 2, {GPU: 4}).obj()])
    sim.run()
    live = [{**w.to_dict(), "kind": c.KIND_WORKLOAD} for w in sim.workloads()]
    urgent = make_workload("urgent").queue("lq").priority(9).pod_set("main", 1, {GPU: 8}).obj()
    code, lines = explain_workload([*queue, *live, urgent], "default", "urgent")
    assert code == 0
    assert lines[1] == ('default/urgent: would preempt "default/low" (InClusterQueue, priority 1): preempting '
                        '1 workload(s) to fit 1 pod(s) of pod set "main" in flavor "a100"')
    # What explain runs evicts nothing and leaves no claim behind.
    dry = Simulation(preempting=False)
    dry.apply([*queue, *live, urgent])
    dry.run()
    assert dry.preemptions == [] and dry.state is not None and dry.state.evicting == {}
    low = next(w for w in dry.workloads() if w.name == "low")
    assert low.condition(c.CONDITION_EVICTED) is None and low.has_quota_reservation


def test_an_admitted_workload_lists_its_domains() -> None:
    objects, names = _cluster_after_admission()
    code, lines = explain_workload(objects, "default", names["llm-pretrain-rack"])
    assert code == 0
    assert len(lines) == 1
    assert re.fullmatch(rf'default/{names["llm-pretrain-rack"]}: admitted in ClusterQueue "team-a": b1/b1-r\d:8', lines[0])


def test_a_missing_workload_exits_1_naming_it() -> None:
    code, lines = explain_workload([], "team", "nope")
    assert code == 1 and lines == ['workload "nope" not found in namespace "team"']


def test_the_kubeconfig_is_found_as_kubectl_finds_it(monkeypatch: Any, tmp_path: Any) -> None:
    monkeypatch.setenv("KUBECONFIG", f"{tmp_path}/a:{tmp_path}/b")
    assert str(kubeconfig_path(None)) == f"{tmp_path}/a"
    monkeypatch.delenv("KUBECONFIG")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert kubeconfig_path(None) is None
    (tmp_path / ".kube").mkdir()
    (tmp_path / ".kube" / "config").write_text("x")
    assert kubeconfig_path(None) == tmp_path / ".kube" / "config"


def test_an_unusable_kubeconfig_exits_with_one_line_naming_it(tmp_path: Any, capsys: Any) -> None:
    from controller.cli import main

    for text in ("garbage: [", "{}", "clusters: 3"):
        bad = tmp_path / "kubeconfig"
        bad.write_text(text)
        assert main(["explain", "workload", "x", "--kubeconfig", str(bad)]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"tasq explain: cannot use the kubeconfig '{bad}'") and err.count("\n") == 1
        assert main(["run", "--kubeconfig", str(bad), "--metrics-port", "-1"]) == 1
        err = capsys.readouterr().err
        assert err.startswith(f"tasq run: cannot use the kubeconfig '{bad}'") and err.count("\n") == 1


def test_replaced_and_failed_nodes_and_a_node_failures_eviction_are_shown() -> None:
    objects, names = _cluster_after_admission()
    name = names["llm-pretrain-rack"]
    live = next(o for o in objects if o["kind"] == c.KIND_WORKLOAD and o["metadata"]["name"] == name)
    live["status"]["unhealthyNodes"] = [{"name": "gpu-b1-r1-n2"}]

    def event(obj_name: str, at: str, message: str, reason: str = c.EVENT_REASON_NODE_REPLACED) -> dict[str, Any]:
        return {"reason": reason, "message": message, "lastTimestamp": at,
                "involvedObject": {"kind": c.KIND_WORKLOAD, "name": obj_name}}

    events = [event(name, "2026-11-27T06:02:00Z", "Node n3 (deleted) replaced by n5 (4 pods) for pod set main"),
              event(name, "2026-11-27T06:01:00Z", "Node n1 (not Ready since ...) replaced by n4 (8 pods) for pod set main"),
              event("someone-else", "2026-11-27T06:00:00Z", "Node x replaced by y"),
              event(name, "2026-11-27T06:00:00Z", "admitted", reason="Admitted")]
    code, lines = explain_workload(objects, "default", name, events=events)
    assert code == 0
    assert lines[1:] == [
        f"default/{name}: replaced at 2026-11-27T06:01:00Z: Node n1 (not Ready since ...) replaced by n4 (8 pods) "
        "for pod set main",
        f"default/{name}: replaced at 2026-11-27T06:02:00Z: Node n3 (deleted) replaced by n5 (4 pods) for pod set main",
        f"default/{name}: failed node(s) waiting for a replacement: gpu-b1-r1-n2"]
    live["status"]["conditions"].append({"type": c.CONDITION_EVICTED, "status": "True", "reason": c.REASON_NODE_FAILURES,
                                         "message": "Workload was evicted as there was no replacement for unhealthy "
                                                    "node(s): gpu-b1-r1-n2", "lastTransitionTime": "2026-11-27T06:03:00Z"})
    del live["status"]["unhealthyNodes"]
    assert explain_workload(objects, "default", name, events=[])[1][-1] == (
        f"default/{name}: evicted (NodeFailures): Workload was evicted as there was no replacement for unhealthy "
        "node(s): gpu-b1-r1-n2")


def test_a_workload_in_its_pods_ready_backoff_says_how_often_and_until_when() -> None:
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    wl = Workload.from_dict(make_workload("stuck").queue("lq").pod_set("main", 1, {GPU: 8}).obj())
    mark_admitted(wl, {"clusterQueue": "cq", "podSetAssignments": [{"name": "main", "count": 1}]}, t0)
    mark_pods_ready(wl, False, t0)
    mark_pods_ready_timeout(wl, "default/stuck", WaitForPodsReady(timeout_s=10), t0)
    mark_eviction_done(wl, t0)
    queue = [make_cluster_queue("cq").flavor("a100", {GPU: 8}).obj(), make_flavor("a100").obj(),
             make_local_queue("lq", "cq").obj()]
    code, lines = explain_workload([*queue, {**wl.to_dict(), "kind": c.KIND_WORKLOAD}], "default", "stuck",
                                   now=t0.timestamp() + 20)
    assert code == 0
    assert lines[-2:] == [
        "default/stuck: PodsReady=False (WaitForStart) since 2026-01-01T00:00:00Z: Not all pods are ready or succeeded",
        "default/stuck: requeued 1 time(s) after a PodsReady timeout; in backoff until 2026-01-01T00:01:00Z "
        "(40s from now): not admitted before"]


def test_a_partially_admitted_workload_shows_its_admitted_count_of_its_count() -> None:
    # Quota for 6 one-GPU pods; the Workload asks for 8 and accepts 4: admitted with 6.
    queue = [make_cluster_queue("cq").flavor("a100", {GPU: 6}).obj(), make_flavor("a100").obj(),
             make_local_queue("lq", "cq").obj()]
    sim = Simulation()
    sim.apply([*queue, make_workload("train").queue("lq").pod_set("main", 8, {GPU: 1}, minCount=4).obj()])
    sim.run()
    live = [{**w.to_dict(), "kind": c.KIND_WORKLOAD} for w in sim.workloads()]
    code, lines = explain_workload([*queue, *live], "default", "train")
    assert code == 0
    assert lines == ['default/train: admitted in ClusterQueue "cq": - (6 of 8 pods)']


def test_describe_is_explain_under_kubectls_verb(capsys: Any, tmp_path: Any) -> None:
    from controller.cli import main

    missing = tmp_path / "nope"
    for verb in ("explain", "describe"):
        assert main([verb, "workload", "w", "--kubeconfig", str(missing)]) == 2
        assert capsys.readouterr().err == f"tasq {verb}: kubeconfig {str(missing)!r} is not a file\n"


def test_a_workload_of_a_stopped_local_queue_is_explained_by_that_queue() -> None:
    # The same words the admission loop writes in QuotaReserved (resolve_cluster_queue): nothing
    # else is tried, and no preemption is suggested for a Workload its own queue holds.
    objects = [make_cluster_queue("cq").flavor("a100", {GPU: 8}).obj(), make_flavor("a100").obj(),
               make_local_queue("lq", "cq").set("spec.stopPolicy", "HoldAndDrain").obj(),
               {**make_workload("w").queue("lq").pod_set("main", 1, {GPU: 1}).obj(), "kind": c.KIND_WORKLOAD}]
    code, lines = explain_workload(objects, "default", "w")
    assert code == 0
    assert lines == ['default/w: Stopped: LocalQueue "lq" in namespace "default" is stopped (stopPolicy HoldAndDrain)']
