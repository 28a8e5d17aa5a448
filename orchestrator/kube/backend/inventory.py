"""The fleet read of ``KubeFleetBackend``: a FleetSnapshot from the cache or from LIST calls.

* **Inventory**: ``orchestrator.kube.inventory.read_fleet``, the code path the CLI's live mode
  uses too, no per-object GETs, no workload-cluster probing (``observe`` reads each cluster
  when a step needs it). Its rules (declared versions, clusters left out and why) are in
  ``orchestrator.kube.fleetmap``.
* **The objects' source**, the one switch: a backend with a watch-fed cache (the worker's,
  ``cache=True``) reads them from memory (``orchestrator.kube.cache.FleetCache``), once the
  cache is synced and has seen every resourceVersion this backend wrote or was shown by a
  conflict (read your writes; docs/decisions.md, "Reads from a watch-fed cache"); one without
  (the CLI's one-shot commands, which must not open watches) LISTs each kind, in one
  namespace or all. A cache that does not get there in time is passed by: that read LISTs.
"""

from __future__ import annotations

import logging
from collections.abc import Hashable, Sequence
from dataclasses import replace

from orchestrator.kube import fleetapi, inventory
from orchestrator.kube.backend.access import KubeAccess
from orchestrator.kube.backend.port import InvalidObjectError, Inventory, NotFoundError
from orchestrator.kube.cache import SYNC_TIMEOUT, CacheNotSynced
from orchestrator.kube.fleetmap import FleetObjects, InventoryError

# Seconds a read waits for the cache to reach a version this backend wrote or saw in a
# conflict (the watch delivers in milliseconds; past this the read LISTs: fresh, never stale).
FRESH_TIMEOUT = 10.0

log = logging.getLogger(__name__)


class FleetInventory(KubeAccess):
    """``FleetBackend.inventory``: the fleet (or some clusters of it) as the adapters read it."""

    def _cached_objects(self) -> tuple[FleetObjects, bool]:
        """The objects from the cache, at least as fresh as ``_fresh`` says; else from LISTs."""
        assert self._cache is not None
        self._cache.start()  # idempotent: a backend built with a cache starts it when first read
        with self._lock:
            fresh: dict[Hashable, str] = dict(self._fresh)
        try:
            read = self._cache.objects(
                sync_timeout=SYNC_TIMEOUT, fresh=fresh, fresh_timeout=FRESH_TIMEOUT
            )
        except CacheNotSynced as err:
            log.warning("%s: this read LISTs instead", err)
            read = inventory.list_objects(self._dyn, self._namespace)
        with self._lock:  # what was asked for is seen; a newer version asked meanwhile stays
            for kind, version in fresh.items():
                if self._fresh.get(kind) == version:
                    del self._fresh[kind]
        return read

    def _inventory(self, names: Sequence[str]) -> Inventory:
        source = self._cached_objects if self._cache is not None else None
        try:
            read = inventory.read_fleet(
                self._dyn, self._namespace, source=source, parsed=self._parsed
            )
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
        """The fleet from the cache or from LIST calls (see the module docstring)."""
        names = tuple(clusters)
        attributes = {"calibrator.clusters": len(names)} if names else {}
        return await self._call(
            "inventory", attributes, lambda: self._inventory(names), self._fleet_reads
        )
