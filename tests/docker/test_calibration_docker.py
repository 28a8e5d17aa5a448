"""A calibration end to end on Docker: the real FleetCalibration workflow upgrades a CAPD docker
cluster (real node containers, real kubelets) from v1.34.12 to v1.35.8 (issue 16, item 4).

One cluster from capi-templates/docker (1 control-plane node, 1 worker) runs a Deployment of two
pause pods guarded by a PodDisruptionBudget (minAvailable 1). The project's worker
(``workflows.worker.build_worker`` on ``KubeFleetBackend``) runs on the Temporal dev server, as in
tests/integration/test_calibration.py; the KCP rollout replaces the control-plane container and
the MachineDeployment rollout the worker's. A sampler thread reads, once a second, the Cluster on
the management plane (taints, declared version) and the Deployment, PDB and pods on the workload
cluster, for the whole run. Asserted afterwards: kubelets at the target, the PDB never broken and
evictions seen (pods recreated on the new worker, Ready), CoreDNS Ready at the v1.35 image, the
upgrade taint held from before the first version patch to the end and gone after.

Prints the per-step times (the workflow's own StepProgress started/finished, and the CAPI
rollouts the sampler saw) and ``docker stats`` of each node container, for docs/benchmarks.md.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from benchmarks.bench_capd_capacity import container_stats
from benchmarks.bench_capd_docker import NS, create_and_time
from orchestrator.domain.taints import TAINTS_ANNOTATION, UPGRADING_TAINT_KEY, decode_taints
from orchestrator.kube import capi, workload
from orchestrator.kube.client import RequestPolicy, api_client, dynamic
from orchestrator.localplane import dockerenv
from orchestrator.localplane.dockerengine import DockerEngine
from orchestrator.localplane.plane import LocalPlane
from testkit.capi_waits import fully_at_version, get, machines, wait_for
from testkit.workflow_harness import start_dev_server
from testkit.workload_objects import (
    APP,
    APP_NS,
    COREDNS_TARGET_IMAGE,
    MIN_AVAILABLE,
    REPLICAS,
    app_objects,
)
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

pytestmark = pytest.mark.docker

START, TARGET = "v1.34.12", "v1.35.8"
CLUSTER = "e2e1"
CREATE_TIMEOUT = 900
CALIBRATION_TIMEOUT = 1800
OPTIONS = CalibrationOptions(
    worker_concurrency=1,
    timeouts=Timeouts(
        activity_seconds=120, rollout_seconds=1500, heartbeat_seconds=60, poll_seconds=2
    ),
)
STUCK = (Phase.HALTED, Phase.AWAITING_DECISIONS, Phase.FAILED, Phase.ABORTED)
# The sampler's workload requests: one short try each, so that a sample is never older than ~5 s
# (the API server is briefly unreachable while the control-plane container is replaced).
SAMPLE_REQUESTS = RequestPolicy(timeout=5.0, attempts=1)


def _pod_ready(pod: Any) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])


@dataclass
class Sample:
    """One look at both sides, seconds from the calibration's start."""

    at: float
    taint: bool | None = None  # management plane: the Cluster carries the upgrade taint
    declared: str | None = None  # management plane: the Cluster's topology version
    available: int | None = None  # workload: the Deployment's available replicas
    pdb_healthy: int | None = None
    pods: dict[str, tuple[str, bool]] = field(default_factory=dict)  # uid -> (node, ready)


def sample_once(dyn: Any, mgmt: client.ApiClient, wl: client.ApiClient | None, t0: float) -> Sample:
    s = Sample(round(time.monotonic() - t0, 1))
    try:
        cluster = get(dyn, capi.CLUSTER, NS, CLUSTER)
        text = (cluster["metadata"].get("annotations") or {}).get(TAINTS_ANNOTATION)
        s.taint = any(t.key == UPGRADING_TAINT_KEY for t in decode_taints(text))
        s.declared = str(cluster["spec"]["topology"]["version"])
    except Exception as err:
        print(f"[sample] management: {err}", flush=True)
    if wl is None:
        return s
    try:
        dep: Any = client.AppsV1Api(wl).read_namespaced_deployment(APP, APP_NS)
        s.available = dep.status.available_replicas or 0
        pdb: Any = client.PolicyV1Api(wl).read_namespaced_pod_disruption_budget(APP, APP_NS)
        s.pdb_healthy = pdb.status.current_healthy
        pods: Any = client.CoreV1Api(wl).list_namespaced_pod(APP_NS, label_selector=f"app={APP}")
        s.pods = {
            p.metadata.uid: (p.spec.node_name or "", _pod_ready(p))
            for p in pods.items
            if not p.metadata.deletion_timestamp
        }
    except Exception as err:  # the API server moves with the control plane: no sample then
        s.available = s.pdb_healthy = None
        s.pods = {}
        print(f"[sample] workload: {type(err).__name__}", flush=True)
    return s


def sampler(plane: LocalPlane, samples: list[Sample], t0: float, stop: threading.Event) -> None:
    mgmt = api_client(plane.kubeconfig)
    dyn = dynamic(mgmt)
    wl = workload.workload_client(mgmt, NS, CLUSTER, SAMPLE_REQUESTS)
    while not stop.is_set():
        samples.append(sample_once(dyn, mgmt, wl, t0))
        stop.wait(1.0)


async def calibrate(
    backend: RecordingKubeBackend, t0: float
) -> tuple[CalibrationProgress, float, dict[str, tuple[float, float]]]:
    """FleetCalibration on the dev server; (result, wall seconds, step id -> (start, end) in
    seconds from ``t0`` as the workflow recorded them)."""
    env = await start_dev_server()
    try:
        task_queue = f"calibration-docker-{uuid.uuid4().hex[:8]}"
        async with build_worker(env.client, backend, task_queue=task_queue):
            began = time.monotonic()
            handle = await start_calibration(
                env.client, CalibrationInput(target=TARGET, options=OPTIONS), task_queue=task_queue
            )
            result_task = asyncio.ensure_future(handle.result())
            while not result_task.done():
                await asyncio.wait({result_task}, timeout=10)
                if result_task.done():
                    break
                progress = await status(env.client, handle.id)
                print(
                    f"[calibration] {time.monotonic() - t0:6.0f}s {progress.phase}: "
                    + "; ".join(f"{c.name} {c.state} {c.message}" for c in progress.clusters),
                    flush=True,
                )
                assert progress.phase not in STUCK, progress
                assert time.monotonic() - began < CALIBRATION_TIMEOUT, progress
            result = result_task.result()
            wall = time.monotonic() - began
    finally:
        await env.shutdown()
    # Wall-clock datetimes of the workflow -> seconds from t0 (monotonic) via one offset.
    offset = time.time() - time.monotonic()
    steps = {
        s.step_id: (
            round(s.started_at.timestamp() - offset - t0, 1),
            round(s.finished_at.timestamp() - offset - t0, 1),
        )
        for c in result.clusters
        for s in c.steps
        if s.started_at and s.finished_at
    }
    return result, wall, steps


def coredns_state(wl: client.ApiClient) -> tuple[str, bool]:
    dep: Any = client.AppsV1Api(wl).read_namespaced_deployment("coredns", "kube-system")
    want = dep.spec.replicas
    st = dep.status
    settled = st.updated_replicas == want and st.ready_replicas == want
    return str(dep.spec.template.spec.containers[0].image), bool(
        settled and not st.unavailable_replicas
    )


@pytest.mark.timeout(3600)
def test_calibration_upgrades_a_capd_docker_cluster(tmp_path: Path) -> None:
    began = time.monotonic()
    times: dict[str, float] = {}
    plane = LocalPlane(tmp_path / "plane")
    docker_dir = Path(os.environ.get("CALIBRATOR_DOCKER_DIR") or tmp_path / "docker")
    stop = threading.Event()
    try:
        started = dockerenv.up(
            plane,
            docker_state_dir=docker_dir,
            node_versions=[START, TARGET],
            ttl_seconds=3600,
            progress=lambda m: print(f"[env] {m}", flush=True),
        )
        times["env_up"] = round(time.monotonic() - began, 1)
        print(f"[env] up: {started.seconds}", flush=True)
        engine = DockerEngine(docker_dir)

        t = time.monotonic()
        doc = create_and_time(plane, CLUSTER, START, timeout=CREATE_TIMEOUT)
        times["cluster_create"] = round(time.monotonic() - t, 1)
        print(f"[capd] {doc['seconds']}", flush=True)
        assert doc["complete"], f"milestones never reached: {doc['missing']}"

        mgmt = api_client(plane.kubeconfig)
        dyn = dynamic(mgmt)
        wl = workload.workload_client(mgmt, NS, CLUSTER)
        deployment, pdb = app_objects()
        client.AppsV1Api(wl).create_namespaced_deployment(APP_NS, deployment)
        client.PolicyV1Api(wl).create_namespaced_pod_disruption_budget(APP_NS, pdb)

        def app_ready() -> dict[str, str] | None:
            pods: Any = client.CoreV1Api(wl).list_namespaced_pod(
                APP_NS, label_selector=f"app={APP}"
            )
            ready = {
                str(p.metadata.uid): str(p.spec.node_name) for p in pods.items if _pod_ready(p)
            }
            return ready if len(ready) == REPLICAS else None

        first_pods = wait_for("the pause Deployment Ready", app_ready, 300, interval=1.0)
        old_nodes = set(workload.nodes(wl))
        before = frozenset(m["metadata"]["name"] for m in machines(dyn, NS, CLUSTER))
        stats_before = container_stats(engine)
        print(f"[stats] before: {json.dumps(stats_before)}", flush=True)

        # The calibration, with the sampler running throughout.
        samples: list[Sample] = []
        t0 = time.monotonic()
        watcher = threading.Thread(target=sampler, args=(plane, samples, t0, stop), daemon=True)
        watcher.start()
        backend = RecordingKubeBackend(api_client(plane.kubeconfig), namespace=NS)
        result, wall, steps = asyncio.run(calibrate(backend, t0))
        done_at = round(time.monotonic() - t0, 1)
        # What the workflow left at the moment it finished (before any wait of the test).
        image_at_end, coredns_ready_at_end = coredns_state(wl)
        # One more sample after the end: the taint must be gone.
        wait_for(
            "a sample after the calibration",
            lambda: any(s.at > done_at and s.taint is not None for s in samples) or None,
            60,
            interval=0.5,
        )
        stop.set()
        watcher.join(timeout=30)
        times["calibration"] = round(wall, 1)

        # Per-step times: the workflow's steps, and the CAPI rollouts as the sampler saw them.
        stats_after = container_stats(engine)
        print(f"[stats] after: {json.dumps(stats_after)}", flush=True)
        for step_id, (s0, s1) in steps.items():
            print(f"[step] {step_id}: {s0:.1f} -> {s1:.1f} = {s1 - s0:.1f}s", flush=True)
        report = {
            "times": times,
            "calibrationWall": round(wall, 1),
            "steps": {k: round(v[1] - v[0], 1) for k, v in steps.items()},
            "stepWindows": steps,
            "taintedFrom": min((s.at for s in samples if s.taint), default=None),
            "firstPatch": min((s.at for s in samples if s.declared == TARGET), default=None),
            "done": done_at,
            "create": doc["seconds"],
            "statsBefore": stats_before,
            "statsAfter": stats_after,
            "samples": len(samples),
            "workloadSamples": sum(1 for s in samples if s.available is not None),
            "podsSeen": len({u for s in samples for u in s.pods}),
            "corednsAtEnd": [image_at_end, coredns_ready_at_end],
        }
        print(f"[report] {json.dumps(report)}", flush=True)
        out = os.environ.get("CALIBRATOR_DOCKER_REPORT")
        if out:
            Path(out).write_text(json.dumps(report, indent=2) + "\n")

        assert result.phase == Phase.COMPLETED, result.message
        assert [c.state for c in result.clusters] == [ClusterState.SUCCEEDED], result.clusters

        # Kubelets at the target on new Nodes; every Machine replaced.
        summary = fully_at_version(dyn, mgmt, NS, CLUSTER, TARGET, 2, replaced=before)
        assert summary, "not every Machine replaced at the target with a Ready Node"
        nodes = workload.nodes(wl)
        assert {n: workload.kubelet_version(v) for n, v in nodes.items()} == dict.fromkeys(
            nodes, TARGET
        )
        assert not old_nodes & set(nodes), (old_nodes, set(nodes))

        # The drain respected the PDB: the Deployment never had fewer than minAvailable
        # available replicas in any sample that reached the workload cluster; and it was drained
        # (the pods that ran before are gone, their replacements run Ready on the new nodes).
        seen = [s for s in samples if s.available is not None]
        assert len(seen) > 0.5 * len(samples), (len(seen), len(samples))
        low = [
            (s.at, s.available, s.pdb_healthy) for s in seen if (s.available or 0) < MIN_AVAILABLE
        ]
        assert not low, low
        assert min(s.pdb_healthy or 0 for s in seen) >= MIN_AVAILABLE
        final = wait_for("the pause Deployment Ready again", app_ready, 300, interval=1.0)
        assert not set(first_pods) & set(final), "no pod was evicted"
        assert set(final.values()) <= set(nodes), final
        uids = {uid for s in seen for uid in s.pods}
        print(
            f"[app] pods seen: {len(uids)} (2 before, 2 after); min available "
            f"{min(s.available or 0 for s in seen)}; samples {len(samples)}, of the workload "
            f"{len(seen)}",
            flush=True,
        )

        # The taint: on from before the first version patch until the last step finished (the
        # workflow's own record), off after the workflow ended (untainting is its last act).
        patched = [s for s in samples if s.declared == TARGET]
        assert patched, "the sampler never saw the version patch"
        first_patch = patched[0].at
        last_step = max(end for _, end in steps.values())
        during = [s for s in samples if first_patch <= s.at <= last_step and s.taint is not None]
        assert during and all(s.taint for s in during), [
            (s.at, s.taint) for s in during if not s.taint
        ]
        after = [s for s in samples if s.at > done_at and s.taint is not None]
        assert after and not any(s.taint for s in after)
        tainted_from = min(s.at for s in samples if s.taint)
        assert tainted_from <= first_patch

        # CoreDNS Ready at the v1.35 image (Available alone once missed a broken CoreDNS).
        print(f"[coredns] at the end of the workflow: {image_at_end} ready={coredns_ready_at_end}")
        assert image_at_end == COREDNS_TARGET_IMAGE, image_at_end
        assert coredns_ready_at_end, "the calibration finished with CoreDNS not Ready"
    finally:
        stop.set()
        t = time.monotonic()
        stopped = dockerenv.down(plane, purge=True, progress=print)
        print(f"[env] stopped: {stopped} in {time.monotonic() - t:.1f}s", flush=True)
        print(f"[total] {time.monotonic() - began:.1f}s {times}", flush=True)
    assert not DockerEngine(docker_dir).status().running, "env down left dockerd running"
