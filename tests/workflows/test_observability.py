"""Metrics and traces of whole calibrations, on a real Temporal server and the in-memory fleet.

Metrics: the worker's runtime serves Prometheus; after the run the scrape must agree with the
run's own progress (clusters entering each phase, one step sample per step, one taint sample per cluster,
one placement run per ``replace``, the plan's findings by action) next to the SDK's own metrics.

Tracing: an in-memory exporter on the real dev server (no network); every span of the run is in
the trace the client's StartWorkflow span began, with workflow and activity spans where the
TracingInterceptor puts them. Kube spans need a real API server: tests/integration/test_observability.py.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from testkit.prometheus import free_address, scrape, scrape_until
from testkit.workflow_harness import Calibration, Harness, cluster, in_memory, start_dev_server
from workflows import metrics, telemetry
from workflows.model import CalibrationProgress, ClusterState, Phase
from workflows.worker import build_worker

FLOW_SCHEMA = "flowcontrol.apiserver.k8s.io/v1beta3/FlowSchema"  # removed in 1.32


def _fleet() -> Any:
    """Two clusters to calibrate; a workload on one of them that v1.32 breaks moves to ``spare``."""
    return in_memory(
        cluster("old", "v1.31.13", labels={"calibrate": "yes"}, pools=("md-0", "md-1")),
        cluster("mid", "v1.32.9", labels={"calibrate": "yes"}),
        cluster("spare", "v1.31.13"),
        workloads=(
            {
                "name": "flow-tuner",
                "namespace": "platform",
                "apis": [FLOW_SCHEMA],
                "placement": {"clusters": ["old"], "maxClusters": 1},
            },
            {"name": "web", "namespace": "shop", "apis": ["apps/v1/Deployment"], "replicas": 2},
        ),
    )


def _steps_by_component(result: CalibrationProgress) -> Counter[str]:
    """Planned steps per component (step ids are ``<calibration>/<cluster>/<nn>-<component>-<v>``)."""
    return Counter(
        s.step_id.rsplit("/", 1)[1].split("-")[1] for c in result.clusters for s in c.steps
    )


def test_the_endpoint_reports_the_calibration_it_served(harness: Harness) -> None:
    address = free_address()
    runtime = telemetry.runtime_for(address)
    fleet = _fleet()

    async def body(c: Calibration) -> None:
        handle = await c.start("v1.33.5", selector="calibrate=yes")
        result = await handle.result()
        assert result.phase == Phase.COMPLETED, result.message
        assert {x.name: x.state for x in result.clusters} == {
            "old": ClusterState.SUCCEEDED,
            "mid": ClusterState.SUCCEEDED,
        }
        assert fleet.workloads["platform/flow-tuner"].placement.clusters == ("spare",)
        series = await asyncio.to_thread(scrape, address)

        # Clusters entering each phase: both planned (Pending), run and succeeded; one
        # calibration ended Completed.
        entered = {s.labels["phase"]: s.value for s in series.named(metrics.CLUSTER_TRANSITIONS)}
        assert entered == {"Pending": 2, "Running": 2, "Succeeded": 2}, entered
        assert series.value(metrics.CALIBRATIONS, phase="Completed") == 1
        assert series.value(metrics.CALIBRATIONS) == 1
        # One sample per step attempt, by component; every attempt succeeded.
        steps = _steps_by_component(result)
        assert set(steps) == {"controlPlane", "workers"}, steps
        for component, count in steps.items():
            h = series.histogram(metrics.STEP_DURATION, component=component, outcome="succeeded")
            assert h.count == count, (component, h)
        assert series.histogram(metrics.STEP_DURATION, outcome="failed").count == 0
        # The taint came off each upgraded cluster once.
        assert series.histogram(metrics.TAINT_GATED, outcome="upgraded").count == 2
        assert series.histogram(metrics.TAINT_GATED, outcome="released").count == 0
        # Placement ran before the first step, after every step and after the upgrade.
        runs = sum(steps.values()) + 2 * len(result.clusters)
        assert series.value(metrics.PLACEMENT_RUNS, outcome="placed") == runs
        assert series.value(metrics.PLACEMENT_RUNS) == runs
        assert series.histogram(metrics.PLACEMENT_DURATION).count == runs
        # Each run (one round: nothing else writes this fleet) read, placed or not, and wrote.
        for phase in ("turn", "read", "write"):
            assert series.histogram(metrics.PLACEMENT_PHASE, phase=phase).count == runs, phase
        # The plan's one finding: flow-tuner on old, moved to spare.
        assert {s.labels["action"]: s.value for s in series.named(metrics.FINDINGS)} == {"move": 1}
        # The SDK's own metrics on the same endpoint (its core counts a completion after
        # reporting it, so they may trail the result by a moment: bounded polling).
        await asyncio.to_thread(
            scrape_until,
            address,
            "the SDK's completions",
            lambda s: (
                s.value("temporal_workflow_completed", workflow_type="ClusterUpgrade") == 2
                and s.value("temporal_workflow_completed", workflow_type="FleetCalibration") == 1
                and s.histogram("temporal_activity_execution_latency").count >= runs
            ),
        )

        # A second calibration (both clusters already at the target): counts grow, series do
        # not gain a label value from the run; every calibrator label is from its fixed set.
        again = await c.start("v1.33.5", selector="calibrate=yes")
        assert (await again.result()).phase == Phase.COMPLETED
        after = await asyncio.to_thread(scrape, address)
        assert after.value(metrics.CALIBRATIONS, phase="Completed") == 2
        assert after.value(metrics.CLUSTER_TRANSITIONS, phase="UpToDate") == 2
        _assert_bounded(after, (handle.id, again.id))

    harness.run(fleet, body, runtime=runtime)


SDK_LABELS = {"namespace", "task_queue", "workflow_type", "activity_type", "service_name", "le"}


def _assert_bounded(series: Any, run_ids: tuple[str, ...]) -> None:
    """Every calibrator_* label is the SDK's or takes a value from ``metrics.LABELS``."""
    ours = [s for s in series.samples if s.name.startswith("calibrator_")]
    assert ours
    for sample in ours:
        base = sample.name.removesuffix("_bucket").removesuffix("_count").removesuffix("_sum")
        allowed = metrics.LABELS[base]
        for label, value in sample.labels.items():
            assert value not in run_ids, sample
            assert label in SDK_LABELS or value in allowed[label], sample


def _by_name(spans: tuple[ReadableSpan, ...], name: str) -> list[ReadableSpan]:
    found = [s for s in spans if s.name == name]
    assert found, f"no span {name!r} among {sorted({s.name for s in spans})}"
    return found


def _parent_of(span: ReadableSpan) -> int | None:
    return None if span.parent is None else span.parent.span_id


def test_a_traced_calibration_is_one_trace_from_start_to_activities() -> None:
    exporter = InMemorySpanExporter()
    tracing = telemetry.start_tracing(telemetry.TracingSettings(), exporters=[exporter])
    assert tracing is not None
    fleet = in_memory(cluster("solo", "v1.32.9"))

    async def main() -> CalibrationProgress:
        env = await start_dev_server(interceptors=[tracing.interceptor])
        try:
            c = Calibration(env, env.client, fleet, f"trace-{uuid.uuid4().hex[:8]}", "local")
            async with build_worker(env.client, fleet, task_queue=c.task_queue):
                return await (await c.start("v1.33.5")).result()
        finally:
            await env.shutdown()

    try:
        result = asyncio.run(main())
    finally:
        tracing.shutdown()
    assert result.phase == Phase.COMPLETED, result.message
    spans = exporter.get_finished_spans()

    (root,) = _by_name(spans, "StartWorkflow:FleetCalibration")
    assert root.parent is None
    trace_id = root.context.trace_id
    assert all(s.context.trace_id == trace_id for s in spans), "a span left the trace"
    # The workflow, and the activity it schedules, hang off the start.
    (run,) = _by_name(spans, "RunWorkflow:FleetCalibration")
    assert _parent_of(run) == root.context.span_id
    (schedule,) = _by_name(spans, "StartActivity:plan_fleet")
    assert _parent_of(schedule) == root.context.span_id
    (execute,) = _by_name(spans, "RunActivity:plan_fleet")
    assert _parent_of(execute) == schedule.context.span_id
    assert execute.attributes is not None
    assert execute.attributes["temporalWorkflowID"] == result.calibration_id
    # The cluster's child workflow and its activities, one level further down.
    (child_start,) = _by_name(spans, "StartChildWorkflow:ClusterUpgrade")
    assert _parent_of(child_start) == root.context.span_id
    (child,) = _by_name(spans, "RunWorkflow:ClusterUpgrade")
    assert _parent_of(child) == child_start.context.span_id
    (taint,) = _by_name(spans, "StartActivity:add_taint")
    assert _parent_of(taint) == child_start.context.span_id
    (tainting,) = _by_name(spans, "RunActivity:add_taint")
    assert _parent_of(tainting) == taint.context.span_id
