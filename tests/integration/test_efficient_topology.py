"""Efficient topology upgrades on real CAPI: workers move only where the plan moves them.

One managed-topology cluster (1 control-plane Machine + 1 worker) is calibrated v1.33.0 → v1.35.0.
The plan is cluster-api's chained, efficient upgrade: the control plane visits v1.34.0 and
v1.35.0, the workers step once, to v1.35.0, at the end. The backend holds the
MachineDeployment topology back with CAPI's ``topology.cluster.x-k8s.io/defer-upgrade`` while the
control plane climbs and releases it for the worker step. A 1-second poller records every Machine
it sees; the test asserts that no worker Machine ever ran v1.34.0, that the control plane visited
both minors, that every Machine ends at the target with the Cluster Available and untainted, and
that nothing is left deferred. It prints the calibration's wall time (docs/workflows.md).
"""

from __future__ import annotations

import asyncio
import functools
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from kubernetes import client
from kubernetes.dynamic import DynamicClient

from orchestrator.domain.taints import SCHEDULABLE_LABEL, UPGRADING_TAINT_KEY, decode_taints
from orchestrator.kube import capi
from orchestrator.kube.backend.fleet import KubeFleetBackend
from orchestrator.kube.client import api_client, apply_all, dynamic
from orchestrator.kube.templates import cluster_class_objects, cluster_objects
from orchestrator.localplane.plane import LocalPlane
from testkit.capi_waits import (
    fully_at_version,
    get,
    machines,
    wait_for,
)
from testkit.workflow_harness import start_dev_server
from tests.orchestrator.kube.backend.recording_backend import RecordingKubeBackend
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

NS = "calibrator-eff"
NAME = "eff-topo"
START, MIDDLE, TARGET = "v1.33.0", "v1.34.0", "v1.35.0"
MACHINES = 2
CREATE_TIMEOUT = 300
CALIBRATION_TIMEOUT = 900
DEFER = "topology.cluster.x-k8s.io/defer-upgrade"
UNSAFE = "unsafe.topology.cluster.x-k8s.io/disable-update-version-check"
OPTIONS = CalibrationOptions(
    worker_concurrency=1,
    timeouts=Timeouts(
        activity_seconds=60, rollout_seconds=600, heartbeat_seconds=30, poll_seconds=2
    ),
)
STUCK = (Phase.HALTED, Phase.AWAITING_DECISIONS, Phase.FAILED, Phase.ABORTED)


@pytest.fixture(scope="module")
def cluster(dyn: DynamicClient) -> Iterator[None]:
    namespaces = dyn.resources.get(api_version="v1", kind="Namespace")
    namespaces.create(body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    apply_all(dyn, cluster_class_objects(NS))
    apply_all(dyn, cluster_objects(NAME, NS, START, labels={"env": "eff"}))
    clusters = dyn.resources.get(api_version=capi.CLUSTER[0], kind=capi.CLUSTER[1])
    try:
        yield
    finally:
        try:
            clusters.delete(name=NAME, namespace=NS, _request_timeout=60)
        except Exception as err:
            print(f"delete {NS}/{NAME}: {err}")
        wait_for(
            "cluster deleted",
            lambda: not clusters.get(namespace=NS, _request_timeout=60).to_dict()["items"],
            240,
        )


@dataclass
class Seen:
    """What the poller saw: Machines by role and version, and the declared KCP versions."""

    worker_versions: dict[str, set[str]] = field(default_factory=dict)  # version -> machines
    cp_versions: dict[str, set[str]] = field(default_factory=dict)
    kcp_versions: list[str] = field(default_factory=list)
    polls: int = 0


def _poll(dyn: DynamicClient, seen: Seen, stop: threading.Event) -> None:
    while not stop.is_set():
        try:
            for m in machines(dyn, NS, NAME):
                labels = m["metadata"].get("labels") or {}
                bucket = (
                    seen.cp_versions
                    if "cluster.x-k8s.io/control-plane" in labels
                    else seen.worker_versions
                )
                bucket.setdefault(str(m["spec"].get("version")), set()).add(m["metadata"]["name"])
            kcp = get(dyn, capi.KUBEADM_CONTROL_PLANE, NS, _kcp_name(dyn))
            version = str(kcp["spec"]["version"])
            if not seen.kcp_versions or seen.kcp_versions[-1] != version:
                seen.kcp_versions.append(version)
            seen.polls += 1
        except Exception as err:
            print(f"poll: {err}")
        stop.wait(1.0)


def _names(by_version: dict[str, set[str]]) -> dict[str, list[str]]:
    return {v: sorted(n) for v, n in sorted(by_version.items())}


def _kcp_name(dyn: DynamicClient) -> str:
    return str(get(dyn, capi.CLUSTER, NS, NAME)["spec"]["controlPlaneRef"]["name"])


async def _calibrate(backend: KubeFleetBackend) -> tuple[CalibrationProgress, float]:
    env = await start_dev_server()
    try:
        task_queue = f"efficient-it-{uuid.uuid4().hex[:8]}"
        async with build_worker(env.client, backend, task_queue=task_queue):
            began = time.monotonic()
            handle = await start_calibration(
                env.client, CalibrationInput(target=TARGET, options=OPTIONS), task_queue=task_queue
            )
            result_task = asyncio.ensure_future(handle.result())
            while not result_task.done():
                await asyncio.wait({result_task}, timeout=5)
                if result_task.done():
                    break
                progress = await status(env.client, handle.id)
                if progress.phase in STUCK or time.monotonic() - began > CALIBRATION_TIMEOUT:
                    raise AssertionError(
                        f"calibration stuck in {progress.phase} after "
                        f"{time.monotonic() - began:.0f}s: "
                        + "; ".join(f"{c.name}: {c.state} {c.message}" for c in progress.clusters)
                    )
            return result_task.result(), time.monotonic() - began
    finally:
        await env.shutdown()


def test_topology_workers_skip_the_intermediate_minor(
    plane: LocalPlane, cluster: None, dyn: DynamicClient, mgmt: client.ApiClient
) -> None:
    summary = wait_for(
        f"{NAME} Available at {START}",
        functools.partial(fully_at_version, dyn, mgmt, NS, NAME, START, MACHINES),
        CREATE_TIMEOUT,
    )
    before = frozenset(summary["machines"])
    backend = RecordingKubeBackend(api_client(plane.kubeconfig), namespace=NS)
    seen = Seen()
    stop = threading.Event()
    poller = threading.Thread(
        target=_poll, args=(dynamic(api_client(plane.kubeconfig)), seen, stop), daemon=True
    )
    poller.start()
    try:
        result, wall = asyncio.run(_calibrate(backend))
    finally:
        stop.set()
        poller.join(timeout=30)
    print(
        f"\nefficient topology calibration {START} -> {TARGET} of {NAME}: wall {wall:.1f}s; "
        f"worker Machines seen {_names(seen.worker_versions)}; "
        f"control-plane Machines seen {_names(seen.cp_versions)}; "
        f"KCP versions {seen.kcp_versions}; {seen.polls} polls; writes "
        f"{[(p.component, p.version, p.kind) for p in backend.patch_log]}"
    )

    assert result.phase == Phase.COMPLETED, result.message
    (progress,) = result.clusters
    assert progress.state == ClusterState.SUCCEEDED, progress.message
    steps = [s.description for s in progress.steps]
    assert steps[:2] == [f"controlPlane -> {MIDDLE}", f"controlPlane -> {TARGET}"], steps
    assert len(steps) == 3 and steps[2].startswith("workers "), steps
    assert steps[2].endswith(f" -> {TARGET}"), steps

    # No worker Machine ever ran the intermediate minor; the control plane visited both minors.
    assert MIDDLE not in seen.worker_versions, seen.worker_versions
    assert set(seen.worker_versions) == {START, TARGET}, seen.worker_versions
    assert {START, MIDDLE, TARGET} <= set(seen.cp_versions), seen.cp_versions
    assert seen.kcp_versions == [START, MIDDLE, TARGET], seen.kcp_versions

    # Every Machine at the target with a Ready Node, the Cluster Available, untainted.
    summary = wait_for(
        f"{NAME} at {TARGET}",
        functools.partial(fully_at_version, dyn, mgmt, NS, NAME, TARGET, MACHINES, replaced=before),
        60,
    )
    assert not before & set(summary["machines"])
    obj = get(dyn, capi.CLUSTER, NS, NAME)
    annotations = obj["metadata"].get("annotations") or {}
    taints = decode_taints(annotations.get("calibrator.dev/taints"))
    assert not [t for t in taints if t.key == UPGRADING_TAINT_KEY], taints
    assert obj["metadata"]["labels"][SCHEDULABLE_LABEL] == "true"
    assert capi.is_true(obj, "Available")

    # Nothing left deferred, no webhook bypass left behind; each step written exactly once.
    for md in obj["spec"]["topology"]["workers"]["machineDeployments"]:
        assert DEFER not in ((md.get("metadata") or {}).get("annotations") or {}), md
    assert UNSAFE not in annotations, annotations
    keys = [(p.component, p.version) for p in backend.patch_log]
    assert len(keys) == len(set(keys)), backend.patch_log
    assert [(p.component == "controlPlane", p.version) for p in backend.patch_log] == [
        (True, MIDDLE),
        (True, TARGET),
        (False, TARGET),
    ], backend.patch_log
