"""Validation of workflow inputs at the workflow entry (deterministic, no I/O).

``workflows.client.start_calibration`` validates before it starts anything, but a workflow can be
started straight through any Temporal client (``temporal workflow start``, another SDK, a script),
so each workflow checks its own input first thing in ``run``. An invalid input fails the workflow
at once with a non-retryable ``ApplicationError`` of type ``InvalidInput`` and one message naming
the field, before any activity runs: nothing is changed anywhere.

What is checked here is cheap (no snapshot parsing: the plan activity validates the snapshot,
also non-retryably, and its CPU time does not count against the workflow task). The bounds keep
later arithmetic safe: ``workflow.now() + timedelta(seconds=...)`` with a huge timeout overflows.
"""

from __future__ import annotations

import math
from typing import Any, NoReturn

from temporalio.exceptions import ApplicationError

from orchestrator.domain.documents import quote
from orchestrator.domain.errors import InputError
from orchestrator.domain.policy import policy_from_mapping
from orchestrator.domain.request import parse_calibration_request, version_field
from workflows.model import (
    CalibrationInput,
    CalibrationOptions,
    ClusterUpgradeInput,
    ContinuousInput,
    Timeouts,
)

INVALID_INPUT = "InvalidInput"  # the same type as workflows.activities.INVALID_INPUT
MAX_TIMEOUT_SECONDS = 366 * 86_400
MAX_WORKER_CONCURRENCY = 1_000
HISTORY_THRESHOLD = (1, 50_000)  # Temporal refuses histories past 51,200 events


def _invalid(message: str) -> NoReturn:
    raise ApplicationError(
        f"invalid workflow input: {message}", type=INVALID_INPUT, non_retryable=True
    )


def _text(value: object, where: str, *, empty: bool = False) -> str:
    if not isinstance(value, str) or (not empty and not value.strip()) or len(value) > 1024:
        _invalid(f"{where}: expected a non-empty string, got {quote(value)}")
    return value


def _version(value: object, where: str) -> None:
    try:
        version_field(value, where)
    except InputError as err:
        _invalid(str(err))


def _seconds(value: object, where: str, minimum: float = 0.0) -> None:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or not minimum < value <= MAX_TIMEOUT_SECONDS
    ):
        _invalid(
            f"{where}: expected seconds in ({minimum:g}, {MAX_TIMEOUT_SECONDS}], got {quote(value)}"
        )


def _options(options: object, where: str) -> None:
    if not isinstance(options, CalibrationOptions):
        _invalid(f"{where}: expected CalibrationOptions, got {quote(options)}")
    concurrency = options.worker_concurrency
    if isinstance(concurrency, bool) or not isinstance(concurrency, int):
        _invalid(f"{where}.worker_concurrency: expected an integer, got {quote(concurrency)}")
    if not 1 <= concurrency <= MAX_WORKER_CONCURRENCY:
        _invalid(
            f"{where}.worker_concurrency: must be 1 to {MAX_WORKER_CONCURRENCY}, got {concurrency}"
        )
    threshold = options.history_threshold
    low, high = HISTORY_THRESHOLD
    if (
        isinstance(threshold, bool)
        or not isinstance(threshold, int)
        or not low <= threshold <= high
    ):
        _invalid(
            f"{where}.history_threshold: must be an integer {low} to {high}, got {quote(threshold)}"
        )
    timeouts: Any = options.timeouts
    if not isinstance(timeouts, Timeouts):
        _invalid(f"{where}.timeouts: expected Timeouts, got {quote(timeouts)}")
    for name in (
        "activity_seconds",
        "rollout_seconds",
        "heartbeat_seconds",
        "poll_seconds",
        "placement_seconds",
    ):
        _seconds(getattr(timeouts, name), f"{where}.timeouts.{name}")


def validate_calibration_input(input: object) -> None:
    """Raise a non-retryable ``InvalidInput`` ApplicationError for an unusable CalibrationInput."""
    if not isinstance(input, CalibrationInput):
        _invalid(f"expected CalibrationInput, got {quote(input)}")
    try:  # target, strategy and selector: the one request parser every way in uses
        parse_calibration_request(input.target, input.strategy, input.selector)
    except InputError as err:
        _invalid(str(err))
    if input.snapshot is not None and not isinstance(input.snapshot, dict):
        _invalid(f"snapshot: expected a FleetSnapshot mapping, got {quote(input.snapshot)}")
    if input.scope is not None:
        _text(input.scope.digest, "scope.digest")
    _options(input.options, "options")


def validate_continuous_input(input: object) -> None:
    """The same for a ContinuousCalibration: the whole policy, strictly, and the options."""
    if not isinstance(input, ContinuousInput):
        _invalid(f"expected ContinuousInput, got {quote(input)}")
    try:
        policy_from_mapping(input.policy)
    except InputError as err:
        _invalid(str(err))
    _options(input.options, "options")


def validate_cluster_upgrade_input(input: object) -> None:
    """The same for a ClusterUpgrade child started directly: ids, versions, steps, options."""
    if not isinstance(input, ClusterUpgradeInput):
        _invalid(f"expected ClusterUpgradeInput, got {quote(input)}")
    _text(input.calibration_id, "calibration_id")
    _version(input.target, "target")
    _text(input.stage, "stage", empty=True)
    plan = input.plan
    if plan is None:  # read from the stored plan by reference (bounded payloads)
        if input.plan_ref is None:
            _invalid("a ClusterUpgrade needs a plan or a plan_ref")
        _text(input.plan_ref.digest, "plan_ref.digest")
        _text(input.cluster, "cluster")
        _options(input.options, "options")
        return
    # Versions, components and pools are typed: decoding read them (``workflows.payloads``).
    _text(plan.plan.cluster, "plan.plan.cluster")
    if len(plan.step_ids) != len(plan.plan.steps):
        _invalid(
            f"plan.step_ids: {len(plan.step_ids)} id(s) for {len(plan.plan.steps)} planned step(s)"
        )
    for i, step_id in enumerate(plan.step_ids):
        _text(step_id, f"plan.step_ids[{i}]")
    _options(input.options, "options")
