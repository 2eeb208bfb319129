"""ResourceFlavor validation: node labels, taints, tolerations and the two topology forms."""

from __future__ import annotations

from tests.builders.kueue import ResourceFlavorBuilder
from tests.unit.webhooks.manifests import (
    BLOCK,
    RACK,
    Case,
    UpdateCase,
    cases,
    valid_flavor,
)
from webhooks.validation import validate, validate_update

GPU = "cloud.provider.com/gpu"


def h100() -> ResourceFlavorBuilder:
    return valid_flavor().node_label(GPU, "h100")


@cases(
    Case("a flavor without any spec is a plain quota bucket", valid_flavor()),
    Case("Kueue form with topologyName", h100().topology_name("gpu")),
    Case("KEP inline levels", h100().levels(BLOCK, RACK)),
    Case("a tainted flavor with its toleration",
         h100().taint("nvidia.com/gpu", "present", "NoSchedule")
         .raw_toleration(key="nvidia.com/gpu", operator="Exists", effect="NoSchedule")),
    Case("an empty-key Exists toleration tolerates everything", h100().raw_toleration(operator="Exists")),
    Case("a NoExecute toleration with seconds",
         h100().raw_toleration(key="k", value="v", effect="NoExecute", tolerationSeconds=30)),
    Case("both topology forms at once", h100().topology_name("gpu").levels(BLOCK),
         want_errors=("spec.topology",)),
    Case("a topology with no node label to select nodes", valid_flavor().topology_name("gpu"),
         want_errors=("spec.nodeLabels",)),
    Case("inline levels with no node label", valid_flavor().levels(BLOCK),
         want_errors=("spec.nodeLabels",)),
    Case("inline levels empty", h100().levels(), want_errors=("spec.topology.levels",)),
    Case("inline levels repeat a label", h100().levels(RACK, RACK),
         want_errors=("spec.topology.levels[1]",)),
    Case("inline hostname not lowest", h100().levels("kubernetes.io/hostname", RACK),
         want_errors=("spec.topology.levels[0]",)),
    Case("inline level not a string", h100().levels(BLOCK, 7),
         want_errors=("spec.topology.levels[1]",)),
    Case("topologyName not a DNS subdomain", h100().topology_name("GPU_Topology"),
         want_errors=("spec.topologyName",)),
    Case("a node label key with two slashes", valid_flavor().node_label("a/b/c", "x"),
         want_errors=("spec.nodeLabels",)),
    Case("a node label value with a space", valid_flavor().node_label(GPU, "h 100"),
         want_errors=(f"spec.nodeLabels[{GPU}]",)),
    Case("a node label value of 64 characters", valid_flavor().node_label(GPU, "a" * 64),
         want_errors=(f"spec.nodeLabels[{GPU}]",)),
    Case("nine node labels exceed Kueue's limit of 8",
         valid_flavor().set("spec.nodeLabels", {f"l{i}": "x" for i in range(9)}),
         want_errors=("spec.nodeLabels",)),
    Case("a taint with an unknown effect", h100().taint("gpu", "", "NoRun"),
         want_errors=("spec.nodeTaints[0].effect",)),
    Case("a taint without key or effect", h100().set("spec.nodeTaints", [{"value": "x"}]),
         want_errors=("spec.nodeTaints[0].key", "spec.nodeTaints[0].effect")),
    Case("a toleration with an unknown operator", h100().raw_toleration(key="k", operator="Matches"),
         want_errors=("spec.tolerations[0].operator",)),
    Case("an empty-key toleration must use Exists", h100().raw_toleration(operator="Equal", value="x"),
         want_errors=("spec.tolerations[0].operator",)),
    Case("Exists with a value", h100().raw_toleration(key="k", operator="Exists", value="v"),
         want_errors=("spec.tolerations[0].value",)),
    Case("a toleration with an unknown effect", h100().raw_toleration(key="k", effect="Sometimes"),
         want_errors=("spec.tolerations[0].effect",)),
    Case("tolerationSeconds without NoExecute", h100().raw_toleration(key="k", tolerationSeconds=5),
         want_errors=("spec.tolerations[0].effect",)),
    Case("two taints with one key and effect, whatever their values",
         h100().taint("gpu", "a", "NoSchedule").taint("gpu", "b", "NoSchedule"),
         want_errors=("spec.nodeTaints[1]",)),
    Case("one key with two effects is two taints",
         h100().taint("gpu", "a", "NoSchedule").taint("gpu", "a", "NoExecute")),
    Case("inline levels that are not a list are reported once", h100().set("spec.topology", {"levels": "rack"}),
         want_errors=("spec.topology.levels",)),
)
def test_resource_flavor(case: Case) -> None:
    assert sorted(e.path for e in validate(case.manifest())) == sorted(case.want_errors)


def test_unsupported_taint_effect_lists_the_supported_values() -> None:
    errs = validate(h100().taint("gpu", "", "NoRun").build())
    assert [str(e) for e in errs] == ['spec.nodeTaints[0].effect: Unsupported value: "NoRun": supported '
                                      'values: "NoSchedule", "PreferNoSchedule", "NoExecute"']


def test_duplicate_taint_names_the_pair_and_the_rule() -> None:
    errs = validate(h100().taint("gpu", "a", "NoSchedule").taint("gpu", "b", "NoSchedule").build())
    assert [str(e) for e in errs] == ['spec.nodeTaints[1]: Duplicate value: "gpu:NoSchedule": taints must be '
                                      'unique by key and effect pair']


@cases(
    UpdateCase("a flavor without topology may change its labels", valid_flavor(), valid_flavor().node_label(GPU, "a")),
    UpdateCase("a Kueue-form topology flavor is frozen", h100().topology_name("gpu"),
               h100().topology_name("gpu").node_label("zone", "a"), want_errors=("spec",)),
    UpdateCase("a KEP-form topology flavor is frozen too", h100().levels(BLOCK, RACK),
               h100().levels(RACK), want_errors=("spec",)),
    UpdateCase("dropping the topology changes a frozen spec", h100().topology_name("gpu"), h100(),
               want_errors=("spec",)),
    UpdateCase("an unchanged topology flavor may be re-applied", h100().topology_name("gpu"),
               h100().topology_name("gpu").label("team", "ml")),
    UpdateCase("a plain flavor may gain a topology", h100(), h100().topology_name("gpu")),
)
def test_resource_flavor_update(case: UpdateCase) -> None:
    assert [e.path for e in validate_update(case.old.build(), case.new.build())] == list(case.want_errors)
