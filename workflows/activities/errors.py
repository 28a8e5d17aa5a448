"""One classification of backend errors: the ApplicationError types workflows and operators see.

Every backend call of an activity goes through ``_ClassifiedBackend``, which turns the backend's
deliberate errors into one non-retryable type each (``classify``); anything else is transient.
"""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from datetime import datetime
from typing import NoReturn, TypeVar

from temporalio.exceptions import ApplicationError

from orchestrator.domain.observed import ApiUsage
from orchestrator.domain.taints import Effect, Taint
from orchestrator.kube.backend.port import (
    BackendError,
    ClusterObservation,
    ClusterRef,
    FleetBackend,
    InvalidObjectError,
    Inventory,
    NotAllowedError,
    NotFoundError,
    PlacementDecisionInfo,
    PlacementWrite,
    Progress,
    UsageRead,
    VersionChangedError,
)

T = TypeVar("T")

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


def _invalid(message: str) -> NoReturn:
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


class _ClassifiedBackend:
    """A ``FleetBackend`` whose deliberate errors arrive already classified (``classify``)."""

    def __init__(self, backend: FleetBackend) -> None:
        self._backend = backend

    @staticmethod
    async def _run(call: Awaitable[T]) -> T:
        try:
            return await call
        except BackendError as err:
            classified = classify(err)
            if classified is err:
                raise
            raise classified from err

    async def inventory(self, clusters: Sequence[str] = ()) -> Inventory:
        return await self._run(self._backend.inventory(clusters))

    async def observe(self, cluster: ClusterRef) -> ClusterObservation:
        return await self._run(self._backend.observe(cluster))

    async def set_control_plane_version(
        self, cluster: ClusterRef, version: str, step_id: str
    ) -> None:
        await self._run(self._backend.set_control_plane_version(cluster, version, step_id))

    async def set_pool_version(
        self, cluster: ClusterRef, pool: str, version: str, step_id: str
    ) -> None:
        await self._run(self._backend.set_pool_version(cluster, pool, version, step_id))

    async def add_taint(self, cluster: ClusterRef, taint: Taint) -> bool:
        return await self._run(self._backend.add_taint(cluster, taint))

    async def remove_taint(self, cluster: ClusterRef, key: str, effect: Effect) -> bool:
        return await self._run(self._backend.remove_taint(cluster, key, effect))

    async def write_placement(
        self,
        decisions: Sequence[PlacementDecisionInfo],
        reason: str,
        progress: Progress | None = None,
    ) -> PlacementWrite:
        return await self._run(self._backend.write_placement(decisions, reason, progress))

    async def read_usage(self, cluster: ClusterRef, now: datetime) -> UsageRead:
        return await self._run(self._backend.read_usage(cluster, now))

    async def record_usage(
        self, cluster: ClusterRef, fresh: Sequence[ApiUsage], now: datetime
    ) -> tuple[ApiUsage, ...]:
        return await self._run(self._backend.record_usage(cluster, fresh, now))

    async def put_blob(self, digest: str, data: bytes) -> None:
        await self._run(self._backend.put_blob(digest, data))

    async def get_blob(self, digest: str) -> bytes:
        return await self._run(self._backend.get_blob(digest))

    async def delete_blob(self, digest: str) -> None:
        await self._run(self._backend.delete_blob(digest))
