"""Build the worker that runs every calibration workflow and activity against one backend.

The CLI's ``calibrator worker`` passes the kube-backed backend; the workflow tests pass an
in-memory fleet. Workflows run in the default sandbox: their module imports domain code through
``imports_passed_through``, so nothing here needs sandbox tweaks.
"""

from __future__ import annotations

import socket
from collections.abc import Sequence
from typing import Any

from temporalio.client import Client
from temporalio.worker import Worker

from orchestrator.kube.backend.port import FleetBackend
from workflows import task_queues
from workflows.activities import CalibrationActivities
from workflows.activities.placement import PLACEMENT_ROUNDS_AT_ONCE
from workflows.definitions.cluster_upgrade import ClusterUpgrade
from workflows.definitions.continuous import ContinuousCalibration
from workflows.definitions.fleet_calibration import FleetCalibration
from workflows.health import HealthServer, server_poll_check, worker_state
from workflows.payloads import strict_client

WORKFLOWS: Sequence[type] = (FleetCalibration, ClusterUpgrade, ContinuousCalibration)


def build_worker(
    client: Client,
    backend: FleetBackend,
    *,
    task_queue: str = task_queues.CALIBRATION,
    placement_rounds: int = PLACEMENT_ROUNDS_AT_ONCE,
    **options: Any,
) -> Worker:
    """A worker for every workflow and activity, bound to ``backend``.

    ``placement_rounds``: re-placement rounds run at once (``PlacementActivities``).
    ``options`` go to ``temporalio.worker.Worker`` (e.g. ``max_concurrent_activities``).
    The worker decodes what clients send strictly (``workflows.payloads``): a malformed input
    fails its run at once with one InvalidInput error instead of failing workflow tasks forever.
    """
    activities = CalibrationActivities(backend, placement_rounds=placement_rounds)
    return Worker(
        strict_client(client),
        task_queue=task_queue,
        workflows=list(WORKFLOWS),
        activities=activities.all(),
        **options,
    )


async def run_worker(
    client: Client,
    backend: FleetBackend,
    *,
    task_queue: str = task_queues.CALIBRATION,
    health: socket.socket | None = None,
    placement_rounds: int = PLACEMENT_ROUNDS_AT_ONCE,
) -> None:
    """Run until cancelled (Ctrl-C in ``calibrator worker``); shuts down gracefully.

    ``health`` is a bound socket (``workflows.health.bind``) to answer ``/livez`` and
    ``/readyz`` on for as long as the worker runs; it closes with the worker.
    ``placement_rounds`` as ``build_worker`` takes it.
    """
    worker = build_worker(client, backend, task_queue=task_queue, placement_rounds=placement_rounds)
    if health is None:
        await worker.run()
        return
    server = HealthServer(
        lambda: worker_state(worker),
        server_poll_check(client, task_queue, client.identity),
        task_queue,
    )
    await server.start(health)
    try:
        await worker.run()
    finally:
        await server.close()
