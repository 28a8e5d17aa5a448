"""The ``replace`` activity costs in proportion to the step, and parallel steps never clobber.

Counted with the in-memory fleet, which records every PlacementDecision write: a re-placement
places only the workloads the cluster hosts or whose decision it can still shape, writes only
decisions that changed, and a decision computed from a read that another cluster's placement
has since superseded is re-read and recomputed instead of written (compare-and-swap per
workload).
"""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest
from temporalio.testing import ActivityEnvironment

from orchestrator.domain.taints import UPGRADING_TAINT_KEY, Taint
from orchestrator.kube.backend.port import (
    ClusterRef,
    FleetBackend,
)
from orchestrator.placement import place
from testkit.fake_backend import InMemoryFleet
from testkit.settle import write_settled
from testkit.workflow_harness import cluster, in_memory
from workflows.activities import CalibrationActivities
from workflows.activities.placement import affected_workloads
from workflows.model import ReplaceInput

FLOW = "flowcontrol.apiserver.k8s.io/v1beta3/FlowSchema"  # served by v1.31, gone in v1.32


def _workload(name: str, env: str, here: str, apis: tuple[str, ...] = ()) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": "apps",
        "generation": 1,  # as the API server gives every object
        "apis": ["apps/v1/Deployment", *apis],
        "requests": {"cpu": "10m", "memory": "10Mi"},
        "placement": {
            "clusterAffinity": {"matchLabels": {"env": env}},
            "clusters": [here],
            "maxClusters": 1,
        },
    }


def _clusters() -> list[dict[str, Any]]:
    return [
        cluster(f"{env}-{i:02d}", "v1.31.13", labels={"env": env})
        for env in ("prod", "dev")
        for i in range(10)
    ]


def _workloads() -> list[dict[str, Any]]:
    workloads = [
        _workload(f"w{n:03d}", env, f"{env}-{n % 10:02d}")
        for n, env in enumerate(["prod", "dev"] * 100)
    ]
    workloads.append(_workload("flow-tuner", "prod", "prod-00", (FLOW,)))
    return workloads


def _fleet() -> InMemoryFleet:
    """20 clusters over two envs, 200 workloads pinned to one env each, one using FlowSchema."""
    return in_memory(*_clusters(), workloads=tuple(_workloads()))


async def _settle(fleet: InMemoryFleet) -> int:
    """Write a full placement of the fleet once (the state a previous run leaves); its writes."""
    written = (await write_settled(fleet, "settle")).written
    fleet.placement_writes.clear()
    return len(written)


def _replace(fleet: InMemoryFleet, name: str, upcoming: str | None = None) -> Any:
    reason = f"{name}: " + ("before the first step" if upcoming else "after the upgrade")
    return ActivityEnvironment().run(
        CalibrationActivities(fleet).replace,
        ReplaceInput("cal", ClusterRef(name), reason, upcoming_version=upcoming),
    )


def test_a_step_places_only_what_it_can_affect_and_writes_only_changes() -> None:
    fleet = _fleet()
    whole_fleet = asyncio.run(_settle(fleet))
    assert whole_fleet == 201  # what every re-placement used to write

    # Nothing changed: the 20 workloads prod-02 hosts are placed again, none written. The other
    # prod workloads could use prod-02 but settled elsewhere while it was open: they keep theirs.
    snapshot = asyncio.run(fleet.inventory()).snapshot
    prod = snapshot.cluster("prod-02")
    assert len(affected_workloads(snapshot, prod)) == 20
    result = asyncio.run(_replace(fleet, "prod-02"))
    assert (result.affected, result.written, result.conflicts) == (20, 0, 0)
    assert fleet.placement_writes == []

    # A step that breaks one hosted workload: exactly that workload is rewritten.
    result = asyncio.run(_replace(fleet, "prod-00", upcoming="v1.32.9"))
    assert result.moved == ("apps/flow-tuner",) and result.stranded == ()
    assert result.written == 1
    assert [w for w, _ in fleet.placement_writes] == ["apps/flow-tuner"]
    assert "prod-00" not in fleet.workloads["apps/flow-tuner"].placement.clusters


def test_parallel_steps_do_not_overwrite_each_others_decisions() -> None:
    fleet = _shared_tuner_fleet()
    moved_by_a: list[Any] = []

    async def prod_00_moves_flow_tuner_meanwhile() -> None:
        # prod-00 is about to go to v1.32, which removes FlowSchema: its placement runs
        # between prod-05's read and prod-05's write.
        moved_by_a.append(await _replace(fleet, "prod-00", upcoming="v1.32.9"))

    async def scenario() -> Any:
        fleet.before_write = prod_00_moves_flow_tuner_meanwhile
        # prod-05's placement read the fleet while flow-tuner still ran on prod-00, so its
        # decision for flow-tuner (stay on prod-00 and prod-05) is stale by the time it writes.
        return await _replace(fleet, "prod-05")

    result = asyncio.run(scenario())
    assert moved_by_a and moved_by_a[0].moved == ("apps/flow-tuner",)
    assert "apps/flow-tuner" in fleet.conflicts
    assert result.conflicts >= 1
    # The move survived: the stale "stay on prod-00" was recomputed, not written.
    assert "prod-00" not in fleet.workloads["apps/flow-tuner"].placement.clusters


def test_a_gated_step_places_only_what_it_hosts_or_what_tolerates_the_gate() -> None:
    fleet = _fleet()
    tolerant = _workload("gate-tolerant", "prod", "prod-01")
    tolerant["placement"]["tolerations"] = [
        {"key": UPGRADING_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}
    ]
    tolerant["placement"]["maxClusters"] = 2
    fleet = in_memory(*_clusters(), workloads=(*_workloads(), tolerant))
    asyncio.run(_settle(fleet))
    gate = Taint(key=UPGRADING_TAINT_KEY, value="", effect="NoSchedule")
    asyncio.run(fleet.add_taint(ClusterRef("prod-02"), gate))
    snapshot = asyncio.run(fleet.inventory()).snapshot
    chosen = affected_workloads(snapshot, snapshot.cluster("prod-02"))
    hosted = {w.key for w in snapshot.workloads if "prod-02" in w.placement.clusters}
    assert len(hosted) == 20
    # Of the 102 its affinity takes while it is open: the 20 it hosts and the one that tolerates.
    assert {w.key for w in chosen} == hosted | {"apps/gate-tolerant"}
    # What is left out keeps its decision: placing the whole fleet moves none of it.
    for decision in place(snapshot).decisions:
        if decision.workload not in hosted:
            assert decision.moved.replicas == 0, decision.workload
    result = asyncio.run(_replace(fleet, "prod-02", upcoming="v1.32.9"))
    assert (result.affected, result.moved) == (len(chosen), ())
    assert fleet.placement_writes == []


def test_time_bounded_tolerations_are_always_re_placed() -> None:
    timed = _workload("drain-tolerant", "dev", "dev-01")
    timed["placement"]["tolerations"] = [
        {"key": "example.com/drain", "operator": "Exists", "effect": "NoExecute",
         "tolerationSeconds": 600}
    ]  # fmt: skip
    fleet = in_memory(
        *(
            cluster(f"{env}-{i:02d}", "v1.31.13", labels={"env": env})
            for env in ("prod", "dev")
            for i in range(4)
        ),
        workloads=(timed,),
    )
    snapshot = asyncio.run(fleet.inventory()).snapshot
    # A prod cluster's step cannot host it, but workflow time alone may evict it from dev-01.
    assert [w.name for w in affected_workloads(snapshot, snapshot.cluster("prod-03"))] == [
        "drain-tolerant"
    ]


def _shared_tuner_fleet() -> InMemoryFleet:
    """flow-tuner runs on prod-00 and prod-05: both clusters' placements decide it."""
    workloads = [w for w in _workloads() if w["name"] != "flow-tuner"]
    tuner = _workload("flow-tuner", "prod", "prod-00", (FLOW,))
    tuner["placement"].update(clusters=["prod-00", "prod-05"], maxClusters=2)
    fleet = in_memory(*_clusters(), workloads=(*workloads, tuner))
    asyncio.run(_settle(fleet))
    return fleet


@pytest.mark.parametrize("rounds", [1, 2])
def test_one_workers_placements_of_a_shared_workload(rounds: int) -> None:
    """The parallel steps above, on one worker. One round at a time, the second reads what the
    first wrote and nothing conflicts. Two at once, both read before either writes: whichever
    writes second finds the other's write (a stale "stay" loses the compare-and-swap, reads again
    and keeps the move; which one that is depends on the threads, so either outcome passes)."""
    fleet = _shared_tuner_fleet()
    worker = CalibrationActivities(fleet, placement_rounds=rounds)

    def replace(name: str, upcoming: str | None = None) -> Any:
        reason = f"{name}: " + ("before the first step" if upcoming else "after the upgrade")
        return ActivityEnvironment().run(
            worker.replace, ReplaceInput("cal", ClusterRef(name), reason, upcoming_version=upcoming)
        )

    async def both() -> list[Any]:
        return list(await asyncio.gather(replace("prod-00", "v1.32.9"), replace("prod-05")))

    moved, other = asyncio.run(both())
    assert moved.moved == ("apps/flow-tuner",)
    conflicts = (moved.conflicts, other.conflicts)
    assert conflicts == (0, 0) if rounds == 1 else conflicts in {(0, 0), (0, 1)}
    assert "prod-00" not in fleet.workloads["apps/flow-tuner"].placement.clusters


class _RoundsInFlight:
    """The in-memory fleet, counting the re-placement rounds between their read and write."""

    def __init__(self, fleet: InMemoryFleet) -> None:
        self._fleet = fleet
        self.in_flight = 0
        self.most = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._fleet, name)

    async def inventory(self, clusters: Any = ()) -> Any:
        self.in_flight += 1
        self.most = max(self.most, self.in_flight)
        await asyncio.sleep(0)  # let every other round that may start reach its read
        return await self._fleet.inventory(clusters)

    async def write_placement(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return await self._fleet.write_placement(*args, **kwargs)
        finally:
            self.in_flight -= 1


@pytest.mark.parametrize("rounds", [1, 2, 3])
def test_a_worker_runs_at_most_placement_rounds_at_once(rounds: int) -> None:
    fleet = _fleet()
    asyncio.run(_settle(fleet))
    counted = _RoundsInFlight(fleet)
    worker = CalibrationActivities(cast(FleetBackend, counted), placement_rounds=rounds)

    async def steps() -> list[Any]:
        return list(
            await asyncio.gather(
                *(
                    ActivityEnvironment().run(
                        worker.replace, ReplaceInput("cal", ClusterRef(f"dev-{i:02d}"), "step")
                    )
                    for i in range(4)
                )
            )
        )

    results = asyncio.run(steps())
    assert counted.most == rounds
    assert all(r.conflicts == 0 for r in results)  # the steps' workloads do not overlap


@pytest.mark.parametrize("rounds", [0, 17])
def test_placement_rounds_out_of_bounds_are_refused(rounds: int) -> None:
    with pytest.raises(ValueError, match="1 to 16"):
        CalibrationActivities(_fleet(), placement_rounds=rounds)
