"""PlacementDecision writes of ``KubeFleetBackend``.

* **Workloads and placement decisions** (``calibrator.dev/v1alpha1``, through
  ``orchestrator.kube.fleetapi``): workloads are the FleetWorkloads of the same namespace scope (one
  LIST); a FleetWorkload's ``status.clusters`` (the last decision, replicas per cluster) is its
  current ``placement.clusters`` with counts (see ``fleetmap``). ``write_placement`` server-side applies, per workload,
  the ``status.decisions`` of its PlacementDecision (same name, owned by the FleetWorkload;
  ``{clusterName, replicas, reason}`` strings, the Argo CD clusterDecisionResource duck type) and
  the FleetWorkload's status, only where the decision changed and conditionally on the
  FleetWorkload's ``resourceVersion`` as the inventory read it (see ``fleetapi``). Missing CRDs, a decision for a workload without a FleetWorkload, or
  a FleetWorkload the snapshot rules reject raise ``NotFoundError`` / ``BackendError`` naming the
  object and the remedy.
"""

from __future__ import annotations

from collections.abc import Sequence

from orchestrator.kube import fleetapi
from orchestrator.kube.backend.access import KubeAccess
from orchestrator.kube.backend.port import NotFoundError, PlacementDecisionInfo, PlacementWrite


class PlacementWrites(KubeAccess):
    """``FleetBackend.write_placement``: the decisions that changed, compare-and-swap."""

    def _write_placement(
        self, decisions: Sequence[PlacementDecisionInfo], reason: str
    ) -> PlacementWrite:
        todo = [
            fleetapi.Decision(
                d.workload,
                tuple((c.cluster, c.replicas) for c in d.clusters),
                d.reason or reason,
                d.resource_version,
            )
            for d in decisions
        ]
        try:
            outcome = fleetapi.write_placement_decisions(self._dyn, todo, self._namespace)
        except (fleetapi.ApiMissingError, fleetapi.WorkloadMissingError) as err:
            raise NotFoundError(str(err)) from None
        with self._lock:
            self.wrote_placements(outcome.written, reason)
        return PlacementWrite(outcome.written, outcome.conflicts)

    async def write_placement(
        self, decisions: Sequence[PlacementDecisionInfo], reason: str
    ) -> PlacementWrite:
        """Write each changed decision, conditionally on the FleetWorkload as read (see above)."""
        attributes = {"calibrator.decisions": len(decisions)}
        return await self._call(
            "write_placement", attributes, lambda: self._write_placement(decisions, reason)
        )
