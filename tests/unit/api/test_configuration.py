"""Kueue's Configuration file: each version's defaults for waitForPodsReady, Go durations, and every
malformed field refused with its path (all of them at once, nothing half-applied)."""

from __future__ import annotations

import pytest

from controller.api.configuration import (
    Configuration,
    ConfigurationError,
    RequeuingStrategy,
    WaitForPodsReady,
    parse_configuration,
    parse_duration,
)

V1BETA1 = "apiVersion: config.kueue.x-k8s.io/v1beta1\nkind: Configuration\n"
V1BETA2 = "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n"


@pytest.mark.parametrize(("text", "seconds"), [
    pytest.param("5m", 300.0, id="minutes"),
    pytest.param("1h30m", 5400.0, id="hours and minutes"),
    pytest.param("2.5s", 2.5, id="a fraction"),
    pytest.param("500ms", 0.5, id="milliseconds"),
    pytest.param("0", 0.0, id="a bare zero, as Go accepts"),
    pytest.param("-3s", -3.0, id="negative (refused later, by the validation)"),
])
def test_durations_read_as_go_reads_them(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["5", "5 m", "m", "5d", ""])
def test_a_duration_without_a_known_unit_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="not a duration"):
        parse_duration(text)


def test_v1beta1_without_enable_leaves_pods_ready_off() -> None:
    assert parse_configuration(V1BETA1 + "waitForPodsReady: {timeout: 3s}\n").wait_for_pods_ready is None
    assert parse_configuration(V1BETA1).wait_for_pods_ready is None


def test_v1beta1_enabled_gets_kueues_v1beta1_defaults() -> None:
    settings = parse_configuration(V1BETA1 + "waitForPodsReady: {enable: true}\n").wait_for_pods_ready
    assert settings == WaitForPodsReady(timeout_s=300.0, recovery_timeout_s=300.0, block_admission=True,
                                        requeuing_strategy=RequeuingStrategy(
                                            timestamp="Eviction", backoff_limit_count=None,
                                            backoff_base_seconds=60, backoff_max_seconds=3600))


def test_v1beta2_is_on_even_without_the_section_with_kueues_v1beta2_defaults() -> None:
    settings = parse_configuration(V1BETA2).wait_for_pods_ready
    assert settings is not None
    assert (settings.timeout_s, settings.recovery_timeout_s, settings.block_admission) == (1800.0, 1800.0, False)


def test_every_field_given_is_kept() -> None:
    settings = parse_configuration(V1BETA2 + """
waitForPodsReady:
  timeout: 3s
  recoveryTimeout: 0s
  blockAdmission: true
  requeuingStrategy: {timestamp: Creation, backoffLimitCount: 2, backoffBaseSeconds: 1, backoffMaxSeconds: 4}
""").wait_for_pods_ready
    assert settings == WaitForPodsReady(timeout_s=3.0, recovery_timeout_s=None, block_admission=True,
                                        requeuing_strategy=RequeuingStrategy(
                                            timestamp="Creation", backoff_limit_count=2,
                                            backoff_base_seconds=1, backoff_max_seconds=4))


def test_kueues_other_fields_are_accepted_untouched() -> None:
    config = parse_configuration(V1BETA1 + "namespace: kueue-system\nmanageJobsWithoutQueueName: false\n"
                                 "integrations: {frameworks: [batch/job]}\n")
    assert config == Configuration(api_version="config.kueue.x-k8s.io/v1beta1", wait_for_pods_ready=None)


@pytest.mark.parametrize(("text", "errors"), [
    pytest.param("apiVersion: config.kueue.x-k8s.io/v1\nkind: Config\n",
                 ["apiVersion: 'config.kueue.x-k8s.io/v1' is not supported; want one of "
                  "config.kueue.x-k8s.io/v1beta1, config.kueue.x-k8s.io/v1beta2", "kind: 'Config'; want Configuration"],
                 id="an unknown version and kind"),
    pytest.param(V1BETA2 + "waitForPodReady: {}\n",
                 ["waitForPodReady: unknown field (Kueue's Configuration has no such field)"], id="a misspelt section"),
    pytest.param(V1BETA2 + "waitForPodsReady: {timeout: 3, blockAdmision: true}\n",
                 ["waitForPodsReady.timeout: want a duration string such as 5m or 30s, got int",
                  "waitForPodsReady.blockAdmision: unknown field"], id="a number for a duration and a typo"),
    pytest.param(V1BETA2 + "waitForPodsReady: {enable: true}\n",
                 ["waitForPodsReady.enable: not in v1beta2 (the section's presence enables it); remove it, or use "
                  "apiVersion config.kueue.x-k8s.io/v1beta1"], id="v1beta1's enable in a v1beta2 file"),
    pytest.param(V1BETA1 + "waitForPodsReady: {enable: true, timeout: -1s, recoveryTimeout: -2s, "
                 "requeuingStrategy: {timestamp: Admission, backoffLimitCount: -1}}\n",
                 ["waitForPodsReady.timeout: must be greater than or equal to 0",
                  "waitForPodsReady.recoveryTimeout: must be greater than or equal to 0",
                  "waitForPodsReady.requeuingStrategy.timestamp: 'Admission' is not supported; want Eviction or Creation",
                  "waitForPodsReady.requeuingStrategy.backoffLimitCount: -1 must be greater than or equal to 0"],
                 id="negative values and an unknown timestamp, all reported"),
    pytest.param("- a\n- b\n", ["want a mapping (kind: Configuration), got list"], id="not a mapping"),
    pytest.param("a: [\n", ["not valid YAML at line 2, column 1: expected the node content, but found '<stream end>'"],
                 id="not YAML"),
])
def test_malformed_files_name_every_field_path(text: str, errors: list[str]) -> None:
    with pytest.raises(ConfigurationError) as raised:
        parse_configuration(text, "f.yaml")
    assert raised.value.errors == errors
    assert str(raised.value).startswith("f.yaml: ")
