"""Telemetry settings (metrics address, OTEL_* variables), kube span names, and the recorders.

The recorders are checked through a real SDK runtime and its real Prometheus endpoint: what a
scrape returns is the contract, not calls on a fake meter.
"""

from __future__ import annotations

import pytest

from orchestrator.domain.errors import InputError
from orchestrator.kube.tracing import request_route, request_spans
from testkit.prometheus import free_address, scrape
from workflows import metrics, telemetry

# ------------------------------------------------------------------------------- metrics address


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("127.0.0.1:9464", "127.0.0.1:9464"),
        (" 0.0.0.0:9000 ", "0.0.0.0:9000"),
        ("[::1]:9464", "[::1]:9464"),
        ("[0:0:0:0:0:0:0:1]:80", "[::1]:80"),
        ("127.0.0.1:065535", "127.0.0.1:65535"),
        ("off", None),
    ],
)
def test_metrics_address_accepts_ip_and_port(text: str, expected: str | None) -> None:
    assert telemetry.parse_metrics_address(text) == expected


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("", "expected IP:PORT"),
        ("9464", "expected IP:PORT"),
        ("localhost:9464", "not an IP address"),
        ("example.com:9464", "not an IP address"),
        ("127.0.0.1:0", "port must be 1-65535"),
        ("127.0.0.1:65536", "port must be 1-65535"),
        ("127.0.0.1:-1", "port must be 1-65535"),
        ("127.0.0.1:", "port must be 1-65535"),
        ("127.0.0.1:94a", "port must be 1-65535"),
        ("::1:9464", "IPv6 addresses go in brackets"),
        ("[127.0.0.1]:9464", "IPv6 addresses go in brackets"),
        ("[::1]", "not an IP address"),
        ("OFF", "expected IP:PORT"),
        ("1" * 80 + ":1", "expected IP:PORT"),
    ],
)
def test_metrics_address_rejects_anything_else_with_one_clear_message(text: str, why: str) -> None:
    with pytest.raises(InputError) as err:
        telemetry.parse_metrics_address(text)
    assert why in str(err.value) and "--metrics-address" in str(err.value)


@pytest.mark.parametrize(
    ("flag", "environ", "expected"),
    [
        (None, {}, telemetry.DEFAULT_METRICS_ADDRESS),
        (None, {"CALIBRATOR_METRICS_ADDRESS": "0.0.0.0:9100"}, "0.0.0.0:9100"),
        (None, {"CALIBRATOR_METRICS_ADDRESS": "off"}, None),
        ("127.0.0.1:9200", {"CALIBRATOR_METRICS_ADDRESS": "0.0.0.0:9100"}, "127.0.0.1:9200"),
        ("off", {"CALIBRATOR_METRICS_ADDRESS": "0.0.0.0:9100"}, None),
    ],
)
def test_the_flag_beats_the_environment_which_beats_the_default(
    flag: str | None, environ: dict[str, str], expected: str | None
) -> None:
    assert telemetry.metrics_address(flag, environ) == expected


def test_a_bad_environment_value_is_named_in_the_error() -> None:
    with pytest.raises(InputError, match="CALIBRATOR_METRICS_ADDRESS 'nope'"):
        telemetry.metrics_address(None, {"CALIBRATOR_METRICS_ADDRESS": "nope"})


def test_a_busy_port_is_input_error_naming_the_address() -> None:
    address = free_address()
    holder = telemetry.runtime_for(address)  # serves on the port while it is referenced
    with pytest.raises(InputError, match=f"cannot serve metrics on {address}"):
        telemetry.runtime_for(address)
    assert scrape(address).samples is not None and holder.metric_meter is not None


# ------------------------------------------------------------------------------- OTEL_* variables


@pytest.mark.parametrize(
    ("environ", "exporters", "protocol"),
    [
        ({}, (), "grpc"),
        ({"OTEL_TRACES_EXPORTER": "none"}, (), "grpc"),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317"}, ("otlp",), "grpc"),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, ("otlp",), "grpc"),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "  "}, (), "grpc"),
        ({"OTEL_TRACES_EXPORTER": "otlp"}, ("otlp",), "grpc"),
        ({"OTEL_TRACES_EXPORTER": "console, OTLP,console"}, ("console", "otlp"), "grpc"),
        (
            {"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317"},
            (),
            "grpc",
        ),
        (
            {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"},
            ("otlp",),
            "http/protobuf",
        ),
        (
            {
                "OTEL_TRACES_EXPORTER": "otlp",
                "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
                "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc",
            },
            ("otlp",),
            "grpc",
        ),
        ({"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}, (), "grpc"),
        ({"OTEL_SDK_DISABLED": "false", "OTEL_TRACES_EXPORTER": "otlp"}, ("otlp",), "grpc"),
    ],
)
def test_tracing_follows_the_otel_variables_and_is_off_by_default(
    environ: dict[str, str], exporters: tuple[str, ...], protocol: str
) -> None:
    settings = telemetry.tracing_settings(environ)
    assert settings == telemetry.TracingSettings(exporters, protocol)
    assert settings.enabled == bool(exporters)


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        ({"OTEL_TRACES_EXPORTER": "zipkin"}, "unsupported exporter 'zipkin'"),
        ({"OTEL_TRACES_EXPORTER": "otlp,jaeger"}, "unsupported exporter 'jaeger'"),
        ({"OTEL_TRACES_EXPORTER": "none,otlp"}, "'none' cannot be combined"),
        (
            {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"},
            "OTEL_EXPORTER_OTLP_PROTOCOL='http/json': unsupported OTLP protocol",
        ),
    ],
)
def test_unsupported_otel_settings_are_input_errors(environ: dict[str, str], message: str) -> None:
    with pytest.raises(InputError, match=message):
        telemetry.tracing_settings(environ)


def test_tracing_off_builds_nothing() -> None:
    assert telemetry.start_tracing(telemetry.TracingSettings()) is None


@pytest.mark.parametrize(
    ("settings", "exporter"),
    [
        (telemetry.TracingSettings(("console",)), "ConsoleSpanExporter"),
        (telemetry.TracingSettings(("otlp",), "grpc"), "grpc.trace_exporter.OTLPSpanExporter"),
        (
            telemetry.TracingSettings(("otlp",), "http/protobuf"),
            "http.trace_exporter.OTLPSpanExporter",
        ),
    ],
)
def test_each_exporter_is_built_for_its_protocol(
    settings: telemetry.TracingSettings, exporter: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_SERVICE_NAME", "calibrator-test")
    tracing = telemetry.start_tracing(settings)
    assert tracing is not None
    try:
        processors = tracing.provider._active_span_processor._span_processors
        (processor,) = processors
        built = type(processor.span_exporter)
        assert f"{built.__module__}.{built.__name__}".endswith(exporter)
        assert tracing.provider.resource.attributes["service.name"] == "calibrator-test"
    finally:
        tracing.shutdown()


def test_the_service_is_named_fleet_calibrator_unless_otel_says_otherwise(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OTEL_SERVICE_NAME", raising=False)
    monkeypatch.delenv("OTEL_RESOURCE_ATTRIBUTES", raising=False)
    tracing = telemetry.start_tracing(telemetry.TracingSettings(("console",)))
    assert tracing is not None
    try:
        assert tracing.provider.resource.attributes["service.name"] == "fleet-calibrator"
    finally:
        tracing.shutdown()


# ------------------------------------------------------------------------------- kube span names


@pytest.mark.parametrize(
    ("url", "route"),
    [
        (
            "https://127.0.0.1:19000/apis/cluster.x-k8s.io/v1beta2/namespaces/ns/clusters",
            "/apis/cluster.x-k8s.io/v1beta2/namespaces/{namespace}/clusters",
        ),
        (
            "https://h/apis/cluster.x-k8s.io/v1beta2/namespaces/ns/clusters/a?x=1",
            "/apis/cluster.x-k8s.io/v1beta2/namespaces/{namespace}/clusters/{name}",
        ),
        (
            "https://h/apis/calibrator.dev/v1alpha1/namespaces/n/fleetworkloads/w/status",
            "/apis/calibrator.dev/v1alpha1/namespaces/{namespace}/fleetworkloads/{name}/status",
        ),
        ("https://h/api/v1/nodes", "/api/v1/nodes"),
        ("https://h/api/v1/nodes/n1", "/api/v1/nodes/{name}"),
        ("https://h/api/v1/namespaces/kube-system", "/api/v1/namespaces/{name}"),
        (
            "https://h/api/v1/namespaces/ns/secrets/a-kubeconfig",
            "/api/v1/namespaces/{namespace}/secrets/{name}",
        ),
        (
            "https://h/apis/cluster.x-k8s.io/v1beta2/clusters?labelSelector=a%3Db",
            "/apis/cluster.x-k8s.io/v1beta2/clusters",
        ),
        ("https://h/apis/cluster.x-k8s.io/v1beta2", "/apis/cluster.x-k8s.io/v1beta2"),
        ("https://h/apis", "/apis"),
        ("https://h/version", "/version"),
        ("https://h/openapi/v2", "/openapi/v2"),
    ],
)
def test_request_routes_hide_namespaces_and_names(url: str, route: str) -> None:
    assert request_route(url) == route


# ------------------------------------------------------------------------------- recorders


def test_recorders_publish_through_the_runtime_endpoint() -> None:
    address = free_address()
    runtime = telemetry.runtime_for(address)
    live = [True]
    fleet = metrics.FleetMetrics(runtime.metric_meter, lambda: live[0])
    fleet.clusters({"Pending": 3})  # planned: 3 entered Pending
    fleet.clusters({"Pending": 2, "Running": 1})
    fleet.clusters({"Pending": 2, "Succeeded": 1})
    live[0] = False  # a replay: nothing is recorded, but the baseline follows the history
    fleet.clusters({"Pending": 1, "Running": 1, "Succeeded": 1})
    live[0] = True
    fleet.clusters({"Pending": 1, "Running": 1, "Succeeded": 1})  # unchanged: nothing new
    fleet.findings({"move": 2, "none": 0, "block": 1})
    fleet.ended("Completed")
    # After a worker restart the workflow replays its history: what it reaches while replaying
    # was counted by the worker that ran it live, so only the live changes after it count.
    restarted = metrics.FleetMetrics(runtime.metric_meter, lambda: live[0])
    live[0] = False
    restarted.clusters({"Pending": 2})
    restarted.clusters({"Running": 1, "Pending": 1})
    restarted.ended("Failed")  # a replayed end is not counted again
    live[0] = True
    restarted.clusters({"Running": 1, "Succeeded": 1})
    # A run continued as new starts from the counts it carried over.
    continued = metrics.FleetMetrics(runtime.metric_meter, lambda: True, {"Succeeded": 4})
    continued.clusters({"Succeeded": 5})
    continued.ended("Aborted")
    cluster = metrics.ClusterMetrics(runtime.metric_meter)
    cluster.step("controlPlane", metrics.SUCCEEDED, 42.0)
    cluster.step("controlPlane", metrics.FAILED, 7.0)
    cluster.step("workers", metrics.SUCCEEDED, 400.0)
    cluster.taint_removed(metrics.UPGRADED, 3000.0)
    placement = metrics.PlacementMetrics(runtime.metric_meter)
    placement.run(metrics.PLACED, 0.02)
    placement.run(metrics.BLOCKED, 0.2)
    placement.phase("turn", 45.0)
    placement.phase("read", 0.04)

    series = scrape(address)
    transitions = {s.labels["phase"]: s.value for s in series.named(metrics.CLUSTER_TRANSITIONS)}
    assert transitions == {"Pending": 3, "Running": 1, "Succeeded": 3}
    ended = {s.labels["phase"]: s.value for s in series.named(metrics.CALIBRATIONS)}
    assert ended == {"Completed": 1, "Aborted": 1}
    findings = {s.labels["action"]: s.value for s in series.named(metrics.FINDINGS)}
    assert findings == {"move": 2, "block": 1}
    steps = series.histogram(metrics.STEP_DURATION, component="controlPlane", outcome="succeeded")
    assert steps.count == 1 and steps.sum == 42.0
    assert steps.buckets[30.0] == 0 and steps.buckets[60.0] == 1  # buckets in seconds
    assert series.histogram(metrics.STEP_DURATION, outcome="failed").count == 1
    assert series.histogram(metrics.STEP_DURATION, component="workers").count == 1
    taint = series.histogram(metrics.TAINT_GATED, outcome="upgraded")
    assert taint.count == 1 and taint.buckets[3600.0] == 1 and taint.buckets[1800.0] == 0
    runs = {s.labels["outcome"]: s.value for s in series.named(metrics.PLACEMENT_RUNS)}
    assert runs == {"placed": 1, "blocked": 1}
    latency = series.histogram(metrics.PLACEMENT_DURATION, outcome="placed")
    assert latency.count == 1 and latency.buckets[0.025] == 1 and latency.buckets[0.01] == 0
    turn = series.histogram(metrics.PLACEMENT_PHASE, phase="turn")
    assert turn.count == 1 and turn.buckets[30.0] == 0 and turn.buckets[60.0] == 1
    assert series.histogram(metrics.PLACEMENT_PHASE, phase="read").sum == 0.04


def test_label_values_are_the_model_s_fixed_sets() -> None:
    from workflows.model import ClusterState, Phase

    assert tuple(s.value for s in ClusterState) == metrics.CLUSTER_PHASES
    assert set(metrics.FINAL_PHASES) == {Phase.COMPLETED, Phase.FAILED, Phase.ABORTED}


def test_a_failed_request_is_an_error_span_with_its_status() -> None:
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import StatusCode

    from orchestrator.kube.client import observe_requests
    from tests.orchestrator.kube.api_server import api_server

    exporter = InMemorySpanExporter()
    tracing = telemetry.start_tracing(telemetry.TracingSettings(), exporters=[exporter])
    assert tracing is not None
    with api_server() as api:
        observe_requests(api, request_spans(tracing.tracer))
        with pytest.raises(ApiException):
            client.CoreV1Api(api).read_namespaced_secret("c1-kubeconfig", "fleet")
    tracing.shutdown()
    (span,) = exporter.get_finished_spans()
    assert span.name == "GET /api/v1/namespaces/{namespace}/secrets/{name}"
    assert span.status.status_code == StatusCode.ERROR
    assert span.attributes is not None
    assert span.attributes["http.response.status_code"] == 404
    assert span.attributes["error.type"] == "404"
    assert str(span.attributes["url.full"]).endswith(
        "/api/v1/namespaces/fleet/secrets/c1-kubeconfig"
    )
