"""The gates before a patch (``workflows.activities.usage_gate``), on the in-memory fleet.

Table of what a control-plane step from v1.34.12 to v1.35.8 does with what the cluster shows:
storage.k8s.io/v1alpha1 VolumeAttributesClass is removed in 1.35 (the catalog), so requests to
it block the step while they keep coming, and stop blocking once they stop.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from orchestrator.domain.apis import ApiRef
from orchestrator.domain.observed import ApiUsage, DisruptionBlocker
from orchestrator.domain.versions import KubeVersion
from orchestrator.kube.backend.port import ClusterRef, UsageRead
from testkit.workflow_harness import cluster, in_memory
from workflows.activities import CalibrationActivities
from workflows.activities.errors import STEP_BLOCKED
from workflows.model import PatchControlPlaneInput, PatchWorkersInput

REF = ClusterRef("a")
T0 = datetime(2026, 12, 5, 10, 2, tzinfo=UTC)
VAC_ALPHA = ApiRef("storage.k8s.io", "v1alpha1", "VolumeAttributesClass")
VAC_BETA = ApiRef("storage.k8s.io", "v1beta1", "VolumeAttributesClass")  # removed in 1.37


def metric(api: ApiRef, count: int, instance: str = "172.18.0.3:6443") -> ApiUsage:
    return ApiUsage(
        api, "volumeattributesclasses", "metric", "1.35", T0, T0, T0, count, 0, instance,
        ((instance, count),),
    )  # fmt: skip


def stored(api: ApiRef) -> ApiUsage:
    return ApiUsage(
        api, "volumeattributesclasses", "managedFields", "1.35", T0, T0, T0, None, 1, "gold"
    )


def step(window: float = 0.0, mode: str = "block") -> PatchControlPlaneInput:
    return PatchControlPlaneInput(
        "cal/a/00",
        REF,
        "v1.34.12",
        "v1.35.8",
        observe_window_seconds=window,
        on_observed_usage=mode,
    )


def patch(reads: list[UsageRead], input: Any, worker: bool = False) -> tuple[Any, Any]:
    fleet = in_memory(cluster("a", "v1.34.12"))
    fleet.usage_reads["a"] = list(reads)
    acts = CalibrationActivities(fleet)
    fn = acts.patch_workers if worker else acts.patch_control_plane
    try:
        return fleet, asyncio.run(ActivityEnvironment().run(fn, input))
    except ApplicationError as err:
        return fleet, err


@pytest.mark.parametrize(
    ("reads", "window", "blocked", "patched"),
    [
        pytest.param([UsageRead()], 0.0, None, True, id="clean"),
        pytest.param([UsageRead((metric(VAC_ALPHA, 12),))], 0.0, "12 requests", False, id="first-look-counts"),
        pytest.param(
            [UsageRead((metric(VAC_ALPHA, 12),)), UsageRead((metric(VAC_ALPHA, 15),))],
            0.01, "15 requests", False, id="still-calling-in-window",
        ),
        pytest.param(
            [UsageRead((metric(VAC_ALPHA, 12),)), UsageRead((metric(VAC_ALPHA, 12),))],
            0.01, None, True, id="quiet-in-window",
        ),
        pytest.param([UsageRead((stored(VAC_ALPHA),))], 0.01, "1 stored", False, id="stored-object"),
        pytest.param([UsageRead((metric(VAC_BETA, 40),))], 0.0, None, True, id="removed-later"),
        pytest.param([UsageRead(partial="172.18.0.4:6443: no answer in time")], 0.0, None, True, id="partial-warns"),
    ],
)  # fmt: skip
def test_control_plane_gate(
    reads: list[UsageRead], window: float, blocked: str | None, patched: bool
) -> None:
    fleet, result = patch(reads, step(window))
    assert (fleet.patches[("a", "controlPlane", "v1.35.8")] == 1) is patched
    if blocked is None:
        assert result.applied == ("controlPlane",)
    else:
        assert isinstance(result, ApplicationError) and result.type == STEP_BLOCKED
        assert (blocked in str(result) and "storage.k8s.io/v1alpha1" in str(result)) or (
            "incomplete" in str(result)
        )


def test_quiet_usage_is_a_warning_and_the_record_keeps_it() -> None:
    fleet, result = patch(
        [UsageRead((metric(VAC_ALPHA, 12),)), UsageRead((metric(VAC_ALPHA, 12),))], step(0.01)
    )
    assert result.applied == ("controlPlane",)
    assert len(result.warnings) == 1 and "none since" in result.warnings[0]
    (kept,) = fleet.usage_records["a"]
    assert kept.requests == 12 and not kept.active


def test_warn_mode_patches_and_says_why() -> None:
    _, result = patch([UsageRead((metric(VAC_ALPHA, 12),))], step(mode="warn"))
    assert result.applied == ("controlPlane",)
    assert "observed: 12 requests to storage.k8s.io/v1alpha1" in result.warnings[0]


def test_a_step_already_applied_is_not_gated_again() -> None:
    fleet = in_memory(cluster("a", "v1.35.8"))
    fleet.usage_reads["a"] = [UsageRead((metric(VAC_ALPHA, 12),))]
    result = asyncio.run(
        ActivityEnvironment().run(CalibrationActivities(fleet).patch_control_plane, step())
    )
    assert result.already == ("controlPlane",) and fleet.usage_looks["a"] == 0


def test_drain_gate_refuses_a_worker_step_before_any_pool_moves() -> None:
    blocker = DisruptionBlocker("shop", "web", "maxUnavailable is 0", 2)
    workers = PatchWorkersInput(
        "cal/a/01", REF, "v1.35.8", (("md-0", KubeVersion.parse("v1.34.12")),)
    )
    fleet, result = patch([UsageRead(blockers=(blocker,))], workers, worker=True)
    assert isinstance(result, ApplicationError) and result.type == STEP_BLOCKED
    assert "PodDisruptionBudget shop/web allows no eviction" in str(result)
    assert not fleet.patches
    # A worker step looks at the PDBs alone: no metrics, no stored-object scan.
    assert fleet.blocker_only_looks["a"] == fleet.usage_looks["a"] == 1
    fleet, result = patch([UsageRead()], workers, worker=True)
    assert result.applied == ("md-0",)


def test_a_stuck_drain_refuses_the_control_plane_step_too() -> None:
    blocker = DisruptionBlocker("shop", "web", "minAvailable 2 equals the 2 expected pods", 2)
    fleet, result = patch([UsageRead(blockers=(blocker,))], step())
    assert isinstance(result, ApplicationError) and result.type == STEP_BLOCKED
    assert "shop/web allows no eviction" in str(result) and not fleet.patches


def test_an_incomplete_look_is_a_warning_naming_what_was_not_seen() -> None:
    _, result = patch([UsageRead(partial="GET /metrics: API server answered 404")], step())
    assert result.applied == ("controlPlane",)
    assert result.warnings == (
        "observation of a is incomplete: GET /metrics: API server answered 404",
    )
