"""Bad telemetry settings stop ``worker``, ``demo`` and ``calibrate`` before anything starts."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from typer.testing import CliRunner

from orchestrator.cli.main import app
from testkit.prometheus import free_address
from workflows import telemetry

runner = CliRunner()

# Every variable these commands read, unset unless a case sets it.
CLEAN: dict[str, str | None] = {
    "CALIBRATOR_METRICS_ADDRESS": None,
    "CALIBRATOR_HEALTH_ADDRESS": None,
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


HEALTH_CASES = [
    ("health-flag", ["--health-address", "localhost:9465"], {}, "--health-address 'localhost:"),
    ("health-port", ["--health-address", "127.0.0.1:70000"], {}, "port must be 1-65535"),
    (
        "health-env",
        [],
        {"CALIBRATOR_HEALTH_ADDRESS": "::1:9465"},
        "CALIBRATOR_HEALTH_ADDRESS '::1:9465': expected IP:PORT such as 127.0.0.1:9465",
    ),
]


@pytest.mark.parametrize(
    ("flags", "env", "message"), [c[1:] for c in HEALTH_CASES], ids=[c[0] for c in HEALTH_CASES]
)
def test_worker_refuses_a_bad_health_address_before_reading_the_kubeconfig(
    flags: list[str], env: dict[str, str], message: str, tmp_path: Path
) -> None:
    missing = tmp_path / "no-such-kubeconfig"
    argv = ["worker", "--kubeconfig", str(missing), "--metrics-address", "off", *flags]
    _one_error(argv, env, message)


def test_worker_refuses_a_busy_health_port(tmp_path: Path) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen(1)
        address = f"127.0.0.1:{holder.getsockname()[1]}"
        missing = tmp_path / "no-such-kubeconfig"
        _one_error(
            ["worker", "--kubeconfig", str(missing), "--metrics-address", "off",
             "--health-address", address],
            {},
            f"cannot serve health on {address}: Address already in use",
        )  # fmt: skip


def test_the_worker_frees_its_health_port_when_it_stops_early(tmp_path: Path) -> None:
    address = free_address()
    missing = tmp_path / "no-such-kubeconfig"
    argv = ["worker", "--kubeconfig", str(missing), "--metrics-address", "off"]
    result = runner.invoke(app, [*argv, "--health-address", address], env=CLEAN)
    assert result.exit_code == 2 and "kubeconfig" in result.stderr, result.stderr
    with socket.socket() as again:  # bindable again: the worker's socket is closed
        host, port = address.rsplit(":", 1)
        again.bind((host, int(port)))


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
