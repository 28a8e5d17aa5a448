"""FleetSnapshot: the fleet as data (pure; the file format is in docs/api.md "FleetSnapshot").

A snapshot is what every planner, check and placement run reads, whether it came from a file or
from a live inventory. The types live here; reading the file format (strict, one error naming
the exact field) is ``snapshot_load`` and writing it is ``snapshot_dump``, so code that only
reads a fleet imports neither parser nor YAML.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from orchestrator.domain.apis import ApiRef
from orchestrator.domain.documents import quote
from orchestrator.domain.errors import InputError
from orchestrator.domain.location import (
    FieldSelector,
    Location,
    SpreadConstraint,
    cluster_location,
)
from orchestrator.domain.quantity import (
    format_cpu,
    format_memory,
)
from orchestrator.domain.selectors import LabelSelector
from orchestrator.domain.taints import (
    Taint,
    Toleration,
    format_time,
)
from orchestrator.domain.versions import KubeVersion

if TYPE_CHECKING:
    from orchestrator.domain.observed import ApiUsage, DisruptionBlocker

API_VERSION = "calibrator.dev/v1alpha1"
KIND = "FleetSnapshot"

# Bounds of snapshot values (docs/api.md "Limits"): far above any real fleet, low enough that
# sums and products stay exact and that no later arithmetic (timers, division) can overflow.
MAX_NAME_LENGTH = 253  # a Kubernetes object name (DNS subdomain)
MAX_VERSION_LENGTH = 64
MAX_REPLICAS = 1_000_000
MAX_WEIGHT = 1_000_000
MAX_RTT_MS = 3_600_000.0  # one hour
MAX_TOLERATION_SECONDS = 366 * 86_400
MAX_REASON_LENGTH = 1000  # an unreachable workload cluster's reason
MAX_API_VERSIONS = 1000  # group/versions one workload cluster serves (a real one: about 30)
MAX_KUBELET_VERSIONS = 100  # distinct kubelet versions in one workload cluster


class SnapshotError(InputError):
    """A snapshot that cannot be used; the message names the field."""


@dataclass(frozen=True, slots=True)
class Resources:
    """CPU in millicores and memory in bytes: exact integers for sums and comparisons."""

    cpu_milli: int = 0
    memory_bytes: int = 0

    def to_json(self) -> dict[str, str]:
        """Kubernetes quantity strings."""
        return {"cpu": format_cpu(self.cpu_milli), "memory": format_memory(self.memory_bytes)}


@dataclass(frozen=True, slots=True)
class ControlPlaneState:
    """The control plane as CAPI declares it (KubeadmControlPlane.spec or topology.version)."""

    version: KubeVersion
    replicas: int = 1


@dataclass(frozen=True, slots=True)
class MachineDeploymentState:
    """One worker pool."""

    name: str
    version: KubeVersion
    replicas: int = 1


@dataclass(frozen=True, slots=True)
class WorkloadClusterStatus:
    """What a live inventory learnt from the workload cluster itself, or why it could not.

    The management cluster declares versions; only the workload cluster knows what its API
    server serves (``apiVersions``, as ``kubectl api-versions`` lists them) and which kubelet
    versions its Nodes run. An unreachable cluster carries the reason, so every output can say
    so instead of presenting declared versions as observed ones. ``kubelet_versions`` counts
    Nodes per reported version; Nodes that report none (CAPD's in-memory ones) count only in
    ``nodes``.

    ``api_usage`` and ``disruption_blockers`` are what the cluster was seen doing
    (``orchestrator.domain.observed``); ``observation_partial`` says why that look was
    incomplete (an apiserver instance that did not answer), "" when it was complete: a partial
    look is never presented as a clean one.
    """

    reachable: bool
    reason: str = ""
    api_versions: tuple[str, ...] = ()
    nodes: int = 0
    ready_nodes: int = 0
    kubelet_versions: tuple[tuple[str, int], ...] = ()
    api_usage: tuple[ApiUsage, ...] = ()
    disruption_blockers: tuple[DisruptionBlocker, ...] = ()
    observation_partial: str = ""

    def describe(self) -> str:
        """One short line for tables: ``3/3 Nodes Ready, kubelet v1.33.0 x3, 12 API versions``."""
        if not self.reachable:
            return f"unreachable: {self.reason}"
        kubelets = ", ".join(f"{v} x{n}" for v, n in self.kubelet_versions) or "not reported"
        return (
            f"{self.ready_nodes}/{self.nodes} Nodes Ready, kubelet {kubelets}, "
            f"{len(self.api_versions)} API versions"
        )

    def to_json(self) -> dict[str, object]:
        """The ``workloadCluster`` field of the file format."""
        if not self.reachable:
            return {"reachable": False, "reason": self.reason}
        out: dict[str, object] = {
            "reachable": True,
            "apiVersions": list(self.api_versions),
            "nodes": self.nodes,
            "readyNodes": self.ready_nodes,
            "kubeletVersions": dict(self.kubelet_versions),
        }
        # Written only when there is something to say, so every document written before the
        # observation existed (and every probe that observes nothing) stays byte-identical.
        if self.api_usage:
            out["apiUsage"] = [usage_to_json(u) for u in self.api_usage]
        if self.disruption_blockers:
            out["disruptionBlockers"] = [
                {
                    "namespace": b.namespace,
                    "name": b.name,
                    "reason": b.reason,
                    "expectedPods": b.expected_pods,
                }
                for b in self.disruption_blockers
            ]
        if self.observation_partial:
            out["observationPartial"] = self.observation_partial
        return out


def usage_to_json(usage: ApiUsage) -> dict[str, object]:
    """One ``apiUsage`` entry of the file format (``observed_load.usages_from_list`` reads it).

    ``counters`` stays out: it is the per-apiserver baseline the next live read is compared
    with, meaningful only beside the record it was taken for, never something to hand-edit.
    ``requests`` is written for the metric source only, ``objects`` for the other two.
    """
    out: dict[str, object] = {
        "api": str(usage.api),
        "resource": usage.resource,
        "source": usage.source,
        "removedRelease": usage.removed_release,
    }
    if usage.source == "metric":
        if usage.requests is not None:
            out["requests"] = usage.requests
    else:
        out["objects"] = usage.objects
    out["firstSeen"] = format_time(usage.first_seen)
    out["lastSeen"] = format_time(usage.last_seen)
    out["observedAt"] = format_time(usage.observed_at)
    if usage.example:
        out["example"] = usage.example
    return out


@dataclass(frozen=True, slots=True)
class Cluster:
    """One CAPI cluster as the planner, checks and placement see it.

    ``provider``, ``region`` and ``zones`` are Karmada's cluster fields; one not given is
    derived from the labels (``location.cluster_location``), so snapshots written before the
    fields existed place as they did.
    """

    name: str
    control_plane: ControlPlaneState
    labels: Mapping[str, str] = field(default_factory=dict)
    machine_deployments: tuple[MachineDeploymentState, ...] = ()
    taints: tuple[Taint, ...] = ()
    capacity: Resources | None = None
    allocated: Resources = Resources()
    topology: bool = True
    workload_cluster: WorkloadClusterStatus | None = None  # None: not probed (files, the worker)
    provider: str | None = None
    region: str | None = None
    zones: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.provider is None or self.region is None or not self.zones:
            derived = cluster_location(self.labels)
            if self.provider is None:
                object.__setattr__(self, "provider", derived.provider)
            if self.region is None:
                object.__setattr__(self, "region", derived.region)
            if not self.zones:
                object.__setattr__(self, "zones", derived.zones)

    @property
    def location(self) -> Location:
        """Provider, region and zones together (what field selectors and spreads read)."""
        return Location(self.provider, self.region, self.zones)

    @property
    def worker_versions(self) -> tuple[KubeVersion, ...]:
        """Versions of every MachineDeployment, in their given order."""
        return tuple(md.version for md in self.machine_deployments)


@dataclass(frozen=True, slots=True)
class ClusterAffinity:
    """Which clusters a workload may run on: names and/or a label selector, minus exclusions."""

    selector: LabelSelector = LabelSelector()
    cluster_names: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    name: str = ""
    field_selector: FieldSelector = FieldSelector()

    def matches(self, cluster: Cluster) -> bool:
        """Karmada semantics: names (if any) AND label selector AND fields AND not excluded."""
        if cluster.name in self.exclude:
            return False
        if self.cluster_names and cluster.name not in self.cluster_names:
            return False
        if self.field_selector.match_expressions and not self.field_selector.matches(
            cluster.location
        ):
            return False
        return self.selector.matches(cluster.labels)

    def describe(self) -> str:
        """Short text for reasons."""
        parts = []
        if self.cluster_names:
            parts.append("clusters " + ",".join(self.cluster_names))
        if not self.selector.is_empty():
            parts.append("labels " + self.selector.describe())
        if not self.field_selector.is_empty():
            parts.append("fields " + self.field_selector.describe())
        if self.exclude:
            parts.append("excluding " + ",".join(self.exclude))
        return "; ".join(parts) or "<any cluster>"


@dataclass(frozen=True, slots=True)
class StaticWeight:
    """A weight entry for Weighted division: cluster name or selector, weight, min, max.

    A cluster several entries match takes the entry with the largest weight (Karmada); of
    equal weights, the first entry in the list.
    """

    weight: int
    cluster: str | None = None
    selector: LabelSelector | None = None
    min_replicas: int = 0
    max_replicas: int | None = None

    def matches(self, cluster: Cluster) -> bool:
        """True when this entry applies to ``cluster``."""
        if self.cluster is not None:
            return cluster.name == self.cluster
        return self.selector is not None and self.selector.matches(cluster.labels)


DivisionType = Literal["Duplicated", "Weighted", "Dynamic", "Aggregated"]
DIVISION_TYPES: tuple[DivisionType, ...] = ("Duplicated", "Weighted", "Dynamic", "Aggregated")


@dataclass(frozen=True, slots=True)
class ReplicaScheduling:
    """How replicas spread: a full copy per cluster, or divided.

    Divided by static weights (Weighted), by free capacity (Dynamic), or onto as few clusters
    as hold them (Aggregated, Karmada's division preference of that name).
    """

    type: DivisionType = "Duplicated"
    weights: tuple[StaticWeight, ...] = ()


@dataclass(frozen=True, slots=True)
class LatencyConstraint:
    """Maximum round-trip time from the chosen cluster to a named cluster or region."""

    max_rtt_ms: float
    to_cluster: str | None = None
    to_region: str | None = None

    def describe(self) -> str:
        """``<= 50ms to cluster prod-eu-1`` / ``<= 80ms to region eu``."""
        target = f"cluster {self.to_cluster}" if self.to_cluster else f"region {self.to_region}"
        return f"<= {self.max_rtt_ms:g}ms to {target}"


@dataclass(frozen=True, slots=True)
class PlacementPolicy:
    """Where a workload may go and how its replicas spread.

    ``clusters`` is where the workload runs now (its current placement): compatibility checks read
    it and the Locality score keeps it there. ``current_replicas`` holds how many replicas each of
    those clusters runs (same order), or None when only the names are known (snapshots written
    before the counts existed): re-placement scales from the counts, so that it moves replicas
    only where a step forces it (docs/decisions.md "Stable re-placement"). ``affinities`` are
    ordered fallbacks (Karmada's ``clusterAffinities``): the first one that yields a feasible
    cluster wins. ``max_clusters`` caps how many clusters a placement uses (None = every feasible
    cluster). ``spread_constraints`` bound how many clusters, and regions, zones or providers, the
    placement spans (at most one of the last three; see ``placement.spread``).
    """

    affinities: tuple[ClusterAffinity, ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    clusters: tuple[str, ...] = ()
    replica_scheduling: ReplicaScheduling = ReplicaScheduling()
    max_latency: LatencyConstraint | None = None
    max_clusters: int | None = None
    spread_constraints: tuple[SpreadConstraint, ...] = ()
    current_replicas: tuple[int, ...] | None = None
    # The workload's ``generation`` the current counts were decided under (live: the
    # FleetWorkload's status.observedGeneration); see ``Workload.policy_observed``.
    observed_generation: int | None = None

    def current(self) -> dict[str, int] | None:
        """Replicas per current cluster, or None when the snapshot names the clusters only."""
        if self.current_replicas is None:
            return None
        return dict(zip(self.clusters, self.current_replicas, strict=True))


@dataclass(frozen=True, slots=True)
class Workload:
    """Something placed across clusters: which APIs it needs and how much it asks for."""

    name: str
    namespace: str = "default"
    apis: tuple[ApiRef, ...] = ()
    replicas: int = 1
    requests: Resources = Resources()
    placement: PlacementPolicy = PlacementPolicy()
    # The version of this placement policy (live: the FleetWorkload's metadata.generation, which
    # moves on every spec change); None when unknown, as in hand-written snapshots.
    generation: int | None = None

    @property
    def policy_observed(self) -> bool:
        """Whether the current counts were decided under this very policy.

        Only then can a Weighted assignment that is off its weights be told apart from a changed
        weight: it was held below a share by room that has freed up since, and nothing forces a
        move. Unknown (no generations) counts as changed, the safe side: re-divide.
        """
        return (
            self.generation is not None
            and self.placement.current_replicas is not None
            and self.placement.observed_generation == self.generation
        )

    @property
    def key(self) -> str:
        """``namespace/name``: unique within a snapshot."""
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class NetworkLink:
    """A measured round trip between two clusters; links are symmetric unless both ways are given."""

    source: str
    target: str
    rtt_ms: float


@dataclass(frozen=True, slots=True)
class FleetSnapshot:
    """The whole fleet; the unit every pure function takes."""

    available_versions: tuple[KubeVersion, ...]
    clusters: tuple[Cluster, ...]
    workloads: tuple[Workload, ...] = ()
    network: tuple[NetworkLink, ...] = ()

    def cluster(self, name: str) -> Cluster:
        """Look a cluster up by name (InputError if unknown)."""
        for cluster in self.clusters:
            if cluster.name == name:
                return cluster
        raise InputError(f"unknown cluster {quote(name)}")

    def cluster_names(self) -> tuple[str, ...]:
        """Cluster names in snapshot order."""
        return tuple(c.name for c in self.clusters)


def replace_cluster(snapshot: FleetSnapshot, updated: Sequence[Cluster]) -> FleetSnapshot:
    """A snapshot with some clusters replaced by name (used to simulate planned versions)."""
    by_name = {c.name: c for c in updated}
    clusters = tuple(by_name.get(c.name, c) for c in snapshot.clusters)
    return FleetSnapshot(
        snapshot.available_versions, clusters, snapshot.workloads, snapshot.network
    )
