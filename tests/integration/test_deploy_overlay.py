"""`kubectl apply -k deploy/overlays/example` is the whole deployment: proven on a real API server.

The example overlay (three fleet namespaces: fleet-eu, fleet-us, fleet-lab) is applied with the
real kubectl to the local plane's kube-apiserver, with the real CAPI controllers behind it. Then
two replicas of the real worker run as the Deployment runs them: the container's arguments and
environment from the rendered Deployment (no ``--namespace``: every namespace), in the pod's view
(``tests/integration/pod_worker.py``: the service environment and a mounted TokenRequest token of
the overlay's ServiceAccount, no kubeconfig, no admin credentials), both on the default task
queue of a real Temporal dev server. The calibration of a cluster in fleet-eu and one in fleet-us
succeeds on the in-memory CAPD backend: no 403 anywhere, placement decisions written, the plans
kept in the pod's namespace (calibrator-system) where the overlay binds the plan store.

The negative half: a cluster in a namespace the overlay does not list (fleet-unlisted). Its
calibration stops in preflight with the permission error naming the Secret, the namespace and the
fix, before anything is written: no taint, versions unchanged; aborting it leaves it so, and the
run's plan is deleted from calibrator-system.
"""

from __future__ import annotations

import asyncio
import functools
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml
from kubernetes import client
from kubernetes.dynamic import DynamicClient
from temporalio.client import Client

from orchestrator.domain.taints import SCHEDULABLE_LABEL, UPGRADING_TAINT_KEY, decode_taints
from orchestrator.kube import capi, fleetapi
from orchestrator.kube.client import apply_all
from orchestrator.kube.templates import cluster_objects
from orchestrator.localplane.plane import LocalPlane
from testkit.capi_waits import fully_at_version, get, wait_for
from testkit.worker_rbac import WORKER_SA, WorkerIdentity
from testkit.workflow_harness import start_dev_server
from workflows.client import abort, start_calibration, status
from workflows.model import (
    CalibrationInput,
    CalibrationOptions,
    CalibrationProgress,
    ClusterState,
    Phase,
    Timeouts,
)

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
OVERLAY = REPO / "deploy" / "overlays" / "example"
LISTED = {"dr-eu": "fleet-eu", "dr-us": "fleet-us"}  # cluster -> a fleet namespace of the overlay
UNLISTED_NS, UNLISTED = "fleet-unlisted", "dr-off"
EMPTY_LISTED_NS = "fleet-lab"  # listed, holds no cluster: its RoleBinding is still applied
PLAN_NS = WORKER_SA[0]  # the worker pod's own namespace
E2E_LABEL = "calibrator.dev/e2e"  # selects this module's clusters among the session's
START, TARGET = "v1.33.0", "v1.34.0"
MACHINES = 2
CREATE_TIMEOUT = 300
CALIBRATION_TIMEOUT = 900
START_TIMEOUT = 120  # a worker process up and polling
STOP_TIMEOUT = 30
REQUEST_TIMEOUT = 60
BLOB_SELECTOR = "app.kubernetes.io/managed-by=fleet-calibrator"
OPTIONS = CalibrationOptions(
    worker_concurrency=1,
    timeouts=Timeouts(
        activity_seconds=60, rollout_seconds=600, heartbeat_seconds=30, poll_seconds=2
    ),
)
WORKLOAD = {
    "apiVersion": "calibrator.dev/v1alpha1",
    "kind": "FleetWorkload",
    "metadata": {"name": "web", "namespace": "fleet-eu"},
    "spec": {
        "apis": ["apps/v1/Deployment"],
        "replicas": 2,
        "placement": {"clusterAffinity": {"matchLabels": {"env": "overlay"}}},
    },
}


def _kubectl(plane: LocalPlane, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["kubectl", "--kubeconfig", str(plane.kubeconfig), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture(scope="module")
def fleet(dyn: DynamicClient) -> Iterator[None]:
    """The fleet's namespaces (they exist before the worker is deployed, as on a real management
    cluster) and three clusters at START: one per listed namespace, one in an unlisted one."""
    namespaces = dyn.resources.get(api_version="v1", kind="Namespace")
    for ns in (*LISTED.values(), EMPTY_LISTED_NS, UNLISTED_NS):
        namespaces.create(body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    for name, ns in LISTED.items():
        labels = {E2E_LABEL: "listed", "env": "overlay"}
        apply_all(dyn, cluster_objects(name, ns, START, topology=False, labels=labels))
    apply_all(
        dyn,
        cluster_objects(
            UNLISTED, UNLISTED_NS, START, topology=False, labels={E2E_LABEL: "unlisted"}
        ),
    )
    apply_all(dyn, [WORKLOAD])
    clusters = dyn.resources.get(api_version=capi.CLUSTER[0], kind=capi.CLUSTER[1])
    everything = {**LISTED, UNLISTED: UNLISTED_NS}
    try:
        yield
    finally:
        # The workload and its decision too: later tests read every namespace.
        for kind in (fleetapi.PLACEMENT_DECISION, fleetapi.FLEET_WORKLOAD):
            try:
                fleetapi.resource(dyn, kind).delete(
                    name="web", namespace="fleet-eu", _request_timeout=REQUEST_TIMEOUT
                )
            except Exception as err:
                print(f"delete {kind[1]} fleet-eu/web: {err}")
        for name, ns in everything.items():
            try:
                clusters.delete(name=name, namespace=ns, _request_timeout=REQUEST_TIMEOUT)
            except Exception as err:
                print(f"delete {ns}/{name}: {err}")
        wait_for(
            "overlay clusters deleted",
            lambda: (
                not any(
                    clusters.get(namespace=ns, _request_timeout=REQUEST_TIMEOUT).to_dict()["items"]
                    for ns in set(everything.values())
                )
            ),
            240,
        )


def _render() -> list[dict[str, Any]]:
    proc = subprocess.run(
        ["kubectl", "kustomize", str(OVERLAY)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return [d for d in yaml.safe_load_all(proc.stdout) if d]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _pod_view(plane: LocalPlane, identity: WorkerIdentity, root: Path) -> Path:
    """What the kubelet mounts for the Deployment's pod: the ServiceAccount's token, CA, namespace."""
    mount = root / "serviceaccount"
    mount.mkdir()
    (mount / "token").write_text(identity.token)
    (mount / "ca.crt").write_bytes((plane.pki_dir / "ca.crt").read_bytes())
    (mount / "namespace").write_text(PLAN_NS)
    return mount


def _start_replicas(
    plane: LocalPlane,
    identity: WorkerIdentity,
    deployment: dict[str, Any],
    temporal_address: str,
    root: Path,
    count: int,
) -> list[tuple[subprocess.Popen[bytes], Path, int]]:
    """``count`` worker processes as the Deployment's pods run them (process, log, health port)."""
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    server = urlsplit(
        yaml.safe_load(plane.kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "KUBE", "OTEL_"))}
    env |= {e["name"]: e["value"] for e in container.get("env", ()) if "value" in e}
    env |= {
        # The overlay's Temporal frontend is a placeholder; this run's is the dev server.
        "TEMPORAL_ADDRESS": temporal_address,
        # The service environment the kubelet sets in every pod.
        "KUBERNETES_SERVICE_HOST": str(server.hostname),
        "KUBERNETES_SERVICE_PORT": str(server.port),
        "HOME": str(root),  # no ~/.kube/config
        "PYTHONUNBUFFERED": "1",
    }
    mount = _pod_view(plane, identity, root)
    replicas = []
    for i in range(count):
        args = list(container["args"])
        # Two pods have two network namespaces; two processes here share one loopback.
        args[args.index("--metrics-address") + 1] = f"127.0.0.1:{_free_port()}"
        port = _free_port()
        args[args.index("--health-address") + 1] = f"127.0.0.1:{port}"
        log = root / f"worker-{i}.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "tests.integration.pod_worker", str(mount), *args],
                cwd=REPO,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        replicas.append((proc, log, port))
    try:
        for proc, log, port in replicas:
            wait_for(
                f"worker {log.name} connected",
                functools.partial(_connected, proc, log),
                START_TIMEOUT,
                interval=0.5,
            )
            # The Deployment's probes on the health port: alive, then ready once the Temporal
            # server lists this replica's polls (bounded: the dev server sees a poll at once).
            probes = {p["httpGet"]["path"] for p in _probes(container)}
            assert probes == {"/livez", "/readyz"}, probes
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/livez", timeout=10) as answer:
                assert answer.status == 200
            wait_for(
                f"worker {log.name} ready (/readyz)",
                functools.partial(_ready, port),
                START_TIMEOUT,
                interval=0.5,
            )
    except BaseException:  # a replica that failed its checks: stop every one started
        _stop(replicas)
        raise
    return replicas


def _probes(container: dict[str, Any]) -> list[dict[str, Any]]:
    return [container["livenessProbe"], container["readinessProbe"]]


def _ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=10) as answer:
            return bool(answer.status == 200)
    except urllib.error.HTTPError as err:
        if err.code == 503:
            return False
        raise


def _connected(proc: subprocess.Popen[bytes], log: Path) -> bool:
    """The worker printed its start-up line (it has connected to Temporal and polls)."""
    if proc.poll() is not None:
        raise AssertionError(f"worker exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
    return "worker connected to" in log.read_text(errors="replace")


def _stop(replicas: list[tuple[subprocess.Popen[bytes], Path, int]]) -> None:
    for proc, _, _ in replicas:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)  # Ctrl-C: the worker shuts down gracefully
    for proc, log, _ in replicas:
        try:
            proc.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        print(f"--- {log.name} (last lines)\n{log.read_text(errors='replace')[-1500:]}")


async def _run_to_end(client: Client, selector: str) -> CalibrationProgress:
    handle = await start_calibration(
        client, CalibrationInput(target=TARGET, options=OPTIONS, selector=selector)
    )
    deadline = time.monotonic() + CALIBRATION_TIMEOUT
    result_task = asyncio.ensure_future(handle.result())
    while not result_task.done():
        await asyncio.wait({result_task}, timeout=5)
        if result_task.done():
            break
        progress = await status(client, handle.id)
        if progress.phase in (Phase.HALTED, Phase.AWAITING_DECISIONS, Phase.FAILED):
            raise AssertionError(
                f"calibration stuck in {progress.phase}: {progress.message}; "
                + "; ".join(f"{c.name}: {c.state} {c.message}" for c in progress.clusters)
            )
        if time.monotonic() > deadline:
            raise AssertionError(f"calibration not finished after {CALIBRATION_TIMEOUT}s")
    return result_task.result()


async def _run_until_waiting(client: Client, selector: str) -> tuple[str, CalibrationProgress]:
    handle = await start_calibration(
        client, CalibrationInput(target=TARGET, options=OPTIONS, selector=selector)
    )
    deadline = time.monotonic() + CALIBRATION_TIMEOUT
    while True:
        progress = await status(client, handle.id)
        # A failed canary halts the run (HALTED) until someone decides; a failed cluster in a
        # later wave leaves it AWAITING_DECISIONS. Either way the cluster waits for a decision.
        if progress.phase in (Phase.HALTED, Phase.AWAITING_DECISIONS) and any(
            c.state == ClusterState.WAITING_FOR_DECISION for c in progress.clusters
        ):
            return handle.id, progress
        assert progress.phase not in (Phase.COMPLETED, Phase.FAILED, Phase.ABORTED), progress
        assert time.monotonic() < deadline, f"no decision awaited after {CALIBRATION_TIMEOUT}s"
        await asyncio.sleep(1)


def _blobs(core: client.CoreV1Api) -> dict[str, set[str]]:
    """Stored plans (calibrator-blob-* ConfigMaps) by namespace, across the management cluster."""
    found: dict[str, set[str]] = {}
    for cm in core.list_config_map_for_all_namespaces(
        label_selector=BLOB_SELECTOR, _request_timeout=REQUEST_TIMEOUT
    ).items:
        assert cm.metadata is not None and cm.metadata.name and cm.metadata.namespace
        if cm.metadata.name.startswith("calibrator-blob-"):
            found.setdefault(cm.metadata.namespace, set()).add(cm.metadata.name)
    return found


def _untouched(dyn: DynamicClient) -> None:
    """The unlisted cluster as it was created: no taint written, every version at START."""
    cluster = get(dyn, capi.CLUSTER, UNLISTED_NS, UNLISTED)
    annotations = cluster["metadata"].get("annotations") or {}
    taints = decode_taints(annotations.get("calibrator.dev/taints"))
    assert not [t for t in taints if t.key == UPGRADING_TAINT_KEY], annotations
    kcp = get(
        dyn, capi.KUBEADM_CONTROL_PLANE, UNLISTED_NS, cluster["spec"]["controlPlaneRef"]["name"]
    )
    assert kcp["spec"]["version"] == START
    mds = dyn.resources.get(
        api_version=capi.MACHINE_DEPLOYMENT[0], kind=capi.MACHINE_DEPLOYMENT[1]
    ).get(namespace=UNLISTED_NS, label_selector=f"{capi.CLUSTER_NAME_LABEL}={UNLISTED}")
    versions = {md["spec"]["template"]["spec"]["version"] for md in mds.to_dict()["items"]}
    assert versions == {START}, versions


@pytest.mark.timeout(2400)
def test_the_example_overlay_deploys_a_worker_that_calibrates_every_listed_namespace(
    plane: LocalPlane,
    fleet: None,
    dyn: DynamicClient,
    mgmt: client.ApiClient,
    worker_identity: WorkerIdentity,
    tmp_path: Path,
) -> None:
    # The one deploy step, with the real kubectl against the real API server.
    applied = _kubectl(plane, "apply", "-k", str(OVERLAY))
    assert applied.returncode == 0, applied.stderr
    print(applied.stdout)
    rbac = client.RbacAuthorizationV1Api(mgmt)
    for ns in (*LISTED.values(), EMPTY_LISTED_NS):
        binding = rbac.read_namespaced_role_binding("fleet-calibrator-kubeconfigs", ns)
        assert binding.role_ref.name == "fleet-calibrator-kubeconfig-reader"
    rbac.read_namespaced_role_binding("fleet-calibrator-plans", PLAN_NS)
    assert not rbac.list_namespaced_role_binding(UNLISTED_NS).items
    (deployment,) = [o for o in _render() if o["kind"] == "Deployment"]
    stored = client.AppsV1Api(mgmt).read_namespaced_deployment(
        deployment["metadata"]["name"], PLAN_NS
    )
    assert stored.spec is not None and stored.spec.replicas == 2

    for name, ns in {**LISTED, UNLISTED: UNLISTED_NS}.items():
        wait_for(
            f"{ns}/{name} Available at {START}",
            functools.partial(fully_at_version, dyn, mgmt, ns, name, START, MACHINES),
            CREATE_TIMEOUT,
        )
    core = client.CoreV1Api(mgmt)

    async def scenario() -> tuple[
        CalibrationProgress, str, CalibrationProgress, CalibrationProgress
    ]:
        env = await start_dev_server()
        replicas: list[tuple[subprocess.Popen[bytes], Path, int]] = []
        try:
            address = env.client.service_client.config.target_host
            replicas = await asyncio.to_thread(
                _start_replicas, plane, worker_identity, deployment, address, tmp_path, 2
            )
            for _, log, _ in replicas:
                line = log.read_text()
                assert f"all namespaces, plans in namespace {PLAN_NS}" in line, line
            done = await _run_to_end(env.client, f"{E2E_LABEL}=listed")
            calibration_id, waiting = await _run_until_waiting(env.client, f"{E2E_LABEL}=unlisted")
            # While it waits, its plan is stored where the overlay lets the worker keep plans.
            blobs = await asyncio.to_thread(_blobs, core)
            assert blobs.get(PLAN_NS), blobs
            assert "default" not in blobs, blobs
            await asyncio.to_thread(_untouched, dyn)
            await abort(env.client, calibration_id, "the namespace is not ours to calibrate")
            ended = await env.client.get_workflow_handle(
                calibration_id, result_type=CalibrationProgress
            ).result()
            return done, calibration_id, waiting, ended
        finally:
            await asyncio.to_thread(_stop, replicas)
            await env.shutdown()

    done, calibration_id, waiting, ended = asyncio.run(scenario())

    # Both listed clusters, in two namespaces, calibrated by the all-namespaces worker.
    assert done.phase == Phase.COMPLETED, done.message
    assert {c.name: c.state for c in done.clusters} == dict.fromkeys(
        LISTED, ClusterState.SUCCEEDED
    ), done.clusters
    for name, ns in LISTED.items():
        wait_for(
            f"{ns}/{name} at {TARGET}",
            functools.partial(fully_at_version, dyn, mgmt, ns, name, TARGET, MACHINES),
            60,
        )
        cluster = get(dyn, capi.CLUSTER, ns, name)
        taints = decode_taints(
            (cluster["metadata"].get("annotations") or {}).get("calibrator.dev/taints")
        )
        assert not [t for t in taints if t.key == UPGRADING_TAINT_KEY], taints
        assert cluster["metadata"]["labels"][SCHEDULABLE_LABEL] == "true"
    # Placement ran and wrote its decision for the workload, across both namespaces' clusters.
    pd = fleetapi.resource(dyn, fleetapi.PLACEMENT_DECISION).get(name="web", namespace="fleet-eu")
    rows = pd.to_dict()["status"]["decisions"]
    assert rows and {r["clusterName"] for r in rows} <= set(LISTED), rows
    assert all(r["reason"].split(":")[0] in LISTED for r in rows), rows

    # The unlisted namespace: a named permission error, before anything was written.
    (refused,) = waiting.clusters
    assert refused.name == UNLISTED and refused.state == ClusterState.WAITING_FOR_DECISION
    print(f"unlisted cluster's message: {refused.message}")
    for words in (
        f"not allowed to read Secret {UNLISTED_NS}/{UNLISTED}-kubeconfig",
        "forbidden",
        f"kubeconfig reader role in {UNLISTED_NS}",
        "deploy/fleet-namespace",
    ):
        assert words in refused.message, refused.message
    assert not refused.tainted
    assert ended.phase == Phase.ABORTED, ended.message
    _untouched(dyn)
    # The aborted run removed its plan from the plan namespace as it ended.
    assert not _blobs(core).get(PLAN_NS), calibration_id
