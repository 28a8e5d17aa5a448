"""A real calibration: Temporal dev server + worker on ``KubeFleetBackend`` + the local plane.

Three managed-topology clusters and one plain KubeadmControlPlane + MachineDeployment cluster,
all created at v1.33.0 from capi-templates, are calibrated to v1.34.0 by ``FleetCalibration``
(default strategy: one cluster at a time). The test asserts what the product promises — every
Machine at the target with a Ready Node and the Cluster Available, no upgrading taint left and the
schedulable label back to "true", placement re-run after every step (the workload's
PlacementDecision, watched on the API server, is rewritten with each step's reason), no step
patched twice — and
prints the measurements the docs need: calibration wall time against the CAPI rollout times on the
critical path, and workflow history events per cluster step.
"""

from __future__ import annotations

import asyncio
import functools
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from kubernetes import client
from kubernetes.dynamic import DynamicClient
from temporalio.api.enums.v1 import EventType
from typer.testing import CliRunner, Result

from orchestrator.cli.main import app
from orchestrator.domain.taints import SCHEDULABLE_LABEL, UPGRADING_TAINT_KEY, decode_taints
from orchestrator.kube import capi, fleetapi
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
from testkit.worker_rbac import WorkerIdentity, grant_kubeconfig_reader, grant_plan_store
from testkit.workflow_harness import start_dev_server
from tests.integration.history_scan import known_secrets, scan_histories
from tests.orchestrator.kube.backend.recording_backend import RecordingKubeBackend
from workflows.client import start_calibration, status
from workflows.model import (
    CalibrationInput,
    CalibrationOptions,
    CalibrationProgress,
    ClusterState,
    Phase,
    StepState,
    Timeouts,
)
from workflows.worker import build_worker

pytestmark = [pytest.mark.integration, pytest.mark.slow]

NS = "calibrator-cal"
TOPOLOGY = ("cal-a", "cal-b", "cal-c")
PLAIN = "cal-kcp"
CLUSTERS = (*TOPOLOGY, PLAIN)
START, TARGET = "v1.33.0", "v1.34.0"
MACHINES = 2  # 1 control-plane Machine + 1 worker
CREATE_TIMEOUT = 300
CALIBRATION_TIMEOUT = 900
DELETE_TIMEOUT = 240
OPTIONS = CalibrationOptions(
    worker_concurrency=1,
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
        "placement": {"clusterAffinity": {"matchLabels": {"env": "cal"}}},
    },
}
DEFER = "topology.cluster.x-k8s.io/defer-upgrade"
STUCK = (Phase.HALTED, Phase.AWAITING_DECISIONS, Phase.FAILED, Phase.ABORTED)


@pytest.fixture(scope="module")
def fleet(dyn: DynamicClient, mgmt: client.ApiClient) -> Iterator[None]:
    """The clusters (created at START, deleted at the end) and one FleetWorkload.

    The worker runs as the least-privilege ServiceAccount of deploy/rbac, so each fleet
    namespace gets the kubeconfig-reader RoleBinding an operator would create.
    """
    namespaces = dyn.resources.get(api_version="v1", kind="Namespace")
    namespaces.create(body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    grant_kubeconfig_reader(mgmt, NS)
    grant_plan_store(mgmt, NS)
    apply_all(dyn, cluster_class_objects(NS))
    for name in TOPOLOGY:
        apply_all(dyn, cluster_objects(name, NS, START, labels={"env": "cal"}))
    apply_all(dyn, cluster_objects(PLAIN, NS, START, topology=False, labels={"env": "cal"}))
    apply_all(dyn, [WORKLOAD])
    clusters = dyn.resources.get(api_version=capi.CLUSTER[0], kind=capi.CLUSTER[1])
    try:
        yield
    finally:
        for name in CLUSTERS:
            try:
                clusters.delete(name=name, namespace=NS, _request_timeout=60)
            except Exception as err:
                print(f"delete {NS}/{name}: {err}")
        wait_for(
            "calibration clusters deleted",
            lambda: not clusters.get(namespace=NS, _request_timeout=60).to_dict()["items"],
            DELETE_TIMEOUT,
        )


@dataclass
class Timeline:
    """Wall-clock moments of one cluster's rollout, as seen on the CAPI objects."""

    cp_patched: float | None = None
    cp_done: float | None = None
    md_patched: float | None = None
    done: float | None = None

    def rollout_seconds(self) -> float | None:
        """CAPI's share: the control-plane rollout plus the MachineDeployment rollout.

        A managed topology's workers are deferred during the control-plane step and released by
        the worker step, so both kinds of cluster roll out in two parts.
        """
        if None in (self.cp_patched, self.cp_done, self.md_patched, self.done):
            return None
        assert self.cp_patched and self.cp_done and self.md_patched and self.done
        return (self.cp_done - self.cp_patched) + (self.done - self.md_patched)


def _declared_cp(dyn: DynamicClient, name: str) -> tuple[str, dict[str, Any]]:
    cluster = get(dyn, capi.CLUSTER, NS, name)
    kcp = get(dyn, capi.KUBEADM_CONTROL_PLANE, NS, cluster["spec"]["controlPlaneRef"]["name"])
    topo = (cluster["spec"].get("topology") or {}).get("version")
    return str(topo or kcp["spec"]["version"]), kcp


def _watch(
    dyn: DynamicClient,
    mgmt: client.ApiClient,
    before: dict[str, frozenset[str]],
    timelines: dict[str, Timeline],
    stop: threading.Event,
) -> None:
    """Record, once a second, when each cluster's rollouts start and finish."""
    while not stop.is_set():
        for name in CLUSTERS:
            t = timelines[name]
            if t.done is not None:
                continue
            try:
                now = time.monotonic()
                declared, kcp = _declared_cp(dyn, name)
                if t.cp_patched is None and declared == TARGET:
                    t.cp_patched = now
                if (
                    t.cp_done is None
                    and t.cp_patched is not None
                    and kcp["spec"]["version"] == TARGET
                    and capi.control_plane_rolled_out(kcp)
                ):
                    t.cp_done = now
                if t.md_patched is None:
                    mds = [
                        m
                        for m in get_mds(dyn, name)
                        if m["spec"]["template"]["spec"].get("version") == TARGET
                    ]
                    if mds:
                        t.md_patched = now
                if t.md_patched is not None and fully_at_version(
                    dyn, mgmt, NS, name, TARGET, MACHINES, replaced=before[name]
                ):
                    t.done = now
            except Exception as err:
                print(f"watch {name}: {err}")
        stop.wait(1.0)


def _watch_decisions(dyn: DynamicClient, reasons: list[str], stop: threading.Event) -> None:
    """Record the reason of every PlacementDecision status the API server stores in NS."""
    res = fleetapi.resource(dyn, fleetapi.PLACEMENT_DECISION)
    version: str | None = None
    while not stop.is_set():
        try:
            for event in res.watch(namespace=NS, resource_version=version, timeout=5):
                obj = event["raw_object"]
                version = obj["metadata"]["resourceVersion"]
                rows = (obj.get("status") or {}).get("decisions") or []
                for reason in {r["reason"] for r in rows}:
                    if not reasons or reasons[-1] != reason:
                        reasons.append(reason)
                if stop.is_set():
                    break
        except Exception as err:
            print(f"watch PlacementDecisions: {err}")
            version = None


def get_mds(dyn: DynamicClient, name: str) -> list[dict[str, Any]]:
    res = dyn.resources.get(api_version=capi.MACHINE_DEPLOYMENT[0], kind=capi.MACHINE_DEPLOYMENT[1])
    items: list[dict[str, Any]] = res.get(
        namespace=NS, label_selector=f"{capi.CLUSTER_NAME_LABEL}={name}"
    ).to_dict()["items"]
    return items


async def _calibrate(
    plane: LocalPlane, backend: KubeFleetBackend, secrets: Callable[[], list[str]]
) -> tuple[CalibrationProgress, float, dict[str, tuple[int, int, int]], int, Result]:
    """Run the calibration; returns progress, wall seconds, per-cluster (events, replaces, steps),
    the parent's history length, and ``calibrator status ID -o json`` run against the server."""
    env = await start_dev_server()
    try:
        task_queue = f"calibration-it-{uuid.uuid4().hex[:8]}"
        async with build_worker(env.client, backend, task_queue=task_queue):
            began = time.monotonic()
            handle = await start_calibration(
                env.client, CalibrationInput(target=TARGET, options=OPTIONS), task_queue=task_queue
            )
            calibration_id = handle.id
            deadline = began + CALIBRATION_TIMEOUT
            result_task = asyncio.ensure_future(handle.result())
            while not result_task.done():
                await asyncio.wait({result_task}, timeout=5)
                if result_task.done():
                    break
                progress = await status(env.client, calibration_id)
                if progress.phase in STUCK:
                    raise AssertionError(
                        f"calibration stuck in {progress.phase}: {progress.message}; "
                        + "; ".join(f"{c.name}: {c.state} {c.message}" for c in progress.clusters)
                    )
                if time.monotonic() > deadline:
                    raise AssertionError(
                        f"calibration not finished after {CALIBRATION_TIMEOUT}s: "
                        + "; ".join(f"{c.name}: {c.state} {c.message}" for c in progress.clusters)
                    )
            result = result_task.result()
            wall = time.monotonic() - began
            per_cluster: dict[str, tuple[int, int, int]] = {}
            for c in result.clusters:
                child = env.client.get_workflow_handle(f"{calibration_id}/{c.name}")
                history = await child.fetch_history()
                replaces = sum(
                    1
                    for e in history.events
                    if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
                    and e.activity_task_scheduled_event_attributes.activity_type.name == "replace"
                )
                per_cluster[c.name] = (len(history.events), replaces, len(c.steps))
            parent = await handle.fetch_history()
            # The CLI runs its own event loop: invoke it from a thread.
            address = env.client.service_client.config.target_host
            cli = await asyncio.to_thread(
                CliRunner().invoke,
                app,
                ["status", calibration_id, "--address", address, "-o", "json"],
            )
            scanned, leaks = await scan_histories(env.client, secrets())
            assert scanned > len(result.clusters) and not leaks, leaks
            print(f"history scan: {scanned} histories, no credentials")
            return result, wall, per_cluster, len(parent.events), cli
    finally:
        await env.shutdown()


def test_calibration_converges_the_fleet_through_capi(
    plane: LocalPlane,
    fleet: None,
    dyn: DynamicClient,
    mgmt: client.ApiClient,
    worker_identity: WorkerIdentity,
) -> None:
    test_began = time.monotonic()
    before: dict[str, frozenset[str]] = {}
    for name in CLUSTERS:
        summary = wait_for(
            f"{name} Available at {START}",
            functools.partial(fully_at_version, dyn, mgmt, NS, name, START, MACHINES),
            CREATE_TIMEOUT,
        )
        before[name] = frozenset(summary["machines"])
    print(f"{len(CLUSTERS)} clusters Available after {time.monotonic() - test_began:.0f}s")

    # The worker authenticates as the ServiceAccount bound to deploy/rbac's role, nothing more.
    backend = RecordingKubeBackend(worker_identity.client(), namespace=NS)
    timelines = {name: Timeline() for name in CLUSTERS}
    stop = threading.Event()
    watcher_mgmt = api_client(plane.kubeconfig)
    watcher = threading.Thread(
        target=_watch,
        args=(dynamic(watcher_mgmt), watcher_mgmt, before, timelines, stop),
        daemon=True,
    )
    watcher.start()
    decision_reasons: list[str] = []
    decisions_watch = threading.Thread(
        target=_watch_decisions,
        args=(dynamic(api_client(plane.kubeconfig)), decision_reasons, stop),
        daemon=True,
    )
    decisions_watch.start()
    try:
        result, wall, per_cluster, parent_events, cli = asyncio.run(
            _calibrate(
                plane,
                backend,
                functools.partial(known_secrets, plane, worker_identity, mgmt, (NS,)),
            )
        )
        # The watch delivers what the API server stored on its own time: wait for the last
        # decision the backend wrote (bounded), not for a fixed moment.
        last = backend.placement_writes[-1][1] if backend.placement_writes else None
        wait_for(
            "the PlacementDecision watch to deliver the last decision written",
            lambda: bool(decision_reasons) and decision_reasons[-1] == last,
            60,
            interval=0.5,
        )
    finally:
        stop.set()
        watcher.join(timeout=30)
        decisions_watch.join(timeout=30)

    # The run and every cluster succeeded.
    assert result.phase == Phase.COMPLETED, result.message
    states = {c.name: c.state for c in result.clusters}
    assert states == dict.fromkeys(CLUSTERS, ClusterState.SUCCEEDED), states

    # `calibrator status ID -o json` queries the finished run: every cluster with its phase.
    assert cli.exit_code == 0, cli.stderr or cli.output
    doc = json.loads(cli.stdout)
    assert doc["calibration_id"] == result.calibration_id
    assert doc["target"] == TARGET and doc["phase"] == Phase.COMPLETED.value
    assert {c["name"]: c["state"] for c in doc["clusters"]} == dict.fromkeys(
        CLUSTERS, ClusterState.SUCCEEDED.value
    ), doc["clusters"]
    for c in doc["clusters"]:
        assert c["steps"] and all(s["state"] == StepState.SUCCEEDED.value for s in c["steps"])
        assert c["from_version"] == START and not c["tainted"]

    # Every Machine at the target with a Ready Node, the Cluster Available; untainted, schedulable.
    for name in CLUSTERS:
        summary = wait_for(
            f"{name} at {TARGET}",
            functools.partial(
                fully_at_version, dyn, mgmt, NS, name, TARGET, MACHINES, replaced=before[name]
            ),
            60,
        )
        assert not before[name] & set(summary["machines"])
        assert all(m["spec"]["version"] == TARGET for m in machines(dyn, NS, name))
        cluster = get(dyn, capi.CLUSTER, NS, name)
        taints = decode_taints(
            (cluster["metadata"].get("annotations") or {}).get("calibrator.dev/taints")
        )
        assert not [t for t in taints if t.key == UPGRADING_TAINT_KEY], taints
        assert cluster["metadata"]["labels"][SCHEDULABLE_LABEL] == "true"

    # No step was written twice; a topology's pool was written once, when its worker step
    # released it (defer-upgrade removed), never together with the control plane.
    assert backend.patches, "no version was patched"
    assert all(n == 1 for n in backend.patches.values()), backend.patches
    patched = {(p.cluster, p.component) for p in backend.patch_log}
    for name in TOPOLOGY:
        components = {c for (n, c) in patched if n == name}
        assert "controlPlane" in components and len(components) == 2, components
        assert all(c.startswith(f"{name}-md-0") for c in components - {"controlPlane"})
        md_topologies = get(dyn, capi.CLUSTER, NS, name)["spec"]["topology"]["workers"]
        for md in md_topologies["machineDeployments"]:
            assert DEFER not in ((md.get("metadata") or {}).get("annotations") or {}), md
    assert {c for (n, c) in patched if n == PLAIN} == {"controlPlane", f"{PLAIN}-md-0"}
    steps = {(p.cluster, p.step_id) for p in backend.patch_log}
    assert len(steps) == len(backend.patch_log)

    # Placement re-ran before the first step, after every step and after the upgrade (the
    # replace activities of each child's history), but wrote only decisions that changed
    # (docs/decisions.md): the workload's first decision, then e.g. its return to a cluster
    # after that cluster's upgrade - never the same decision again. What the API server stored
    # (seen through a watch) is what the backend wrote.
    reasons = [r for _, r in backend.placement_writes]
    assert reasons and reasons[0].endswith(": before the first step"), reasons
    assert set(decision_reasons) <= set(reasons), (decision_reasons, reasons)
    assert decision_reasons[-1] == reasons[-1], (decision_reasons, reasons)
    runs = 0
    for c in result.clusters:
        events, replaces, nsteps = per_cluster[c.name]
        assert replaces == nsteps + 2, (c.name, replaces, nsteps)
        runs += replaces
    assert len(reasons) < runs, (len(reasons), runs)
    pd = fleetapi.resource(dyn, fleetapi.PLACEMENT_DECISION).get(name="web", namespace=NS)
    rows = pd.to_dict()["status"]["decisions"]
    assert sorted(r["clusterName"] for r in rows) == sorted(CLUSTERS)
    assert all(isinstance(v, str) for r in rows for v in r.values()), rows
    assert decision_reasons[-1].endswith(": after the upgrade"), decision_reasons
    assert {r["reason"] for r in rows} == {decision_reasons[-1]}
    assert pd.to_dict()["metadata"]["labels"] == {fleetapi.WORKLOAD_LABEL: "web"}
    fw = fleetapi.resource(dyn, fleetapi.FLEET_WORKLOAD).get(name="web", namespace=NS).to_dict()
    assert sorted(c["name"] for c in fw["status"]["clusters"]) == sorted(CLUSTERS)
    assert pd.to_dict()["metadata"]["ownerReferences"][0]["uid"] == fw["metadata"]["uid"]
    print(f"PlacementDecision writes: {len(reasons)} for {runs} placement runs")
    # A Duplicated workload only gains copies as clusters come back from their upgrade (the
    # upgrading taint spares the copies already there): no placement moved a replica.
    assert result.replicas_moved == 0, result.replicas_moved
    assert all(c.replicas_moved == 0 for c in result.clusters), result.clusters

    # Measurements for the docs.
    rollouts: dict[str, float] = {}
    for name in CLUSTERS:
        seconds = timelines[name].rollout_seconds()
        assert seconds is not None, (name, timelines[name])
        rollouts[name] = seconds
    critical = sum(rollouts.values())  # default strategy: one cluster at a time
    print(f"\ncalibration {START} -> {TARGET} of {len(CLUSTERS)} clusters: wall {wall:.1f}s")
    for name in CLUSTERS:
        events, replaces, nsteps = per_cluster[name]
        print(
            f"  {name}: CAPI rollout {rollouts[name]:.1f}s; child history {events} events, "
            f"{nsteps} steps ({events / max(nsteps, 1):.0f} events/step), {replaces} placements"
        )
    print(
        f"  sum of rollouts on the critical path {critical:.1f}s; "
        f"overhead ratio wall/rollouts = {wall / critical:.2f}; parent history {parent_events}"
    )
    print(f"  test total {time.monotonic() - test_began:.0f}s")
