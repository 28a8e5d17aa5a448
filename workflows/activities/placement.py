"""The re-placement activity: read the fleet, place workloads, write PlacementDecisions, heartbeating."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import AsyncIterator, Callable, Sequence

from temporalio import activity
from temporalio.exceptions import ApplicationError

from orchestrator.domain.calibration import at_version
from orchestrator.domain.errors import InputError
from orchestrator.domain.snapshot import Cluster, FleetSnapshot, Workload, replace_cluster
from orchestrator.domain.taints import blocks_scheduling, parse_time, untolerated
from orchestrator.domain.versions import KubeVersion
from orchestrator.kube.backend.port import (
    ClusterReplicasInfo,
    FleetBackend,
    PlacementDecisionInfo,
    PlacementWrite,
)
from orchestrator.placement import place
from workflows import metrics
from workflows.activities.base import ActivitiesBase
from workflows.activities.errors import PLACEMENT_CONFLICT, invalid_input
from workflows.activities.heartbeat import heartbeating
from workflows.model import PlacementProgress, ReplaceInput, ReplaceResult

# Read-place-write rounds of one ``replace`` before it fails (and Temporal retries it).
PLACEMENT_ROUNDS = 5

# Rounds one worker runs at once (``PlacementActivities._one_round``; docs/benchmarks.md: at
# 100 clusters x 1,000 workloads, 4 cut the wait for a turn from 29 s to 3 s a round and the
# overhead from 1.26 to 1.07, at the cost of 7% of the status writes refused and redone).
PLACEMENT_ROUNDS_AT_ONCE = 4
MAX_PLACEMENT_ROUNDS_AT_ONCE = 16


# Workload lists in a ReplaceResult are cut to this many names (the counts stay exact).
RESULT_LIST_LIMIT = 20


def _first(names: Sequence[str]) -> tuple[str, ...]:
    return tuple(names[:RESULT_LIST_LIMIT])


def affected_workloads(snapshot: FleetSnapshot, cluster: Cluster) -> tuple[Workload, ...]:
    """Workloads a step of ``cluster`` can move: those it hosts, and those it could now host.

    A step changes only the cluster's version and taints. A workload elsewhere can start using
    the cluster only if one of its affinity terms selects the cluster (names, labels, exclusions:
    facts a step does not change) and it tolerates every taint that keeps new work off the
    cluster. Tolerations, API compatibility and capacity are otherwise not pre-filtered, so the
    set over-approximates rather than misses. Workloads whose NoExecute toleration has
    ``tolerationSeconds`` are always included: workflow time alone can evict them. Everything
    else keeps its decision: its clusters did not change.

    Of those it could host, only the ones whose decision the cluster can still shape are placed
    (``_gate_may_move``), and, while the cluster is gated (the upgrading taint, NoSchedule), those
    that tolerate the gate. The rest were placed while the cluster was open to them and did not
    take it, and stable placement keeps what they have: whether the cluster is open or closed to
    new work does not change their decision (tests/workflows/activities/test_gated_placement.py
    places generated fleets both ways). That holds for the placement after the gate comes off
    too: opening the cluster pulls back no replica that moved away. At 300 clusters this spares
    each of a one-step cluster's three placements nearly all of the fleet's workloads
    (docs/benchmarks.md).
    """
    gates = tuple(t for t in cluster.taints if blocks_scheduling(t))
    chosen: list[Workload] = []
    # The cheap tests first: this runs over every workload of the fleet on every step, and
    # most are settled elsewhere, which the policy alone tells, before any affinity is matched.
    for w in snapshot.workloads:
        policy = w.placement
        hosted = cluster.name in policy.clusters
        # A time-bounded NoExecute toleration can run out between any two runs.
        timed = policy.tolerations and any(
            t.toleration_seconds is not None for t in policy.tolerations
        )
        if (
            hosted
            or timed
            or (
                (
                    _gate_may_move(w)
                    or (gates and policy.tolerations and not untolerated(gates, policy.tolerations))
                )
                and (not policy.affinities or any(a.matches(cluster) for a in policy.affinities))
            )
        ):
            chosen.append(w)
    return tuple(chosen)


def _gate_may_move(workload: Workload) -> bool:
    """Whether gating or opening a cluster the workload does not use can change its decision.

    Not for a workload whose counts were settled under its policy: its decision was made while
    the cluster was open to it, and it did not take the cluster (or while it was gated, and
    stable placement pulls nothing back when it opens). Losing the cluster as an option then
    moves nothing: ``maxClusters`` keeps its best, and each division keeps its counts
    (``stable``). Two policies are exceptions, because a cluster they were given without
    replicas still shaped the result: with a ``minReplicas`` weight, the cluster that takes the
    gated one's place among the ``maxClusters`` best gets a floor, and a replica moves there;
    with a spread constraint, the gated cluster's group may rank lower without it, and another
    group's clusters be chosen instead. Nor for a workload that may not have all it wants: counts
    that do not add up (a scale), a policy not yet observed, a Duplicated workload with fewer
    copies than ``maxClusters`` (room held it back, and which cluster takes the next copy
    depends on which are open) or with no limit (no count tells whether every feasible cluster
    has its copy). Found by placing generated fleets step by step with the gated cluster open
    and gated, and comparing the decisions of the workloads left out (docs/benchmarks.md).
    """
    policy = workload.placement
    counts = policy.current_replicas
    if (
        policy.spread_constraints
        or any(w.min_replicas > 0 for w in policy.replica_scheduling.weights)
        or counts is None
        or not workload.policy_observed
    ):
        return True
    if policy.replica_scheduling.type == "Duplicated":
        # A copy on every feasible cluster (up to maxClusters): with fewer, it was held back by
        # room, and the next copy's cluster depends on which are open.
        held = sum(1 for c in counts if c > 0)
        return (
            policy.max_clusters is None
            or held < policy.max_clusters
            or any(c not in (0, workload.replicas) for c in counts)
        )
    return sum(counts) != workload.replicas


Beat = Callable[[PlacementProgress], None]
# Times the block it wraps as one phase of a round (``metrics.PLACEMENT_PHASES``).
Timed = Callable[[str], contextlib.AbstractAsyncContextManager[None]]


class PlacementActivities(ActivitiesBase):
    """Re-place the fleet's workloads around a cluster that is about to change or just did."""

    def __init__(
        self, backend: FleetBackend, *, placement_rounds: int = PLACEMENT_ROUNDS_AT_ONCE
    ) -> None:
        super().__init__(backend)
        if not 1 <= placement_rounds <= MAX_PLACEMENT_ROUNDS_AT_ONCE:
            raise ValueError(
                f"placement rounds at once must be 1 to {MAX_PLACEMENT_ROUNDS_AT_ONCE}, "
                f"not {placement_rounds}"
            )
        self._placing = asyncio.Semaphore(placement_rounds)

    @contextlib.asynccontextmanager
    async def _one_round(self, beat: Beat, timed: Timed) -> AsyncIterator[None]:
        """At most ``placement_rounds`` read-place-write rounds at once on this worker.

        Unbounded, rounds run side by side read the same fleet and decided the same workloads,
        so all but one lost each workload's compare-and-swap and read and placed again: at 100
        clusters x 1,000 FleetWorkloads with up to 60 clusters re-placing at once, 48% of the
        status writes were refused (docs/benchmarks.md), and with three calibrations on two
        cores the crowd of placement and writer threads starved the wait activities' heartbeats
        until the run halted. One at a time, each read what the one before wrote, but a round
        waited about 29 s for its turn behind rounds that wait on the API server. Now that a
        round places only what its cluster can shape, a few at once rarely decide the same
        workload (7% of the writes refused at 4). The wait is ``turn`` in ``PLACEMENT_PHASE``.
        Rounds side by side, here or on other workers, meet only at the compare-and-swap, which
        stays the guard (docs/decisions.md).
        """
        if self._placing.locked():
            beat(PlacementProgress(0, 0, "waiting for this worker's other placements"))
        async with timed("turn"):
            await self._placing.acquire()
        try:
            yield
        finally:
            self._placing.release()

    @activity.defn(name="replace")
    async def replace(self, input: ReplaceInput) -> ReplaceResult:
        """Re-place the workloads this cluster's step can affect and write what changed.

        With ``upcoming_version`` the cluster is placed as if it ran that version, so workloads
        it would break move away before the patch. Unschedulable workloads keep their current
        decision (writing an empty one would evict them everywhere). ``stranded`` names those
        that run on the cluster and were rejected there; before a step that means the step would
        break them, so nothing is written and the workflow must not run the step.

        Cost in proportion to the step: only ``affected_workloads`` are placed, and only decisions
        that differ from the stored ones are written. Each write is a compare-and-swap on the
        workload's version as this inventory read it; a workload another cluster's placement
        changed meanwhile is re-read and recomputed (a few rounds, then a retryable failure).

        Every run is counted with its outcome and latency (``workflows.metrics``).
        """
        began = time.monotonic()
        outcome = metrics.ERROR
        recorder = metrics.PlacementMetrics(activity.metric_meter())

        @contextlib.asynccontextmanager
        async def timed(phase: str) -> AsyncIterator[None]:
            start = time.monotonic()
            try:
                yield
            finally:
                recorder.phase(phase, time.monotonic() - start)

        try:
            async with heartbeating(PlacementProgress(0, 0, "reading the fleet")) as beat:
                result = await self._replace_rounds(input, beat, timed)
            blocked = bool(result.stranded and input.upcoming_version)
            outcome = metrics.BLOCKED if blocked else metrics.PLACED
            return result
        except ApplicationError as err:
            if err.type == PLACEMENT_CONFLICT:
                outcome = metrics.CONFLICT
            raise
        finally:
            recorder.run(outcome, time.monotonic() - began)

    async def _replace_rounds(self, input: ReplaceInput, beat: Beat, timed: Timed) -> ReplaceResult:
        written = 0
        conflicts = 0
        for _ in range(PLACEMENT_ROUNDS):
            async with self._one_round(beat, timed):
                outcome = await self._replace_once(input, beat, timed)
            if isinstance(outcome, ReplaceResult):
                return dataclasses.replace(
                    outcome, written=written + outcome.written, conflicts=conflicts
                )
            written += len(outcome.written)
            conflicts += len(outcome.conflicts)
            beat(
                PlacementProgress(
                    0, 0, f"{len(outcome.conflicts)} placement conflict(s); re-reading"
                )
            )
        raise ApplicationError(
            f"placement for {input.cluster.name}: workloads kept changing under "
            f"{PLACEMENT_ROUNDS} attempts ({conflicts} conflicts)",
            type=PLACEMENT_CONFLICT,
        )

    async def _replace_once(
        self, input: ReplaceInput, beat: Beat, timed: Timed
    ) -> ReplaceResult | PlacementWrite:
        """One read-place-write round; a PlacementWrite with conflicts means "read again"."""
        name = input.cluster.name
        try:
            async with timed("read"):
                inv = await self._backend.inventory()  # InputError: a FleetWorkload is invalid
            snapshot = inv.snapshot
            current = snapshot.cluster(name)
            if input.upcoming_version:
                upcoming = KubeVersion.parse(input.upcoming_version)
                snapshot = replace_cluster(snapshot, [at_version(current, upcoming)])
            affected = affected_workloads(snapshot, current)
            beat(PlacementProgress(0, 0, f"placing {len(affected)} workload(s)"))
            now = parse_time(input.now) if input.now else None
            # Pure CPU, seconds for a large fleet: in a thread, so the worker's event loop keeps
            # sending every activity's heartbeats meanwhile.
            async with timed("place"):
                result = (
                    await asyncio.to_thread(
                        place, dataclasses.replace(snapshot, workloads=affected), now=now
                    )
                    if affected
                    else None
                )
        except InputError as err:
            invalid_input(str(err))
        before = {w.key: set(w.placement.clusters) for w in affected}
        decisions: list[PlacementDecisionInfo] = []
        moved: list[str] = []
        stranded: list[str] = []
        unschedulable: list[str] = []
        replicas_moved = replicas_forced = 0
        for decision in result.decisions if result is not None else ():
            was_here = name in before.get(decision.workload, set())
            if decision.unschedulable:
                unschedulable.append(decision.workload)
                if was_here and name in decision.reasons:
                    stranded.append(decision.workload)
                continue
            if was_here and name not in decision.replicas:
                moved.append(decision.workload)
            replicas_moved += decision.moved.replicas
            if decision.moved.removed:  # reasons are worked out on demand: only when needed
                rejected = decision.reasons
                replicas_forced += sum(r for c, r in decision.moved.removed if c in rejected)
            decisions.append(
                PlacementDecisionInfo(
                    workload=decision.workload,
                    clusters=tuple(
                        ClusterReplicasInfo(c.name, c.replicas) for c in decision.clusters
                    ),
                    reason=input.reason,
                    resource_version=inv.workload_versions.get(decision.workload, ""),
                )
            )
        lists = (_first(moved), _first(stranded), _first(unschedulable))
        if stranded and input.upcoming_version:
            return ReplaceResult(0, (), lists[1], lists[2], affected=len(affected))
        # Called even with nothing to write: an empty call costs no API request, and the backend
        # sees every placement run (the in-memory fleet records them). A first placement of a
        # large fleet writes thousands of objects: the backend writes a few at a time and each
        # finished decision is a heartbeat, so the attempt lasts as long as the writes progress.
        beat(PlacementProgress(0, len(decisions), "writing decisions"))

        def progress(done: int, total: int) -> None:
            beat(PlacementProgress(done, total, f"{done}/{total} decisions written"))

        async with timed("write"):
            write = await self._backend.write_placement(decisions, input.reason, progress)
        if write.conflicts:
            return write
        return ReplaceResult(
            len(decisions),
            *lists,
            affected=len(affected),
            written=len(write.written),
            replicas_moved=replicas_moved,
            replicas_forced=replicas_forced,
        )
