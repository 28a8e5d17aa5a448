"""Activities that add and remove the cluster taint that keeps new work off an upgrading cluster."""

from __future__ import annotations

from temporalio import activity

from orchestrator.domain.taints import Taint
from workflows.activities.base import ActivitiesBase
from workflows.activities.errors import invalid_input
from workflows.model import TaintInput, TaintResult


class TaintActivities(ActivitiesBase):
    """Add or remove a cluster taint (idempotent)."""

    @activity.defn(name="add_taint")
    async def add_taint(self, input: TaintInput) -> TaintResult:
        """Add the upgrading taint; a retry keeps the first ``timeAdded`` (no change reported)."""
        if not input.key:
            invalid_input("a taint needs a key")
        taint = Taint(input.key, input.effect, input.value, input.time_added or None)
        return TaintResult(await self._backend.add_taint(input.cluster, taint))

    @activity.defn(name="remove_taint")
    async def remove_taint(self, input: TaintInput) -> TaintResult:
        """Remove the taint (idempotent: removing an absent taint changes nothing)."""
        return TaintResult(await self._backend.remove_taint(input.cluster, input.key, input.effect))
