"""The state every group of activities shares: one classified backend and the cached stored plans."""

from __future__ import annotations

import hashlib
from collections import OrderedDict

from temporalio.exceptions import ApplicationError

from orchestrator.kube.backend.port import ClusterObservation, ClusterRef, FleetBackend
from workflows.activities.errors import NOT_FOUND, _ClassifiedBackend
from workflows.activities.plan_payload import (
    PLAN_CACHE_SIZE,
    _index,
    _LoadedPlan,
    decode_plan,
    decode_scope,
)
from workflows.model import PlanRef, ScopeRef


class ActivitiesBase:
    """What every group of activities shares: the classified backend and the stored plans."""

    def __init__(self, backend: FleetBackend) -> None:
        self._backend: FleetBackend = _ClassifiedBackend(backend)
        self._plans: OrderedDict[str, _LoadedPlan] = OrderedDict()

    async def _observe(self, cluster: ClusterRef) -> ClusterObservation:
        return await self._backend.observe(cluster)

    def _remember(self, digest: str, loaded: _LoadedPlan) -> _LoadedPlan:
        self._plans[digest] = loaded
        self._plans.move_to_end(digest)
        while len(self._plans) > PLAN_CACHE_SIZE:
            self._plans.popitem(last=False)
        return loaded

    async def _load(self, ref: PlanRef) -> _LoadedPlan:
        """The stored plan (cached by digest: it never changes), verified against the digest."""
        loaded = self._plans.get(ref.digest)
        if loaded is not None:
            self._plans.move_to_end(ref.digest)
            return loaded
        data = await self._backend.get_blob(ref.digest)
        if hashlib.sha256(data).hexdigest() != ref.digest:
            raise ApplicationError(f"stored plan {ref.digest} is corrupt", type=NOT_FOUND)
        return self._remember(ref.digest, _index(decode_plan(data)))

    async def _scope(self, ref: ScopeRef) -> frozenset[str]:
        """The stored cluster names of a scoped calibration, verified against the digest."""
        data = await self._backend.get_blob(ref.digest)
        if hashlib.sha256(data).hexdigest() != ref.digest:
            raise ApplicationError(f"stored scope {ref.digest} is corrupt", type=NOT_FOUND)
        return frozenset(decode_scope(data))
