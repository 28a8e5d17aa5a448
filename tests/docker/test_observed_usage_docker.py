"""Observed API usage blocks a real cluster's upgrade until its client stops (issue 27, item 5).

Two CAPD docker clusters at v1.34.12 on the local plane:

- ``obs-a`` (KubeadmControlPlane + MachineDeployment) whose kubeadm configuration enables
  ``storage.k8s.io/v1alpha1`` and ``storage.k8s.io/v1beta1`` (``--runtime-config``; both off by
  default). The catalog lists the first as removed in 1.35, the second as deprecated and removed
  in 1.37. A VolumeAttributesClass is applied through v1alpha1 with client-side apply (so its
  managedFields and last-applied annotation carry v1alpha1), and a real client, kubectl on the
  control-plane node, keeps requesting both versions. The app beside it has a
  PodDisruptionBudget that allows no eviction (maxUnavailable 0).
- ``obs-b`` (ClusterClass), clean, with an app behind a satisfiable PDB.

Live ``calibrator check --fail-on block`` first: the v1alpha1 requests block obs-a (exit 3),
the v1beta1 ones are an early warning naming 1.37, both counted by the apiserver's metrics.
The real worker then calibrates both to v1.35.8 on the Temporal dev server. ``obs-b`` upgrades while
``obs-a`` is refused before its first patch, naming what was observed (requests counted by the
apiserver's metrics, the stored object, the PDB), and stays tainted and untouched. Then, as an
operator would: the client stops, the object is re-created at storage.k8s.io/v1, the PDB is
fixed and the alpha API switched off in the KubeadmControlPlane (KCP rolls the control plane:
the apiserver that counted the requests is gone); ``calibrator retry`` lets ``obs-a`` upgrade,
and the requests seen before stay in the record on its Cluster.
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from kubernetes import client
from typer.testing import CliRunner

from benchmarks.bench_capd_docker import CNI_LABEL, NS, observe, prepare
from orchestrator.cli.main import app
from orchestrator.domain.observed_record import OBSERVED_ANNOTATION, record_of
from orchestrator.domain.taints import TAINTS_ANNOTATION, UPGRADING_TAINT_KEY, decode_taints
from orchestrator.kube import capi, workload
from orchestrator.kube.backend.fleet import KubeFleetBackend
from orchestrator.kube.client import api_client, apply_all
from orchestrator.kube.templates import cluster_objects
from orchestrator.localplane import dockerenv
from orchestrator.localplane.dockerapi import api
from orchestrator.localplane.dockerengine import DockerEngine
from orchestrator.localplane.plane import LocalPlane
from testkit.capi_waits import fully_at_version, get, machines, patch, wait_for
from testkit.workflow_harness import start_dev_server
from testkit.workload_objects import APP, APP_NS, app_objects
from workflows.client import retry, start_calibration, status
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
BLOCKED, CLEAN = "obs-a", "obs-b"
ALPHA = "storage.k8s.io/v1alpha1"
BETA = "storage.k8s.io/v1beta1"  # deprecated in 1.34, removed in 1.37: an early warning
RUNTIME_CONFIG = {"name": "runtime-config", "value": f"{ALPHA}=true,{BETA}=true"}
CREATE_TIMEOUT = 900
RUN_TIMEOUT = 2400
OPTIONS = CalibrationOptions(
    timeouts=Timeouts(
        activity_seconds=120,
        rollout_seconds=1500,
        heartbeat_seconds=60,
        poll_seconds=2,
        observe_window_seconds=15,
    )
)
STRATEGY = {
    "kind": "CalibrationStrategy",
    "stages": [{"name": "fleet", "maxConcurrency": 2}],
    "maxFailures": 1,
}
# The client on obs-a's control-plane node: kubectl asks for the alpha and the beta API every
# 2 s until told to stop (a file), then says it stopped (another file), so the test never
# guesses when.
CLIENT = (
    "while [ ! -e /tmp/stop-client ]; do "
    "for v in v1alpha1 v1beta1; do kubectl --kubeconfig=/etc/kubernetes/admin.conf get "
    "volumeattributesclasses.$v.storage.k8s.io >/dev/null 2>&1; done; sleep 2; done; "
    "touch /tmp/client-stopped"
)
VAC = {
    "kind": "VolumeAttributesClass",
    "metadata": {"name": "gold"},
    "driverName": "example.csi.calibrator.dev",
    "parameters": {"iops": "3000"},
}


def observed_in_check(kubeconfig: Path) -> dict[str, dict[str, Any]] | None:
    """obs-a's metric findings by group/version from live ``check -o json --fail-on block``.

    None until the apiserver has counted requests to both versions the client asks for.
    """
    result = CliRunner().invoke(
        app,
        [
            *("check", "--kubeconfig", str(kubeconfig), "-n", NS, "-t", TARGET),
            *("-o", "json", "--fail-on", "block"),
        ],
    )
    # 3: a finding blocks a cluster's upgrade, the exit status a pipeline gates on.
    assert result.exit_code in (0, 3), (result.exit_code, result.stderr, result.stdout[-2000:])
    found = {
        f["api"].rsplit("/", 1)[0]: f
        for f in json.loads(result.stdout)["findings"]
        if f["cluster"] == BLOCKED and f["source"] == "metric"
    }
    if {ALPHA, BETA} <= found.keys():
        assert result.exit_code == 3, result.stdout[-2000:]
        return found
    return None


def log(msg: str) -> None:
    print(f"[observed] {msg}", flush=True)


def create(plane: LocalPlane) -> tuple[DockerEngine, Any, Any]:
    """Both clusters at once; obs-a's KubeadmControlPlane serves the alpha API."""
    engine, mgmt, dyn = prepare(plane)
    blocked = cluster_objects(
        BLOCKED, NS, START, backend="docker", topology=False, labels=CNI_LABEL
    )
    for obj in blocked:
        if obj["kind"] == "KubeadmControlPlane":
            api_server = obj["spec"]["kubeadmConfigSpec"]["clusterConfiguration"]["apiServer"]
            api_server["extraArgs"] = [RUNTIME_CONFIG]
    apply_all(dyn, blocked)
    apply_all(dyn, cluster_objects(CLEAN, NS, START, backend="docker", labels=CNI_LABEL))
    for name in (BLOCKED, CLEAN):

        def available(name: str = name) -> bool | None:
            return all(observe(dyn, mgmt, engine.socket, name).values()) or None

        wait_for(f"{name} Available with every Node Ready", available, CREATE_TIMEOUT)
    return engine, mgmt, dyn


def node_container(engine: DockerEngine, cluster: str) -> str:
    """The id of the cluster's control-plane node container (CAPD's kind labels)."""
    filters = json.dumps(
        {"label": [f"io.x-k8s.kind.cluster={cluster}", "io.x-k8s.kind.role=control-plane"]}
    )
    code, body = api(engine.socket, "GET", f"/containers/json?filters={quote(filters)}", 30)
    assert code == 200 and isinstance(body, list) and len(body) == 1, (code, body)
    return str(body[0]["Id"])


def node_exec(engine: DockerEngine, container: str, script: str, detach: bool) -> None:
    """Run ``sh -c script`` on a node (detached: in the background there)."""
    code, made = api(
        engine.socket,
        "POST",
        f"/containers/{container}/exec",
        30,
        body={"Cmd": ["sh", "-c", script], "AttachStdout": not detach, "AttachStderr": not detach},
    )
    assert code == 201 and isinstance(made, dict), (code, made)
    code, out = api(
        engine.socket, "POST", f"/exec/{made['Id']}/start", 120, body={"Detach": detach}
    )
    assert code == 200, (code, out)
    if not detach:
        code, info = api(engine.socket, "GET", f"/exec/{made['Id']}/json", 30)
        assert isinstance(info, dict) and info.get("ExitCode") == 0, (info, out)


def apply_on_node(engine: DockerEngine, container: str, manifest: dict[str, Any]) -> None:
    """``kubectl apply`` (client-side: last-applied annotation, its field manager) on the node."""
    text = json.dumps(manifest).replace("'", "'\\''")
    node_exec(
        engine,
        container,
        f"echo '{text}' | kubectl --kubeconfig=/etc/kubernetes/admin.conf apply -f -",
        detach=False,
    )


def frozen_pdb() -> client.V1PodDisruptionBudget:
    return client.V1PodDisruptionBudget(
        metadata=client.V1ObjectMeta(name="frozen", namespace=APP_NS),
        spec=client.V1PodDisruptionBudgetSpec(
            max_unavailable=0, selector=client.V1LabelSelector(match_labels={"app": APP})
        ),
    )


def run_app(wl: client.ApiClient) -> None:
    deployment, pdb = app_objects()
    client.AppsV1Api(wl).create_namespaced_deployment(APP_NS, deployment)
    client.PolicyV1Api(wl).create_namespaced_pod_disruption_budget(APP_NS, pdb)


def expected_pods(wl: client.ApiClient, name: str) -> int | None:
    pdb: Any = client.PolicyV1Api(wl).read_namespaced_pod_disruption_budget(name, APP_NS)
    return int(pdb.status.expected_pods or 0) or None


def tainted(dyn: Any, name: str) -> bool:
    text = (get(dyn, capi.CLUSTER, NS, name)["metadata"].get("annotations") or {}).get(
        TAINTS_ANNOTATION
    )
    return any(t.key == UPGRADING_TAINT_KEY for t in decode_taints(text))


def declared(dyn: Any, name: str) -> str:
    kcp = get(dyn, capi.KUBEADM_CONTROL_PLANE, NS, f"{name}-control-plane")
    return str(kcp["spec"]["version"])


async def until(
    env_client: Any, run_id: str, what: str, check: Any, timeout: float
) -> CalibrationProgress:
    """Poll the run's status until ``check(progress)``; fail with the last one."""
    deadline = time.monotonic() + timeout
    progress = await status(env_client, run_id)
    while not check(progress):
        assert time.monotonic() < deadline, f"{what}: {progress}"
        await asyncio.sleep(5)
        progress = await status(env_client, run_id)
        log(
            f"{progress.phase}: "
            + "; ".join(f"{c.name} {c.state} {c.message[:160]}" for c in progress.clusters)
        )
    return progress


def by_name(progress: CalibrationProgress) -> dict[str, Any]:
    return {c.name: c for c in progress.clusters}


def state(progress: CalibrationProgress, name: str) -> ClusterState | None:
    """The cluster's state, None while the run has not listed it yet (planning)."""
    found = by_name(progress).get(name)
    return None if found is None else found.state


@pytest.mark.timeout(3600)
def test_observed_usage_blocks_until_the_client_stops(tmp_path: Path) -> None:

    began = time.monotonic()
    plane = LocalPlane(tmp_path / "plane")
    # A short path of its own when CI names none: dockerd's unix sockets live below it.
    docker_dir = Path(os.environ.get("CALIBRATOR_DOCKER_DIR") or tempfile.mkdtemp(prefix="fc-obs-"))
    times: dict[str, float] = {}
    try:
        dockerenv.up(
            plane,
            docker_state_dir=docker_dir,
            node_versions=[START, TARGET],
            ttl_seconds=3600,
            progress=lambda m: print(f"[env] {m}", flush=True),
        )
        times["env_up"] = round(time.monotonic() - began, 1)
        engine, mgmt, dyn = create(plane)
        times["clusters_created"] = round(time.monotonic() - began, 1)

        node = node_container(engine, BLOCKED)
        apply_on_node(engine, node, {"apiVersion": ALPHA, **VAC})
        node_exec(engine, node, CLIENT, detach=True)
        wl_a = workload.workload_client(mgmt, NS, BLOCKED)
        wl_b = workload.workload_client(mgmt, NS, CLEAN)
        for wl in (wl_a, wl_b):
            run_app(wl)
        client.PolicyV1Api(wl_a).create_namespaced_pod_disruption_budget(APP_NS, frozen_pdb())
        # The disruption controller has counted the pods: the PDB now allows no eviction.
        wait_for("the frozen PDB's expected pods", lambda: expected_pods(wl_a, "frozen"), 300)
        # Live check before any run: the alpha API blocks, the beta one is an early warning.
        found = wait_for(
            "live check counting the client's requests to both versions",
            lambda: observed_in_check(plane.kubeconfig),
            180,
            interval=5,
        )
        log(f"check: {found[ALPHA]['detail']} | {found[BETA]['detail']}")
        assert found[ALPHA]["action"] == "block" and not found[ALPHA]["earlyWarning"], found
        assert found[ALPHA]["removedIn"] == "1.35", found
        early = found[BETA]
        assert early["earlyWarning"] and early["action"] == "warn", early
        assert early["removedIn"] == "1.37", early
        assert early["replacement"] == "storage.k8s.io/v1/VolumeAttributesClass", early
        assert " to storage.k8s.io/v1beta1 volumeattributesclasses since " in early["detail"]
        assert "deprecated, removed in 1.37" in early["detail"], early
        before = {
            n: frozenset(m["metadata"]["name"] for m in machines(dyn, NS, n))
            for n in (BLOCKED, CLEAN)
        }

        async def calibrate() -> CalibrationProgress:
            env = await start_dev_server()
            try:
                queue = f"observed-{uuid.uuid4().hex[:8]}"
                backend = KubeFleetBackend(api_client(plane.kubeconfig), namespace=NS)
                async with build_worker(env.client, backend, task_queue=queue):
                    handle = await start_calibration(
                        env.client,
                        CalibrationInput(target=TARGET, strategy=STRATEGY, options=OPTIONS),
                        task_queue=queue,
                    )
                    progress = await until(
                        env.client,
                        handle.id,
                        "obs-b upgraded and obs-a refused",
                        lambda p: (
                            state(p, CLEAN) == ClusterState.SUCCEEDED
                            and state(p, BLOCKED) == ClusterState.WAITING_FOR_DECISION
                        ),
                        RUN_TIMEOUT,
                    )
                    times["refused"] = round(time.monotonic() - began, 1)
                    refused = by_name(progress)[BLOCKED].message
                    log(f"refused: {refused}")
                    # Refused before any patch, gated all along: nothing of obs-a moved.
                    assert f"removes {ALPHA} volumeattributesclasses" in refused, refused
                    assert "requests to storage.k8s.io/v1alpha1" in refused, refused
                    assert "(apiserver metrics)" in refused, refused
                    assert "managedFields of stored objects" in refused, refused
                    assert f"PodDisruptionBudget {APP_NS}/frozen allows no eviction" in refused
                    assert declared(dyn, BLOCKED) == START
                    assert tainted(dyn, BLOCKED)
                    recorded = record_of(
                        get(dyn, capi.CLUSTER, NS, BLOCKED)["metadata"].get("annotations"), "a"
                    )
                    assert any(u.source == "metric" and u.requests for u in recorded), recorded

                    # The operator's fix: stop the client, move the object to v1, fix the PDB,
                    # switch the alpha API off (KCP replaces the apiserver that counted).
                    node_exec(engine, node, "touch /tmp/stop-client", detach=False)
                    wait_for(
                        "the client stopped",
                        lambda: _stopped(engine, node),
                        60,
                    )
                    client.CustomObjectsApi(wl_a).delete_cluster_custom_object(
                        "storage.k8s.io", "v1", "volumeattributesclasses", "gold"
                    )
                    apply_on_node(engine, node, {"apiVersion": "storage.k8s.io/v1", **VAC})
                    client.PolicyV1Api(wl_a).delete_namespaced_pod_disruption_budget(
                        "frozen", APP_NS
                    )
                    patch(
                        dyn,
                        capi.KUBEADM_CONTROL_PLANE,
                        NS,
                        f"{BLOCKED}-control-plane",
                        {
                            "spec": {
                                "kubeadmConfigSpec": {
                                    "clusterConfiguration": {"apiServer": {"extraArgs": None}}
                                }
                            }
                        },
                    )
                    wait_for(
                        "obs-a's control plane rolled without the alpha API",
                        lambda: control_plane_replaced(dyn, mgmt, before[BLOCKED]),
                        CREATE_TIMEOUT,
                    )
                    times["fixed"] = round(time.monotonic() - began, 1)
                    await retry(env.client, handle.id, BLOCKED, "client stopped, object on v1")
                    # Ends when the run does, or when obs-a is refused again (its first step's
                    # second attempt waiting): no guess about when the retry arrived.
                    return await until(
                        env.client,
                        handle.id,
                        "the run completed",
                        lambda p: (
                            p.phase in (Phase.COMPLETED, Phase.FAILED, Phase.ABORTED)
                            or (
                                state(p, BLOCKED) == ClusterState.WAITING_FOR_DECISION
                                and by_name(p)[BLOCKED].steps[0].attempts >= 2
                            )
                        ),
                        RUN_TIMEOUT,
                    )
            finally:
                await env.shutdown()

        result = asyncio.run(calibrate())
        times["completed"] = round(time.monotonic() - began, 1)
        log(f"times: {json.dumps(times)}")
        assert result.phase == Phase.COMPLETED, result
        assert {c.name: c.state for c in result.clusters} == {
            BLOCKED: ClusterState.SUCCEEDED,
            CLEAN: ClusterState.SUCCEEDED,
        }
        for name in (BLOCKED, CLEAN):
            assert fully_at_version(dyn, mgmt, NS, name, TARGET, 2), name
            assert not tainted(dyn, name), name
        # What apiservers since replaced counted is still on record, quiet, after the upgrade.
        kept = record_of(get(dyn, capi.CLUSTER, NS, BLOCKED)["metadata"].get("annotations"), "a")
        metric = [u for u in kept if u.source == "metric" and u.api.group_version == ALPHA]
        assert metric and metric[0].requests and not metric[0].active, kept
        assert not (get(dyn, capi.CLUSTER, NS, CLEAN)["metadata"].get("annotations") or {}).get(
            OBSERVED_ANNOTATION
        )
    finally:
        stopped = dockerenv.down(plane, purge=True, progress=print)
        log(f"env down: {stopped}; {json.dumps(times)}")
    assert not DockerEngine(docker_dir).status().running, "env down left dockerd running"


def control_plane_replaced(dyn: Any, mgmt: Any, old: frozenset[str]) -> bool | None:
    """Every control-plane Machine is new (none of ``old``) and its Node Ready."""
    ms = [
        m
        for m in machines(dyn, NS, BLOCKED)
        if "cluster.x-k8s.io/control-plane" in (m["metadata"].get("labels") or {})
    ]
    if not ms or {m["metadata"]["name"] for m in ms} & old:
        return None
    nodes = workload.nodes(workload.workload_client(mgmt, NS, BLOCKED))
    for m in ms:
        ref = (m.get("status") or {}).get("nodeRef") or {}
        node = nodes.get(ref.get("name", ""))
        if node is None or not workload.node_ready(node):
            return None
    return True


def _stopped(engine: DockerEngine, container: str) -> bool | None:
    try:
        node_exec(engine, container, "test -e /tmp/client-stopped", detach=False)
    except AssertionError:
        return None
    return True
