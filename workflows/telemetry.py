"""Process telemetry of a worker: the Prometheus endpoint and OpenTelemetry tracing.

Metrics: one ``temporalio.runtime.Runtime`` whose ``PrometheusConfig`` serves the SDK's own
metrics and the calibrator's (``workflows.metrics``, recorded through the same runtime's meter)
on one endpoint, 127.0.0.1:9464 unless ``--metrics-address`` or ``CALIBRATOR_METRICS_ADDRESS``
says otherwise (``off`` disables it).

Tracing follows the OpenTelemetry environment variables, so a worker is configured like any
other OTel-instrumented process: it is on when ``OTEL_TRACES_EXPORTER`` names an exporter or an
OTLP endpoint is set, and off otherwise (unlike the SDK default, which would export to
localhost:4317 unasked). Exporter options (endpoint, headers, certificates, timeouts,
compression), sampling (``OTEL_TRACES_SAMPLER``), batching (``OTEL_BSP_*``) and the resource
(``OTEL_SERVICE_NAME``, ``OTEL_RESOURCE_ATTRIBUTES``) are read by the OpenTelemetry SDK itself.
Nothing of OpenTelemetry is imported while tracing is off.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from temporalio.runtime import PrometheusConfig, Runtime, TelemetryConfig

from orchestrator.domain.errors import InputError
from workflows import metrics

DEFAULT_METRICS_ADDRESS = "127.0.0.1:9464"
METRICS_ADDRESS_ENV = "CALIBRATOR_METRICS_ADDRESS"
METRICS_OFF = "off"
MAX_ADDRESS_LENGTH = 64  # "[" + the longest IPv6 text (45) + "]:65535" fits

DEFAULT_SERVICE_NAME = "fleet-calibrator"
TRACES_EXPORTER_ENV = "OTEL_TRACES_EXPORTER"
ENDPOINT_ENVS = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
PROTOCOL_ENVS = ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
EXPORTERS = ("otlp", "console", "none")
PROTOCOLS = ("grpc", "http/protobuf")


# --------------------------------------------------------------------------------------------
# Metrics
# --------------------------------------------------------------------------------------------


def parse_metrics_address(
    text: str, source: str = "--metrics-address", example: str = DEFAULT_METRICS_ADDRESS
) -> str | None:
    """``IP:PORT`` to bind the endpoint to (None for ``off``); InputError naming ``source``.

    Only IP literals: the SDK's exporter binds a socket address and resolves no host names, and
    a port of 0 would bind somewhere nobody can find. The health endpoint takes the same form.
    """
    value = text.strip()
    if value == METRICS_OFF:
        return None
    hint = f"{source} {text!r}: expected IP:PORT such as {example}, or {METRICS_OFF}"
    if not value or len(value) > MAX_ADDRESS_LENGTH or ":" not in value:
        raise InputError(hint)
    host, _, port_text = value.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host, brackets = host[1:-1], True
    else:
        brackets = False
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        raise InputError(f"{hint} ({host!r} is not an IP address)") from None
    if (ip.version == 6) != brackets:
        raise InputError(f"{hint} (IPv6 addresses go in brackets: [::1]:9464)")
    if not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
        raise InputError(f"{hint} (port must be 1-65535)")
    return f"[{ip}]:{int(port_text)}" if brackets else f"{ip}:{int(port_text)}"


def metrics_address(flag: str | None, environ: Mapping[str, str]) -> str | None:
    """The flag, else ``CALIBRATOR_METRICS_ADDRESS``, else the loopback default."""
    if flag is not None:
        return parse_metrics_address(flag)
    if METRICS_ADDRESS_ENV in environ:
        return parse_metrics_address(environ[METRICS_ADDRESS_ENV], METRICS_ADDRESS_ENV)
    return DEFAULT_METRICS_ADDRESS


def runtime_for(address: str | None) -> Runtime:
    """A Temporal runtime serving Prometheus metrics on ``address`` (no endpoint for None).

    The SDK's own metric names and units stay as Temporal documents them (milliseconds, no
    ``_total`` suffix); the calibrator's histograms get buckets in seconds. A busy port is an
    InputError that names the address.
    """
    if address is None:
        return Runtime(telemetry=TelemetryConfig())
    config = PrometheusConfig(
        bind_address=address,
        histogram_bucket_overrides={k: list(v) for k, v in metrics.BUCKETS.items()},
    )
    try:
        return Runtime(telemetry=TelemetryConfig(metrics=config))
    except ValueError as err:
        raise InputError(f"cannot serve metrics on {address}: {err}") from None


# --------------------------------------------------------------------------------------------
# Tracing
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TracingSettings:
    """What the OTEL_* variables ask for: exporters (empty = tracing off) and the OTLP protocol."""

    exporters: tuple[str, ...] = ()
    protocol: str = "grpc"

    @property
    def enabled(self) -> bool:
        """Whether any span is recorded at all."""
        return bool(self.exporters)


def tracing_settings(environ: Mapping[str, str]) -> TracingSettings:
    """Read OTEL_SDK_DISABLED, OTEL_TRACES_EXPORTER, the OTLP endpoint and protocol variables."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return TracingSettings()
    raw = environ.get(TRACES_EXPORTER_ENV, "").strip()
    if raw:
        names = [n.strip().lower() for n in raw.split(",") if n.strip()]
        unknown = [n for n in names if n not in EXPORTERS]
        if unknown:
            raise InputError(
                f"{TRACES_EXPORTER_ENV}={raw!r}: unsupported exporter {unknown[0]!r} "
                f"(supported: {', '.join(EXPORTERS)})"
            )
        exporters = tuple(dict.fromkeys(n for n in names if n != "none"))
        if "none" in names and exporters:
            raise InputError(f"{TRACES_EXPORTER_ENV}={raw!r}: 'none' cannot be combined")
    elif any(environ.get(name, "").strip() for name in ENDPOINT_ENVS):
        exporters = ("otlp",)
    else:
        exporters = ()
    protocol = "grpc"
    for name in PROTOCOL_ENVS:
        value = environ.get(name, "").strip()
        if value:
            if value not in PROTOCOLS:
                raise InputError(
                    f"{name}={value!r}: unsupported OTLP protocol (supported: {', '.join(PROTOCOLS)})"
                )
            protocol = value
            break
    return TracingSettings(exporters, protocol)


@dataclass
class Tracing:
    """A tracer provider of our own, the Temporal interceptor on it, and the tracer for kube spans.

    Not installed as the global provider unless asked (tests run several in one process).
    """

    provider: Any  # opentelemetry.sdk.trace.TracerProvider
    interceptor: Any  # temporalio.contrib.opentelemetry.TracingInterceptor
    tracer: Any  # opentelemetry.trace.Tracer for kube calls

    def shutdown(self) -> None:
        """Flush and stop every span processor (exports what is still batched)."""
        self.provider.shutdown()


def start_tracing(
    settings: TracingSettings,
    *,
    exporters: Sequence[Any] = (),
    install_global: bool = False,
) -> Tracing | None:
    """Build tracing for ``settings`` (None when off), or for ``exporters`` given directly.

    Workflow spans are created even when the starter sent no trace context (a schedule, another
    process without tracing), so every calibration is traced; such spans are roots of their own.
    Spans are batched, except for exporters passed in (tests' in-memory exporters).
    """
    if not settings.enabled and not exporters:
        return None
    import opentelemetry.trace
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
    from temporalio.contrib.opentelemetry import TracingInterceptor

    resource = Resource.create()
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: DEFAULT_SERVICE_NAME}))
    provider = TracerProvider(resource=resource)
    for exporter in exporters:
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    for name in settings.exporters:
        provider.add_span_processor(BatchSpanProcessor(_exporter(name, settings.protocol)))
    tracer = provider.get_tracer("fleet-calibrator")
    if install_global:
        opentelemetry.trace.set_tracer_provider(provider)
    interceptor = TracingInterceptor(
        provider.get_tracer("temporalio"), always_create_workflow_spans=True
    )
    return Tracing(provider, interceptor, tracer)


def _exporter(name: str, protocol: str) -> Any:
    if name == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter()
    if protocol == "http/protobuf":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
            OTLPSpanExporter as HttpExporter,
        )

        return HttpExporter()
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter()
