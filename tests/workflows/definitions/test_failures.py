"""Failure semantics: timeouts, decisions, the failure budget, invalid input, blocked steps."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import UTC, datetime

import pytest
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ApplicationError

from orchestrator.domain.apis import ApiRef
from orchestrator.domain.errors import InputError
from orchestrator.domain.observed import ApiUsage
from orchestrator.domain.snapshot_dump import snapshot_to_mapping
from orchestrator.kube.backend.port import UsageRead
from testkit.workflow_harness import FAST, Calibration, Harness, cluster, in_memory, strategy
from workflows import client as control
from workflows.client import ControlError, validate_input
from workflows.model import CalibrationInput, ClusterState, Phase, StepState, Timeouts

ONE_AT_A_TIME = strategy({"name": "fleet", "maxConcurrency": 1})
SHORT_ROLLOUT = replace(
    FAST,
    timeouts=Timeouts(
        activity_seconds=10, rollout_seconds=1.5, heartbeat_seconds=1, poll_seconds=0.01
    ),
)


def test_step_timeout_leaves_the_cluster_tainted_and_waiting_then_retry_succeeds(
    harness: Harness,
) -> None:
    fleet = in_memory(cluster("a-stuck", "v1.32.9"), cluster("b-next", "v1.32.9"))
    fleet.hold("a-stuck")

    async def body(c: Calibration) -> None:
        handle = await c.start("v1.33.5", strategy=ONE_AT_A_TIME, options=SHORT_ROLLOUT)
        halted = await c.wait_for(
            handle.id,
            "a-stuck waiting for a decision",
            lambda p: p.cluster("a-stuck").state == ClusterState.WAITING_FOR_DECISION,
        )
        stuck = halted.cluster("a-stuck")
        assert stuck.steps[0].state == StepState.FAILED
        assert "timed out" in stuck.steps[0].message and "timed out" in stuck.message
        # The reason says what the wait saw last, not only that it timed out.
        assert "; last seen: control plane rolling out v1.33.5" in stuck.message, stuck.message
        assert stuck.tainted and stuck.touched
        assert fleet.has_upgrading_taint("a-stuck")  # never untainted mid-upgrade
        assert fleet.events_of("a-stuck")[-1].kind == "patch"
        # maxFailures 0: the run is halted, nothing else starts.
        assert halted.phase == Phase.HALTED and halted.failures == 1
        await asyncio.sleep(0.3)
        assert (await c.progress(handle.id)).cluster("b-next").state == ClusterState.PENDING
        assert fleet.events_of("b-next") == []
        with pytest.raises(ControlError, match="not waiting for a decision"):
            await control.retry(c.client, handle.id, "b-next")
        fleet.release("a-stuck")
        await control.retry(c.client, handle.id, "a-stuck", "rollout unstuck")
        result = await handle.result()
        assert result.phase == Phase.COMPLETED and result.failures == 0
        stuck = result.cluster("a-stuck")
        assert stuck.state == ClusterState.SUCCEEDED and not stuck.tainted
        assert stuck.steps[0].attempts == 2
        # The retried step found its patch already applied: applied exactly once.
        assert fleet.patches[("a-stuck", "controlPlane", "v1.33.5")] == 1
        assert not fleet.has_upgrading_taint("a-stuck")
        assert result.cluster("b-next").state == ClusterState.SUCCEEDED

    harness.run(fleet, body)


def test_zero_failure_budget_fails_the_run_when_the_failure_is_final(harness: Harness) -> None:
    fleet = in_memory(cluster("a-bad", "v1.32.9"), cluster("b", "v1.32.9"), cluster("c", "v1.32.9"))
    fleet.hold("a-bad")

    async def body(c: Calibration) -> None:
        handle = await c.start("v1.33.5", strategy=ONE_AT_A_TIME, options=SHORT_ROLLOUT)
        await c.wait_for(
            handle.id,
            "bad waiting",
            lambda p: p.cluster("a-bad").state == ClusterState.WAITING_FOR_DECISION,
        )
        # The decision can also go straight to the cluster's own workflow ("b" has none yet).
        with pytest.raises(ControlError, match="not found"):
            await control.decide(c.client, handle.id, "b", "abort")
        await control.decide(c.client, handle.id, "a-bad", "abort", "hardware fault")
        with pytest.raises(WorkflowFailureError) as failure:
            await handle.result()
        cause = failure.value.cause
        assert isinstance(cause, ApplicationError) and cause.type == "FailureBudgetExceeded"
        final = await c.progress(handle.id)
        assert final.phase == Phase.FAILED
        bad = final.cluster("a-bad")
        assert (
            bad.state == ClusterState.FAILED and bad.tainted and fleet.has_upgrading_taint("a-bad")
        )
        for name in ("b", "c"):
            assert final.cluster(name).state == ClusterState.NOT_STARTED
            assert fleet.events_of(name) == []

    harness.run(fleet, body)


def test_failure_budget_of_one_tolerates_one_failed_cluster(harness: Harness) -> None:
    fleet = in_memory(cluster("a-bad", "v1.32.9"), cluster("b", "v1.32.9"), cluster("c", "v1.32.9"))
    fleet.hold("a-bad")
    doc = strategy({"name": "fleet", "maxConcurrency": 1}, max_failures=1)

    async def body(c: Calibration) -> None:
        handle = await c.start("v1.33.5", strategy=doc, options=SHORT_ROLLOUT)
        waiting = await c.wait_for(
            handle.id,
            "the others done while bad waits",
            lambda p: p.phase == Phase.AWAITING_DECISIONS,
        )
        assert waiting.cluster("a-bad").state == ClusterState.WAITING_FOR_DECISION
        assert waiting.cluster("b").state == ClusterState.SUCCEEDED
        assert waiting.cluster("c").state == ClusterState.SUCCEEDED
        assert waiting.failures == 1 and waiting.max_failures == 1
        await control.decide(c.client, handle.id, "a-bad", "abort", "leave it to the vendor")
        result = await handle.result()
        assert result.phase == Phase.COMPLETED and result.failures == 1
        assert result.cluster("a-bad").state == ClusterState.FAILED
        assert fleet.has_upgrading_taint("a-bad")

    harness.run(fleet, body)


def test_failed_verification_then_skip_keeps_the_taint_and_the_run_goes_on(
    harness: Harness,
) -> None:
    fleet = in_memory(cluster("odd", "v1.32.9"), cluster("fine", "v1.32.9"))
    fleet.wrong_kubelet.add("odd")  # kubelets never report the new version

    async def body(c: Calibration) -> None:
        handle = await c.start("v1.33.5", strategy=ONE_AT_A_TIME)
        waiting = await c.wait_for(
            handle.id,
            "odd waiting",
            lambda p: p.cluster("odd").state == ClusterState.WAITING_FOR_DECISION,
        )
        odd = waiting.cluster("odd")
        assert odd.steps[0].state == StepState.SUCCEEDED  # control plane fine
        assert odd.steps[1].state == StepState.FAILED
        assert "verification failed" in odd.steps[1].message
        await control.skip(c.client, handle.id, "odd", "kubelet reporting bug")
        result = await handle.result()
        assert result.phase == Phase.COMPLETED and result.failures == 0
        odd = result.cluster("odd")
        assert odd.state == ClusterState.SKIPPED and odd.tainted
        assert fleet.has_upgrading_taint("odd")  # half-verified cluster takes no new work
        assert result.cluster("fine").state == ClusterState.SUCCEEDED

    harness.run(fleet, body)


def test_invalid_input_fails_before_anything_is_touched(harness: Harness) -> None:
    fleet = in_memory(cluster("a", "v1.32.9"))

    async def body(c: Calibration) -> None:
        # Caught by the client before a workflow starts.
        with pytest.raises(InputError):
            validate_input(
                CalibrationInput(
                    target="v1.99.0",
                    snapshot=snapshot_to_mapping((await fleet.inventory()).snapshot),
                )
            )
        with pytest.raises(InputError):
            validate_input(CalibrationInput(target="v1.33.5", strategy={"stages": []}))
        with pytest.raises(InputError):
            validate_input(CalibrationInput(target="latest"))
        # Caught by the plan activity (live inventory): non-retryable, workflow fails at once.
        handle = await c.start("v1.34.0")
        with pytest.raises(WorkflowFailureError) as failure:
            await handle.result()
        cause = failure.value.cause
        assert isinstance(cause, ApplicationError) and cause.type == "InvalidInput"
        assert "availableVersions" in cause.message
        assert fleet.events == []
        assert (await c.progress(handle.id)).phase == Phase.FAILED

    harness.run(fleet, body)


def test_placement_moves_a_workload_off_before_the_step_that_would_break_it(
    harness: Harness,
) -> None:
    fleet = in_memory(
        cluster("old", "v1.31.13", labels={"calibrate": "yes"}),
        cluster("spare", "v1.31.13"),
        workloads=(
            {
                "name": "flow-tuner",
                "namespace": "platform",
                "apis": ["flowcontrol.apiserver.k8s.io/v1beta3/FlowSchema"],
                "placement": {"clusters": ["old"], "maxClusters": 1},
            },
        ),
    )

    async def body(c: Calibration) -> None:
        handle = await c.start("v1.33.5", selector="calibrate=yes")
        result = await handle.result()
        assert result.phase == Phase.COMPLETED
        assert fleet.workloads["platform/flow-tuner"].placement.clusters == ("spare",)
        events = fleet.events_of("old")
        first_patch = next(i for i, e in enumerate(events) if e.kind == "patch")
        assert events[first_patch - 1].kind == "place"  # moved before the v1.32 patch
        assert fleet.events_of("spare") == []
        with pytest.raises(KeyError):  # not selected, so not part of the calibration
            result.cluster("spare")

    harness.run(fleet, body)


def test_a_step_its_gate_refused_waits_untouched_and_skip_untaints(harness: Harness) -> None:
    fleet = in_memory(cluster("used", "v1.34.12"), versions=("v1.34.12", "v1.35.8"))
    now = datetime(2026, 12, 5, 10, 2, tzinfo=UTC)
    api = ApiRef("storage.k8s.io", "v1alpha1", "VolumeAttributesClass")
    usage = ApiUsage(api, "volumeattributesclasses", "metric", "1.35", now, now, now, 40, 0,
                     "172.18.0.3:6443", (("172.18.0.3:6443", 40),))  # fmt: skip
    fleet.usage_reads["used"] = [UsageRead((usage,))]
    no_window = replace(FAST, timeouts=replace(FAST.timeouts, observe_window_seconds=0))

    async def body(c: Calibration) -> None:
        handle = await c.start("v1.35.8", strategy=ONE_AT_A_TIME, options=no_window)
        waiting = await c.wait_for(
            handle.id,
            "used waiting",
            lambda p: p.cluster("used").state == ClusterState.WAITING_FOR_DECISION,
        )
        used = waiting.cluster("used")
        assert "StepBlocked" in used.message and "observed: 40 requests" in used.message
        assert used.tainted and not used.touched  # refused before its patch: nothing moved
        assert fleet.events_of("used", "patch") == []
        await control.skip(c.client, handle.id, "used", "client owner contacted")
        result = await handle.result()
        assert result.cluster("used").state == ClusterState.SKIPPED
        assert not fleet.has_upgrading_taint("used")  # untouched, so it takes work again

    harness.run(fleet, body)
