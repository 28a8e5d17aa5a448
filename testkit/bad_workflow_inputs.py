"""Bad workflow inputs and operator requests, sent raw through a Temporal client.

The corpus bypasses the CLI and ``workflows.client``: each payload is plain JSON as any client
(``temporal workflow start``, another SDK, a script) could send it, to a real worker on the
in-memory fleet. Used by tests/workflows/test_bad_input_dev_server.py on the Temporal dev server
and by benchmarks/bad_inputs.py, which prints the figures.

A start is *handled* when the run ends FAILED with one non-retryable ApplicationError (a short,
one-line message without a traceback that contains the expected fragment), its history has no
failed workflow task (no retry loop), it started no child and at most the one plan activity
(bad snapshots and scopes are found there, also non-retryably: one attempt) - or when the server
refuses the start and no run exists. An update is handled when it is rejected or fails with one
such message and the run it was sent to is unchanged.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowUpdateFailedError,
)
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError

from testkit.fake_backend import InMemoryFleet
from testkit.workflow_harness import cluster, in_memory
from workflows.client import start_calibration, status
from workflows.model import CalibrationInput, CalibrationOptions, Phase, Timeouts

TARGET = "v1.33.5"
GOOD_POLICY: dict[str, Any] = {
    "apiVersion": "calibrator.dev/v1alpha1",
    "kind": "CalibrationPolicy",
    "selector": {"matchLabels": {"env": "prod"}},
    "rules": {"channel": "stable"},
}
OPTIONS = {
    "worker_concurrency": 2,
    "timeouts": {
        "activity_seconds": 10,
        "rollout_seconds": 20,
        "heartbeat_seconds": 5,
        "poll_seconds": 0.01,
    },
}
RESULT_TIMEOUT = 60.0  # a bound, not a timing assertion: handled cases end in well under 1 s
MESSAGE_LIMIT = 400


def _snapshot_clusters(count: int) -> dict[str, Any]:
    return {
        "availableVersions": ["v1.32.9", TARGET],
        "clusters": [cluster(f"c{i:06d}", "v1.32.9") for i in range(count)],
    }


def _calibration(**fields: Any) -> dict[str, Any]:
    return {"target": TARGET, "options": OPTIONS, **fields}


def _upgrade(**plan: Any) -> dict[str, Any]:
    """A child's input with an inline ``ClusterRun``; ``plan`` replaces fields of its domain plan."""
    base = {
        "cluster": "a",
        "target": TARGET,
        "control_plane_from": "v1.32.9",
        "control_plane_steps": [TARGET],
        "workers_from": None,
        "worker_steps": [],
        "steps": [{"component": "controlPlane", "version": TARGET, "from_version": "v1.32.9"}],
    }
    run = {"plan": {**base, **plan}, "step_ids": ["x/a/00"]}
    return {"calibration_id": "x", "target": TARGET, "stage": "s", "plan": run}


@dataclass(frozen=True)
class Start:
    """A workflow started with ``arg`` as its raw JSON input; ``message``: expected fragment."""

    id: str
    workflow: str
    arg: object
    message: str
    activity: bool = False  # the plan activity finds it (one attempt, non-retryable)


STARTS: list[Start] = [
    Start("calibration-target-int", "FleetCalibration", {"target": 5}, "target: Expected"),
    Start("calibration-missing-target", "FleetCalibration", {}, "missing 1 required"),
    Start("calibration-list", "FleetCalibration", [1, 2], "expected a JSON object"),
    Start("calibration-1e5-string", "FleetCalibration", "x" * 100_000, "expected a JSON object"),
    Start(
        "calibration-unknown-field",
        "FleetCalibration",
        _calibration(optoins={}),
        "unknown field(s) 'optoins'",
    ),
    Start(
        "options-unknown-nested",
        "FleetCalibration",
        _calibration(options={"timeouts": {"rollout_secnds": 1}}),
        "options.timeouts: unknown field(s) 'rollout_secnds'",
    ),
    Start(
        "options-concurrency-string",
        "FleetCalibration",
        _calibration(options={"worker_concurrency": "8"}),
        "options: worker_concurrency: Expected value to be int",
    ),
    Start(
        "options-concurrency-zero",
        "FleetCalibration",
        _calibration(options={"worker_concurrency": 0}),
        "options.worker_concurrency: must be 1 to 1000",
    ),
    Start(
        "timeout-1e308",
        "FleetCalibration",
        _calibration(options={"timeouts": {"rollout_seconds": 1e308}}),
        "options.timeouts.rollout_seconds",
    ),
    Start(
        "timeout-negative",
        "FleetCalibration",
        _calibration(options={"timeouts": {"poll_seconds": -1}}),
        "options.timeouts.poll_seconds",
    ),
    Start(
        "history-threshold-huge",
        "FleetCalibration",
        _calibration(options={"history_threshold": 10**9}),
        "options.history_threshold",
    ),
    Start("target-latest", "FleetCalibration", _calibration(target="latest"), "target: invalid"),
    Start(
        "strategy-approvel",
        "FleetCalibration",
        _calibration(strategy={"stages": [{"name": "a", "approvel": True}]}),
        "unknown field(s) approvel",
    ),
    Start(
        "strategy-approval-string",
        "FleetCalibration",
        _calibration(strategy={"stages": [{"name": "a", "approval": "false"}]}),
        "approval: must be true or false",
    ),
    Start(
        "strategy-apiVersion-v9",
        "FleetCalibration",
        _calibration(strategy={"apiVersion": "v9", "stages": [{"name": "a"}]}),
        "strategy.apiVersion",
    ),
    Start(
        "strategy-soak-huge",
        "FleetCalibration",
        _calibration(strategy={"stages": [{"name": "a", "soak": "99999999999999999999d"}]}),
        "longer than the limit",
    ),
    Start(
        "strategy-not-a-mapping",
        "FleetCalibration",
        _calibration(strategy=["fleet"]),
        "strategy",
    ),
    Start(
        "selector-syntax",
        "FleetCalibration",
        _calibration(selector="env in prod"),
        "invalid label selector",
    ),
    Start(
        "snapshot-invalid-cluster",
        "FleetCalibration",
        _calibration(snapshot={"clusters": [{"name": "a"}]}),
        "clusters[0]: missing required field 'controlPlane'",
        activity=True,
    ),
    Start(
        "snapshot-duplicate-clusters",
        "FleetCalibration",
        _calibration(snapshot={**_snapshot_clusters(1), "clusters": [cluster("a", "v1.32.9")] * 2}),
        "duplicate cluster name(s) 'a'",
        activity=True,
    ),
    Start(
        "scope-unknown-digest",
        "FleetCalibration",
        _calibration(scope={"digest": "0" * 64, "clusters": 1}),
        "not found",
        activity=True,
    ),
    Start(
        "snapshot-4mb-cluster-list",
        "FleetCalibration",
        _calibration(snapshot=_snapshot_clusters(20_000)),
        "size exceeds limit",  # the server refuses payloads over its 2 MB blob limit: no run at all
    ),
    Start("continuous-policy-string", "ContinuousCalibration", {"policy": "x"}, "policy:"),
    Start(
        "continuous-policy-unknown-field",
        "ContinuousCalibration",
        {"policy": {**GOOD_POLICY, "rules": {"channl": "stable"}}, "options": OPTIONS},
        "unknown field(s) channl",
    ),
    Start(
        "continuous-options-unknown",
        "ContinuousCalibration",
        {"policy": GOOD_POLICY, "options": {"worker_concurency": 2}},
        "unknown field(s) 'worker_concurency'",
    ),
    Start(
        "continuous-history-threshold-zero",
        "ContinuousCalibration",
        {"policy": GOOD_POLICY, "options": {**OPTIONS, "history_threshold": 0}},
        "options.history_threshold",
    ),
    Start(
        "upgrade-no-plan",
        "ClusterUpgrade",
        {"calibration_id": "x", "target": TARGET, "stage": "s"},
        "needs a plan or a plan_ref",
    ),
    Start(
        "upgrade-step-unknown-field",
        "ClusterUpgrade",
        _upgrade(steps=[{"component": "controlPlane", "version": TARGET, "bogus": 1}]),
        "plan.plan.steps[0]: unknown field(s) 'bogus'",
    ),
    Start(
        "upgrade-component-kubelet",
        "ClusterUpgrade",
        _upgrade(steps=[{"component": "kubelet", "version": TARGET, "from_version": "v1.32.9"}]),
        "component",
    ),
    Start(
        "upgrade-from-version-bad",
        "ClusterUpgrade",
        _upgrade(control_plane_from="1.x"),
        "plan: control_plane_from: invalid Kubernetes version '1.x'",
    ),
]


@dataclass(frozen=True)
class Update:
    """An update sent raw to a calibration waiting at its approval gate."""

    id: str
    name: str
    arg: object
    message: str


UPDATES: list[Update] = [
    Update("approve-unknown-stage", "approve", {"stage": "nope"}, "unknown stage 'nope'"),
    Update("approve-stage-list", "approve", {"stage": ["gated"]}, "stage: Expected"),
    Update("approve-stage-5000", "approve", {"stage": "g" * 5000}, "longer than 1024"),
    Update("approve-unknown-field", "approve", {"stag": "gated"}, "unknown field(s) 'stag'"),
    Update("approve-not-object", "approve", "gated", "expected a JSON object"),
    Update("skip-unknown-cluster", "skip", {"cluster": "nowhere"}, "not part of this calibration"),
    Update("retry-unknown-cluster", "retry", {"cluster": "nowhere"}, "not part of this"),
    Update("retry-not-waiting", "retry", {"cluster": "a"}, "not waiting for a decision"),
    Update("pause-reason-int", "pause", {"reason": 5}, "reason: Expected value to be str"),
    Update("resume-not-paused", "resume", {}, "not paused"),
    Update("abort-unknown-field", "abort", {"reasn": "x"}, "unknown field(s) 'reasn'"),
]


@dataclass(frozen=True)
class Outcome:
    """What one case did."""

    kind: str
    id: str
    handled: bool
    traceback: bool
    seconds: float
    detail: str


def _traceback(text: str) -> bool:
    return "Traceback" in text or 'File "' in text


def _message_ok(message: str, fragment: str) -> str | None:
    if fragment not in message:
        return f"expected {fragment!r} in: {message[:300]}"
    if "\n" in message or len(message) > MESSAGE_LIMIT:
        return "not one short line"
    return None


async def _history_problems(handle: WorkflowHandle[Any, Any], activity: bool) -> str | None:
    scheduled = 0
    async for event in handle.fetch_history_events():
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED:
            return "a workflow task failed (the SDK would retry it forever)"
        if event.event_type == EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED:
            return "a child workflow was started"
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            scheduled += 1
    if scheduled > (1 if activity else 0):
        return f"{scheduled} activities were scheduled"
    return None


async def run_start(client: Client, task_queue: str, case: Start) -> Outcome:
    """Start ``case`` raw; wait (bounded) for the run to end; judge it."""
    started = time.perf_counter()
    workflow_id = f"bad-{case.id}-{uuid.uuid4().hex[:8]}"

    def outcome(handled: bool, detail: str, traceback: bool = False) -> Outcome:
        return Outcome(
            "workflow input",
            case.id,
            handled,
            traceback,
            time.perf_counter() - started,
            detail,
        )

    try:
        handle = await client.start_workflow(
            case.workflow,
            case.arg,
            id=workflow_id,
            task_queue=task_queue,
            execution_timeout=timedelta(seconds=RESULT_TIMEOUT * 2),
        )
    except RPCError as err:  # refused by the server: no run may exist
        try:
            await client.get_workflow_handle(workflow_id).describe()
        except RPCError:
            problem = _message_ok(str(err), case.message)
            return outcome(problem is None, problem or f"refused: {err}", _traceback(str(err)))
        return outcome(False, "refused, yet a run exists")
    try:
        await asyncio.wait_for(handle.result(), RESULT_TIMEOUT)
    except WorkflowFailureError as failure:
        cause = failure.cause
        if not isinstance(cause, ApplicationError):
            return outcome(False, f"failed with {type(cause).__name__}: {cause}")
        message = cause.message
        problem = _message_ok(message, case.message)
        if problem is None and not cause.non_retryable:
            problem = "the error is retryable"
        if problem is None:
            problem = await _history_problems(handle, case.activity)
        return outcome(problem is None, problem or message, _traceback(message))
    except TimeoutError:
        await handle.terminate("bad-input corpus: the run did not end")
        return outcome(False, f"no end after {RESULT_TIMEOUT:g} s (a retry loop?)")
    return outcome(False, "the run succeeded")


async def _waiting_calibration(client: Client, task_queue: str) -> WorkflowHandle[Any, Any]:
    """A calibration of cluster ``a`` waiting at the approval gate of its stage ``gated``."""
    handle = await start_calibration(
        client,
        CalibrationInput(
            target=TARGET,
            strategy={"stages": [{"name": "gated", "approval": True}]},
            options=CalibrationOptions(
                worker_concurrency=2,
                timeouts=Timeouts(
                    activity_seconds=10, rollout_seconds=20, heartbeat_seconds=5, poll_seconds=0.01
                ),
            ),
        ),
        calibration_id=f"bad-updates-{uuid.uuid4().hex[:8]}",
        task_queue=task_queue,
    )
    deadline = time.monotonic() + RESULT_TIMEOUT
    while time.monotonic() < deadline:
        try:
            if (await status(client, handle.id)).phase == Phase.AWAITING_APPROVAL:
                return handle
        except Exception:  # the first workflow task has not run yet: no query answer
            pass
        await asyncio.sleep(0.05)
    raise AssertionError("the calibration never reached its approval gate")


async def run_updates(client: Client, task_queue: str, fleet: InMemoryFleet) -> list[Outcome]:
    """Send every ``UPDATES`` case to one waiting calibration; then check it is unchanged."""
    handle = await _waiting_calibration(client, task_queue)
    raw = client.get_workflow_handle(handle.id)
    before = await status(client, handle.id)
    outcomes: list[Outcome] = []
    for case in UPDATES:
        started = time.perf_counter()
        try:
            await asyncio.wait_for(raw.execute_update(case.name, case.arg), RESULT_TIMEOUT)
        except WorkflowUpdateFailedError as err:
            cause = err.cause
            message = cause.message if isinstance(cause, ApplicationError) else str(cause)
            problem = _message_ok(message, case.message)
            outcomes.append(
                Outcome(
                    "update",
                    case.id,
                    problem is None,
                    _traceback(message),
                    time.perf_counter() - started,
                    problem or message,
                )
            )
            continue
        except TimeoutError:
            detail = "no answer"
        else:
            detail = "the update was accepted"
        outcomes.append(
            Outcome("update", case.id, False, False, time.perf_counter() - started, detail)
        )
    after = await status(client, handle.id)
    unchanged = (after.phase, after.counts, after.paused, after.abort_reason) == (
        before.phase,
        before.counts,
        before.paused,
        before.abort_reason,
    )
    if not unchanged or fleet.events:
        outcomes.append(
            Outcome("update", "run-unchanged", False, False, 0.0, f"{before!r} -> {after!r}")
        )
    await raw.execute_update("abort", {"reason": "bad-input corpus done"})
    result = await asyncio.wait_for(raw.result(), RESULT_TIMEOUT)
    if result.get("phase") != Phase.ABORTED.value or fleet.events:
        outcomes.append(Outcome("update", "abort-after", False, False, 0.0, repr(result)))
    desc = await raw.describe()
    if desc.status != WorkflowExecutionStatus.COMPLETED:
        outcomes.append(Outcome("update", "closed", False, False, 0.0, str(desc.status)))
    return outcomes


def fleet() -> InMemoryFleet:
    """The fleet the worker serves: one cluster ``a`` behind the target."""
    return in_memory(cluster("a", "v1.32.9"))


async def run_all(
    client: Client, task_queue: str, served: InMemoryFleet, starts: list[Start] | None = None
) -> list[Outcome]:
    """Every start case, then every update case; the fleet must be untouched throughout."""
    outcomes = [await run_start(client, task_queue, c) for c in (starts or STARTS)]
    if served.events:
        outcomes.append(
            Outcome("workflow input", "fleet-untouched", False, False, 0.0, repr(served.events))
        )
    outcomes += await run_updates(client, task_queue, served)
    return outcomes
