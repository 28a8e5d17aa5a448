"""The state every group of activities shares: one classified backend and the cached stored plans."""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Awaitable, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from typing import TypeVar

from temporalio.exceptions import ApplicationError

from orchestrator.domain.observed import ApiUsage
from orchestrator.domain.taints import Effect, Taint
from orchestrator.kube.backend.port import (
    BackendError,
    ClusterObservation,
    ClusterRef,
    FleetBackend,
    Inventory,
    PlacementDecisionInfo,
    PlacementWrite,
    Progress,
    UsageRead,
    Wakeup,
)
from workflows.activities.errors import NOT_FOUND, classify
from workflows.activities.plan_payload import (
    PLAN_CACHE_SIZE,
    LoadedPlan,
    decode_plan,
    decode_scope,
    index_plan,
)
from workflows.model import PlanRef, ScopeRef

T = TypeVar("T")


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

    def rollout_wakeups(self, cluster: ClusterRef) -> AbstractAsyncContextManager[Wakeup]:
        return self._backend.rollout_wakeups(cluster)  # reads nothing: nothing to classify

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

    async def read_usage(
        self, cluster: ClusterRef, now: datetime, *, blockers_only: bool = False
    ) -> UsageRead:
        return await self._run(self._backend.read_usage(cluster, now, blockers_only=blockers_only))

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


class ActivitiesBase:
    """What every group of activities shares: the classified backend and the stored plans."""

    def __init__(self, backend: FleetBackend) -> None:
        self._backend: FleetBackend = _ClassifiedBackend(backend)
        self._plans: OrderedDict[str, LoadedPlan] = OrderedDict()

    async def _observe(self, cluster: ClusterRef) -> ClusterObservation:
        return await self._backend.observe(cluster)

    def _remember(self, digest: str, loaded: LoadedPlan) -> LoadedPlan:
        self._plans[digest] = loaded
        self._plans.move_to_end(digest)
        while len(self._plans) > PLAN_CACHE_SIZE:
            self._plans.popitem(last=False)
        return loaded

    async def _load(self, ref: PlanRef) -> LoadedPlan:
        """The stored plan (cached by digest: it never changes), verified against the digest."""
        loaded = self._plans.get(ref.digest)
        if loaded is not None:
            self._plans.move_to_end(ref.digest)
            return loaded
        data = await self._backend.get_blob(ref.digest)
        if hashlib.sha256(data).hexdigest() != ref.digest:
            raise ApplicationError(f"stored plan {ref.digest} is corrupt", type=NOT_FOUND)
        return self._remember(ref.digest, index_plan(decode_plan(data)))

    async def _scope(self, ref: ScopeRef) -> frozenset[str]:
        """The stored cluster names of a scoped calibration, verified against the digest."""
        data = await self._backend.get_blob(ref.digest)
        if hashlib.sha256(data).hexdigest() != ref.digest:
            raise ApplicationError(f"stored scope {ref.digest} is corrupt", type=NOT_FOUND)
        return frozenset(decode_scope(data))
