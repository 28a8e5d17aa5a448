"""The fleet read of ``KubeFleetBackend``: a FleetSnapshot from LIST calls.

* **Inventory**: ``orchestrator.kube.inventory.read_fleet``, the code path the CLI's live mode
  uses too: one paginated LIST per kind, in one namespace or all, no per-object GETs, no
  workload-cluster probing (``observe`` reads each cluster when a step needs it). Its rules
  (declared versions, clusters left out and why) are in ``orchestrator.kube.fleetmap``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from orchestrator.kube import fleetapi, inventory
from orchestrator.kube.backend.access import KubeAccess
from orchestrator.kube.backend.port import InvalidObjectError, Inventory, NotFoundError
from orchestrator.kube.fleetmap import InventoryError


class FleetInventory(KubeAccess):
    """``FleetBackend.inventory``: the fleet (or some clusters of it) as the adapters read it."""

    def _inventory(self, names: Sequence[str]) -> Inventory:
        try:
            read = inventory.read_fleet(self._dyn, self._namespace)
        except fleetapi.ApiMissingError as err:
            raise NotFoundError(str(err)) from None
        except InventoryError as err:
            # The objects cannot form a fleet (an invalid FleetWorkload, a cluster name in two
            # namespaces): an operator must fix them, so no retry - the activity fails at once.
            raise InvalidObjectError(str(err)) from None
        if not names:
            return read
        unknown = [n for n in names if n not in read.namespaces]
        if unknown:
            raise NotFoundError(f"cluster(s) not found: {', '.join(unknown)}")
        keep = set(names)
        return replace(
            read,
            snapshot=replace(
                read.snapshot, clusters=tuple(c for c in read.snapshot.clusters if c.name in keep)
            ),
            namespaces={n: read.namespaces[n] for n in names},
            skipped={n: r for n, r in read.skipped.items() if n in keep},
            pending={n: r for n, r in read.pending.items() if n in keep},
        )

    async def inventory(self, clusters: Sequence[str] = ()) -> Inventory:
        """The fleet from LIST calls (see the module docstring)."""
        names = tuple(clusters)
        attributes = {"calibrator.clusters": len(names)} if names else {}
        return await self._call(
            "inventory", attributes, lambda: self._inventory(names), self._fleet_reads
        )
