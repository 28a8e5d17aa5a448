"""What the calibration workflows share: activity options, patch ids, failure descriptions.

Workflow code is deterministic: no I/O, no wall clock (``workflow.now()`` only), no randomness;
domain code is imported through ``imports_passed_through`` and everything else happens in
activities. These helpers run inside the workflows that import them (``FleetCalibration``,
``ClusterUpgrade``, ``ContinuousCalibration``), so they follow the same rules.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    ChildWorkflowError,
    FailureError,
)
from temporalio.exceptions import TimeoutError as ActivityTimeoutError

with workflow.unsafe.imports_passed_through():
    # Domain types that are payloads themselves (a window is a ``MaintenanceWindow`` with its
    # ``LabelSelector``): the SDK resolves their field types through the sandbox's ``sys.modules``
    # when it decodes them, and only a module imported here by its own name is there (importing
    # workflows.model is not enough). Without these, a planned window fails the workflow task.
    from orchestrator.domain.selectors import LabelSelector, Requirement  # noqa: F401
    from orchestrator.domain.waves import MaintenanceWindow  # noqa: F401
    from workflows.activities import NON_RETRYABLE_ERRORS, CalibrationActivities
    from workflows.model import (
        CalibrationOptions,
        DropBlobInput,
    )

MIN_TIMER = timedelta(seconds=1)

# The activity options below are shared: ``FleetCalibration`` and ``ClusterUpgrade`` schedule their
# activities with them, so both workflows retry and time out the same way.


def short_options(options: CalibrationOptions) -> dict[str, Any]:
    """API calls: a few quick retries, then the failure goes to the operator."""
    return {
        "start_to_close_timeout": timedelta(seconds=options.timeouts.activity_seconds),
        "retry_policy": RetryPolicy(
            initial_interval=timedelta(seconds=1),
            maximum_interval=timedelta(seconds=30),
            maximum_attempts=5,
            non_retryable_error_types=list(NON_RETRYABLE_ERRORS),
        ),
    }


def placement_options(options: CalibrationOptions) -> dict[str, Any]:
    """Re-placements: retried like API calls, each attempt bounded by ``placement_seconds``.

    Their cost grows with the workloads written (a first placement of a large names-only fleet
    writes every decision), so an attempt is not held to ``activity_seconds``; the activity
    heartbeats per decision written, so a dead worker is noticed within ``heartbeat_seconds``.
    Only the timeouts differ from ``short_options``: the commands a history replays (activity
    type and id) stay the same, so running calibrations replay unchanged and no patch is needed.
    """
    return {
        **short_options(options),
        "start_to_close_timeout": timedelta(seconds=options.timeouts.placement_seconds),
        "heartbeat_timeout": timedelta(seconds=options.timeouts.heartbeat_seconds),
    }


def read_options(options: CalibrationOptions) -> dict[str, Any]:
    """Reads of the stored plan: retried until the store answers, except for a missing plan.

    An outage of the store pauses the run instead of failing it; the plan itself cannot change.
    """
    return {
        "start_to_close_timeout": timedelta(seconds=options.timeouts.activity_seconds),
        "retry_policy": RetryPolicy(
            initial_interval=timedelta(seconds=1),
            maximum_interval=timedelta(seconds=60),
            non_retryable_error_types=list(NON_RETRYABLE_ERRORS),
        ),
    }


def wait_options(options: CalibrationOptions) -> dict[str, Any]:
    """Rollout waits: one budget for all attempts; heartbeats detect a dead worker early."""
    return {
        "schedule_to_close_timeout": timedelta(seconds=options.timeouts.rollout_seconds),
        "heartbeat_timeout": timedelta(seconds=options.timeouts.heartbeat_seconds),
        "retry_policy": RetryPolicy(
            initial_interval=timedelta(seconds=1),
            maximum_interval=timedelta(seconds=30),
            non_retryable_error_types=list(NON_RETRYABLE_ERRORS),
        ),
    }


# The parent's signal for a child's every transition (``FleetCalibration.report``): the child
# sends it by name, since the two workflow modules cannot import each other.
REPORT_SIGNAL = "report"

# workflow.patched ids: runs started before these changes replay without the new activities.
DROP_PLAN_PATCH = "drop-stored-plan"
DROP_SCOPE_PATCH = "drop-stored-scope"
# A run that ends first waits for the children that reported their end to close (a timer, only
# when one is still closing).
AWAIT_CHILDREN_PATCH = "await-closing-children"


async def drop_stored(digest: str, options: CalibrationOptions, what: str) -> None:
    """Delete a stored plan or scope its owner is done with; a failure never fails the run.

    Garbage collection is a courtesy to the management cluster's etcd, not part of the
    calibration's outcome: after a few retries the leftover is logged with its digest.
    """
    try:
        await workflow.execute_activity_method(
            CalibrationActivities.drop_blob, DropBlobInput(digest), **short_options(options)
        )
    except ActivityError as err:
        workflow.logger.warning(
            "stored %s %s was not deleted: %s", what, digest, describe_failure(err)
        )


def describe_failure(err: BaseException) -> str:
    """One line for the operator: the root cause of an activity or child failure."""
    cause: BaseException | None = err
    while isinstance(cause, ActivityError | ChildWorkflowError) and cause.cause is not None:
        cause = cause.cause
    if isinstance(cause, ActivityTimeoutError):
        kind = cause.type.name.lower().replace("_", "-") if cause.type is not None else "activity"
        return f"timed out ({kind} timeout)" + _last_seen(cause.last_heartbeat_details)
    if isinstance(cause, ApplicationError):
        return f"{cause.type}: {cause.message}" if cause.type else cause.message
    if isinstance(cause, FailureError):
        return cause.message
    return str(cause)


def _last_seen(details: Sequence[Any]) -> str:
    """What a timed-out wait saw last (its ``WaitProgress`` heartbeat), for the operator.

    "timed out" alone does not say why a rollout is stuck; the last poll does (e.g. "1/2
    Machines at v1.34.0"). The details arrive as plain JSON (no type hint on a failure).
    """
    last = details[-1] if details else None
    message = last.get("message") if isinstance(last, dict) else None
    if not message:
        return ""
    text = str(message)
    return f"; last seen: {text if len(text) <= 300 else text[:299] + '…'}"
