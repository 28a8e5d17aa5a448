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
* **Stale reads are refused, never written**: the decisions may come from the worker's
  watch-fed cache (``inventory``), a little behind the API server. What the writer compares
  them with is never behind the moment the write began: a decision computed from an older
  FleetWorkload is a conflict before any write, and one the server changed after that moment
  fails its conditional apply (409). Either way the versions the writer saw are handed to the
  cache's readers (``_saw``): the retry's inventory read waits until the cache has them (or
  LISTs), so it recomputes from data at least as new as what refused it (docs/decisions.md,
  "Reads from a watch-fed cache").
* **What the writer compares with: a consistent read from the cache** (``_placement_objects``).
  Without a cache (the CLI) it is two fresh LISTs, every FleetWorkload and every
  PlacementDecision in scope, per call: with the cache, the largest reads left, growing with
  the fleet. With one, a round of at most ``KEYED_READS`` workloads (a gated step places those
  its cluster hosts, a few dozen) GETs each one's FleetWorkload and PlacementDecision: consistent
  reads, so nothing waits for the cache. For a larger round the backend first asks each
  collection for its current resourceVersion
  (``fleetapi.probe_version``: a LIST of ``limit=1``, a consistent read, one object), waits
  until the cache's store of that kind has reached it (``FleetCache.current``, the same
  integer comparison and wait as the inventory's read-your-writes, at most ``FRESH_TIMEOUT``;
  that version is etcd's revision, which every kind's writes move, so a store whose own kind
  did not change asks the server for a bookmark: ``cache.WatchCache.wait_for(ask=True)``),
  and reads the objects from memory: everything a LIST made at that moment would return. A
  cache that is not synced, lagging or not there in time is passed by: the two LISTs, fresh,
  never stale. PlacementDecisions are a cached kind for this (not read one by one for the
  decisions that changed): the writer compares every decision it is given with the mirror
  (a decision equal to the FleetWorkload's but not to the mirror repairs it), and a round
  above ``KEYED_READS`` gives it many, so reading them one by one would cost two GETs per
  workload; cached, they
  cost one object per FleetWorkload in memory (slimmed as the other kinds) and their watch
  events, which grow with the writes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from orchestrator.kube import fleetapi
from orchestrator.kube.backend import inventory
from orchestrator.kube.backend.access import KubeAccess
from orchestrator.kube.backend.port import (
    NotFoundError,
    PlacementDecisionInfo,
    PlacementWrite,
    Progress,
)
from orchestrator.kube.cache import PLACEMENT_KINDS, SYNC_TIMEOUT, CacheNotSynced

# Decisions written at once by write_placement: a few in flight fill the API server's fair share
# without queueing behind the client's connection pool (kubernetes' default: 5 per CPU).
PLACEMENT_WRITERS = 8
# Workloads up to which the writer GETs what it compares with rather than bring the cache to the
# collections' current versions. A store whose kind did not change asks for a bookmark, which
# comes after a second at best; 64 workloads are 128 GETs, 8 at a time, well under that on a
# loaded plane (docs/benchmarks.md, session 23). A step of a gated cluster places a few dozen.
KEYED_READS = 64

log = logging.getLogger(__name__)


class PlacementWrites(KubeAccess):
    """``FleetBackend.write_placement``: the decisions that changed, compare-and-swap."""

    def _placement_objects(self, keys: Sequence[str]) -> fleetapi.PlacementObjects:
        """The stored FleetWorkloads and PlacementDecisions of ``keys``, as new as now.

        Up to ``KEYED_READS`` workloads, two GETs each. More, from the cache once each of its
        two stores has reached its collection's current resourceVersion (two ``limit=1``
        probes), looked up by key: a round reads the decisions it writes, not the fleet's.
        Else two fresh LISTs.
        """
        assert self._cache is not None
        self._cache.start()  # idempotent, as the inventory's first read
        if len(keys) <= KEYED_READS:
            return fleetapi.placement_by_key(self._dyn, PLACEMENT_WRITERS)(keys)
        versions = {
            kind: fleetapi.probe_version(self._dyn, kind, self._namespace)
            for kind in PLACEMENT_KINDS
        }
        try:
            read = self._cache.current(
                versions,
                keys=keys,
                sync_timeout=SYNC_TIMEOUT,
                fresh_timeout=inventory.FRESH_TIMEOUT,
            )
        except CacheNotSynced as err:
            log.warning("%s: the placement writer LISTs instead", err)
            return fleetapi.placement_listing(self._dyn, self._namespace)(keys)
        return read[fleetapi.FLEET_WORKLOAD], read[fleetapi.PLACEMENT_DECISION]

    def _placement_writer(
        self, todo: Sequence[fleetapi.PlacementDecision]
    ) -> fleetapi.PlacementWriter:
        source = self._placement_objects if self._cache is not None else None
        try:
            return fleetapi.PlacementWriter(self._dyn, todo, self._namespace, source=source)
        except (fleetapi.ApiMissingError, fleetapi.WorkloadMissingError) as err:
            raise NotFoundError(str(err)) from None

    async def write_placement(
        self,
        decisions: Sequence[PlacementDecisionInfo],
        reason: str,
        progress: Progress | None = None,
    ) -> PlacementWrite:
        """Write each changed decision, conditionally on the FleetWorkload as read (see above).

        The stored objects first (a fleet-wide read, ``access.FLEET_READERS``: from the cache
        at the collections' current versions, or two LISTs), then up to
        ``PLACEMENT_WRITERS`` decisions at a time, on threads of this call's own (not the
        backend's pool, which every activity of the worker shares); each decision is a
        ``_call`` (cancelled with the activity, a span of its own).
        A first placement writes three objects per workload: one after the other, 1,000
        workloads outlasted a 60-s activity on a loaded plane (issue 9). Decisions are one per
        workload, so concurrent writes never touch the same objects and each keeps its
        compare-and-swap. ``progress`` hears of every decision handled; the result lists
        workloads in the order of ``decisions``. The first failure stops the writes not yet
        started (those in flight finish their request) and is raised.
        """
        todo = [
            fleetapi.PlacementDecision(
                d.workload,
                tuple((c.cluster, c.replicas) for c in d.clusters),
                d.reason or reason,
                d.resource_version,
            )
            for d in decisions
        ]
        attributes = {"calibrator.decisions": len(todo)}
        writer = await self._call(
            "write_placement", attributes, lambda: self._placement_writer(todo), self._fleet_reads
        )
        statuses = [fleetapi.UNCHANGED] * len(todo)
        pending = iter(range(len(todo)))  # shared by the writers: each index is taken once
        done = 0
        threads = ThreadPoolExecutor(PLACEMENT_WRITERS, thread_name_prefix="placement")

        async def write_some() -> None:
            nonlocal done
            for i in pending:
                statuses[i] = await self._call(
                    "write_placement_decision",
                    {"calibrator.workload": todo[i].workload},
                    lambda d=todo[i]: writer.write(d),  # type: ignore[misc]
                    threads,
                )
                done += 1
                if progress is not None:
                    progress(done, len(todo))

        writers = [
            asyncio.ensure_future(write_some()) for _ in range(min(PLACEMENT_WRITERS, len(todo)))
        ]
        try:
            if writers:
                finished, _ = await asyncio.wait(writers, return_when=asyncio.FIRST_EXCEPTION)
                for task in finished:
                    failure = task.exception()
                    if failure is not None:
                        raise failure
        finally:
            for task in writers:
                task.cancel()
            await asyncio.gather(*writers, return_exceptions=True)
            threads.shutdown(wait=False)
        outcome = fleetapi.outcome_of(todo, statuses)
        # The next read from the cache waits until it has seen these (read your writes; a
        # conflict's retry computes from data at least as new as what refused it).
        for version in writer.versions.values():
            self._saw(fleetapi.FLEET_WORKLOAD, version)
        with self._lock:
            self.wrote_placements(outcome.written, reason)
        return PlacementWrite(outcome.written, outcome.conflicts)
