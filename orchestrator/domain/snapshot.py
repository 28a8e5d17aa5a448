"""FleetSnapshot: the fleet as data (pure), and its file format (DESIGN.md "FleetSnapshot").

A snapshot is what every planner, check and placement run reads, whether it came from a file or
from a live inventory. Parsing validates everything up front and raises one ``InputError`` whose
message names the exact field (``clusters[3].controlPlane.version: ...``), so nothing downstream
ever sees a half-valid fleet.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import date
from functools import wraps
from typing import Any, Concatenate, Literal, ParamSpec, TypeVar, cast

import yaml

from orchestrator.domain.documents import load_document, quote
from orchestrator.domain.errors import InputError
from orchestrator.domain.location import (
    PLURAL,
    SPREAD_FIELDS,
    FieldSelector,
    Location,
    SpreadConstraint,
    SpreadField,
    cluster_location,
    field_selector_from_mapping,
    field_value,
    zone_list,
)
from orchestrator.domain.quantity import (
    format_cpu,
    format_memory,
    parse_cpu_milli,
    parse_memory_bytes,
)
from orchestrator.domain.selectors import LabelSelector, selector_from_mapping
from orchestrator.domain.strict import boolean, check_fields, integer
from orchestrator.domain.taints import (
    NUMERIC_OPERATORS,
    OPERATORS,
    Operator,
    Taint,
    Toleration,
    numeric_value_error,
    parse_effect,
    taint_from_mapping,
)
from orchestrator.domain.versions import KubeVersion, VersionError

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
_GROUP_VERSION = re.compile(r"^(?:[a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?v[0-9]+[a-z0-9]*$")


class SnapshotError(InputError):
    """A snapshot that cannot be used; the message names the field."""


@dataclass(frozen=True, slots=True, order=True)
class ApiRef:
    """An API a workload uses, written ``group/version/Kind`` (``v1/Kind`` for the core group)."""

    group: str
    version: str
    kind: str

    @staticmethod
    def parse(text: object) -> ApiRef:
        """Parse ``batch/v1beta1/CronJob`` or ``v1/ConfigMap``."""
        if not isinstance(text, str):
            raise InputError(f"invalid API {quote(text)}: expected group/version/Kind")
        parts = text.strip().split("/")
        if len(parts) == 2 and all(parts):
            return ApiRef("", parts[0], parts[1])
        if len(parts) == 3 and all(parts):
            return ApiRef(parts[0], parts[1], parts[2])
        raise InputError(
            f"invalid API {quote(text)}: expected group/version/Kind (v1/Kind for core)"
        )

    @property
    def group_version(self) -> str:
        """``apps/v1`` or ``v1``: the apiVersion field of a manifest."""
        return f"{self.group}/{self.version}" if self.group else self.version

    def __str__(self) -> str:
        return f"{self.group_version}/{self.kind}"


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
    """

    reachable: bool
    reason: str = ""
    api_versions: tuple[str, ...] = ()
    nodes: int = 0
    ready_nodes: int = 0
    kubelet_versions: tuple[tuple[str, int], ...] = ()

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
        return {
            "reachable": True,
            "apiVersions": list(self.api_versions),
            "nodes": self.nodes,
            "readyNodes": self.ready_nodes,
            "kubeletVersions": dict(self.kubelet_versions),
        }


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


# --------------------------------------------------------------------------------------------
# Parsing
# --------------------------------------------------------------------------------------------


_T = TypeVar("_T")
_P = ParamSpec("_P")

# For the length of one ``snapshot_from_mapping`` call (None outside one): parsed values by
# parser and the text of their raw value, and the first parsed value equal to each. See
# ``_by_content``.
_Memo = tuple[dict[tuple[str, str], Any], dict[Any, Any]]
_PARSED: ContextVar[_Memo | None] = ContextVar("_PARSED", default=None)


@contextmanager
def _content_memo() -> Iterator[None]:
    token = _PARSED.set(({}, {}))
    try:
        yield
    finally:
        _PARSED.reset(token)


def _by_content(
    parse: Callable[Concatenate[object, _P], _T],
) -> Callable[Concatenate[object, _P], _T]:
    """Parse each distinct raw value once per snapshot.

    A fleet's workloads repeat a few placement rules, request sizes and API lists thousands of
    times, and validating each copy again was most of the time a 100k-workload snapshot took to
    load. A parser wrapped here must depend on its first argument alone (``where``, the only
    other one, names the field in an error; an error is raised, never stored), so the first
    result serves every copy. Results are also interned by value, so equal parts of the snapshot
    are one object even when written differently (``cpu: 1`` and ``cpu: "1"``): placement keys
    some caches by identity, and its answer must not depend on how the input was spelt.

    The key is ``repr`` of the raw value: a document holds only str, int, float, bool, None,
    dates, bytes, lists and dicts, whose reprs differ whenever the values do (1, 1.0 and True
    included), so two keys are equal only when the parser would see the same value.
    """
    name = parse.__qualname__

    @wraps(parse)
    def parse_once(raw: object, /, *args: _P.args, **kwargs: _P.kwargs) -> _T:
        state = _PARSED.get()
        if state is None:
            return parse(raw, *args, **kwargs)
        memo, values = state
        key = (name, repr(raw))
        found = memo.get(key, _MISSING)
        if found is _MISSING:
            value = parse(raw, *args, **kwargs)
            found = memo[key] = values.setdefault(value, value)
        return cast(_T, found)

    return parse_once


_MISSING = object()


def _mapping(raw: object, where: str) -> Mapping[str, Any]:
    if type(raw) is dict:  # what every loader builds; skips the slower ABC check
        return raw
    if not isinstance(raw, Mapping):
        raise SnapshotError(f"{where}: expected a mapping, got {type(raw).__name__}")
    return cast(Mapping[str, Any], raw)


def _list(raw: object, where: str) -> list[Any]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise SnapshotError(f"{where}: expected a list, got {type(raw).__name__}")
    return raw


def _required(raw: Mapping[str, Any], key: str, where: str) -> Any:
    if key not in raw or raw[key] is None:
        raise SnapshotError(f"{where}: missing required field '{key}'")
    return raw[key]


def _name(raw: object, where: str) -> str:
    if not isinstance(raw, str) or not raw.strip():
        raise SnapshotError(f"{where}: must be a non-empty string, got {quote(raw)}")
    if len(raw) > MAX_NAME_LENGTH:
        raise SnapshotError(f"{where}: longer than {MAX_NAME_LENGTH} characters: {quote(raw)}")
    return raw


def _int(raw: object, where: str, minimum: int = 0, maximum: int = MAX_REPLICAS) -> int:
    return integer(raw, where, minimum, maximum, SnapshotError)


def _number(raw: object, where: str, maximum: float = MAX_RTT_MS) -> float:
    # ``not 0 <= raw <= maximum`` is also true for NaN, so NaN and infinities fail here too.
    if isinstance(raw, bool) or not isinstance(raw, int | float) or not 0 <= raw <= maximum:
        raise SnapshotError(f"{where}: must be a number from 0 to {maximum:,.0f}, got {quote(raw)}")
    return float(raw)


def _bool(raw: object, where: str) -> bool:
    return boolean(raw, where, SnapshotError)


def _version(raw: object, where: str) -> KubeVersion:
    if not isinstance(raw, str) or len(raw) > MAX_VERSION_LENGTH:
        raise SnapshotError(
            f"{where}: invalid Kubernetes version {quote(raw)}: expected a string like v1.31.1"
        )
    try:
        return KubeVersion.parse(raw)
    except VersionError as err:
        raise SnapshotError(f"{where}: {err}") from None


def _wrap(where: str, err: InputError) -> SnapshotError:
    text = str(err)
    return SnapshotError(text if text.startswith(where) else f"{where}: {text}")


@_by_content
def _resources(raw: object, where: str) -> Resources:
    data = _mapping(raw, where)
    _check_fields(data, {"cpu", "memory"}, where)
    try:
        cpu = parse_cpu_milli(data.get("cpu", 0))
        memory = parse_memory_bytes(data.get("memory", 0))
    except InputError as err:
        raise _wrap(where, err) from None
    return Resources(cpu, memory)


def _labels(raw: object, where: str) -> dict[str, str]:
    data = _mapping(raw or {}, where)
    out: dict[str, str] = {}
    for key, value in data.items():
        if not isinstance(key, str) or not key or len(key) > MAX_NAME_LENGTH:
            raise SnapshotError(f"{where}: invalid label key {quote(key)}")
        if isinstance(value, bool) or value is None or isinstance(value, list | dict):
            raise SnapshotError(f"{where}.{key}: label values must be strings, got {quote(value)}")
        text = str(value) if not isinstance(value, str) else value
        if len(text) > MAX_NAME_LENGTH:
            raise SnapshotError(
                f"{where}.{key}: label value longer than {MAX_NAME_LENGTH} characters"
            )
        out[key] = text
    return out


def _check_fields(data: Mapping[str, Any], allowed: set[str], where: str) -> None:
    check_fields(data, allowed, where, SnapshotError)


def _cluster(raw: object, where: str) -> Cluster:
    data = _mapping(raw, where)
    _check_fields(
        data,
        {
            "name",
            "labels",
            "controlPlane",
            "machineDeployments",
            "taints",
            "capacity",
            "allocated",
            "topology",
            "workloadCluster",
            "provider",
            "region",
            "zones",
        },
        where,
    )
    name = _name(_required(data, "name", where), f"{where}.name")
    cp_raw = _mapping(_required(data, "controlPlane", where), f"{where}.controlPlane")
    _check_fields(cp_raw, {"version", "replicas"}, f"{where}.controlPlane")
    control_plane = ControlPlaneState(
        _version(
            _required(cp_raw, "version", f"{where}.controlPlane"), f"{where}.controlPlane.version"
        ),
        _int(cp_raw.get("replicas", 1), f"{where}.controlPlane.replicas", 1),
    )
    mds: list[MachineDeploymentState] = []
    for i, md_raw in enumerate(
        _list(data.get("machineDeployments"), f"{where}.machineDeployments")
    ):
        here = f"{where}.machineDeployments[{i}]"
        md = _mapping(md_raw, here)
        _check_fields(md, {"name", "version", "replicas"}, here)
        mds.append(
            MachineDeploymentState(
                _name(_required(md, "name", here), f"{here}.name"),
                _version(_required(md, "version", here), f"{here}.version"),
                _int(md.get("replicas", 1), f"{here}.replicas"),
            )
        )
    seen = {md.name for md in mds}
    if len(seen) != len(mds):
        raise SnapshotError(f"{where}.machineDeployments: duplicate MachineDeployment names")
    taints: list[Taint] = []
    taint_ids: set[tuple[str, str]] = set()
    for i, t_raw in enumerate(_list(data.get("taints"), f"{where}.taints")):
        here = f"{where}.taints[{i}]"
        t_map = _mapping(t_raw, here)
        _check_fields(t_map, {"key", "value", "effect", "timeAdded"}, here)
        added = t_map.get("timeAdded")
        if added is not None and not isinstance(added, str | date):  # YAML reads times as dates
            raise SnapshotError(f"{here}.timeAdded: must be an RFC 3339 time, got {quote(added)}")
        try:
            taint = taint_from_mapping(t_raw, here)
        except InputError as err:
            raise _wrap(here, err) from None
        if (taint.key, taint.effect) in taint_ids:
            raise SnapshotError(
                f"{here}: duplicate taint {quote(taint.key)} with effect {taint.effect}"
            )
        taint_ids.add((taint.key, taint.effect))
        taints.append(taint)
    capacity = _resources(data["capacity"], f"{where}.capacity") if data.get("capacity") else None
    allocated = (
        _resources(data["allocated"], f"{where}.allocated")
        if data.get("allocated")
        else Resources()
    )
    topology = _bool(data.get("topology", True), f"{where}.topology")
    workload_cluster = (
        None
        if data.get("workloadCluster") is None
        else _workload_cluster(data["workloadCluster"], f"{where}.workloadCluster")
    )
    return Cluster(
        name=name,
        control_plane=control_plane,
        labels=_labels(data.get("labels"), f"{where}.labels"),
        machine_deployments=tuple(mds),
        taints=tuple(taints),
        capacity=capacity,
        allocated=allocated,
        topology=topology,
        workload_cluster=workload_cluster,
        provider=_field(data, "provider", where),
        region=_field(data, "region", where),
        zones=zone_list(data["zones"], f"{where}.zones", SnapshotError) if "zones" in data else (),
    )


def _workload_cluster(raw: object, where: str) -> WorkloadClusterStatus:
    data = _mapping(raw, where)
    reachable = _bool(_required(data, "reachable", where), f"{where}.reachable")
    if not reachable:
        _check_fields(data, {"reachable", "reason"}, where)
        reason = _required(data, "reason", where)
        if not isinstance(reason, str) or not reason.strip() or len(reason) > MAX_REASON_LENGTH:
            raise SnapshotError(
                f"{where}.reason: must be a non-empty string of at most {MAX_REASON_LENGTH} "
                f"characters, got {quote(reason)}"
            )
        return WorkloadClusterStatus(False, reason)
    _check_fields(
        data, {"reachable", "apiVersions", "nodes", "readyNodes", "kubeletVersions"}, where
    )
    versions = _list(data.get("apiVersions"), f"{where}.apiVersions")
    if len(versions) > MAX_API_VERSIONS:
        raise SnapshotError(f"{where}.apiVersions: more than {MAX_API_VERSIONS} entries")
    for i, gv in enumerate(versions):
        if not isinstance(gv, str) or len(gv) > MAX_NAME_LENGTH or not _GROUP_VERSION.match(gv):
            raise SnapshotError(
                f"{where}.apiVersions[{i}]: expected group/version (v1 for core), got {quote(gv)}"
            )
    if len(set(versions)) != len(versions):
        raise SnapshotError(f"{where}.apiVersions: duplicate entries")
    nodes = _int(data.get("nodes", 0), f"{where}.nodes")
    ready = _int(data.get("readyNodes", 0), f"{where}.readyNodes", maximum=nodes)
    kubelets_raw = _mapping(data.get("kubeletVersions") or {}, f"{where}.kubeletVersions")
    if len(kubelets_raw) > MAX_KUBELET_VERSIONS:
        raise SnapshotError(f"{where}.kubeletVersions: more than {MAX_KUBELET_VERSIONS} versions")
    kubelets: list[tuple[str, int]] = []
    for version, count in kubelets_raw.items():
        if not isinstance(version, str) or not version or len(version) > MAX_VERSION_LENGTH:
            raise SnapshotError(f"{where}.kubeletVersions: invalid version {quote(version)}")
        kubelets.append((version, _int(count, f"{where}.kubeletVersions.{version}", 1)))
    if sum(n for _, n in kubelets) > nodes:
        raise SnapshotError(f"{where}.kubeletVersions: counts more than the {nodes} Node(s)")
    return WorkloadClusterStatus(True, "", tuple(versions), nodes, ready, tuple(kubelets))


def _field(data: Mapping[str, Any], key: str, where: str) -> str | None:
    """An optional cluster field (provider, region): absent, or a valid value (never null)."""
    if key not in data:
        return None
    return field_value(data[key], f"{where}.{key}", SnapshotError)


@_by_content
def _affinity(raw: object, where: str) -> ClusterAffinity:
    data = _mapping(raw, where)
    _check_fields(
        data,
        {
            "name",
            "matchLabels",
            "matchExpressions",
            "labelSelector",
            "fieldSelector",
            "clusterNames",
            "exclude",
        },
        where,
    )
    selector_raw: object = data.get("labelSelector")
    if selector_raw is None and ("matchLabels" in data or "matchExpressions" in data):
        selector_raw = {k: data[k] for k in ("matchLabels", "matchExpressions") if k in data}
    try:
        selector = selector_from_mapping(selector_raw, where)
    except InputError as err:
        raise _wrap(where, err) from None
    names = tuple(
        _name(n, f"{where}.clusterNames[{i}]")
        for i, n in enumerate(_list(data.get("clusterNames"), f"{where}.clusterNames"))
    )
    exclude = tuple(
        _name(n, f"{where}.exclude[{i}]")
        for i, n in enumerate(_list(data.get("exclude"), f"{where}.exclude"))
    )
    label = _name(data["name"], f"{where}.name") if "name" in data else ""
    fields = (
        field_selector_from_mapping(data["fieldSelector"], f"{where}.fieldSelector", SnapshotError)
        if "fieldSelector" in data
        else FieldSelector()
    )
    return ClusterAffinity(selector, names, exclude, label, fields)


def _toleration(raw: object, where: str) -> Toleration:
    data = _mapping(raw, where)
    _check_fields(data, {"key", "operator", "value", "effect", "tolerationSeconds"}, where)
    operator = data.get("operator", "Equal")
    if operator not in OPERATORS:
        raise SnapshotError(
            f"{where}.operator: must be one of {', '.join(OPERATORS)}, got {operator!r}"
        )
    key = data.get("key", "") or ""
    if not isinstance(key, str):
        raise SnapshotError(f"{where}.key: must be a string")
    if not key and operator != "Exists":
        raise SnapshotError(f"{where}: an empty key needs operator Exists")
    value = data.get("value", "") or ""
    if operator == "Exists" and value:
        raise SnapshotError(f"{where}: operator Exists takes no value")
    if operator in NUMERIC_OPERATORS:
        # Kubernetes validates a numeric toleration's value as a canonical int64 (a YAML
        # integer is accepted as its decimal text).
        if isinstance(value, int) and not isinstance(value, bool):
            value = str(value)
        problem = numeric_value_error(value) if isinstance(value, str) else "must be a string"
        if problem:
            raise SnapshotError(f"{where}.value: operator {operator} needs an integer: {problem}")
    effect_raw = data.get("effect", "") or ""
    effect = parse_effect(effect_raw, where) if effect_raw else ""
    seconds = data.get("tolerationSeconds")
    return Toleration(
        key=key,
        operator=cast(Operator, operator),
        value=str(value),
        effect=effect,
        toleration_seconds=None
        if seconds is None
        else _int(seconds, f"{where}.tolerationSeconds", maximum=MAX_TOLERATION_SECONDS),
    )


@_by_content
def _replica_scheduling(raw: object, where: str) -> ReplicaScheduling:
    if raw is None:
        return ReplicaScheduling()
    data = _mapping(raw, where)
    _check_fields(data, {"type", "weights"}, where)
    kind = data.get("type", "Duplicated")
    if kind not in DIVISION_TYPES:
        raise SnapshotError(
            f"{where}.type: must be one of {', '.join(DIVISION_TYPES)}, got {quote(kind)}"
        )
    weights: list[StaticWeight] = []
    for i, w_raw in enumerate(_list(data.get("weights"), f"{where}.weights")):
        here = f"{where}.weights[{i}]"
        w = _mapping(w_raw, here)
        _check_fields(w, {"cluster", "matchLabels", "weight", "minReplicas", "maxReplicas"}, here)
        if ("cluster" in w) == ("matchLabels" in w):
            raise SnapshotError(f"{here}: give exactly one of 'cluster' or 'matchLabels'")
        selector = None
        if "matchLabels" in w:
            try:
                selector = selector_from_mapping({"matchLabels": w["matchLabels"]}, here)
            except InputError as err:
                raise _wrap(here, err) from None
        min_r = _int(w.get("minReplicas", 0), f"{here}.minReplicas")
        max_raw = w.get("maxReplicas")
        max_r = None if max_raw is None else _int(max_raw, f"{here}.maxReplicas")
        if max_r is not None and max_r < min_r:
            raise SnapshotError(f"{here}: maxReplicas {max_r} is below minReplicas {min_r}")
        weights.append(
            StaticWeight(
                weight=_int(w.get("weight", 1), f"{here}.weight", maximum=MAX_WEIGHT),
                cluster=_name(w["cluster"], f"{here}.cluster") if "cluster" in w else None,
                selector=selector,
                min_replicas=min_r,
                max_replicas=max_r,
            )
        )
    if weights and kind != "Weighted":
        raise SnapshotError(f"{where}.weights: only used with type Weighted")
    return ReplicaScheduling(cast(DivisionType, kind), tuple(weights))


@_by_content
def _latency(raw: object, where: str) -> LatencyConstraint | None:
    if raw is None:
        return None
    data = _mapping(raw, where)
    _check_fields(data, {"cluster", "region", "rttMs"}, where)
    if ("cluster" in data) == ("region" in data):
        raise SnapshotError(f"{where}: give exactly one of 'cluster' or 'region'")
    return LatencyConstraint(
        max_rtt_ms=_number(_required(data, "rttMs", where), f"{where}.rttMs"),
        to_cluster=_name(data["cluster"], f"{where}.cluster") if "cluster" in data else None,
        to_region=_name(data["region"], f"{where}.region") if "region" in data else None,
    )


@_by_content
def _affinities(raw: object, where: str) -> tuple[ClusterAffinity, ...]:
    """``raw`` is the pair (clusterAffinity, clusterAffinities): one value, so one memo key."""
    single, many = cast(tuple[object, object], raw)
    if single is not None:
        return (_affinity(single, f"{where}.clusterAffinity"),)
    items = _list(many, f"{where}.clusterAffinities")
    return tuple(_affinity(a, f"{where}.clusterAffinities[{i}]") for i, a in enumerate(items))


@_by_content
def _tolerations(raw: object, where: str) -> tuple[Toleration, ...]:
    return tuple(_toleration(t, f"{where}[{i}]") for i, t in enumerate(_list(raw, where)))


def _placement(raw: object, where: str) -> PlacementPolicy:
    if raw is None:
        return PlacementPolicy()
    data = _mapping(raw, where)
    _check_fields(
        data,
        {
            "clusterAffinity",
            "clusterAffinities",
            "tolerations",
            "clusters",
            "replicaScheduling",
            "maxLatency",
            "maxClusters",
            "spreadConstraints",
            "observedGeneration",
        },
        where,
    )
    if "clusterAffinity" in data and "clusterAffinities" in data:
        raise SnapshotError(f"{where}: give clusterAffinity or clusterAffinities, not both")
    clusters, current_replicas = _current(data.get("clusters"), f"{where}.clusters")
    max_raw = data.get("maxClusters")
    max_clusters = None if max_raw is None else _int(max_raw, f"{where}.maxClusters", 1)
    scheduling = _replica_scheduling(data.get("replicaScheduling"), f"{where}.replicaScheduling")
    spread_raw = data.get("spreadConstraints")
    spread: tuple[SpreadConstraint, ...] = ()
    if spread_raw is not None:
        spread = _spread_constraints(spread_raw, f"{where}.spreadConstraints")
        _check_spread(spread, f"{where}.spreadConstraints", scheduling, max_clusters)
    return PlacementPolicy(
        affinities=_affinities((data.get("clusterAffinity"), data.get("clusterAffinities")), where),
        tolerations=_tolerations(data.get("tolerations"), f"{where}.tolerations"),
        clusters=clusters,
        replica_scheduling=scheduling,
        max_latency=_latency(data.get("maxLatency"), f"{where}.maxLatency"),
        max_clusters=max_clusters,
        spread_constraints=spread,
        current_replicas=current_replicas,
        observed_generation=_generation(
            data.get("observedGeneration"), f"{where}.observedGeneration"
        ),
    )


def _generation(raw: object, where: str) -> int | None:
    """A Kubernetes ``metadata.generation``-style counter: a positive 64-bit integer, or absent."""
    return None if raw is None else _int(raw, where, 1, 2**63 - 1)


def _current(raw: object, where: str) -> tuple[tuple[str, ...], tuple[int, ...] | None]:
    """The current placement: names (``[a, b]``) or names with counts (``[{name, replicas}]``).

    One form per list: a list that counts some clusters but not others would leave the rest
    guessed, so mixing is an error. Counted clusters appear once each (two counts for one
    cluster have no meaning); a name-only list keeps its old leniency.

    Depends on the raw list alone, yet not ``_by_content``: a current placement is the workload's
    own (three in four distinct at 10k x 100k with counts), so a memo costs a repr per workload
    and saves nothing (measured: no faster, 4.4 s either way).
    """
    items = _list(raw, where)
    if not items or not any(isinstance(item, Mapping) for item in items):
        return tuple(_name(c, f"{where}[{i}]") for i, c in enumerate(items)), None
    names: list[str] = []
    counts: list[int] = []
    for i, item in enumerate(items):
        here = f"{where}[{i}]"
        if not isinstance(item, Mapping):
            raise SnapshotError(
                f"{here}: give every entry as a name or every entry as {{name, replicas}}, "
                f"not both (got {quote(item)})"
            )
        _check_fields(item, {"name", "replicas"}, here)
        names.append(_name(_required(item, "name", here), f"{here}.name"))
        counts.append(_int(_required(item, "replicas", here), f"{here}.replicas"))
    if len(set(names)) != len(names):
        raise SnapshotError(f"{where}: duplicate cluster(s) {_duplicates(names)}")
    return tuple(names), tuple(counts)


@_by_content
def _spread_constraints(raw: object, where: str) -> tuple[SpreadConstraint, ...]:
    """Karmada's spreadConstraints with spreadByField: one per field, at most one located.

    Depends on the raw list alone; the checks against the rest of the policy are
    ``_check_spread``'s. Spreading by two of region/zone/provider at once is a covering problem
    placement does not solve (Karmada's selection does not either).
    """
    items = _list(raw, where)
    out: list[SpreadConstraint] = []
    for i, item in enumerate(items):
        here = f"{where}[{i}]"
        data = _mapping(item, here)
        _check_fields(data, {"spreadByField", "minGroups", "maxGroups"}, here)
        spread_field = _required(data, "spreadByField", here)
        if spread_field not in SPREAD_FIELDS:
            raise SnapshotError(
                f"{here}.spreadByField: must be one of {', '.join(SPREAD_FIELDS)}, "
                f"got {quote(spread_field)}"
            )
        low = _int(data.get("minGroups", 1), f"{here}.minGroups", 1)
        high_raw = data.get("maxGroups")
        high = None if high_raw is None else _int(high_raw, f"{here}.maxGroups", 1)
        if high is not None and high < low:
            raise SnapshotError(f"{here}: maxGroups {high} is below minGroups {low}")
        if any(c.field == spread_field for c in out):
            raise SnapshotError(f"{here}: a second constraint spreading by {spread_field}")
        out.append(SpreadConstraint(cast(SpreadField, spread_field), low, high))
    located = [c.field for c in out if c.field != "cluster"]
    if len(located) > 1:
        raise SnapshotError(
            f"{where}: spread by one of region, zone or provider, not {' and '.join(located)}"
        )
    return tuple(sorted(out, key=lambda c: SPREAD_FIELDS.index(c.field)))


def _check_spread(
    spread: tuple[SpreadConstraint, ...],
    where: str,
    scheduling: ReplicaScheduling,
    max_clusters: int | None,
) -> None:
    """Only what placement can honour, against the rest of the policy.

    No static weights (Karmada ignores spreads there; a rule silently ignored is worse than an
    error), one cluster cap, no minimum that the cap rules out.
    """
    if not spread:
        return
    by_field = {c.field: c for c in spread}
    if scheduling.weights:
        raise SnapshotError(
            f"{where}: spread constraints do not combine with static weights "
            "(replicaScheduling.weights decide the clusters)"
        )
    per_cluster = by_field.get("cluster")
    if per_cluster is not None and per_cluster.max_groups is not None and max_clusters is not None:
        raise SnapshotError(
            f"{where}: give maxClusters or a cluster spread's maxGroups, not both (same meaning)"
        )
    cap = max_clusters if per_cluster is None else per_cluster.max_groups or max_clusters
    for c in spread:
        # A cluster is in one region and one provider: fewer clusters cannot span more of them.
        if cap is not None and c.field != "zone" and c.min_groups > cap:
            raise SnapshotError(
                f"{where}: minGroups {c.min_groups} {PLURAL[c.field]} can never be met "
                f"on at most {cap} cluster{'' if cap == 1 else 's'}"
            )


@_by_content
def _apis(raw: object, where: str) -> tuple[ApiRef, ...]:
    apis: list[ApiRef] = []
    for i, api in enumerate(_list(raw, where)):
        try:
            apis.append(ApiRef.parse(api))
        except InputError as err:
            raise _wrap(f"{where}[{i}]", err) from None
    return tuple(apis)


def _workload(raw: object, where: str) -> Workload:
    data = _mapping(raw, where)
    _check_fields(
        data,
        {"name", "namespace", "apis", "replicas", "requests", "placement", "generation"},
        where,
    )
    namespace = data.get("namespace", "default")
    return Workload(
        name=_name(_required(data, "name", where), f"{where}.name"),
        namespace=_name(namespace, f"{where}.namespace"),
        apis=_apis(data.get("apis"), f"{where}.apis"),
        replicas=_int(data.get("replicas", 1), f"{where}.replicas"),
        requests=_resources(data["requests"], f"{where}.requests")
        if data.get("requests")
        else Resources(),
        placement=_placement(data.get("placement"), f"{where}.placement"),
        generation=_generation(data.get("generation"), f"{where}.generation"),
    )


def cluster_from_mapping(raw: object, where: str) -> Cluster:
    """One ``clusters[]`` entry validated alone (the live inventory skips a bad one by name)."""
    return _cluster(raw, where)


def snapshot_from_mapping(raw: object) -> FleetSnapshot:
    """Validate and build a snapshot from parsed YAML/JSON; raises SnapshotError on any defect."""
    data = _mapping(raw, "snapshot")
    _check_fields(
        data,
        {"apiVersion", "kind", "availableVersions", "clusters", "workloads", "network"},
        "snapshot",
    )
    if data.get("apiVersion", API_VERSION) != API_VERSION:
        raise SnapshotError(
            f"snapshot.apiVersion: expected {API_VERSION}, got {quote(data.get('apiVersion'))}"
        )
    if data.get("kind", KIND) != KIND:
        raise SnapshotError(f"snapshot.kind: expected {KIND}, got {quote(data.get('kind'))}")
    versions = tuple(
        _version(v, f"availableVersions[{i}]")
        for i, v in enumerate(_list(data.get("availableVersions"), "availableVersions"))
    )
    if len(set(versions)) != len(versions):
        raise SnapshotError("availableVersions: duplicate versions")
    clusters = tuple(
        _cluster(c, f"clusters[{i}]")
        for i, c in enumerate(_list(_required(data, "clusters", "snapshot"), "clusters"))
    )
    names = [c.name for c in clusters]
    known = set(names)
    if len(known) != len(names):
        raise SnapshotError(f"clusters: duplicate cluster name(s) {_duplicates(names)}")
    with _content_memo():
        workloads = tuple(
            _workload(w, f"workloads[{i}]")
            for i, w in enumerate(_list(data.get("workloads"), "workloads"))
        )
    keys = [w.key for w in workloads]
    if len(set(keys)) != len(keys):
        raise SnapshotError(f"workloads: duplicate workload(s) {_duplicates(keys)}")
    for i, workload in enumerate(workloads):
        where = f"workloads[{i}] ({workload.key}).placement"
        _check_cluster_refs(workload.placement, known, where)
    links: list[NetworkLink] = []
    for i, l_raw in enumerate(_list(data.get("network"), "network")):
        here = f"network[{i}]"
        link = _mapping(l_raw, here)
        _check_fields(link, {"from", "to", "rttMs"}, here)
        source = _name(_required(link, "from", here), f"{here}.from")
        target = _name(_required(link, "to", here), f"{here}.to")
        for end in (source, target):
            if end not in known:
                raise SnapshotError(f"{here}: unknown cluster {quote(end)}")
        links.append(
            NetworkLink(source, target, _number(_required(link, "rttMs", here), f"{here}.rttMs"))
        )
    return FleetSnapshot(versions, clusters, workloads, tuple(links))


def _duplicates(names: Sequence[str], shown: int = 5) -> str:
    """The repeated names, sorted, at most ``shown`` of them (one linear pass)."""
    seen: set[str] = set()
    repeated: set[str] = set()
    for name in names:
        if name in seen:
            repeated.add(name)
        seen.add(name)
    ordered = sorted(repeated)
    text = ", ".join(quote(n, 40) for n in ordered[:shown])
    return text + (f" and {len(ordered) - shown} more" if len(ordered) > shown else "")


def _check_cluster_refs(policy: PlacementPolicy, known: set[str], where: str) -> None:
    refs: list[tuple[str, str]] = [(n, f"{where}.clusters") for n in policy.clusters]
    for j, aff in enumerate(policy.affinities):
        refs += [(n, f"{where}.clusterAffinities[{j}].clusterNames") for n in aff.cluster_names]
    refs += [
        (w.cluster, f"{where}.replicaScheduling.weights")
        for w in policy.replica_scheduling.weights
        if w.cluster
    ]
    if policy.max_latency and policy.max_latency.to_cluster:
        refs.append((policy.max_latency.to_cluster, f"{where}.maxLatency.cluster"))
    for name, here in refs:
        if name not in known:
            raise SnapshotError(f"{here}: unknown cluster {quote(name)}")


def load_snapshot(text: str | bytes) -> FleetSnapshot:
    """Parse YAML (or JSON) text into a validated snapshot (``documents.load_document`` rules)."""
    try:
        raw = load_document(text, "snapshot")
    except InputError as err:
        raise SnapshotError(str(err)) from None
    if raw is None:
        raise SnapshotError("snapshot is empty")
    return snapshot_from_mapping(raw)


# --------------------------------------------------------------------------------------------
# Dumping (the inverse of parsing; round-trips)
# --------------------------------------------------------------------------------------------


def _affinity_to_json(aff: ClusterAffinity) -> dict[str, object]:
    out: dict[str, object] = {}
    if aff.name:
        out["name"] = aff.name
    out.update(aff.selector.to_json())
    if aff.cluster_names:
        out["clusterNames"] = list(aff.cluster_names)
    if aff.exclude:
        out["exclude"] = list(aff.exclude)
    if not aff.field_selector.is_empty():
        out["fieldSelector"] = aff.field_selector.to_json()
    return out


def _placement_to_json(policy: PlacementPolicy) -> dict[str, object]:
    out: dict[str, object] = {}
    if len(policy.affinities) == 1:
        out["clusterAffinity"] = _affinity_to_json(policy.affinities[0])
    elif policy.affinities:
        out["clusterAffinities"] = [_affinity_to_json(a) for a in policy.affinities]
    out["tolerations"] = [
        {
            k: v
            for k, v in (
                ("key", t.key),
                ("operator", t.operator),
                ("value", t.value),
                ("effect", t.effect),
                ("tolerationSeconds", t.toleration_seconds),
            )
            if v not in ("", None)
        }
        for t in policy.tolerations
    ]
    if policy.current_replicas is None:
        out["clusters"] = list(policy.clusters)
    else:
        out["clusters"] = [
            {"name": n, "replicas": r}
            for n, r in zip(policy.clusters, policy.current_replicas, strict=True)
        ]
    rs = policy.replica_scheduling
    if rs.type != "Duplicated" or rs.weights:
        rs_out: dict[str, object] = {"type": rs.type}
        if rs.weights:
            rs_out["weights"] = [
                {
                    k: v
                    for k, v in (
                        ("cluster", w.cluster),
                        ("matchLabels", dict(w.selector.match_labels) if w.selector else None),
                        ("weight", w.weight),
                        ("minReplicas", w.min_replicas or None),
                        ("maxReplicas", w.max_replicas),
                    )
                    if v is not None
                }
                for w in rs.weights
            ]
        out["replicaScheduling"] = rs_out
    if policy.max_latency:
        lat = policy.max_latency
        out["maxLatency"] = (
            {"cluster": lat.to_cluster} if lat.to_cluster else {"region": lat.to_region}
        )
        cast(dict[str, object], out["maxLatency"])["rttMs"] = lat.max_rtt_ms
    if policy.max_clusters is not None:
        out["maxClusters"] = policy.max_clusters
    if policy.spread_constraints:
        out["spreadConstraints"] = [
            {
                k: v
                for k, v in (
                    ("spreadByField", c.field),
                    ("minGroups", c.min_groups),
                    ("maxGroups", c.max_groups),
                )
                if v is not None
            }
            for c in policy.spread_constraints
        ]
    if policy.observed_generation is not None:
        out["observedGeneration"] = policy.observed_generation
    return out


def snapshot_to_mapping(snapshot: FleetSnapshot) -> dict[str, object]:
    """The file form of a snapshot (what ``load_snapshot`` reads back to an equal snapshot)."""
    clusters: list[dict[str, object]] = []
    for c in snapshot.clusters:
        item: dict[str, object] = {
            "name": c.name,
            "labels": dict(c.labels),
            "controlPlane": {
                "version": str(c.control_plane.version),
                "replicas": c.control_plane.replicas,
            },
            "machineDeployments": [
                {"name": md.name, "version": str(md.version), "replicas": md.replicas}
                for md in c.machine_deployments
            ],
            "taints": [t.to_json() for t in c.taints],
        }
        if not c.topology:
            item["topology"] = False
        if c.capacity is not None:
            item["capacity"] = c.capacity.to_json()
        if c.allocated != Resources():
            item["allocated"] = c.allocated.to_json()
        if c.workload_cluster is not None:
            item["workloadCluster"] = c.workload_cluster.to_json()
        # Only fields the labels do not imply: the file stays as it was for label-only fleets.
        derived = cluster_location(c.labels)
        if c.provider is not None and c.provider != derived.provider:
            item["provider"] = c.provider
        if c.region is not None and c.region != derived.region:
            item["region"] = c.region
        if c.zones and c.zones != derived.zones:
            item["zones"] = list(c.zones)
        clusters.append(item)
    workloads: list[dict[str, object]] = []
    for w in snapshot.workloads:
        entry: dict[str, object] = {
            "name": w.name,
            "namespace": w.namespace,
            "apis": [str(a) for a in w.apis],
            "replicas": w.replicas,
        }
        if w.requests != Resources():
            entry["requests"] = w.requests.to_json()
        entry["placement"] = _placement_to_json(w.placement)
        if w.generation is not None:
            entry["generation"] = w.generation
        workloads.append(entry)
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "availableVersions": [str(v) for v in snapshot.available_versions],
        "clusters": clusters,
        "workloads": workloads,
        "network": [
            {"from": n.source, "to": n.target, "rttMs": n.rtt_ms} for n in snapshot.network
        ],
    }


def dump_snapshot(snapshot: FleetSnapshot) -> str:
    """YAML text of a snapshot."""
    return yaml.safe_dump(snapshot_to_mapping(snapshot), sort_keys=False)


def replace_cluster(snapshot: FleetSnapshot, updated: Sequence[Cluster]) -> FleetSnapshot:
    """A snapshot with some clusters replaced by name (used to simulate planned versions)."""
    by_name = {c.name: c for c in updated}
    clusters = tuple(by_name.get(c.name, c) for c in snapshot.clusters)
    return FleetSnapshot(
        snapshot.available_versions, clusters, snapshot.workloads, snapshot.network
    )
