"""An in-memory fleet behind ``FleetBackend``: the only fake of the workflow tests.

It simulates what the activities observe of CAPI: a declared version per control plane and
MachineDeployment that "rolls out" after a few polls (``rollout_polls``), running versions that
follow, taints, workloads and their placement. It also records what happened, in order, so tests
can assert the product's promises (taint during every patch, placement after every step, at most
N clusters upgrading at once, no step applied twice) without looking inside the workflows.

Knobs for failure tests: ``hold`` (a cluster's rollouts stop progressing until ``release``),
``fail_times`` (transient errors on a backend call), ``wrong_kubelet`` (verification mismatch),
``before_write`` (runs once at the start of the next placement write: a concurrent writer).

Observed usage: ``usage_reads`` lists what ``read_usage`` returns per cluster, one per call, the
last one repeated (default: a clean, complete read); ``record_usage`` folds reads into ``usage_records`` with the domain's merge, as
the kube backend does on the Cluster.

Placement writes behave like the kube backend's: each workload has a version that every write
bumps, a decision carrying an older version is a conflict (not written), and a decision equal to
the stored one is not written; ``placement_writes`` lists every write. Blobs live in a dict.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime

from orchestrator.domain.observed import ApiUsage, merge_usage
from orchestrator.domain.snapshot import (
    Cluster,
    ControlPlaneState,
    FleetSnapshot,
    MachineDeploymentState,
    Workload,
)
from orchestrator.domain.taints import UPGRADING_TAINT_KEY, Effect, Taint, with_taint, without_taint
from orchestrator.domain.versions import KubeVersion
from orchestrator.kube.backend.port import (
    ClusterObservation,
    ClusterRef,
    ComponentObservation,
    Inventory,
    NotFoundError,
    PlacementDecisionInfo,
    PlacementWrite,
    Progress,
    UsageRead,
    Wakeup,
)


@dataclass(frozen=True)
class Event:
    """One write the fleet saw. ``tainted`` = the cluster carried the upgrading taint then."""

    kind: str  # taint | untaint | patch | place
    cluster: str
    detail: str = ""
    tainted: bool = False


@dataclass
class _Component:
    declared: str
    running: str
    replicas: int = 1
    polls_left: int = 0
    step_ids: list[str] = field(default_factory=list)


@dataclass
class _Cluster:
    base: Cluster
    control_plane: _Component
    pools: dict[str, _Component]
    taints: tuple[Taint, ...]


class _FakeWakeup:
    def __init__(self, fleet: InMemoryFleet) -> None:
        self._fleet = fleet

    async def wait(self, timeout: float) -> bool:
        if not self._fleet.wake_rollouts:
            await asyncio.sleep(timeout)
            return False
        self._fleet.wakeups += 1
        await asyncio.sleep(0)
        return True


class InMemoryFleet:
    """A fleet held in memory; implements ``orchestrator.kube.backend.port.FleetBackend``."""

    def __init__(
        self, snapshot: FleetSnapshot, *, rollout_polls: int = 2, namespace: str = "fleet"
    ) -> None:
        self.available_versions = snapshot.available_versions
        self.network = snapshot.network
        self.namespace = namespace
        self.rollout_polls = rollout_polls
        self.clusters: dict[str, _Cluster] = {
            c.name: _Cluster(
                base=c,
                control_plane=_Component(
                    str(c.control_plane.version),
                    str(c.control_plane.version),
                    c.control_plane.replicas,
                ),
                pools={
                    md.name: _Component(str(md.version), str(md.version), max(md.replicas, 1))
                    for md in c.machine_deployments
                },
                taints=c.taints,
            )
            for c in snapshot.clusters
        }
        self.workloads: dict[str, Workload] = {w.key: w for w in snapshot.workloads}
        self.workload_versions: Counter[str] = Counter({key: 1 for key in self.workloads})
        self.decisions: dict[str, tuple[tuple[str, int], ...]] = {}
        self.placement_writes: list[tuple[str, str]] = []  # (workload, reason)
        self.conflicts: list[str] = []
        self.before_write: Callable[[], Awaitable[None]] | None = None
        self.blobs: dict[str, bytes] = {}
        self.blob_reads = 0
        self.blob_deletes: list[str] = []
        self.events: list[Event] = []
        self.patches: Counter[tuple[str, str, str]] = Counter()
        self.held: set[str] = set()
        self.wrong_kubelet: set[str] = set()
        self.fail_times: Counter[tuple[str, str]] = Counter()
        self.upgrading: set[str] = set()
        self.max_upgrading = 0
        self.max_pools_rolling = 0
        self.observations = 0
        # Rollout waits are woken at once (as the worker's cache wakes them when CAPI's status
        # says a rollout finished) instead of sleeping out their poll interval; counted.
        self.wake_rollouts = False
        self.wakeups = 0
        self.usage_reads: dict[str, list[UsageRead]] = {}
        self.usage_records: dict[str, tuple[ApiUsage, ...]] = {}
        self.usage_looks: Counter[str] = Counter()
        self.blocker_only_looks: Counter[str] = Counter()  # looks at the PDBs alone

    # ------------------------------------------------------------------ test controls

    def hold(self, cluster: str) -> None:
        """Rollouts on ``cluster`` stop progressing (a stuck rollout)."""
        self.held.add(cluster)

    def release(self, cluster: str) -> None:
        """Let a held cluster's rollouts finish."""
        self.held.discard(cluster)

    def has_upgrading_taint(self, cluster: str) -> bool:
        """Does the cluster carry ``calibrator.dev/upgrading``?"""
        return any(t.key == UPGRADING_TAINT_KEY for t in self.clusters[cluster].taints)

    def versions(self, cluster: str) -> tuple[str, tuple[str, ...]]:
        """(control plane, pools) running versions."""
        c = self.clusters[cluster]
        return c.control_plane.running, tuple(p.running for p in c.pools.values())

    def events_of(self, cluster: str, *kinds: str) -> list[Event]:
        """Events of one cluster, optionally of some kinds only."""
        return [e for e in self.events if e.cluster == cluster and (not kinds or e.kind in kinds)]

    def first(self, cluster: str, kind: str) -> int:
        """Index of the cluster's first event of ``kind`` (for ordering assertions)."""
        for i, e in enumerate(self.events):
            if e.cluster == cluster and e.kind == kind:
                return i
        raise AssertionError(f"{cluster} has no {kind} event")

    def last(self, cluster: str, kind: str) -> int:
        """Index of the cluster's last event of ``kind``."""
        found = [i for i, e in enumerate(self.events) if e.cluster == cluster and e.kind == kind]
        if not found:
            raise AssertionError(f"{cluster} has no {kind} event")
        return found[-1]

    # ------------------------------------------------------------------ helpers

    def _get(self, name: str) -> _Cluster:
        try:
            return self.clusters[name]
        except KeyError:
            raise NotFoundError(f"cluster {name!r} not found") from None

    def _maybe_fail(self, call: str, cluster: str) -> None:
        key = (call, cluster)
        if self.fail_times[key] > 0:
            self.fail_times[key] -= 1
            raise RuntimeError(f"injected transient failure of {call} on {cluster}")

    def _advance(self, name: str, component: _Component) -> None:
        if component.declared == component.running or name in self.held:
            return
        component.polls_left -= 1
        if component.polls_left <= 0:
            component.running = component.declared

    def _cluster_now(self, c: _Cluster) -> Cluster:
        return replace(
            c.base,
            control_plane=ControlPlaneState(
                KubeVersion.parse(c.control_plane.declared), c.control_plane.replicas
            ),
            machine_deployments=tuple(
                MachineDeploymentState(name, KubeVersion.parse(p.declared), p.replicas)
                for name, p in c.pools.items()
            ),
            taints=c.taints,
        )

    # ------------------------------------------------------------------ FleetBackend

    async def inventory(self, clusters: Sequence[str] = ()) -> Inventory:
        """The fleet as declared now, with current placements."""
        names = list(clusters) or list(self.clusters)
        snapshot = FleetSnapshot(
            self.available_versions,
            tuple(self._cluster_now(self._get(n)) for n in names),
            tuple(self.workloads.values()),
            self.network,
        )
        versions = {key: str(v) for key, v in self.workload_versions.items()}
        return Inventory(snapshot, {n: self.namespace for n in names}, workload_versions=versions)

    @asynccontextmanager
    async def rollout_wakeups(self, cluster: ClusterRef) -> AsyncIterator[Wakeup]:
        """Wake-ups that come at once with ``wake_rollouts``; else each wait sleeps its timeout."""
        yield _FakeWakeup(self)

    async def observe(self, cluster: ClusterRef) -> ClusterObservation:
        """One poll: rollouts advance, then the cluster is reported."""
        self._maybe_fail("observe", cluster.name)
        c = self._get(cluster.name)
        self.observations += 1
        self._advance(cluster.name, c.control_plane)
        for pool in c.pools.values():
            self._advance(cluster.name, pool)
        cp = c.control_plane
        kubelet_skew = cluster.name in self.wrong_kubelet
        return ClusterObservation(
            cluster=ClusterRef(cluster.name, self.namespace),
            control_plane=ComponentObservation(
                name="controlPlane",
                version=cp.declared,
                rolled_out=cp.declared == cp.running,
                message=f"{cp.replicas if cp.declared == cp.running else 0}/{cp.replicas} "
                "replicas up to date",
                versions=(cp.running,),
            ),
            pools=tuple(
                ComponentObservation(
                    name=name,
                    version=p.declared,
                    rolled_out=p.declared == p.running,
                    message="rolling" if p.declared != p.running else "",
                    versions=tuple(
                        "v1.0.0" if kubelet_skew else p.running for _ in range(p.replicas)
                    ),
                )
                for name, p in c.pools.items()
            ),
            taints=c.taints,
            topology=c.base.topology,
        )

    async def set_control_plane_version(
        self, cluster: ClusterRef, version: str, step_id: str
    ) -> None:
        """Declare the version; the rollout starts."""
        self._maybe_fail("set_control_plane_version", cluster.name)
        c = self._get(cluster.name)
        c.control_plane.declared = version
        c.control_plane.polls_left = self.rollout_polls
        c.control_plane.step_ids.append(step_id)
        self.patches[(cluster.name, "controlPlane", version)] += 1
        self.events.append(
            Event(
                "patch",
                cluster.name,
                f"controlPlane {version}",
                self.has_upgrading_taint(cluster.name),
            )
        )

    async def set_pool_version(
        self, cluster: ClusterRef, pool: str, version: str, step_id: str
    ) -> None:
        """Declare a MachineDeployment's version; its rollout starts."""
        self._maybe_fail("set_pool_version", cluster.name)
        c = self._get(cluster.name)
        if pool not in c.pools:
            raise NotFoundError(f"MachineDeployment {pool} not found in {cluster.name}")
        component = c.pools[pool]
        component.declared = version
        component.polls_left = self.rollout_polls
        component.step_ids.append(step_id)
        rolling = sum(1 for p in c.pools.values() if p.declared != p.running)
        self.max_pools_rolling = max(self.max_pools_rolling, rolling)
        self.patches[(cluster.name, pool, version)] += 1
        self.events.append(
            Event(
                "patch", cluster.name, f"{pool} {version}", self.has_upgrading_taint(cluster.name)
            )
        )

    async def add_taint(self, cluster: ClusterRef, taint: Taint) -> bool:
        """Add (idempotently) and track how many clusters are upgrading at once."""
        self._maybe_fail("add_taint", cluster.name)
        c = self._get(cluster.name)
        updated = with_taint(c.taints, taint)
        changed = updated != c.taints
        c.taints = updated
        if taint.key == UPGRADING_TAINT_KEY:
            self.upgrading.add(cluster.name)
            self.max_upgrading = max(self.max_upgrading, len(self.upgrading))
        self.events.append(
            Event("taint", cluster.name, taint.key if changed else "unchanged", True)
        )
        return changed

    async def remove_taint(self, cluster: ClusterRef, key: str, effect: Effect) -> bool:
        """Remove (idempotently)."""
        self._maybe_fail("remove_taint", cluster.name)
        c = self._get(cluster.name)
        updated = without_taint(c.taints, key, effect)
        changed = updated != c.taints
        c.taints = updated
        if key == UPGRADING_TAINT_KEY:
            self.upgrading.discard(cluster.name)
        self.events.append(Event("untaint", cluster.name, key if changed else "unchanged", False))
        return changed

    async def write_placement(
        self,
        decisions: Sequence[PlacementDecisionInfo],
        reason: str,
        progress: Progress | None = None,
    ) -> PlacementWrite:
        """Compare-and-swap each changed decision; the event names the cluster from ``reason``.

        ``progress`` hears of every decision handled, as the kube backend reports it.
        """
        hook, self.before_write = self.before_write, None
        if hook is not None:
            await hook()
        written: list[str] = []
        conflicts: list[str] = []
        for d in decisions:
            version = str(self.workload_versions[d.workload])
            if d.resource_version and d.resource_version != version:
                conflicts.append(d.workload)
                continue
            old = self.workloads[d.workload]
            rows = tuple((c.cluster, c.replicas) for c in d.clusters)
            clusters = tuple(c.cluster for c in d.clusters)
            counts = tuple(c.replicas for c in d.clusters)
            if (
                self.decisions.get(d.workload) == rows
                and old.placement.clusters == clusters
                and old.placement.current_replicas == counts
            ):
                continue
            self.decisions[d.workload] = rows
            # As the FleetWorkload's status: the decision with its counts is the current placement,
            # decided under the spec's generation (the live writer's status.observedGeneration).
            self.workloads[d.workload] = replace(
                old,
                placement=replace(
                    old.placement,
                    clusters=clusters,
                    current_replicas=counts,
                    observed_generation=old.generation,
                ),
            )
            self.workload_versions[d.workload] += 1
            self.placement_writes.append((d.workload, reason))
            written.append(d.workload)
        if progress is not None:
            for done in range(1, len(decisions) + 1):
                progress(done, len(decisions))
        self.conflicts += conflicts
        cluster = reason.split(":", 1)[0]
        self.events.append(
            Event(
                "place",
                cluster,
                reason,
                cluster in self.clusters and self.has_upgrading_taint(cluster),
            )
        )
        return PlacementWrite(tuple(written), tuple(conflicts))

    async def read_usage(
        self, cluster: ClusterRef, now: datetime, *, blockers_only: bool = False
    ) -> UsageRead:
        """The next of ``usage_reads`` for the cluster (a clean read by default)."""
        self._get(cluster.name)
        self.usage_looks[cluster.name] += 1
        self.blocker_only_looks[cluster.name] += int(blockers_only)
        reads = self.usage_reads.get(cluster.name) or [UsageRead()]
        return reads.pop(0) if len(reads) > 1 else reads[0]

    async def record_usage(
        self, cluster: ClusterRef, fresh: Sequence[ApiUsage], now: datetime
    ) -> tuple[ApiUsage, ...]:
        """Fold ``fresh`` into the cluster's record, as the kube backend does on the Cluster."""
        self._get(cluster.name)
        merged = merge_usage(self.usage_records.get(cluster.name, ()), fresh, now)
        self.usage_records[cluster.name] = merged
        return merged

    async def put_blob(self, digest: str, data: bytes) -> None:
        """Keep the bytes; the key must be their SHA-256 (content addressing)."""
        if hashlib.sha256(data).hexdigest() != digest:
            raise ValueError(f"blob {digest} does not match its content")
        self.blobs.setdefault(digest, data)

    async def get_blob(self, digest: str) -> bytes:
        """The stored bytes (NotFoundError if absent)."""
        self.blob_reads += 1
        try:
            return self.blobs[digest]
        except KeyError:
            raise NotFoundError(f"blob {digest} not found") from None

    async def delete_blob(self, digest: str) -> None:
        """Forget a blob (deleting one that is gone is no error, as in the kube backend)."""
        self.blob_deletes.append(digest)
        self.blobs.pop(digest, None)
