"""The real Pulumi engine (built from Go modules by tools/build.sh --set pulumi) provisions the
local stack's fleet on the real local plane, the policy pack rejects a skewed fleet, and destroy
removes every cluster. Never skipped: a missing engine is a failure with the build's output."""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from kubernetes.dynamic import DynamicClient

from benchmarks.bench_worker import start_bench_worker
from infra.automation import FleetStack, FleetStackError, stack_config
from infra.spec import FleetSpecError
from orchestrator.localplane.plane import LocalPlane
from testkit.workflow_harness import start_dev_server
from workflows.client import start_calibration
from workflows.model import CalibrationInput, CalibrationProgress, Phase

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _available(cluster: dict[str, Any]) -> bool:
    conditions = (cluster.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Available" and c.get("status") == "True" for c in conditions)


def _clusters(dyn: DynamicClient, namespace: str) -> dict[str, dict[str, Any]]:
    api = dyn.resources.get(api_version="cluster.x-k8s.io/v1beta2", kind="Cluster")
    items = api.get(namespace=namespace).to_dict()["items"]
    return {c["metadata"]["name"]: c for c in items}


async def _calibrate(plane: LocalPlane, namespace: str, target: str, selector: str) -> Any:
    """A real FleetCalibration (dev server, worker process) of the selected clusters."""
    env = await start_dev_server()
    task_queue = f"pulumi-{uuid.uuid4().hex[:8]}"
    address = env.client.service_client.config.target_host
    worker = start_bench_worker(address, plane.kubeconfig, task_queue, namespace)
    try:
        handle = await start_calibration(
            env.client, CalibrationInput(target=target, selector=selector), task_queue=task_queue
        )
        result: CalibrationProgress = await asyncio.wait_for(handle.result(), timeout=900)
        return result
    finally:
        worker.terminate()
        worker.wait(timeout=30)
        await env.shutdown()


def test_pulumi_up_policy_and_destroy(
    plane: LocalPlane, dyn: DynamicClient, tmp_path: Path
) -> None:
    declared = stack_config("local")
    namespace = declared["namespace"]
    fleet = FleetStack("local", plane.kubeconfig, tmp_path / "pulumi")
    log: list[str] = []

    def progress(line: str) -> None:  # live in the CI log, kept for failure messages
        log.append(line)
        print(f"[pulumi] {line.rstrip()}", flush=True)

    started = time.monotonic()
    up = fleet.up(progress)
    up_seconds = time.monotonic() - started
    assert up["result"] == "succeeded", "\n".join(log[-40:])
    print(
        f"[pulumi] up of {len(declared['clusters'])} clusters: {up_seconds:.1f} s, {up['changes']}"
    )

    # `up` returned only after CAPI's Available condition (pulumi.com/waitFor on each Cluster).
    live = _clusters(dyn, namespace)
    for want in declared["clusters"]:
        cluster = live[want["name"]]
        assert _available(cluster), want["name"]
        assert cluster["metadata"]["labels"].items() >= want["labels"].items()
        if want.get("topology", True):
            assert cluster["spec"]["topology"]["version"] == want["version"]
    kcps = (
        dyn.resources.get(
            api_version="controlplane.cluster.x-k8s.io/v1beta2", kind="KubeadmControlPlane"
        )
        .get(namespace=namespace)
        .to_dict()["items"]
    )
    plain = next(c for c in declared["clusters"] if c.get("topology") is False)
    kcp = next(k for k in kcps if k["metadata"]["name"] == f"{plain['name']}-control-plane")
    assert kcp["spec"]["version"] == plain["version"]
    workloads = dyn.resources.get(api_version="calibrator.dev/v1alpha1", kind="FleetWorkload")
    names = {w["metadata"]["name"] for w in workloads.get(namespace=namespace).to_dict()["items"]}
    assert names == {w["name"] for w in declared["workloads"]}

    # A second up is a no-op: the declaration and the live objects agree.
    again = fleet.up(progress)
    assert set(again["changes"]) == {"same"}, again["changes"]

    # Version ownership (docs/pulumi.md): a real calibration moves pulumi-prod-us from the
    # declared v1.34.0 to v1.35.0. The next up keeps the live version: it changes nothing on the
    # cluster (its generation stays) and downgrades nothing; Pulumi records v1.35.0 at most.
    result = asyncio.run(_calibrate(plane, namespace, "v1.35.0", "env=prod,region=us"))
    assert result.phase == Phase.COMPLETED, (result.phase, result.message)
    calibrated = _clusters(dyn, namespace)["pulumi-prod-us"]
    assert calibrated["spec"]["topology"]["version"] == "v1.35.0"
    kept = fleet.up(progress)
    assert kept["result"] == "succeeded", "\n".join(log[-40:])
    assert set(kept["changes"]) <= {"same", "update"}, kept["changes"]
    assert kept["changes"].get("update", 0) <= 1, kept["changes"]
    assert any("pulumi-prod-us: v1.35.0 live kept" in line for line in log), log[-20:]
    after = _clusters(dyn, namespace)["pulumi-prod-us"]
    assert after["spec"]["topology"]["version"] == "v1.35.0"
    assert after["metadata"]["generation"] == calibrated["metadata"]["generation"]

    # Raising a version in the stack is refused before the engine starts: moving an existing
    # cluster is the calibrator's job. Nothing changes.
    ahead = FleetStack(
        "local",
        plane.kubeconfig,
        tmp_path / "pulumi",
        overrides={
            "clusters": [
                {**c, "version": "v1.34.0"} if c["name"] == "pulumi-prod-eu" else c
                for c in declared["clusters"]
            ]
        },
    )
    with pytest.raises(FleetSpecError, match=r"runs v1\.33\.0 and the stack declares v1\.34\.0"):
        ahead.up(progress)
    assert _clusters(dyn, namespace)["pulumi-prod-eu"]["spec"]["topology"]["version"] == "v1.33.0"

    # The policy pack runs in the real engine and stops a skewed fleet before anything changes.
    skewed = FleetStack(
        "local",
        plane.kubeconfig,
        tmp_path / "pulumi",
        overrides={
            "clusters": [
                *declared["clusters"],
                {
                    "name": "pulumi-skewed",
                    "version": "v1.35.0",
                    "topology": False,
                    "machineDeployments": [{"name": "md-0", "version": "v1.31.0"}],
                },
            ]
        },
    )
    with pytest.raises(FleetStackError, match=r"4 minors behind the control plane at v1\.35\.0"):
        skewed.preview(progress)
    assert "pulumi-skewed" not in _clusters(dyn, namespace)

    started = time.monotonic()
    down = fleet.down(progress)
    down_seconds = time.monotonic() - started
    assert down["result"] == "succeeded", "\n".join(log[-40:])
    print(f"[pulumi] destroy: {down_seconds:.1f} s, {down['changes']}")
    assert not set(_clusters(dyn, namespace)) & {c["name"] for c in declared["clusters"]}
