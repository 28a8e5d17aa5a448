"""Client helpers: start a calibration, read its progress, and steer it (the CLI's backend).

Every helper takes a connected ``temporalio.client.Client`` and a calibration id (the
FleetCalibration workflow id) and addresses the *latest* run, so they keep working after the
workflow continued as new. Control helpers turn a rejected update (the workflow's validators) into
``ControlError`` with the validator's one-line message, ready for stderr.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, cast

from temporalio.client import Client, WorkflowHandle, WorkflowUpdateFailedError
from temporalio.common import SearchAttributePair, TypedSearchAttributes
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError

from orchestrator.domain.request import CalibrationRequest, parse_calibration_request
from orchestrator.domain.snapshot_load import snapshot_from_mapping
from orchestrator.domain.versions import KubeVersion
from orchestrator.planning import plan_calibration
from workflows import names, search_attributes, task_queues
from workflows.model import (
    AbortRequest,
    Ack,
    ApproveRequest,
    CalibrationInput,
    CalibrationProgress,
    ClusterProgress,
    Decision,
    DecisionAction,
    PauseRequest,
    Phase,
    ResumeRequest,
    RetryRequest,
    SkipRequest,
)
from workflows.search_attribute_setup import (
    MissingSearchAttributes,
    OperatorAdmin,
    Registration,
    ensure_search_attributes,
    missing_attribute,
    missing_hint,
)


class ControlError(Exception):
    """An update the calibration refused, or a calibration that does not exist."""


async def register_search_attributes(client: Client) -> Registration:
    """Register CalibrationTarget, CalibrationPhase and ClusterName (Keyword) where missing.

    The one way every caller registers them (``calibrator temporal setup``, the demo, the
    tests): ``search_attribute_setup.ensure_search_attributes`` on the client's namespace.
    """
    return await ensure_search_attributes(OperatorAdmin(client), client.namespace)


# A run's handle: started and addressed by the registered names (``workflows.names``), so this
# module imports neither the workflow definitions nor the activities; the result is typed.
CalibrationHandle = WorkflowHandle[Any, CalibrationProgress]


def new_calibration_id(target: KubeVersion, now: datetime | None = None) -> str:
    """``calibration-v1.35.0-20260102T030405``: sortable, and says what it does."""
    at = now or datetime.now(UTC)
    return f"calibration-{target}-{at:%Y%m%dT%H%M%S}"


def validate_input(input: CalibrationInput) -> CalibrationRequest:
    """Fail before starting anything: target, strategy, selector, and the plan for a snapshot.

    Raises ``orchestrator.domain.errors.InputError`` (the CLI prints it and exits 2).
    """
    request = parse_calibration_request(input.target, input.strategy, input.selector)
    if input.snapshot is not None:  # what the plan activity will find: fail before the start
        snapshot = snapshot_from_mapping(input.snapshot)
        plan_calibration(snapshot, request.target, request.strategy, request.selector)
    return request


async def start_calibration(
    client: Client,
    input: CalibrationInput,
    *,
    calibration_id: str | None = None,
    task_queue: str = task_queues.CALIBRATION,
) -> CalibrationHandle:
    """Validate, then start a FleetCalibration with search attributes and a static summary.

    A namespace without the calibration search attributes refuses the start: that becomes
    ``MissingSearchAttributes``, whose message names `calibrator temporal setup`.
    """
    request = validate_input(input)
    workflow_id = calibration_id or new_calibration_id(request.target)
    target = str(request.target)
    details = [
        f"Target: **{target}**",
        f"Selector: `{input.selector}`" if input.selector else "Selector: whole fleet",
        "Strategy: "
        + ("custom document" if input.strategy else "default (canary, then one at a time)"),
        "Fleet: " + ("snapshot given at start" if input.snapshot else "live inventory"),
    ]
    try:
        return await client.start_workflow(
            names.FLEET_CALIBRATION,
            input,
            result_type=CalibrationProgress,
            id=workflow_id,
            task_queue=task_queue,
            search_attributes=TypedSearchAttributes(
                [
                    SearchAttributePair(search_attributes.CALIBRATION_TARGET, target),
                    SearchAttributePair(search_attributes.CALIBRATION_PHASE, Phase.PLANNING.value),
                ]
            ),
            static_summary=f"Calibrate fleet to {target}",
            static_details="\n".join(details),
        )
    except RPCError as err:
        missing = missing_attribute(err)
        if missing is None:
            raise
        raise MissingSearchAttributes(missing_hint(client.namespace, [missing])) from None


def _handle(client: Client, calibration_id: str) -> CalibrationHandle:
    return client.get_workflow_handle(calibration_id, result_type=CalibrationProgress)


async def status(client: Client, calibration_id: str) -> CalibrationProgress:
    """The ``progress`` query of the latest run (works on finished runs too)."""
    try:
        progress = await _handle(client, calibration_id).query(
            names.PROGRESS, result_type=CalibrationProgress
        )
    except RPCError as err:
        raise ControlError(f"calibration {calibration_id}: {err.message}") from err
    return cast(CalibrationProgress, progress)


async def cluster_status(client: Client, calibration_id: str, cluster: str) -> ClusterProgress:
    """One ClusterUpgrade child's own progress (step activity in detail)."""
    handle = client.get_workflow_handle(f"{calibration_id}/{cluster}", result_type=ClusterProgress)
    try:
        progress = await handle.query(names.PROGRESS, result_type=ClusterProgress)
    except RPCError as err:
        raise ControlError(f"cluster {cluster} of {calibration_id}: {err.message}") from err
    return cast(ClusterProgress, progress)


def _refusal(err: WorkflowUpdateFailedError | RPCError) -> ControlError:
    if isinstance(err, WorkflowUpdateFailedError) and isinstance(err.cause, ApplicationError):
        return ControlError(err.cause.message)
    return ControlError(str(err.message) if isinstance(err, RPCError) else str(err))


async def _update(client: Client, workflow_id: str, update: str, request: object) -> Ack:
    """Send one update by its registered name; a refusal becomes ``ControlError``."""
    try:
        ack = await client.get_workflow_handle(workflow_id).execute_update(
            update, request, result_type=Ack
        )
    except (WorkflowUpdateFailedError, RPCError) as err:
        raise _refusal(err) from err
    return cast(Ack, ack)


async def pause(client: Client, calibration_id: str, reason: str = "") -> Ack:
    """Start no new cluster or step; running steps finish."""
    return await _update(client, calibration_id, names.PAUSE, PauseRequest(reason))


async def resume(client: Client, calibration_id: str, reason: str = "") -> Ack:
    """Undo a pause."""
    return await _update(client, calibration_id, names.RESUME, ResumeRequest(reason))


async def approve(client: Client, calibration_id: str, stage: str, reason: str = "") -> Ack:
    """Open a stage's approval gate."""
    return await _update(client, calibration_id, names.APPROVE, ApproveRequest(stage, reason))


async def skip(client: Client, calibration_id: str, cluster: str, reason: str = "") -> Ack:
    """Leave a cluster out (before it starts, or while it waits for a decision)."""
    return await _update(client, calibration_id, names.SKIP, SkipRequest(cluster, reason))


async def retry(client: Client, calibration_id: str, cluster: str, reason: str = "") -> Ack:
    """Retry a cluster's failed step."""
    return await _update(client, calibration_id, names.RETRY, RetryRequest(cluster, reason))


async def abort(client: Client, calibration_id: str, reason: str = "") -> Ack:
    """Stop the run at the next step boundary of every running cluster."""
    return await _update(client, calibration_id, names.ABORT, AbortRequest(reason))


async def decide(
    client: Client, calibration_id: str, cluster: str, action: DecisionAction, reason: str = ""
) -> Ack:
    """Answer a failed step directly on the cluster's ClusterUpgrade child."""
    workflow_id = f"{calibration_id}/{cluster}"
    return await _update(client, workflow_id, names.DECIDE, Decision(action, reason))
