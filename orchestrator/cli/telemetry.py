"""Telemetry options shared by the commands that run a worker (``worker``, ``demo``) or start one.

Bad settings (an address that is not IP:PORT, a busy port, an unknown OTEL exporter) fail before
anything connects or starts: one stderr line, exit 2. Imports are lazy like the rest of the CLI.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Annotated, Any

import typer

from orchestrator.cli.output import fail

MetricsAddressOpt = Annotated[
    str | None,
    typer.Option(
        "--metrics-address",
        help="Serve Prometheus metrics on IP:PORT, or 'off' "
        "(default: $CALIBRATOR_METRICS_ADDRESS, else 127.0.0.1:9464).",
    ),
]


HealthAddressOpt = Annotated[
    str | None,
    typer.Option(
        "--health-address",
        help="Serve /livez and /readyz (the worker polls its task queue) on IP:PORT, or 'off' "
        "(default: $CALIBRATOR_HEALTH_ADDRESS, else 127.0.0.1:9465).",
    ),
]


def worker_health(flag: str | None) -> Any:
    """The bound health socket (None for ``off``): a bad address or busy port is exit 2."""
    from orchestrator.domain.errors import InputError
    from workflows import health

    try:
        address = health.health_address(flag, os.environ)
        return None if address is None else health.bind(address)
    except InputError as err:
        fail(str(err))


@dataclass
class WorkerTelemetry:
    """The runtime (metrics endpoint) and tracing a worker process runs with."""

    address: str | None
    runtime: Any  # temporalio.runtime.Runtime
    tracing: Any = None  # workflows.telemetry.Tracing | None
    interceptors: list[Any] = field(default_factory=list)

    @property
    def tracer(self) -> Any:
        """The tracer for kube spans (None when tracing is off)."""
        return None if self.tracing is None else self.tracing.tracer

    def describe(self) -> str:
        """One line for stderr: where metrics are, whether traces are exported."""
        where = f"http://{self.address}/metrics" if self.address else "off"
        return f"metrics: {where}; tracing: {'on' if self.tracing else 'off'}"

    def close(self) -> None:
        """Export the spans still batched."""
        if self.tracing is not None:
            self.tracing.shutdown()


def worker_telemetry(metrics_flag: str | None) -> WorkerTelemetry:
    """Validate the metrics address and OTEL_* variables, then bind the endpoint (exit 2 on error)."""
    from orchestrator.domain.errors import InputError
    from workflows import telemetry

    try:
        address = telemetry.metrics_address(metrics_flag, os.environ)
        settings = telemetry.tracing_settings(os.environ)
        runtime = telemetry.runtime_for(address)
    except InputError as err:
        fail(str(err))
    tracing = telemetry.start_tracing(settings, install_global=True)
    interceptors = [] if tracing is None else [tracing.interceptor]
    return WorkerTelemetry(address, runtime, tracing, interceptors)


def client_tracing() -> Any:
    """Tracing for a command that starts calibrations, so the whole run is one trace (or None)."""
    from orchestrator.domain.errors import InputError
    from workflows import telemetry

    try:
        settings = telemetry.tracing_settings(os.environ)
    except InputError as err:
        fail(str(err))
    return telemetry.start_tracing(settings, install_global=True)
