"""Metrics and traces of a real calibration: Temporal dev server + local plane + real CAPI rollouts.

Two clusters (a managed topology and a plain KubeadmControlPlane) go from v1.33.0 to v1.34.0 on a
worker whose runtime serves Prometheus on a free loopback port and whose tracing exports into
memory (no network). The endpoint is scraped while the calibration runs (bounded polling until
both clusters have entered Pending and not both succeeded) and again after it ended, where every
series must agree with the run: clusters entering each phase, a step sample per step, a taint sample per cluster, a
placement run per ``replace``, no findings, and the SDK's own metrics. The spans must form one
trace from the client's StartWorkflow to the HTTP requests each kube call sends.
"""

from __future__ import annotations

import asyncio
import functools
import time
import uuid
from collections import Counter
from collections.abc import Iterator

import pytest
from kubernetes import client
from kubernetes.dynamic import DynamicClient
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from temporalio.runtime import Runtime

from orchestrator.kube import capi
from orchestrator.kube.backend.fleet import KubeFleetBackend
from orchestrator.kube.client import apply_all
from orchestrator.kube.templates import cluster_class_objects, cluster_objects
from orchestrator.localplane.plane import LocalPlane
from testkit.capi_waits import fully_at_version, wait_for
from testkit.prometheus import Scrape, free_address, scrape, scrape_until
from testkit.worker_rbac import WorkerIdentity, grant_kubeconfig_reader, grant_plan_store
from testkit.workflow_harness import start_dev_server
from workflows import metrics, telemetry
from workflows.client import start_calibration, status
from workflows.model import (
    CalibrationInput,
    CalibrationOptions,
    CalibrationProgress,
    ClusterState,
    Phase,
    Timeouts,
)
from workflows.worker import build_worker

pytestmark = pytest.mark.integration

NS = "calibrator-obs"
CLUSTERS = {"obs-topo": True, "obs-kcp": False}  # name -> managed topology
START, TARGET = "v1.33.0", "v1.34.0"
MACHINES = 2
CREATE_TIMEOUT = 300
CALIBRATION_TIMEOUT = 900
DELETE_TIMEOUT = 240
OPTIONS = CalibrationOptions(
    timeouts=Timeouts(
        activity_seconds=60, rollout_seconds=600, heartbeat_seconds=30, poll_seconds=2
    ),
)
WORKLOAD = {
    "apiVersion": "calibrator.dev/v1alpha1",
    "kind": "FleetWorkload",
    "metadata": {"name": "web", "namespace": NS},
    "spec": {
        "apis": ["apps/v1/Deployment"],
        "replicas": 2,
        "placement": {"clusterAffinity": {"matchLabels": {"env": "obs"}}},
    },
}
STUCK = (Phase.HALTED, Phase.AWAITING_DECISIONS, Phase.FAILED, Phase.ABORTED)


@pytest.fixture(scope="module")
def fleet(dyn: DynamicClient, mgmt: client.ApiClient) -> Iterator[None]:
    namespaces = dyn.resources.get(api_version="v1", kind="Namespace")
    namespaces.create(body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    grant_kubeconfig_reader(mgmt, NS)
    grant_plan_store(mgmt, NS)
    apply_all(dyn, cluster_class_objects(NS))
    for name, topology in CLUSTERS.items():
        apply_all(dyn, cluster_objects(name, NS, START, topology=topology, labels={"env": "obs"}))
    apply_all(dyn, [WORKLOAD])
    clusters = dyn.resources.get(api_version=capi.CLUSTER[0], kind=capi.CLUSTER[1])
    try:
        yield
    finally:
        for name in CLUSTERS:
            try:
                clusters.delete(name=name, namespace=NS)
            except Exception as err:
                print(f"delete {NS}/{name}: {err}")
        wait_for(
            "observability clusters deleted",
            lambda: not clusters.get(namespace=NS).to_dict()["items"],
            DELETE_TIMEOUT,
        )


async def _calibrate(
    backend: KubeFleetBackend, runtime: Runtime, address: str, tracing: telemetry.Tracing
) -> tuple[CalibrationProgress, Scrape]:
    """Run the calibration; returns its result and the scrape taken while it ran."""
    env = await start_dev_server(runtime=runtime, interceptors=[tracing.interceptor])
    try:
        task_queue = f"observability-it-{uuid.uuid4().hex[:8]}"
        async with build_worker(env.client, backend, task_queue=task_queue):
            handle = await start_calibration(
                env.client, CalibrationInput(target=TARGET, options=OPTIONS), task_queue=task_queue
            )
            deadline = time.monotonic() + CALIBRATION_TIMEOUT
            result_task = asyncio.ensure_future(handle.result())
            during: Scrape | None = None
            while not result_task.done():
                await asyncio.wait({result_task}, timeout=1)
                if result_task.done():
                    break
                if during is None:
                    # Scraped while the run is in flight: both clusters were planned (entered
                    # Pending) and they have not all succeeded yet.
                    current = await asyncio.to_thread(scrape, address)
                    planned = current.value(metrics.CLUSTER_TRANSITIONS, phase="Pending")
                    succeeded = current.value(metrics.CLUSTER_TRANSITIONS, phase="Succeeded")
                    if planned == len(CLUSTERS) and succeeded < len(CLUSTERS):
                        during = current
                progress = await status(env.client, handle.id)
                if progress.phase in STUCK:
                    raise AssertionError(f"calibration stuck in {progress.phase}: {progress}")
                if time.monotonic() > deadline:
                    raise AssertionError(f"calibration not finished: {progress}")
            result = result_task.result()
            assert during is not None, "no scrape saw the calibration in flight"
            return result, during
    finally:
        await env.shutdown()


def _one(spans: tuple[ReadableSpan, ...], name: str, parent: ReadableSpan) -> ReadableSpan:
    """A span called ``name`` whose parent is ``parent``."""
    children = [
        s
        for s in spans
        if s.name == name and s.parent is not None and s.parent.span_id == parent.context.span_id
    ]
    assert children, (
        f"no {name!r} under {parent.name!r}; its children: "
        f"{sorted({s.name for s in spans if s.parent and s.parent.span_id == parent.context.span_id})}"
    )
    return children[0]


def test_a_real_calibration_is_measured_and_traced(
    plane: LocalPlane,
    fleet: None,
    dyn: DynamicClient,
    mgmt: client.ApiClient,
    worker_identity: WorkerIdentity,
) -> None:
    for name in CLUSTERS:
        wait_for(
            f"{name} Available at {START}",
            functools.partial(fully_at_version, dyn, mgmt, NS, name, START, MACHINES),
            CREATE_TIMEOUT,
        )
    address = free_address()
    runtime = telemetry.runtime_for(address)  # serves until the test drops it
    exporter = InMemorySpanExporter()
    tracing = telemetry.start_tracing(telemetry.TracingSettings(), exporters=[exporter])
    assert tracing is not None
    # The worker authenticates as deploy/rbac's ServiceAccount, as in production.
    backend = KubeFleetBackend(worker_identity.client(), namespace=NS, tracer=tracing.tracer)
    try:
        result, during = asyncio.run(_calibrate(backend, runtime, address, tracing))
    finally:
        tracing.shutdown()
    assert result.phase == Phase.COMPLETED, result.message
    assert {c.name: c.state for c in result.clusters} == dict.fromkeys(
        CLUSTERS, ClusterState.SUCCEEDED
    )
    calibration = result.calibration_id

    # ---- metrics while the run was in flight: SDK and calibrator series on one endpoint.
    assert during.value("temporal_workflow_completed", workflow_type="FleetCalibration") == 0
    assert during.value("temporal_request") > 0  # the worker's own calls to the server
    assert during.value(metrics.CLUSTER_TRANSITIONS, phase="Succeeded") < 2
    assert during.value(metrics.CALIBRATIONS) == 0

    # ---- metrics after the run (the worker stopped; the runtime still serves what it recorded).
    after = scrape(address)
    entered = {s.labels["phase"]: s.value for s in after.named(metrics.CLUSTER_TRANSITIONS)}
    assert entered == dict.fromkeys(("Pending", "Running", "Succeeded"), len(CLUSTERS)), entered
    assert after.value(metrics.CALIBRATIONS, phase=Phase.COMPLETED.value) == 1
    assert not [s for s in after.samples if calibration in s.labels.values()]  # no per-run label
    steps = Counter(
        s.step_id.rsplit("/", 1)[1].split("-")[1] for c in result.clusters for s in c.steps
    )
    assert steps == {"controlPlane": len(CLUSTERS), "workers": len(CLUSTERS)}, steps
    step_seconds = 0.0
    for component, count in steps.items():
        h = after.histogram(metrics.STEP_DURATION, component=component, outcome="succeeded")
        assert h.count == count, (component, h)
        assert h.sum > 0 and h.buckets[float("inf")] == count, h
        step_seconds += h.sum
    assert after.histogram(metrics.STEP_DURATION, outcome="failed").count == 0
    gated = after.histogram(metrics.TAINT_GATED, outcome="upgraded")
    assert gated.count == len(CLUSTERS), gated
    assert gated.sum >= step_seconds, (gated, step_seconds)  # every step ran while tainted
    runs = sum(steps.values()) + 2 * len(CLUSTERS)  # before the first step, after each, after
    assert after.value(metrics.PLACEMENT_RUNS) == runs
    assert after.value(metrics.PLACEMENT_RUNS, outcome="placed") == runs
    assert after.histogram(metrics.PLACEMENT_DURATION).count == runs
    assert after.named(metrics.FINDINGS) == []  # the fleet's workload uses no removed API
    # The SDK counts a completion after reporting it: it may trail the result (bounded poll).
    scrape_until(
        address,
        "the SDK's completions",
        lambda s: (
            s.value("temporal_workflow_completed", workflow_type="FleetCalibration") == 1
            and s.value("temporal_workflow_completed", workflow_type="ClusterUpgrade") == 2
            and s.histogram(
                "temporal_activity_execution_latency", activity_type="wait_workers"
            ).count
            >= len(CLUSTERS)
        ),
    )
    print(
        f"\nscrape after the run: {len(after.samples)} samples; steps {dict(steps)} took "
        f"{step_seconds:.0f}s, tainted {gated.sum:.0f}s, {runs} placement runs"
    )

    # ---- traces: one trace from the start to the HTTP requests of each kube call.
    spans = exporter.get_finished_spans()
    (root,) = [s for s in spans if s.name == "StartWorkflow:FleetCalibration"]
    assert root.parent is None
    # Everything is in the start's trace, except the test's own progress queries (each one a
    # client call of its own).
    others = {s.name for s in spans if s.context.trace_id != root.context.trace_id}
    assert others <= {"QueryWorkflow:progress", "HandleQuery:progress"}, others
    _one(spans, "RunWorkflow:FleetCalibration", root)
    plan = _one(spans, "RunActivity:plan_fleet", _one(spans, "StartActivity:plan_fleet", root))
    inventory = _one(spans, "kube.inventory", plan)
    lists = _one(
        spans, "GET /apis/cluster.x-k8s.io/v1beta2/namespaces/{namespace}/clusters", inventory
    )
    assert lists.attributes is not None and lists.attributes["http.response.status_code"] == 200
    for name in CLUSTERS:
        (child,) = [
            s
            for s in spans
            if s.name == "StartChildWorkflow:ClusterUpgrade"
            and s.attributes is not None
            and s.attributes["temporalWorkflowID"] == calibration
            and any(
                c.name == "RunWorkflow:ClusterUpgrade"
                and c.attributes is not None
                and c.attributes["temporalWorkflowID"] == f"{calibration}/{name}"
                and c.parent is not None
                and c.parent.span_id == s.context.span_id
                for c in spans
            )
        ]
        patch = _one(
            spans,
            "RunActivity:patch_control_plane",
            _one(spans, "StartActivity:patch_control_plane", child),
        )
        write = _one(spans, "kube.set_control_plane_version", patch)
        assert write.attributes is not None and write.attributes["calibrator.cluster"] == name
        requests = [
            s for s in spans if s.parent is not None and s.parent.span_id == write.context.span_id
        ]
        assert any(s.name.startswith("PATCH ") for s in requests), [s.name for s in requests]
        # The workload cluster's API server is reached through its own client: traced too.
        preflight = _one(
            spans, "RunActivity:preflight", _one(spans, "StartActivity:preflight", child)
        )
        observe = _one(spans, "kube.observe", preflight)
        _one(spans, "GET /api/v1/nodes", observe)
    assert runtime is not None
