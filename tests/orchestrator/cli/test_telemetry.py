"""Bad telemetry settings stop ``worker``, ``demo`` and ``calibrate`` before anything starts."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from orchestrator.cli.main import app
from tests.workflows.prometheus import free_address
from workflows import telemetry

runner = CliRunner()

# Every variable these commands read, unset unless a case sets it.
CLEAN: dict[str, str | None] = {
    "CALIBRATOR_METRICS_ADDRESS": None,
    "OTEL_SDK_DISABLED": None,
    "OTEL_TRACES_EXPORTER": None,
    "OTEL_EXPORTER_OTLP_ENDPOINT": None,
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": None,
    "OTEL_EXPORTER_OTLP_PROTOCOL": None,
    "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": None,
}

CASES = [
    ("flag", ["--metrics-address", "localhost:9464"], {}, "'localhost' is not an IP address"),
    ("port", ["--metrics-address", "127.0.0.1:0"], {}, "port must be 1-65535"),
    ("env", [], {"CALIBRATOR_METRICS_ADDRESS": "9464"}, "CALIBRATOR_METRICS_ADDRESS '9464'"),
    ("exporter", [], {"OTEL_TRACES_EXPORTER": "zipkin"}, "unsupported exporter 'zipkin'"),
    (
        "protocol",
        [],
        {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "udp"},
        "unsupported OTLP protocol",
    ),
]


def _one_error(argv: list[str], env: dict[str, str], message: str) -> None:
    result = runner.invoke(app, argv, env={**CLEAN, **env})
    assert result.exit_code == 2, (result.output, result.exception)
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert message in lines[0], lines[0]


@pytest.mark.parametrize(
    ("flags", "env", "message"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_worker_refuses_bad_telemetry_before_reading_the_kubeconfig(
    flags: list[str], env: dict[str, str], message: str, tmp_path: Path
) -> None:
    missing = tmp_path / "no-such-kubeconfig"
    _one_error(["worker", "--kubeconfig", str(missing), *flags], env, message)


@pytest.mark.parametrize(
    ("flags", "env", "message"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_demo_refuses_bad_telemetry_before_starting_anything(
    flags: list[str], env: dict[str, str], message: str
) -> None:
    _one_error(["demo", *flags], env, message)


def test_worker_refuses_a_busy_metrics_port(tmp_path: Path) -> None:
    address = free_address()
    holder = telemetry.runtime_for(address)
    missing = tmp_path / "no-such-kubeconfig"
    _one_error(
        ["worker", "--kubeconfig", str(missing), "--metrics-address", address],
        {},
        f"cannot serve metrics on {address}",
    )
    assert holder.metric_meter is not None


def test_calibrate_refuses_bad_otel_settings_before_connecting() -> None:
    _one_error(
        ["calibrate", "-t", "v1.35.0", "--address", "127.0.0.1:9"],
        {"OTEL_TRACES_EXPORTER": "jaeger"},
        "unsupported exporter 'jaeger'",
    )
