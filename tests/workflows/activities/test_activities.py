"""Activities alone (no server): idempotency, error classes, heartbeats, plan conversion."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import timedelta
from typing import Any

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from orchestrator.domain.snapshot_dump import snapshot_to_mapping
from orchestrator.domain.versions import KubeVersion
from orchestrator.kube.backend.port import ClusterRef
from testkit.fake_backend import InMemoryFleet
from testkit.workflow_harness import cluster, in_memory, strategy
from workflows.activities import INVALID_INPUT, NOT_FOUND, VERSION_CONFLICT, CalibrationActivities
from workflows.activities import rollout as rollout_activities
from workflows.activities.plan_payload import plan_from_input
from workflows.model import (
    ClusterPlanInput,
    LocateInput,
    PatchControlPlaneInput,
    PatchWorkersInput,
    PlacementProgress,
    PlanInput,
    PlanRef,
    PreflightInput,
    ReplaceInput,
    TaintInput,
    VerifyInput,
    WaitControlPlaneInput,
    WaitProgress,
    WaveInput,
)

REF = ClusterRef("a")
V = KubeVersion.parse


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def acts(fleet: InMemoryFleet) -> CalibrationActivities:
    return CalibrationActivities(fleet)


def test_patch_is_idempotent_and_detects_foreign_changes() -> None:
    fleet = in_memory(cluster("a", "v1.32.9"))
    a = acts(fleet)
    env = ActivityEnvironment()
    step = PatchControlPlaneInput("cal/a/00", REF, "v1.32.9", "v1.33.5")
    first = run(env.run(a.patch_control_plane, step))
    assert first.applied == ("controlPlane",)
    again = run(env.run(a.patch_control_plane, step))  # a retry after a lost response
    assert again.applied == () and again.already == ("controlPlane",)
    assert fleet.patches[("a", "controlPlane", "v1.33.5")] == 1
    with pytest.raises(ApplicationError) as err:
        run(env.run(a.patch_control_plane, PatchControlPlaneInput("x", REF, "v1.31.13", "v1.32.9")))
    assert err.value.type == VERSION_CONFLICT and err.value.non_retryable


def test_patch_workers_skips_pools_already_moved() -> None:
    fleet = in_memory(cluster("a", "v1.33.5", workers="v1.32.9", pools=("md-0", "md-1")))
    a = acts(fleet)
    env = ActivityEnvironment()
    pools = (("md-0", V("v1.32.9")), ("md-1", V("v1.32.9")))
    run(env.run(a.patch_workers, PatchWorkersInput("s", REF, "v1.33.5", pools[:1])))
    result = run(env.run(a.patch_workers, PatchWorkersInput("s", REF, "v1.33.5", pools)))
    assert result.applied == ("md-1",) and result.already == ("md-0",)
    with pytest.raises(ApplicationError) as err:
        run(env.run(a.patch_workers, PatchWorkersInput("s", REF, "v1.33.5", ())))
    assert err.value.type == INVALID_INPUT


def test_wait_heartbeats_every_poll() -> None:
    fleet = in_memory(cluster("a", "v1.32.9"), rollout_polls=3)
    a = acts(fleet)
    env = ActivityEnvironment()
    beats: list[WaitProgress] = []
    env.on_heartbeat = lambda *details: beats.append(details[0])
    run(env.run(a.patch_control_plane, PatchControlPlaneInput("s", REF, "v1.32.9", "v1.33.5")))
    result = run(
        env.run(a.wait_control_plane, WaitControlPlaneInput("s", REF, "v1.33.5", poll_seconds=0))
    )
    # The first beat says it is observing (before the first answer), then one per poll.
    assert beats[0] == WaitProgress(0, "observing the control plane")
    assert result.polls == len(beats) - 1 >= 2
    assert "rolled out" in result.message and "rolling out" in beats[1].message


def test_a_woken_wait_observes_without_sleeping_its_interval(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The worker's cache wakes a wait when CAPI's status says the rollout finished; the poll
    # interval (an hour here) only bounds a wait nobody wakes. The gap between two observations
    # is set to none, so a wait that slept would run into the test's bound, not finish.
    monkeypatch.setattr(rollout_activities, "MIN_OBSERVE_GAP", 0.0)
    fleet = in_memory(cluster("a", "v1.32.9"), rollout_polls=3)
    fleet.wake_rollouts = True
    a = acts(fleet)
    env = ActivityEnvironment()
    run(env.run(a.patch_control_plane, PatchControlPlaneInput("s", REF, "v1.32.9", "v1.33.5")))
    wait = WaitControlPlaneInput("s", REF, "v1.33.5", poll_seconds=3600)
    result = run(asyncio.wait_for(env.run(a.wait_control_plane, wait), 60))
    assert "rolled out" in result.message
    assert fleet.wakeups == result.polls - 1 >= 2


def test_unknown_cluster_is_not_retryable() -> None:
    a = acts(in_memory(cluster("a", "v1.32.9")))
    with pytest.raises(ApplicationError) as err:
        run(
            ActivityEnvironment().run(
                a.verify, VerifyInput("s", ClusterRef("zz"), "controlPlane", "v1.33.5")
            )
        )
    assert err.value.type == NOT_FOUND and err.value.non_retryable


def test_preflight_reports_every_problem() -> None:
    fleet = in_memory(cluster("a", "v1.31.13"))
    fleet.clusters["a"].control_plane.declared = "v1.31.99"  # someone else is rolling it
    a = acts(fleet)
    foreign = TaintInput(REF, "calibrator.dev/upgrading", "NoSchedule", "other-calibration")
    run(ActivityEnvironment().run(a.add_taint, foreign))
    result = run(
        ActivityEnvironment().run(
            a.preflight,
            PreflightInput("mine", REF, "v1.31.13", (("md-9", V("v1.31.13")),), ("v1.32.9",)),
        )
    )
    assert not result.ok
    text = " | ".join(result.problems)
    assert "declares v1.31.99" in text and "md-9 not found" in text
    assert "other-calibration" in text


def test_replace_refuses_a_step_that_would_strand_a_workload() -> None:
    fleet = in_memory(
        cluster("a", "v1.31.13"),
        workloads=(
            {
                "name": "flow",
                "apis": ["flowcontrol.apiserver.k8s.io/v1beta3/FlowSchema"],
                "placement": {"clusters": ["a"]},
            },
        ),
    )
    a = acts(fleet)
    blocked = run(
        ActivityEnvironment().run(
            a.replace, ReplaceInput("c", REF, "a: test", upcoming_version="v1.32.9")
        )
    )
    assert blocked.stranded == ("default/flow",) and blocked.decisions == 0
    assert fleet.events == []  # nothing written
    now = run(ActivityEnvironment().run(a.replace, ReplaceInput("c", REF, "a: test")))
    assert now.stranded == () and now.decisions == 1


def test_plan_conversion_adds_step_ids_from_versions_and_canary_gate() -> None:
    fleet = in_memory(
        cluster("c", "v1.32.9", labels={"canary": "yes"}),
        cluster("m", "v1.31.13", workers="v1.31.13", pools=("md-0", "md-1")),
    )
    snapshot = run(fleet.inventory()).snapshot
    doc = strategy(
        {"name": "rest"},
        canary={"selector": {"matchLabels": {"canary": "yes"}}, "approvalAfter": True},
        max_failures=2,
    )
    plan = plan_from_input(
        PlanInput("cal-1", "v1.33.5", snapshot_to_mapping(snapshot), doc, None, {"m": "ns"})
    )
    stages = plan.plan.rollout.stages
    assert [s.name for s in stages] == ["canary", "rest"]
    assert [s.approval for s in stages] == [False, True]  # approvalAfter gates the next
    assert plan.plan.rollout.max_failures == 2
    m = plan.cluster("m")
    assert m.cluster == ClusterRef("m", "ns")
    assert [(s.component, str(s.from_version), str(s.version)) for s in m.plan.steps] == [
        ("controlPlane", "v1.31.13", "v1.32.9"),
        ("controlPlane", "v1.32.9", "v1.33.5"),
        ("workers", "v1.31.13", "v1.33.5"),
    ]
    assert m.plan.steps[2].pools_from == (("md-0", V("v1.31.13")), ("md-1", V("v1.31.13")))
    assert m.step_ids[0] == "cal-1/m/00-controlPlane-v1.32.9"
    with pytest.raises(ApplicationError) as err:
        run(
            ActivityEnvironment().run(
                acts(fleet).plan_fleet, PlanInput("x", "v1.30.0", snapshot_to_mapping(snapshot))
            )
        )
    assert err.value.type == INVALID_INPUT and err.value.non_retryable


def test_stored_plan_is_summarized_read_back_in_slices_and_located() -> None:
    fleet = in_memory(
        cluster("canary", "v1.32.9", labels={"calibrator.dev/canary": "true"}),
        cluster("a", "v1.31.13"),
        cluster("b", "v1.32.9"),
        cluster("c", "v1.32.9"),
        cluster("done", "v1.33.5"),
    )
    a = acts(fleet)
    env = ActivityEnvironment()
    summary = run(env.run(a.plan_fleet, PlanInput("cal", "v1.33.5", None)))
    assert list(fleet.blobs) == [summary.plan.digest]
    assert summary.plan.size == len(fleet.blobs[summary.plan.digest])
    assert summary.counts == {"Pending": 4, "UpToDate": 1} and summary.clusters == 5
    assert [(s.name, s.waves, s.clusters) for s in summary.stages] == [
        ("canary", 1, 1),
        ("fleet", 3, 3),
    ]
    # The next clusters to run get detail first (execution order), up-to-date ones after.
    assert [p.name for p in summary.notable] == ["canary", "a", "b", "c", "done"]
    # Same fleet, same plan, same digest (the plan is content-addressed).
    again = run(env.run(CalibrationActivities(fleet).plan_fleet, PlanInput("cal", "v1.33.5", None)))
    assert again.plan == summary.plan

    cold = CalibrationActivities(fleet)  # another worker: reads the store, not its memory
    part = run(env.run(cold.wave, WaveInput(summary.plan, 1, 0, 0, 1)))
    assert [m.name for m in part.members] == ["a"] and part.total == 1
    assert part.members[0].steps[:2] == ("controlPlane -> v1.32.9", "controlPlane -> v1.33.5")
    assert part.members[0].step_ids[0] == "cal/a/00-controlPlane-v1.32.9"
    plan = run(env.run(cold.cluster_plan, ClusterPlanInput(summary.plan, "a")))
    assert plan.cluster.name == "a" and len(plan.plan.steps) == len(part.members[0].steps)
    assert fleet.blob_reads == 1  # decoded once per worker, then cached by digest
    where = run(env.run(cold.locate_cluster, LocateInput(summary.plan, "c")))
    assert (where.found, where.stage, where.wave, where.state) == (True, 1, 2, "Pending")
    assert run(env.run(cold.locate_cluster, LocateInput(summary.plan, "done"))).state == (
        "UpToDate"
    )
    assert not run(env.run(cold.locate_cluster, LocateInput(summary.plan, "zzz"))).found
    with pytest.raises(ApplicationError) as err:
        run(env.run(cold.cluster_plan, ClusterPlanInput(summary.plan, "zzz")))
    assert err.value.type == INVALID_INPUT
    with pytest.raises(ApplicationError) as err:
        run(env.run(cold.wave, WaveInput(PlanRef("0" * 64), 0, 0)))
    assert err.value.type == NOT_FOUND and err.value.non_retryable


def test_replace_reports_replicas_moved_and_an_unchanged_fleet_moves_none() -> None:
    # Two replicas on each cluster; the upcoming version of a removes the API the workload uses,
    # so a's two replicas move to b, and only those (b's stay where they are).
    fleet = in_memory(
        cluster("a", "v1.31.13"),
        cluster("b", "v1.31.13"),
        workloads=(
            {
                "name": "flow",
                "replicas": 4,
                "apis": ["flowcontrol.apiserver.k8s.io/v1beta3/FlowSchema"],
                "placement": {
                    "replicaScheduling": {"type": "Dynamic"},
                    "clusters": [{"name": "a", "replicas": 2}, {"name": "b", "replicas": 2}],
                },
            },
        ),
    )
    a = acts(fleet)
    first = run(
        ActivityEnvironment().run(
            a.replace, ReplaceInput("c", REF, "a: test", upcoming_version="v1.32.9")
        )
    )
    assert first.replicas_moved == 2 and first.moved == ("default/flow",)
    assert first.replicas_forced == 2  # a rejects the workload at v1.32.9: the minimum
    assert fleet.decisions["default/flow"] == (("b", 4),)
    assert fleet.workloads["default/flow"].placement.current() == {"b": 4}
    again = run(
        ActivityEnvironment().run(
            a.replace, ReplaceInput("c", REF, "a: test", upcoming_version="v1.32.9")
        )
    )
    assert again.replicas_moved == 0 and again.written == 0 and again.replicas_forced == 0


def test_replace_heartbeats_while_it_writes() -> None:
    # A first placement (names only) writes every decision; each one written is a heartbeat, so
    # a large one lasts as long as it progresses (issue 9) and a dead worker is still noticed.
    fleet = in_memory(
        cluster("a", "v1.31.13"),
        cluster("b", "v1.31.13"),
        workloads=tuple(
            {"name": f"w{i}", "replicas": 2, "apis": ["apps/v1/Deployment"],
             "placement": {"clusters": ["a"]}}
            for i in range(3)
        ),
    )  # fmt: skip
    env = ActivityEnvironment()
    beats: list[Any] = []
    env.on_heartbeat = lambda *details: beats.append(details[0])
    result = run(env.run(acts(fleet).replace, ReplaceInput("c", REF, "a: first")))
    assert result.written == 3 and result.affected == 3
    assert [(b.done, b.total) for b in beats] == [(0, 0), (0, 0), (0, 3), (1, 3), (2, 3), (3, 3)]
    assert all(isinstance(b, PlacementProgress) for b in beats)
    assert beats[-1].message == "3/3 decisions written"


def _held_until_heartbeat_thrice(fleet: InMemoryFleet, method: str) -> tuple[Any, list[Any]]:
    """An environment whose activity's ``method`` call on ``fleet`` returns only once the
    activity has heartbeat three times (a 30-ms heartbeat timeout; no clock in the check)."""
    repeated = asyncio.Event()
    beats: list[Any] = []

    def heard(*details: Any) -> None:
        beats.append(details[0])
        if len(beats) >= 3:
            repeated.set()

    call = getattr(fleet, method)

    async def held(*args: Any) -> Any:
        await asyncio.wait_for(repeated.wait(), 30)
        return await call(*args)

    setattr(fleet, method, held)
    env = ActivityEnvironment()
    env.info = dataclasses.replace(env.info, heartbeat_timeout=timedelta(milliseconds=30))
    env.on_heartbeat = heard
    return env, beats


def test_replace_keeps_heartbeating_through_a_long_fleet_read() -> None:
    # One LIST of thousands of workloads reports no progress; the activity repeats its latest
    # heartbeat meanwhile, so the heartbeat timeout only catches a dead worker.
    fleet = in_memory(cluster("a", "v1.31.13"))
    env, beats = _held_until_heartbeat_thrice(fleet, "inventory")
    run(env.run(acts(fleet).replace, ReplaceInput("c", REF, "a: first")))
    assert [b.message for b in beats[:3]] == ["reading the fleet"] * 3


def test_a_wait_keeps_heartbeating_through_a_slow_observation() -> None:
    # At 300 clusters a poll's LIST of Machines outlasted the heartbeat timeout on a busy API
    # server, and every attempt of 40 clusters' waits was cancelled. The wait repeats its latest
    # heartbeat while a poll is in flight.
    fleet = in_memory(cluster("a", "v1.31.13"))
    env, beats = _held_until_heartbeat_thrice(fleet, "observe")
    wait = WaitControlPlaneInput("s1", REF, "v1.31.13", poll_seconds=0)
    result = run(env.run(acts(fleet).wait_control_plane, wait))
    assert result.polls == 1
    assert [b.message for b in beats[:3]] == ["observing the control plane"] * 3
    assert all(isinstance(b, WaitProgress) for b in beats)
