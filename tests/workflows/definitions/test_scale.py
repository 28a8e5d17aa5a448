"""A calibration of 10,000 clusters keeps every payload and the parent's history bounded.

The fleet is 10,000 clusters of which three are behind (so the run is short); the calibration
continues as new after every wave. Each history event of every run of the parent and of every
child is measured (serialized size, what the server stores), as is the progress query result.
Before the plan moved out of history, the inventory payload alone was 6.7 MB here and the
server refused it (docs/decisions.md).
"""

from __future__ import annotations

from dataclasses import replace

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from orchestrator.domain.snapshot import (
    Cluster,
    ControlPlaneState,
    FleetSnapshot,
    MachineDeploymentState,
    Resources,
)
from orchestrator.domain.taints import Taint
from orchestrator.domain.versions import KubeVersion
from testkit.fake_backend import InMemoryFleet
from testkit.workflow_harness import FAST, VERSIONS, Calibration, Harness, strategy
from workflows.model import SAMPLE_LIMIT, ClusterState, Phase, Timeouts
from workflows.payloads import DATA_CONVERTER

CLUSTERS = 10_000
BEHIND = ("prod-us-00007", "dev-eu-04242", "prod-ap-09998")
# The bound every event must stay under: far below Temporal's 2 MB payload limit, and
# independent of the fleet's size (what grows with the fleet stays in the store).
EVENT_BOUND = 64 * 1024
QUERY_BOUND = 128 * 1024
PARENT_EVENTS_PER_RUN = 200


def _fleet() -> InMemoryFleet:
    target, old = KubeVersion.parse(VERSIONS[-1]), KubeVersion.parse(VERSIONS[-2])
    regions = ("eu", "us", "ap")
    clusters = []
    for i in range(CLUSTERS):
        env = "prod" if i % 3 else "dev"
        name = f"{env}-{regions[i % 3]}-{i:05d}"
        version = old if name in BEHIND else target
        clusters.append(
            Cluster(
                name=name,
                control_plane=ControlPlaneState(version, 3),
                labels={"env": env, "region": regions[i % 3], "tier": "standard"},
                machine_deployments=(MachineDeploymentState("md-0", version, 4),),
                taints=(Taint("example.com/maintenance", "PreferNoSchedule"),) if i % 50 else (),
                capacity=Resources(64_000, 256 * 2**30),
                allocated=Resources(20_000, 64 * 2**30),
            )
        )
    versions = tuple(KubeVersion.parse(v) for v in VERSIONS)
    return InMemoryFleet(FleetSnapshot(versions, tuple(clusters)), rollout_polls=1)


async def _sizes(client: Client, workflow_id: str, run_id: str | None) -> tuple[list[int], str]:
    """Serialized size of every event of one run, and the next run's id ('' if none)."""
    history = await client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
    last = history.events[-1]
    following = ""
    if last.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
        following = last.workflow_execution_continued_as_new_event_attributes.new_execution_run_id
    return [e.ByteSize() for e in history.events], following


def test_ten_thousand_clusters_keep_payloads_and_history_bounded(harness: Harness) -> None:
    fleet = _fleet()
    options = replace(
        FAST,
        timeouts=Timeouts(
            activity_seconds=600, rollout_seconds=60, heartbeat_seconds=30, poll_seconds=0.01
        ),
        history_threshold=1,  # continue as new at every wave boundary: checkpoints are measured
    )

    async def body(c: Calibration) -> None:
        handle = await c.start(
            VERSIONS[-1], strategy=strategy({"name": "fleet", "maxConcurrency": 1}), options=options
        )
        result = await handle.result()
        assert result.phase == Phase.COMPLETED, result.message
        assert result.total_clusters == CLUSTERS
        assert result.counts == {
            ClusterState.SUCCEEDED.value: len(BEHIND),
            ClusterState.UP_TO_DATE.value: CLUSTERS - len(BEHIND),
        }
        assert result.runs > 1
        for name in BEHIND:
            assert fleet.versions(name) == (VERSIONS[-1], (VERSIONS[-1],))
            assert not fleet.has_upgrading_taint(name)
        assert len(result.clusters) <= SAMPLE_LIMIT + len(BEHIND)
        (query,) = DATA_CONVERTER.payload_converter.to_payloads([result])
        assert query.ByteSize() < QUERY_BOUND, query.ByteSize()

        runs = 0
        run_id: str | None = handle.first_execution_run_id
        while run_id:
            sizes, run_id = await _sizes(c.client, handle.id, run_id)
            runs += 1
            assert max(sizes) < EVENT_BOUND, (runs, max(sizes))
            assert len(sizes) < PARENT_EVENTS_PER_RUN, (runs, len(sizes))
        assert runs == result.runs
        for name in BEHIND:
            sizes, _ = await _sizes(c.client, f"{handle.id}/{name}", None)
            assert max(sizes) < EVENT_BOUND, (name, max(sizes))
        # The plan went to the store as one content-addressed document, deleted at the end.
        assert (len(fleet.blob_deletes), fleet.blobs) == (1, {})

    harness.run(fleet, body)
