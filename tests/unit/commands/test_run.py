"""`tasq run`'s metrics and probe flags: combinations that cannot work exit 2 with one line before
anything starts, and the flags become the operator's `Endpoints` (metrics secure by default, their
certificate the webhooks' when none is given)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from controller.api import constants as c
from controller.cli import main
from controller.commands import run
from controller.kube.metrics import Endpoints


def parsed(*flags: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    run.register(parser.add_subparsers(dest="command"))
    return parser.parse_args(["run", *flags])


@pytest.mark.parametrize(("flags", "words"), [
    pytest.param(["--metrics-insecure"], "only on a loopback --metrics-host", id="insecure on every interface"),
    pytest.param(["--metrics-insecure", "--metrics-host", "10.1.2.3"], "not '10.1.2.3'", id="insecure on a pod IP"),
    pytest.param(["--metrics-port", "9000", "--probe-port", "9000"], "both 9000", id="one port for both"),
    pytest.param(["--probe-port", "70000"], "--probe-port 70000: want 0-65535", id="a probe port out of range"),
    pytest.param(["--metrics-port", "-2"], "--metrics-port -2: want 0-65535", id="a metrics port out of range"),
    pytest.param(["--metrics-cert-dir", "/nonexistent/certs"], "is not a directory", id="a missing cert dir"),
])
def test_flags_that_cannot_work_exit_2_naming_why(flags: list[str], words: str, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("{}")  # never read: the flags are refused first
    assert main(["run", "--kubeconfig", str(kubeconfig), *flags]) == 2
    err = capsys.readouterr().err
    assert words in err and len(err.strip().splitlines()) == 1


def test_by_default_metrics_are_https_on_8443_and_the_probes_plain_on_8081() -> None:
    args = parsed()
    assert run.endpoints_flags_problem(args) is None
    assert run.endpoints_from_flags(args) == Endpoints(
        metrics_host="0.0.0.0", metrics_port=c.METRICS_PORT, metrics_cert_dir=None, metrics_insecure=False,
        probe_host="0.0.0.0", probe_port=c.PROBE_PORT)
    assert (c.METRICS_PORT, c.PROBE_PORT) == (8443, 8081)


def test_the_metrics_certificate_is_the_webhooks_unless_given(tmp_path: Path) -> None:
    assert run.endpoints_from_flags(parsed("--webhook-cert-dir", str(tmp_path))).metrics_cert_dir == tmp_path
    own = tmp_path / "metrics"
    own.mkdir()
    assert run.endpoints_from_flags(parsed("--webhook-cert-dir", str(tmp_path), "--metrics-cert-dir",
                                           str(own))).metrics_cert_dir == own


def test_minus_one_serves_nothing_and_insecure_loopback_is_allowed() -> None:
    args = parsed("--metrics-port", "-1", "--probe-port", "-1")
    endpoints = run.endpoints_from_flags(args)
    assert (endpoints.metrics_port, endpoints.probe_port) == (None, None)
    args = parsed("--metrics-insecure", "--metrics-host", "127.0.0.1", "--metrics-port", "0", "--probe-port", "0")
    assert run.endpoints_flags_problem(args) is None


def test_log_flags_default_to_info_text_and_offer_what_the_log_setup_accepts() -> None:
    from controller.kube import logs

    assert (run.LOG_LEVELS, run.LOG_FORMATS) == (logs.LEVELS, logs.FORMATS)
    args = parsed()
    assert (args.log_level, args.log_format, args.verbose) == ("info", "text", False)
    args = parsed("--log-level", "debug", "--log-format", "json")
    assert (args.log_level, args.log_format) == ("debug", "json")


def test_an_unknown_log_format_exits_2_naming_the_choices(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["run", "--kubeconfig", "/dev/null", "--log-format", "yaml"])
    assert exited.value.code == 2
    assert "'text', 'json'" in capsys.readouterr().err


def test_the_build_info_names_the_version_and_commit_tasq_version_prints() -> None:
    from controller.commands.version import commit, package_version

    info = run.build_info()
    assert (info.git_version, info.git_commit) == (package_version(), commit())


def test_a_malformed_config_file_exits_2_naming_every_field_path(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("{}")  # never read: the configuration is refused first
    config = tmp_path / "config.yaml"
    config.write_text("apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n"
                      "waitForPodsReady: {timeout: soon, requeuingStrategy: {backofLimitCount: 3}}\n")
    assert main(["run", "--kubeconfig", str(kubeconfig), "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert "2 problem(s)" in err and "waitForPodsReady.timeout: 'soon' is not a duration" in err
    assert "waitForPodsReady.requeuingStrategy.backofLimitCount: unknown field" in err
    assert "Traceback" not in err


def test_a_missing_config_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("{}")
    assert main(["run", "--kubeconfig", str(kubeconfig), "--config", str(tmp_path / "none.yaml")]) == 2
    assert "No such file or directory" in capsys.readouterr().err


def test_the_config_file_becomes_the_operators_configuration(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("apiVersion: config.kueue.x-k8s.io/v1beta1\nkind: Configuration\n"
                      "waitForPodsReady: {enable: true, timeout: 4s}\n")
    args = parsed("--config", str(config))
    assert run.read_config_flag(args) is None
    assert args.configuration.wait_for_pods_ready.timeout_s == 4.0
    args = parsed()
    assert run.read_config_flag(args) is None and args.configuration.wait_for_pods_ready is None
