"""Crashes during a real calibration: the worker SIGKILLed at five points, the Temporal server
restarted mid-run (issue 11, items 2 and 3; figures in docs/reliability/crashes.md).

Two clusters, one KubeadmControlPlane + MachineDeployment and one managed topology (1
control-plane Machine + 1 worker each), are calibrated one minor up by a worker that runs in a
subprocess (``tests.integration.worker_process``) on the real dev server and the local plane.
Each test takes the clusters where they are and moves them to the next minor, so the two tests
share one fleet in either order (v1.33 -> v1.34 -> v1.35).

* **Worker kills.** The worker SIGKILLs itself at five named points of one run (after a
  placement write, entering the first patch, after a version write, during a rollout wait,
  after the taint removal): the points are reached by what the worker does, not by timing, and
  each fires once (a marker file per point). The test restarts the worker after every kill.
* **Server restart.** The dev server keeps its state in a SQLite file. When the worker reaches a
  rollout wait (a marker, no kill), the server is stopped and started again on the same port and
  file; the worker process is not restarted and must reconnect on its own.

Both assert what an operator relies on: the run completes, every cluster at the target,
untainted and schedulable; exactly one effective version write per step (the worker processes'
shared write log); no cluster ever observed mid-rollout and ungated (a watcher samples every
cluster's versions and its taint annotation and schedulable label while the run goes); no
credential in any Temporal history.
"""

from __future__ import annotations

import asyncio
import functools
import signal
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.dynamic import DynamicClient
from temporalio.testing import WorkflowEnvironment

from orchestrator.domain.taints import SCHEDULABLE_LABEL, UPGRADING_TAINT_KEY, decode_taints
from orchestrator.domain.versions import KubeVersion
from orchestrator.kube import capi
from orchestrator.kube.client import api_client, apply_all, dynamic
from orchestrator.kube.templates import cluster_class_objects, cluster_objects
from orchestrator.localplane.plane import LocalPlane
from testkit.capi_waits import fully_at_version, get, list_for_cluster, wait_for
from testkit.worker_rbac import WorkerIdentity, grant_kubeconfig_reader, grant_plan_store
from testkit.workflow_harness import start_dev_server
from tests.integration.history_scan import known_secrets, scan_histories
from tests.integration.worker_process import read_lines, start_worker
from tests.integration.worker_process import stop as stop_workers
from workflows.client import ControlError, start_calibration, status
from workflows.definitions.fleet_calibration import FleetCalibration
from workflows.model import (
    CalibrationInput,
    CalibrationOptions,
    CalibrationProgress,
    ClusterState,
    Phase,
    Timeouts,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]

NS = "calibrator-crashes"
KCP, TOPO = "rel-kcp", "rel-topo"
CLUSTERS = (KCP, TOPO)
FIRST = "v1.33.0"
NEWEST = KubeVersion.parse("v1.35.0")  # the newest version the ClusterClass offers
MACHINES = 2  # 1 control-plane Machine + 1 worker
CREATE_TIMEOUT = 300
RUN_TIMEOUT = 900
DELETE_TIMEOUT = 240
# A killed short activity is retried only when its start-to-close timeout passes, so this bounds
# the cost of each kill outside a wait (waits heartbeat: a dead worker is noticed in 10 s).
OPTIONS = CalibrationOptions(
    worker_concurrency=1,
    timeouts=Timeouts(
        activity_seconds=20, rollout_seconds=600, heartbeat_seconds=10, poll_seconds=2
    ),
)
# Spread over both clusters so that each kind of write is interrupted on a real cluster:
# the topology's control-plane write is the one-patch topology.version + defer-upgrade.
KILLS = ("placement", f"before-patch@{KCP}", f"patch@{TOPO}", f"wait@{KCP}", f"untaint@{TOPO}")
STUCK = (Phase.HALTED, Phase.AWAITING_DECISIONS, Phase.FAILED, Phase.ABORTED)


def _workload(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "calibrator.dev/v1alpha1",
        "kind": "FleetWorkload",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "apis": ["apps/v1/Deployment"],
            "replicas": 2,
            "placement": {"clusterAffinity": {"matchLabels": {"env": "crashes"}}},
        },
    }


@pytest.fixture(scope="module")
def crash_fleet(dyn: DynamicClient, mgmt: client.ApiClient) -> Iterator[None]:
    """The two clusters (created at FIRST, deleted at the end), shared by the module's runs."""
    namespaces = dyn.resources.get(api_version="v1", kind="Namespace")
    namespaces.create(body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    grant_kubeconfig_reader(mgmt, NS)
    grant_plan_store(mgmt, NS)
    apply_all(dyn, cluster_class_objects(NS))
    labels = {"env": "crashes"}
    apply_all(dyn, cluster_objects(KCP, NS, FIRST, topology=False, labels=labels))
    apply_all(dyn, cluster_objects(TOPO, NS, FIRST, labels=labels))
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
            "crash clusters deleted",
            lambda: not clusters.get(namespace=NS, _request_timeout=60).to_dict()["items"],
            DELETE_TIMEOUT,
        )


def _declared(dyn: DynamicClient, name: str) -> str:
    cluster = get(dyn, capi.CLUSTER, NS, name)
    topo = (cluster["spec"].get("topology") or {}).get("version")
    if topo:
        return str(topo)
    kcp = get(dyn, capi.KUBEADM_CONTROL_PLANE, NS, cluster["spec"]["controlPlaneRef"]["name"])
    return str(kcp["spec"]["version"])


def _at_declared(dyn: DynamicClient, mgmt: client.ApiClient, name: str) -> dict[str, Any] | None:
    return fully_at_version(dyn, mgmt, NS, name, _declared(dyn, name), MACHINES)


def _ready(
    dyn: DynamicClient, mgmt: client.ApiClient
) -> tuple[str, str, dict[str, frozenset[str]]]:
    """Wait until both clusters are fully at one version; (that version, the next minor, the
    Machines now, which the run must replace)."""
    before: dict[str, frozenset[str]] = {}
    versions: set[str] = set()
    for name in CLUSTERS:
        summary = wait_for(
            f"{name} Available at its declared version",
            functools.partial(_at_declared, dyn, mgmt, name),
            CREATE_TIMEOUT,
        )
        before[name] = frozenset(summary["machines"])
        versions.add(_declared(dyn, name))
    assert len(versions) == 1, f"the clusters are at different versions: {versions}"
    start = KubeVersion.parse(versions.pop())
    target = KubeVersion(start.major, start.minor + 1, 0)
    assert target.precedence() <= NEWEST.precedence(), f"no minor after {start} to calibrate to"
    return (
        f"v{start.major}.{start.minor}.{start.patch}",
        f"v{target.major}.{target.minor}.0",
        before,
    )


# ------------------------------------------------------------------------------ gate watcher


@dataclass
class GateWatch:
    """Samples each cluster's versions and gate once a second while a run goes.

    A cluster is mid-rollout when its versions (declared control plane, KubeadmControlPlane,
    MachineDeployments, Machines) are not all one. It is gated when the Cluster carries the
    upgrading taint and its schedulable label is not "true". The Cluster is read before and
    after the versions, and a sample counts as ungated only if both reads were ungated: the gate
    cannot have been set and cleared around the version read, so an ungated sample is real.
    """

    dyn: DynamicClient
    samples: int = 0
    mid_rollout: int = 0
    ungated: list[str] = field(default_factory=list)
    errors: int = 0

    def _gated(self, name: str) -> bool:
        cluster = get(self.dyn, capi.CLUSTER, NS, name)
        meta = cluster["metadata"]
        taints = decode_taints((meta.get("annotations") or {}).get("calibrator.dev/taints"))
        tainted = any(t.key == UPGRADING_TAINT_KEY for t in taints)
        return tainted and (meta.get("labels") or {}).get(SCHEDULABLE_LABEL) != "true"

    def _versions(self, name: str) -> set[str]:
        versions = {_declared(self.dyn, name)}
        cluster = get(self.dyn, capi.CLUSTER, NS, name)
        kcp = get(
            self.dyn, capi.KUBEADM_CONTROL_PLANE, NS, cluster["spec"]["controlPlaneRef"]["name"]
        )
        versions.add(str(kcp["spec"]["version"]))
        for md in list_for_cluster(self.dyn, capi.MACHINE_DEPLOYMENT, NS, name):
            versions.add(str(md["spec"]["template"]["spec"].get("version")))
        for m in list_for_cluster(self.dyn, capi.MACHINE, NS, name):
            versions.add(str(m["spec"].get("version")))
        return versions

    def sample(self) -> None:
        for name in CLUSTERS:
            try:
                gated_before = self._gated(name)
                versions = self._versions(name)
                gated_after = self._gated(name)
            except Exception as err:
                self.errors += 1
                print(f"gate watch {name}: {err}")
                continue
            self.samples += 1
            if len(versions) > 1:
                self.mid_rollout += 1
                if not gated_before and not gated_after:
                    self.ungated.append(f"{time.strftime('%X')} {name} at {sorted(versions)}")

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            self.sample()
            stop.wait(1.0)


# ------------------------------------------------------------------------------ the run


@dataclass
class Run:
    """What one crash run did, for the assertions and the docs."""

    target: str
    markers: Path
    log: Path
    result: CalibrationProgress | None = None
    wall: float = 0.0
    kills: list[tuple[int, int]] = field(default_factory=list)  # (pid, returncode)
    workers: list[subprocess.Popen[bytes]] = field(default_factory=list)
    server_down: float = 0.0
    events: list[str] = field(default_factory=list)
    histories: int = 0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _start_server(port: int, db: Path) -> WorkflowEnvironment:
    return await start_dev_server(port=port, dev_server_database_filename=str(db))


async def _calibrate(
    run: Run,
    identity: WorkerIdentity,
    tmp: Path,
    secrets: Callable[[], list[str]],
    *,
    kill: tuple[str, ...] = (),
    restart_server_at: str | None = None,
) -> None:
    """One calibration with a worker subprocess: restart the worker whenever it dies of a
    planned SIGKILL; with ``restart_server_at`` (a mark point), restart the server there."""
    port, db = _free_port(), tmp / "temporal.db"
    env = await _start_server(port, db)
    address = f"127.0.0.1:{port}"
    task_queue = f"calibration-crashes-{uuid.uuid4().hex[:8]}"
    mark = (restart_server_at,) if restart_server_at else ()

    def worker() -> subprocess.Popen[bytes]:
        w = start_worker(
            address,
            identity.kubeconfig,
            NS,
            task_queue,
            run.log,
            markers=run.markers,
            kill=kill,
            mark=mark,
            output=tmp / "worker.log",
        )
        run.workers.append(w)
        return w

    try:
        current = worker()
        handle = await start_calibration(
            env.client, CalibrationInput(target=run.target, options=OPTIONS), task_queue=task_queue
        )
        began = time.monotonic()
        result = asyncio.ensure_future(handle.result())
        restarted = False
        last_status = began
        while not result.done():
            await asyncio.wait({result}, timeout=1.0)
            if result.done():
                break
            now = time.monotonic()
            if now - began > RUN_TIMEOUT:
                raise AssertionError(f"the run did not finish in {RUN_TIMEOUT}s: {run.events}")
            code = current.poll()
            if code is not None:
                assert code == -signal.SIGKILL, f"worker {current.pid} exited with {code}"
                run.kills.append((current.pid, code))
                current = worker()
                run.events.append(
                    f"{now - began:.0f}s: worker {run.kills[-1][0]} killed; {current.pid} started"
                )
            if restart_server_at and not restarted and (run.markers / restart_server_at).exists():
                result.cancel()
                stopped = time.monotonic()
                await env.shutdown()
                env = await _start_server(port, db)
                run.server_down = time.monotonic() - stopped
                restarted = True
                handle = env.client.get_workflow_handle_for(FleetCalibration.run, handle.id)
                result = asyncio.ensure_future(handle.result())
                run.events.append(
                    f"{stopped - began:.0f}s: server stopped at {restart_server_at}; "
                    f"back after {run.server_down:.1f}s"
                )
            if now - last_status > 10:  # fail early and clearly on a stuck run
                last_status = now
                try:
                    progress = await asyncio.wait_for(status(env.client, handle.id), 15)
                except (ControlError, TimeoutError) as err:
                    # A query can find no live worker right after a kill: not the run's fault.
                    run.events.append(f"{now - began:.0f}s: status not answered: {err!r}")
                    continue
                if progress.phase in STUCK:
                    raise AssertionError(
                        f"run stuck in {progress.phase}: {progress.message}; "
                        + "; ".join(f"{c.name}: {c.state} {c.message}" for c in progress.clusters)
                    )
        run.result = result.result()
        run.wall = time.monotonic() - began
        run.events.append(f"{run.wall:.0f}s: finished {run.result.phase}")
        assert not restart_server_at or restarted, "the run finished before the restart point"
        scanned, leaks = await scan_histories(env.client, secrets())
        assert not leaks, leaks
        run.histories = scanned
    finally:
        stop_workers(run.workers)
        await env.shutdown()
        log = tmp / "worker.log"
        if log.exists():
            print("worker output (tail):\n" + "\n".join(log.read_text().splitlines()[-40:]))


def _run_watched(
    plane: LocalPlane,
    run: Run,
    body: Callable[[], Any],
) -> GateWatch:
    """Run ``body`` (the calibration) with the gate watcher sampling beside it."""
    gate = GateWatch(dynamic(api_client(plane.kubeconfig)))
    stop = threading.Event()
    watcher = threading.Thread(target=gate.run, args=(stop,), daemon=True)
    watcher.start()
    try:
        asyncio.run(body())
    finally:
        stop.set()
        watcher.join(timeout=60)
    gate.sample()  # the end state, after the run
    print("\n" + "\n".join(run.events))
    print(
        f"gate watch: {gate.samples} samples, {gate.mid_rollout} mid-rollout, "
        f"{len(gate.ungated)} ungated, {gate.errors} read errors"
    )
    return gate


def _check_outcome(
    run: Run,
    gate: GateWatch,
    dyn: DynamicClient,
    mgmt: client.ApiClient,
    before: dict[str, frozenset[str]],
) -> None:
    """The promises: completed, converged, untainted, one write per step, never ungated."""
    assert run.result is not None
    assert run.result.phase == Phase.COMPLETED, run.result.message
    states = {c.name: c.state for c in run.result.clusters}
    assert states == dict.fromkeys(CLUSTERS, ClusterState.SUCCEEDED), states

    writes = read_lines(run.log)
    print(f"version writes: {len(writes)} by worker pids {sorted({w['pid'] for w in writes})}")
    keys = [(w["cluster"], w["component"], w["version"]) for w in writes]
    assert len(keys) == len(set(keys)), f"a step was applied twice: {writes}"
    # The topology's pool is named by CAPI (rel-topo-md-0-<suffix>): its release is one write.
    named = sorted((c, "md" if comp.startswith(f"{c}-md-0") else comp, v) for c, comp, v in keys)
    assert named == sorted(
        (c, part, run.target) for c in CLUSTERS for part in ("controlPlane", "md")
    ), writes

    for name in CLUSTERS:
        wait_for(
            f"{name} at {run.target}",
            functools.partial(
                fully_at_version, dyn, mgmt, NS, name, run.target, MACHINES, replaced=before[name]
            ),
            60,
        )
        cluster = get(dyn, capi.CLUSTER, NS, name)
        taints = decode_taints(
            (cluster["metadata"].get("annotations") or {}).get("calibrator.dev/taints")
        )
        assert not [t for t in taints if t.key == UPGRADING_TAINT_KEY], taints
        assert cluster["metadata"]["labels"][SCHEDULABLE_LABEL] == "true"

    assert gate.mid_rollout > 0, "the watcher never saw a cluster mid-rollout"
    assert not gate.ungated, f"mid-rollout and ungated: {gate.ungated}"


def test_worker_killed_at_five_points_of_one_run_converges_once(
    plane: LocalPlane,
    crash_fleet: None,
    dyn: DynamicClient,
    mgmt: client.ApiClient,
    worker_identity: WorkerIdentity,
    tmp_path: Path,
) -> None:
    start, target, before = _ready(dyn, mgmt)
    # A workload no run has placed yet: the first placement of this run must write it.
    apply_all(dyn, [_workload(f"web-kills-{uuid.uuid4().hex[:6]}")])
    markers = tmp_path / "markers"
    markers.mkdir()
    run = Run(target, markers, tmp_path / "patches.jsonl")
    secrets = functools.partial(known_secrets, plane, worker_identity, mgmt, (NS,))
    gate = _run_watched(
        plane, run, lambda: _calibrate(run, worker_identity, tmp_path, secrets, kill=KILLS)
    )
    print(f"{start} -> {target}: wall {run.wall:.1f}s with {len(run.kills)} kills")
    hits = {p: read_lines(markers / p) for p in KILLS}
    for point, lines in hits.items():
        print(f"  {point}: {lines}")
    _check_outcome(run, gate, dyn, mgmt, before)

    # Every planned point was reached once, by the process that died there.
    assert all(len(lines) == 1 for lines in hits.values()), hits
    assert sorted(lines[0]["pid"] for lines in hits.values()) == sorted(p for p, _ in run.kills)
    assert len(run.kills) == len(KILLS) and len(run.workers) == len(KILLS) + 1, run.events
    assert hits["placement"][0]["activity"] == "replace", hits
    assert hits[f"before-patch@{KCP}"][0]["activity"] == "patch_control_plane", hits
    assert hits[f"patch@{TOPO}"][0]["activity"] == "patch_control_plane", hits
    assert hits[f"wait@{KCP}"][0]["activity"] in ("wait_control_plane", "wait_workers"), hits
    assert hits[f"untaint@{TOPO}"][0]["activity"] == "remove_taint", hits
    assert run.histories > len(CLUSTERS)


def test_temporal_server_restarted_mid_rollout_resumes_the_run(
    plane: LocalPlane,
    crash_fleet: None,
    dyn: DynamicClient,
    mgmt: client.ApiClient,
    worker_identity: WorkerIdentity,
    tmp_path: Path,
) -> None:
    start, target, before = _ready(dyn, mgmt)
    apply_all(dyn, [_workload(f"web-restart-{uuid.uuid4().hex[:6]}")])
    markers = tmp_path / "markers"
    markers.mkdir()
    run = Run(target, markers, tmp_path / "patches.jsonl")
    secrets = functools.partial(known_secrets, plane, worker_identity, mgmt, (NS,))
    at = f"wait@{KCP}"
    gate = _run_watched(
        plane,
        run,
        lambda: _calibrate(run, worker_identity, tmp_path, secrets, restart_server_at=at),
    )
    print(f"{start} -> {target}: wall {run.wall:.1f}s, server down {run.server_down:.1f}s")
    _check_outcome(run, gate, dyn, mgmt, before)
    # The mark was reached in a rollout wait, and the one worker process rode the restart out.
    hit = read_lines(markers / at)
    assert len(hit) == 1 and hit[0]["activity"] in ("wait_control_plane", "wait_workers"), hit
    assert not run.kills and len(run.workers) == 1, run.events
    assert run.histories > len(CLUSTERS)
