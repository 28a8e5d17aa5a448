"""A calibration that goes right: every promise of the data flow, checked on the fleet's writes."""

from __future__ import annotations

from dataclasses import replace

from testkit.fake_backend import InMemoryFleet
from testkit.workflow_harness import FAST, Calibration, Harness, cluster, in_memory
from workflows.model import ClusterState, Phase, StageState, StepState


def _assert_safe_sequence(fleet: InMemoryFleet, name: str) -> None:
    """taint, place, then per step (patches) + place, untaint, place; tainted at every patch."""
    events = fleet.events_of(name)
    kinds = [e.kind for e in events]
    assert kinds[0] == "taint", kinds
    assert kinds[1] == "place", kinds
    assert kinds[-2:] == ["untaint", "place"], kinds
    assert all(e.tainted for e in events if e.kind == "patch"), events
    # Placement re-runs after every step: each run of patches is followed by a placement before
    # the next patch (and before the taint comes off).
    body = kinds[2:-2]
    assert body, "no step ran"
    groups: list[list[str]] = [[]]
    for kind in body:
        groups[-1].append(kind)
        if kind == "place":
            groups.append([])
    assert groups[-1] == [], kinds
    for group in groups[:-1]:
        assert group[-1] == "place" and all(k == "patch" for k in group[:-1]) and len(group) > 1


def test_calibration_upgrades_every_cluster_safely(harness: Harness) -> None:
    fleet = in_memory(
        cluster("alpha", "v1.31.13", pools=("md-0", "md-1")),
        cluster("beta", "v1.32.9"),
        cluster("gamma", "v1.33.5", workers="v1.32.9"),
        cluster("done", "v1.33.5"),
    )
    fleet.fail_times[("observe", "beta")] = 2  # transient errors are retried by Temporal

    async def body(c: Calibration) -> None:
        handle = await c.start("v1.33.5")
        result = await handle.result()
        assert result.phase == Phase.COMPLETED
        assert result.failures == 0
        for name in ("alpha", "beta", "gamma"):
            progress = result.cluster(name)
            assert progress.state == ClusterState.SUCCEEDED, progress
            assert not progress.tainted
            assert all(s.state == StepState.SUCCEEDED for s in progress.steps)
            assert fleet.versions(name) == (
                "v1.33.5",
                ("v1.33.5",) * len(fleet.clusters[name].pools),
            )
            assert not fleet.has_upgrading_taint(name)
            _assert_safe_sequence(fleet, name)
        assert result.cluster("done").state == ClusterState.UP_TO_DATE
        assert fleet.events_of("done") == []
        # alpha: v1.31 -> v1.32 -> v1.33 for the control plane, workers only at the end (skew
        # allows it), both pools in one step; canonical order.
        assert [s.description for s in result.cluster("alpha").steps] == [
            "controlPlane -> v1.32.9",
            "controlPlane -> v1.33.5",
            "workers md-0,md-1 -> v1.33.5",
        ]
        # No step applied twice.
        assert all(count == 1 for count in fleet.patches.values()), fleet.patches
        assert [s.state for s in result.stages] == [StageState.DONE]

    harness.run(fleet, body)


def test_machine_deployments_roll_with_bounded_concurrency(harness: Harness) -> None:
    fleet = in_memory(cluster("wide", "v1.32.9", pools=("md-a", "md-b", "md-c", "md-d")))

    async def body(c: Calibration) -> None:
        options = replace(FAST, worker_concurrency=2)
        result = await (await c.start("v1.33.5", options=options)).result()
        assert result.phase == Phase.COMPLETED
        assert fleet.max_pools_rolling == 2
        assert fleet.versions("wide") == ("v1.33.5", ("v1.33.5",) * 4)

    harness.run(fleet, body)


def test_replicas_moved_are_counted_per_step_per_cluster_and_for_the_run(
    harness: Harness,
) -> None:
    # v1.32 removes the workload's API: before alpha's first step its two replicas move to beta
    # (not calibrated: outside the selector); beta's two stay. Nothing else moves afterwards.
    fleet = in_memory(
        cluster("alpha", "v1.31.13", labels={"wave": "now"}),
        cluster("beta", "v1.31.13"),
        workloads=(
            {
                "name": "flow",
                "replicas": 4,
                "apis": ["flowcontrol.apiserver.k8s.io/v1beta3/FlowSchema"],
                "placement": {
                    "replicaScheduling": {"type": "Dynamic"},
                    "clusters": [{"name": "alpha", "replicas": 2}, {"name": "beta", "replicas": 2}],
                },
            },
        ),
    )

    async def body(c: Calibration) -> None:
        result = await (await c.start("v1.32.9", selector="wave=now")).result()
        assert result.phase == Phase.COMPLETED
        alpha = result.cluster("alpha")
        assert alpha.replicas_moved == 2
        # Forced too: alpha rejects the workload at v1.32 (issue 15: moved next to forced).
        assert alpha.replicas_forced == 2
        assert [s.replicas_moved for s in alpha.steps] == [0] * len(alpha.steps)
        assert [s.replicas_forced for s in alpha.steps] == [0] * len(alpha.steps)
        assert result.replicas_moved == 2 and result.replicas_forced == 2
        assert fleet.workloads["default/flow"].placement.current() == {"beta": 4}

    harness.run(fleet, body)
