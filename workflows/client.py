"""Client helpers: start a calibration, read its progress, and steer it (the CLI's backend).

Every helper takes a connected ``temporalio.client.Client`` and a calibration id (the
FleetCalibration workflow id) and addresses the *latest* run, so they keep working after the
workflow continued as new. Control helpers turn a rejected update (the workflow's validators) into
``ControlError`` with the validator's one-line message, ready for stderr.
"""

from __future__ import annotations

from datetime import UTC, datetime

from temporalio.client import Client, WorkflowHandle, WorkflowUpdateFailedError
from temporalio.common import SearchAttributePair, TypedSearchAttributes
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError

from orchestrator.domain.request import CalibrationRequest, parse_calibration_request
from orchestrator.domain.snapshot_load import snapshot_from_mapping
from orchestrator.domain.versions import KubeVersion
from orchestrator.planning import plan_calibration
from workflows import search_attributes, task_queues
from workflows.definitions.cluster_upgrade import ClusterUpgrade
from workflows.definitions.fleet_calibration import FleetCalibration
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


def new_calibration_id(target: str | KubeVersion, now: datetime | None = None) -> str:
    """``calibration-v1.35.0-20260102T030405``: sortable, and says what it does."""
    at = now or datetime.now(UTC)
    version = target if isinstance(target, KubeVersion) else KubeVersion.parse(target)
    return f"calibration-{version}-{at:%Y%m%dT%H%M%S}"


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
) -> WorkflowHandle[FleetCalibration, CalibrationProgress]:
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
            FleetCalibration.run,
            input,
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


def _handle(
    client: Client, calibration_id: str
) -> WorkflowHandle[FleetCalibration, CalibrationProgress]:
    return client.get_workflow_handle_for(FleetCalibration.run, calibration_id)


async def status(client: Client, calibration_id: str) -> CalibrationProgress:
    """The ``progress`` query of the latest run (works on finished runs too)."""
    try:
        return await _handle(client, calibration_id).query(FleetCalibration.progress)
    except RPCError as err:
        raise ControlError(f"calibration {calibration_id}: {err.message}") from err


async def cluster_status(client: Client, calibration_id: str, cluster: str) -> ClusterProgress:
    """One ClusterUpgrade child's own progress (step activity in detail)."""
    handle = client.get_workflow_handle_for(ClusterUpgrade.run, f"{calibration_id}/{cluster}")
    try:
        return await handle.query(ClusterUpgrade.progress)
    except RPCError as err:
        raise ControlError(f"cluster {cluster} of {calibration_id}: {err.message}") from err


def _refusal(err: WorkflowUpdateFailedError | RPCError) -> ControlError:
    if isinstance(err, WorkflowUpdateFailedError) and isinstance(err.cause, ApplicationError):
        return ControlError(err.cause.message)
    return ControlError(str(err.message) if isinstance(err, RPCError) else str(err))


async def pause(client: Client, calibration_id: str, reason: str = "") -> Ack:
    """Start no new cluster or step; running steps finish."""
    try:
        return await _handle(client, calibration_id).execute_update(
            FleetCalibration.pause, PauseRequest(reason)
        )
    except (WorkflowUpdateFailedError, RPCError) as err:
        raise _refusal(err) from err


async def resume(client: Client, calibration_id: str, reason: str = "") -> Ack:
    """Undo a pause."""
    try:
        return await _handle(client, calibration_id).execute_update(
            FleetCalibration.resume, ResumeRequest(reason)
        )
    except (WorkflowUpdateFailedError, RPCError) as err:
        raise _refusal(err) from err


async def approve(client: Client, calibration_id: str, stage: str, reason: str = "") -> Ack:
    """Open a stage's approval gate."""
    try:
        return await _handle(client, calibration_id).execute_update(
            FleetCalibration.approve, ApproveRequest(stage, reason)
        )
    except (WorkflowUpdateFailedError, RPCError) as err:
        raise _refusal(err) from err


async def skip(client: Client, calibration_id: str, cluster: str, reason: str = "") -> Ack:
    """Leave a cluster out (before it starts, or while it waits for a decision)."""
    try:
        return await _handle(client, calibration_id).execute_update(
            FleetCalibration.skip, SkipRequest(cluster, reason)
        )
    except (WorkflowUpdateFailedError, RPCError) as err:
        raise _refusal(err) from err


async def retry(client: Client, calibration_id: str, cluster: str, reason: str = "") -> Ack:
    """Retry a cluster's failed step."""
    try:
        return await _handle(client, calibration_id).execute_update(
            FleetCalibration.retry, RetryRequest(cluster, reason)
        )
    except (WorkflowUpdateFailedError, RPCError) as err:
        raise _refusal(err) from err


async def abort(client: Client, calibration_id: str, reason: str = "") -> Ack:
    """Stop the run at the next step boundary of every running cluster."""
    try:
        return await _handle(client, calibration_id).execute_update(
            FleetCalibration.abort, AbortRequest(reason)
        )
    except (WorkflowUpdateFailedError, RPCError) as err:
        raise _refusal(err) from err


async def decide(
    client: Client, calibration_id: str, cluster: str, action: DecisionAction, reason: str = ""
) -> Ack:
    """Answer a failed step directly on the cluster's ClusterUpgrade child."""
    handle = client.get_workflow_handle_for(ClusterUpgrade.run, f"{calibration_id}/{cluster}")
    try:
        return await handle.execute_update(ClusterUpgrade.decide, Decision(action, reason))
    except (WorkflowUpdateFailedError, RPCError) as err:
        raise _refusal(err) from err
