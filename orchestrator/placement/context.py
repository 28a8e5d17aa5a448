"""What every plugin may look at during one ``place()`` run: clusters, network, free capacity.

The context is built once per run. Static facts (labels, taints, versions, links) never change
during a run, so plugins that read only those can be cached per equivalence class. Free capacity
does change: each placement consumes some, in workload order, so the batch never overcommits. The
ledger keeps every consumption with the sequence number of the workload that made it, which lets a
decision explain itself later (lazily) with the free capacity *that workload saw*. It is a flat
list of ints per cluster (``seq, cpu, mem, seq, cpu, mem, ...``): ints are not containers, so a
batch of 10,000 placements leaves nothing for the garbage collector to trace.
"""

from __future__ import annotations

import bisect
import copy
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from types import MappingProxyType

from orchestrator.domain.snapshot import Cluster, FleetSnapshot, NetworkLink, Resources, Workload

# Free capacity of a cluster whose capacity is unknown: large enough that every comparison in the
# hot loops says "fits" without a separate branch, small enough to stay a machine-size int.
UNKNOWN_FREE = 1 << 62
# No measured round trips (shared, never written).
_NONE: Mapping[str, float] = MappingProxyType({})


def minimum_share(workload: Workload) -> int:
    """Replicas a cluster must be able to take to be feasible at all.

    A Duplicated workload runs a full copy on each selected cluster; a divided one (Weighted or
    Dynamic) needs room for at least one replica, and division then caps each cluster at what fits.
    """
    if workload.placement.replica_scheduling.type == "Duplicated":
        return workload.replicas
    return min(1, workload.replicas)


def credited_replicas(workload: Workload, cluster_name: str) -> int:
    """Replicas running already on ``cluster_name`` (their usage is inside ``allocated``).

    The recorded count when the snapshot has one (``placement.clusters`` with replicas). Older
    snapshots name the clusters only: then a Duplicated workload is assumed to hold a full copy
    on every current cluster and a divided one an even share, rounded down (rounding down never
    lets the batch overcommit).
    """
    policy = workload.placement
    current = policy.clusters
    if cluster_name not in current:
        return 0
    if policy.current_replicas is not None:
        return policy.current_replicas[current.index(cluster_name)]
    if policy.replica_scheduling.type == "Duplicated":
        return workload.replicas
    return workload.replicas // len(current)


def build_rtt(links: Iterable[NetworkLink]) -> dict[str, dict[str, float]]:
    """Round trips by from, then to; a link counts both ways unless the reverse is measured too.

    Nested by name rather than keyed by (from, to) pairs: a fleet's thousands of links then
    make a dict per cluster, not a tuple per link for the garbage collector to trace.
    """
    explicit: dict[str, dict[str, float]] = {}
    for link in links:
        explicit.setdefault(link.source, {})[link.target] = link.rtt_ms
    rtt = {source: dict(targets) for source, targets in explicit.items()}
    for source, targets in explicit.items():
        for target, value in targets.items():
            rtt.setdefault(target, {}).setdefault(source, value)
    return rtt


class PlacementContext:
    """Read-only view of the fleet for plugins, plus the capacity ledger of the current run.

    Clusters are held in name order; a cluster's position is its index in every per-cluster list
    (``free_cpu``, ``free_mem``, ...), which is what batch plugins iterate over.
    """

    __slots__ = (
        "_consumed",
        "_region_rtt",
        "cap_cpu",
        "cap_mem",
        "clusters",
        "cpu_points",
        "deficit",
        "free_cpu",
        "free_mem",
        "index",
        "known",
        "mem_points",
        "now",
        "regions",
        "rtt_ms",
        "seq",
        "snapshot",
        "unknown",
    )

    def __init__(self, snapshot: FleetSnapshot, now: datetime | None = None) -> None:
        self.snapshot = snapshot
        # The caller's clock (placement reads none): ends NoExecute tolerations whose
        # tolerationSeconds ran out. None: offline, they hold (see plugins/taint_toleration.py).
        self.now = now
        self.clusters: tuple[Cluster, ...] = tuple(sorted(snapshot.clusters, key=_name))
        self.index: dict[str, int] = {c.name: i for i, c in enumerate(self.clusters)}
        self.known: list[bool] = [c.capacity is not None for c in self.clusters]
        self.unknown = tuple(i for i, known in enumerate(self.known) if not known)
        self.cap_cpu: list[int] = [c.capacity.cpu_milli if c.capacity else 0 for c in self.clusters]
        self.cap_mem: list[int] = [
            c.capacity.memory_bytes if c.capacity else 0 for c in self.clusters
        ]
        self.free_cpu: list[int] = [
            max(0, c.capacity.cpu_milli - c.allocated.cpu_milli) if c.capacity else UNKNOWN_FREE
            for c in self.clusters
        ]
        self.free_mem: list[int] = [
            max(0, c.capacity.memory_bytes - c.allocated.memory_bytes)
            if c.capacity
            else UNKNOWN_FREE
            for c in self.clusters
        ]
        # Clusters using more than their capacity (capacity lost since the replicas were placed):
        # index -> [cpu, memory] over. Replicas with recorded counts are shed there, in
        # placement order, until the excess is gone (``replicas_fitting``, ``consume``).
        self.deficit: dict[int, list[int]] = {
            i: [
                max(0, c.allocated.cpu_milli - cap.cpu_milli),
                max(0, c.allocated.memory_bytes - cap.memory_bytes),
            ]
            for i, c in enumerate(self.clusters)
            if (cap := c.capacity) is not None
            and (
                c.allocated.cpu_milli > cap.cpu_milli or c.allocated.memory_bytes > cap.memory_bytes
            )
        }
        # Score points per unit of free cpu/memory: half of 100 each, so a fully free cluster
        # scores 100 and an unknown one 0 (its UNKNOWN_FREE times 0.0).
        self.cpu_points: list[float] = [50 / c if c > 0 else 0.0 for c in self.cap_cpu]
        self.mem_points: list[float] = [50 / m if m > 0 else 0.0 for m in self.cap_mem]
        self.regions: list[str | None] = [c.region for c in self.clusters]
        self.rtt_ms = build_rtt(snapshot.network)
        region_of = dict(zip(self.index, self.regions, strict=True))
        best: dict[str, dict[str, float]] = {}
        for source, targets in self.rtt_ms.items():
            mine = best[source] = {}
            for target, value in targets.items():
                region = region_of.get(target)
                if region is not None and value < mine.get(region, float("inf")):
                    mine[region] = value
        self._region_rtt = best
        self._consumed: list[list[int]] = [[] for _ in self.clusters]
        self.seq: int | None = None

    # ---------------------------------------------------------------- network
    def rtt(self, source: str, target: str) -> float | None:
        """Measured round trip between two clusters (0 to itself); None when never measured."""
        if source == target:
            return 0.0
        return self.rtt_ms.get(source, _NONE).get(target)

    def rtt_to_region(self, cluster: Cluster, region: str) -> float | None:
        """Best round trip from ``cluster`` to any cluster of ``region`` (0 when it is in it)."""
        if cluster.region == region:
            return 0.0
        return self._region_rtt.get(cluster.name, _NONE).get(region)

    # ---------------------------------------------------------------- capacity
    def free(self, cluster: Cluster) -> Resources | None:
        """Free capacity as this context sees it (None when the cluster reports no capacity)."""
        i = self.index[cluster.name]
        if not self.known[i]:
            return None
        cpu, mem = self.free_cpu[i], self.free_mem[i]
        if self.seq is not None:
            ledger = self._consumed[i]
            for end in range(len(ledger), 0, -3):
                if ledger[end - 3] < self.seq:
                    break
                cpu += ledger[end - 2]
                mem += ledger[end - 1]
        return Resources(cpu, mem)

    def replicas_fitting(self, i: int, workload: Workload) -> int | None:
        """How many replicas cluster ``i`` can hold now, counting replicas already running there.

        None means unbounded: capacity unknown, or the workload requests nothing.
        """
        req = workload.requests
        if not self.known[i] or (req.cpu_milli <= 0 and req.memory_bytes <= 0):
            return None
        room = min(
            self.free_cpu[i] // req.cpu_milli if req.cpu_milli > 0 else UNKNOWN_FREE,
            self.free_mem[i] // req.memory_bytes if req.memory_bytes > 0 else UNKNOWN_FREE,
        )
        credited = credited_replicas(workload, self.clusters[i].name)
        if credited and i in self.deficit and workload.placement.current_replicas is not None:
            credited -= self._shed(i, workload, credited)
        return room + credited

    def _shed(self, i: int, workload: Workload, credited: int) -> int:
        """Replicas of ``workload`` that cluster ``i`` no longer holds (its capacity shrank).

        As few as cover what the cluster is over, at most what the workload runs there. Only
        for recorded counts: an even-share guess must not decide what to evict.
        """
        req = workload.requests
        over_cpu, over_mem = self.deficit[i]
        need = max(
            -(-over_cpu // req.cpu_milli) if req.cpu_milli > 0 else 0,
            -(-over_mem // req.memory_bytes) if req.memory_bytes > 0 else 0,
        )
        return min(credited, need)

    def rooms(self, workload: Workload, indices: Sequence[int]) -> list[int | None]:
        """``replicas_fitting`` for many clusters at once; ``indices`` ascending.

        One comprehension, then the workload's current clusters patched (found by bisection: a
        pool can hold every cluster of the fleet). A cluster of unknown capacity is unbounded
        (None) in the same pass: the worker knows no capacity at all, and patching each of them
        by bisection was a fifth of a re-placement's CPU at 300 clusters (docs/benchmarks.md).
        """
        cpu, mem = workload.requests.cpu_milli, workload.requests.memory_bytes
        if cpu <= 0 or mem <= 0:
            return [self.replicas_fitting(i, workload) for i in indices]
        fc, fm, known = self.free_cpu, self.free_mem, self.known
        rooms: list[int | None]
        if not self.unknown:
            rooms = [c if (c := fc[i] // cpu) < (m := fm[i] // mem) else m for i in indices]
        elif len(self.unknown) == len(known):
            return [None] * len(indices)  # no capacity anywhere: current clusters too
        else:
            rooms = [
                (c if (c := fc[i] // cpu) < (m := fm[i] // mem) else m) if known[i] else None
                for i in indices
            ]
        size = len(indices)
        for name in workload.placement.clusters:  # few: current placements are short
            i = self.index.get(name, -1)
            if i >= 0 and known[i]:
                p = bisect.bisect_left(indices, i)
                if p < size and indices[p] == i:
                    rooms[p] = self.replicas_fitting(i, workload)
        return rooms

    def consume(
        self, seq: int, workload: Workload, assignment: Sequence[tuple[int, int]]
    ) -> list[int]:
        """Take what ``workload`` needs beyond the replicas credited to it on each cluster.

        Returns the clusters whose free capacity changed (none when it stays where it runs).
        """
        req = workload.requests
        changed: list[int] = []
        if req.cpu_milli <= 0 and req.memory_bytes <= 0:
            return changed
        current = workload.placement.clusters
        known, clusters, consumed = self.known, self.clusters, self._consumed
        free_cpu, free_mem = self.free_cpu, self.free_mem
        last, used, cpu, mem = 0, (seq, 0, 0), 0, 0  # equal ledger entries are shared
        for i, replicas in assignment:
            if not known[i]:
                continue
            extra = replicas
            if current and clusters[i].name in current:
                extra -= credited_replicas(workload, clusters[i].name)
                if extra <= 0:
                    continue
            if extra != last:
                cpu, mem = extra * req.cpu_milli, extra * req.memory_bytes
                last, used = extra, (seq, cpu, mem)
            free_cpu[i] -= cpu
            free_mem[i] -= mem
            consumed[i].extend(used)
            changed.append(i)
        if self.deficit and workload.placement.current_replicas is not None:
            self._recover(workload, assignment)
        return changed

    def _recover(self, workload: Workload, assignment: Sequence[tuple[int, int]]) -> None:
        """What ``workload`` stops running on over-full clusters pays their excess down.

        The freed usage goes to the excess, not to free capacity: the cluster was over, so a
        later workload of the run sheds only what is still over.
        """
        req = workload.requests
        placed = dict(assignment)
        index = self.index
        for name, held in (workload.placement.current() or {}).items():
            i = index.get(name, -1)
            over = self.deficit.get(i)
            if over is None:
                continue
            freed = held - placed.get(i, 0)
            if freed > 0:
                over[0] = max(0, over[0] - freed * req.cpu_milli)
                over[1] = max(0, over[1] - freed * req.memory_bytes)
                if over == [0, 0]:
                    del self.deficit[i]

    def ledgers(self) -> list[tuple[list[int], list[int], list[int]]]:
        """Per cluster, its consumptions so far as three lists: (seqs, cpus, memories)."""
        return [(ledger[0::3], ledger[1::3], ledger[2::3]) for ledger in self._consumed]

    def consumption(self) -> Iterator[tuple[int, int, int, int]]:
        """Every consumption of the run so far as (seq, cluster index, cpu, memory)."""
        for i, ledger in enumerate(self._consumed):
            for p in range(0, len(ledger), 3):
                yield ledger[p], i, ledger[p + 1], ledger[p + 2]

    def at(self, seq: int) -> PlacementContext:
        """The same context as the workload with sequence number ``seq`` saw it (for reasons)."""
        view = copy.copy(self)
        view.seq = seq
        return view


def _name(cluster: Cluster) -> str:
    return cluster.name
