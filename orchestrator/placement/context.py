"""What every plugin may look at during one ``place()`` run: clusters, network, free capacity.

The context is built once per run. Static facts (labels, taints, versions, links) never change
during a run, so plugins that read only those can be cached per equivalence class. Free capacity
does change: each placement consumes some, in workload order, so the batch never overcommits. The
ledger keeps every consumption with the sequence number of the workload that made it, which lets a
decision explain itself later (lazily) with the free capacity *that workload saw*.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence

from orchestrator.domain.snapshot import Cluster, FleetSnapshot, NetworkLink, Resources, Workload

# Free capacity of a cluster whose capacity is unknown: large enough that every comparison in the
# hot loops says "fits" without a separate branch, small enough to stay a machine-size int.
UNKNOWN_FREE = 1 << 62


def minimum_share(workload: Workload) -> int:
    """Replicas a cluster must be able to take to be feasible at all.

    A Duplicated workload runs a full copy on each selected cluster; a divided one (Weighted or
    Dynamic) needs room for at least one replica, and division then caps each cluster at what fits.
    """
    if workload.placement.replica_scheduling.type == "Duplicated":
        return workload.replicas
    return min(1, workload.replicas)


def credited_replicas(workload: Workload, cluster_name: str) -> int:
    """Replicas assumed to run already on ``cluster_name`` (their usage is inside ``allocated``).

    The snapshot records only *where* a workload runs, not how many replicas each cluster holds, so
    a Duplicated workload is assumed to hold a full copy on every current cluster and a divided one
    an even share, rounded down (rounding down never lets the batch overcommit).
    """
    current = workload.placement.clusters
    if cluster_name not in current:
        return 0
    if workload.placement.replica_scheduling.type == "Duplicated":
        return workload.replicas
    return workload.replicas // len(current)


def build_rtt(links: Iterable[NetworkLink]) -> dict[tuple[str, str], float]:
    """Round trips by (from, to); a link counts both ways unless the reverse is measured too."""
    explicit: dict[tuple[str, str], float] = {}
    for link in links:
        explicit[(link.source, link.target)] = link.rtt_ms
    rtt = dict(explicit)
    for (source, target), value in explicit.items():
        rtt.setdefault((target, source), value)
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
        "free_cpu",
        "free_mem",
        "index",
        "known",
        "mem_points",
        "regions",
        "rtt_ms",
        "seq",
        "snapshot",
    )

    def __init__(self, snapshot: FleetSnapshot) -> None:
        self.snapshot = snapshot
        self.clusters: tuple[Cluster, ...] = tuple(sorted(snapshot.clusters, key=_name))
        self.index: dict[str, int] = {c.name: i for i, c in enumerate(self.clusters)}
        self.known: list[bool] = [c.capacity is not None for c in self.clusters]
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
        # Score points per unit of free cpu/memory: half of 100 each, so a fully free cluster
        # scores 100 and an unknown one 0 (its UNKNOWN_FREE times 0.0).
        self.cpu_points: list[float] = [50 / c if c > 0 else 0.0 for c in self.cap_cpu]
        self.mem_points: list[float] = [50 / m if m > 0 else 0.0 for m in self.cap_mem]
        self.regions: list[str | None] = [c.region for c in self.clusters]
        self.rtt_ms = build_rtt(snapshot.network)
        region_of = dict(zip(self.index, self.regions, strict=True))
        best: dict[tuple[str, str], float] = {}
        for (source, target), value in self.rtt_ms.items():
            region = region_of.get(target)
            if region is not None:
                key = (source, region)
                if value < best.get(key, float("inf")):
                    best[key] = value
        self._region_rtt = best
        self._consumed: list[list[tuple[int, int, int]]] = [[] for _ in self.clusters]
        self.seq: int | None = None

    # ---------------------------------------------------------------- network
    def rtt(self, source: str, target: str) -> float | None:
        """Measured round trip between two clusters (0 to itself); None when never measured."""
        if source == target:
            return 0.0
        return self.rtt_ms.get((source, target))

    def rtt_to_region(self, cluster: Cluster, region: str) -> float | None:
        """Best round trip from ``cluster`` to any cluster of ``region`` (0 when it is in it)."""
        if cluster.region == region:
            return 0.0
        return self._region_rtt.get((cluster.name, region))

    # ---------------------------------------------------------------- capacity
    def free(self, cluster: Cluster) -> Resources | None:
        """Free capacity as this context sees it (None when the cluster reports no capacity)."""
        i = self.index[cluster.name]
        if not self.known[i]:
            return None
        cpu, mem = self.free_cpu[i], self.free_mem[i]
        if self.seq is not None:
            for seq, used_cpu, used_mem in reversed(self._consumed[i]):
                if seq < self.seq:
                    break
                cpu += used_cpu
                mem += used_mem
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
        return room + credited_replicas(workload, self.clusters[i].name)

    def rooms(self, workload: Workload, indices: Sequence[int]) -> list[int | None]:
        """``replicas_fitting`` for many clusters at once (one comprehension, credits patched)."""
        cpu, mem = workload.requests.cpu_milli, workload.requests.memory_bytes
        if cpu <= 0 or mem <= 0:
            return [self.replicas_fitting(i, workload) for i in indices]
        fc, fm, known = self.free_cpu, self.free_mem, self.known
        rooms: list[int | None] = [
            min(fc[i] // cpu, fm[i] // mem) if known[i] else None for i in indices
        ]
        if workload.placement.clusters:
            position = {i: p for p, i in enumerate(indices)}
            for name in workload.placement.clusters:
                p = position.get(self.index.get(name, -1), -1)
                if p >= 0:
                    rooms[p] = self.replicas_fitting(indices[p], workload)
        return rooms

    def consume(self, seq: int, workload: Workload, assignment: Sequence[tuple[int, int]]) -> None:
        """Take what ``workload`` needs beyond the replicas credited to it on each cluster."""
        req = workload.requests
        if req.cpu_milli <= 0 and req.memory_bytes <= 0:
            return
        for i, replicas in assignment:
            if not self.known[i]:
                continue
            extra = replicas - credited_replicas(workload, self.clusters[i].name)
            if extra <= 0:
                continue
            cpu, mem = extra * req.cpu_milli, extra * req.memory_bytes
            self.free_cpu[i] -= cpu
            self.free_mem[i] -= mem
            self._consumed[i].append((seq, cpu, mem))

    def at(self, seq: int) -> PlacementContext:
        """The same context as the workload with sequence number ``seq`` saw it (for reasons)."""
        view = copy.copy(self)
        view.seq = seq
        return view


def _name(cluster: Cluster) -> str:
    return cluster.name
