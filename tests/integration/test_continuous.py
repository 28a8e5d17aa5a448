"""Continuous calibration on the real parts: Temporal dev server + Schedule + local CAPI plane.

Two clusters are created from capi-templates: ``cont-new`` at v1.34.0 in the policy's pool
(``env=cont``) and ``cont-old`` at v1.33.0 outside it. The policy keeps the pool within one minor
of the newest version the ClusterClass offers (v1.35.0). The schedule is triggered by hand:

1. the pool keeps the policy: the run ends compliant and no calibration exists;
2. ``cont-old`` joins the pool (its label changes, as when a cluster is handed to a team): the
   next run finds it two minors behind and runs a calibration scoped to it alone, to v1.34.0,
   which CAPI rolls out for real;
3. the run after that is compliant again and starts nothing.
"""

from __future__ import annotations

import asyncio
import functools
import time
from datetime import timedelta

import pytest
from kubernetes import client
from kubernetes.dynamic import DynamicClient
from temporalio.client import Client, ScheduleHandle, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from orchestrator.kube import capi
from orchestrator.kube.backend.fleet import KubeFleetBackend
from orchestrator.kube.client import api_client, apply_all
from orchestrator.kube.templates import cluster_class_objects, cluster_objects
from orchestrator.localplane.plane import LocalPlane
from testkit.capi_waits import fully_at_version, get, wait_for
from testkit.workflow_harness import start_dev_server
from workflows import schedules
from workflows.client import status
from workflows.definitions.continuous import ContinuousCalibration, calibration_id
from workflows.model import CalibrationOptions, ContinuousResult, Timeouts
from workflows.worker import build_worker

pytestmark = pytest.mark.integration

NS = "calibrator-cont"
MACHINES = 2
CREATE_TIMEOUT = 300
RUN_TIMEOUT = 600.0
DELETE_TIMEOUT = 240
OPTIONS = CalibrationOptions(
    timeouts=Timeouts(
        activity_seconds=60, rollout_seconds=600, heartbeat_seconds=30, poll_seconds=2
    )
)
POLICY = {
    "kind": "CalibrationPolicy",
    "selector": {"matchLabels": {"env": "cont"}},
    "rules": {"maxMinorsBehind": 1, "maxWorkerSkew": 0},
    "strategy": {"stages": [{"name": "pool"}]},
}


async def _finished_run(
    client: Client, handle: ScheduleHandle, runs: int
) -> tuple[str, ContinuousResult]:
    deadline = time.monotonic() + RUN_TIMEOUT
    while time.monotonic() < deadline:
        recent = (await handle.describe()).info.recent_actions
        if len(recent) >= runs:
            workflow_id = getattr(recent[runs - 1].action, "workflow_id", "")
            run = client.get_workflow_handle_for(ContinuousCalibration.run, workflow_id)
            if (await run.describe()).status != WorkflowExecutionStatus.RUNNING:
                return workflow_id, await run.result()
        await asyncio.sleep(2)
    raise AssertionError(f"run {runs} of the schedule did not finish in {RUN_TIMEOUT:.0f}s")


async def _exists(client: Client, workflow_id: str) -> bool:
    try:
        await client.get_workflow_handle(workflow_id).describe()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return False
        raise
    return True


def test_schedule_calibrates_the_live_fleet_only_when_it_breaks_the_policy(
    plane: LocalPlane, dyn: DynamicClient, mgmt: client.ApiClient
) -> None:
    namespaces = dyn.resources.get(api_version="v1", kind="Namespace")
    namespaces.create(body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    apply_all(dyn, cluster_class_objects(NS))
    apply_all(dyn, cluster_objects("cont-new", NS, "v1.34.0", labels={"env": "cont"}))
    apply_all(dyn, cluster_objects("cont-old", NS, "v1.33.0", labels={"env": "staging"}))
    clusters = dyn.resources.get(api_version=capi.CLUSTER[0], kind=capi.CLUSTER[1])
    try:
        for name, version in (("cont-new", "v1.34.0"), ("cont-old", "v1.33.0")):
            wait_for(
                f"{name} Available at {version}",
                functools.partial(fully_at_version, dyn, mgmt, NS, name, version, MACHINES),
                CREATE_TIMEOUT,
            )
        backend = KubeFleetBackend(api_client(plane.kubeconfig), namespace=NS)
        asyncio.run(_scenario(backend, dyn))
        wait_for(
            "cont-old fully at v1.34.0",
            functools.partial(fully_at_version, dyn, mgmt, NS, "cont-old", "v1.34.0", MACHINES),
            120,
        )
    finally:
        for name in ("cont-new", "cont-old"):
            try:
                clusters.delete(name=name, namespace=NS)
            except Exception as err:
                print(f"delete {NS}/{name}: {err}")
        wait_for(
            "continuous-calibration clusters deleted",
            lambda: not clusters.get(namespace=NS).to_dict()["items"],
            DELETE_TIMEOUT,
        )


async def _scenario(backend: KubeFleetBackend, dyn: DynamicClient) -> None:
    env = await start_dev_server()
    try:
        temporal = env.client
        async with build_worker(temporal, backend):
            spec = schedules.build_schedule(
                "cont", POLICY, every=timedelta(days=7), paused=True, options=OPTIONS
            )
            await schedules.create(temporal, "cont", spec)
            handle = temporal.get_schedule_handle("cont")

            await handle.trigger()
            first, result = await _finished_run(temporal, handle, 1)
            print(f"run 1: {result.message}")
            assert result.report is not None and result.report.newest == "v1.35.0"
            assert (result.report.checked, result.report.violating) == (1, 0)
            assert result.calibrations == ()
            assert not await _exists(temporal, calibration_id(first, "v1.34.0"))

            res = dyn.resources.get(api_version=capi.CLUSTER[0], kind=capi.CLUSTER[1])
            res.patch(
                name="cont-old",
                namespace=NS,
                body={"metadata": {"labels": {"env": "cont"}}},
                content_type="application/merge-patch+json",
            )
            began = time.monotonic()
            await handle.trigger()
            second, result = await _finished_run(temporal, handle, 2)
            print(f"run 2: {result.message} ({time.monotonic() - began:.0f}s)")
            assert result.report is not None
            assert (result.report.checked, result.report.violating) == (2, 1)
            (violation,) = result.report.sample
            assert (violation.cluster, violation.goal, violation.rules) == (
                "cont-old",
                "v1.34.0",
                ("maxMinorsBehind",),
            )
            (started,) = result.calibrations
            assert started.calibration_id == f"{second}/v1.34.0"
            assert started.phase == "Completed", started.message
            progress = await status(temporal, started.calibration_id)
            assert progress.total_clusters == 1  # scoped: cont-new was not part of it
            assert [c.name for c in progress.clusters] == ["cont-old"]
            cluster = get(dyn, capi.CLUSTER, NS, "cont-new")
            assert cluster["spec"]["topology"]["version"] == "v1.34.0"

            await handle.trigger()
            third, result = await _finished_run(temporal, handle, 3)
            print(f"run 3: {result.message}")
            assert result.report is not None and result.report.violating == 0
            assert result.calibrations == ()
            assert not await _exists(temporal, calibration_id(third, "v1.34.0"))
            await schedules.delete(temporal, "cont")
    finally:
        await env.shutdown()
