"""One classification of backend errors: the ApplicationError types workflows and operators see.

Every backend call of an activity goes through ``base.ActivitiesBase``'s classified backend, which
turns the backend's deliberate errors into one non-retryable type each (``classify``); anything
else is transient.
"""

from __future__ import annotations

from typing import NoReturn

from temporalio.exceptions import ApplicationError

from orchestrator.kube.backend.port import (
    BackendError,
    InvalidObjectError,
    NotAllowedError,
    NotFoundError,
    VersionChangedError,
)

# ApplicationError types the workflows and operators see.
INVALID_INPUT = "InvalidInput"
NOT_FOUND = "NotFound"
VERSION_CONFLICT = "VersionConflict"
ROLLOUT_FAILED = "RolloutFailed"
NOT_ALLOWED = "NotAllowed"  # the worker's role lacks a permission (403)
PLACEMENT_CONFLICT = "PlacementConflict"  # retryable: other placements kept winning
# A step refused before its patch: an API removed at the step's version is still in use, or a
# PodDisruptionBudget would keep the drain from ever finishing (issue 27). The operator decides.
# Raised non-retryable itself, so the retry policies recorded in histories stay as they were.
STEP_BLOCKED = "StepBlocked"

NON_RETRYABLE_ERRORS = (INVALID_INPUT, NOT_FOUND, VERSION_CONFLICT, ROLLOUT_FAILED, NOT_ALLOWED)

# Backend error class -> the ApplicationError type operators and workflows see (non-retryable).
_BACKEND_ERROR_TYPES: tuple[tuple[type[BackendError], str], ...] = (
    (NotFoundError, NOT_FOUND),
    (NotAllowedError, NOT_ALLOWED),
    (InvalidObjectError, INVALID_INPUT),
    (VersionChangedError, VERSION_CONFLICT),
)


def invalid_input(message: str) -> NoReturn:
    """Fail the activity as INVALID_INPUT, never retried; shared: every activity group refuses bad input so."""
    raise ApplicationError(message, type=INVALID_INPUT, non_retryable=True)


def classify(err: BackendError) -> BackendError | ApplicationError:
    """The one mapping of backend errors to activity failures (see the module docstring).

    Returns ``err`` itself for a BackendError with no type of its own: a transient failure,
    retried by Temporal like any other exception.
    """
    for cls, error_type in _BACKEND_ERROR_TYPES:
        if isinstance(err, cls):
            return ApplicationError(str(err), type=error_type, non_retryable=True)
    return err
