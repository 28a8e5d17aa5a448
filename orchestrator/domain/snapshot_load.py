"""Reading a FleetSnapshot document (pure): strict, bounded, one error naming the exact field.

Parsing validates everything up front and raises one ``SnapshotError`` whose message names the
exact field (``clusters[3].controlPlane.version: ...``), so nothing downstream ever sees a
half-valid fleet. The inverse is ``snapshot_dump``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import date
from functools import wraps
from typing import Any, Concatenate, ParamSpec, TypeVar, cast

from orchestrator.domain.apis import ApiRef
from orchestrator.domain.documents import load_document, quote
from orchestrator.domain.errors import InputError
from orchestrator.domain.location import (
    PLURAL,
    SPREAD_FIELDS,
    FieldSelector,
    SpreadConstraint,
    SpreadField,
    field_selector_from_mapping,
    field_value,
    zone_list,
)
from orchestrator.domain.names import (
    capi_name_error,
    dns1123_label_error,
    dns1123_subdomain_error,
)
from orchestrator.domain.observed_load import blockers_from_list, usages_from_list
from orchestrator.domain.observed_load import text as observed_text
from orchestrator.domain.quantity import (
    parse_cpu_milli,
    parse_memory_bytes,
)
from orchestrator.domain.selectors import selector_from_mapping
from orchestrator.domain.snapshot import (
    API_VERSION,
    DIVISION_TYPES,
    KIND,
    MAX_API_VERSIONS,
    MAX_KUBELET_VERSIONS,
    MAX_NAME_LENGTH,
    MAX_REASON_LENGTH,
    MAX_REPLICAS,
    MAX_RTT_MS,
    MAX_TOLERATION_SECONDS,
    MAX_VERSION_LENGTH,
    MAX_WEIGHT,
    Cluster,
    ClusterAffinity,
    ControlPlaneState,
    DivisionType,
    FleetSnapshot,
    LatencyConstraint,
    MachineDeploymentState,
    NetworkLink,
    PlacementPolicy,
    ReplicaScheduling,
    Resources,
    SnapshotError,
    StaticWeight,
    Workload,
    WorkloadClusterStatus,
)
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

# A group/version as discovery serves it ("v1", "apps/v1", "batch/v1beta1").
_GROUP_VERSION = re.compile(r"^(?:[a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?v[0-9]+[a-z0-9]*$")

_T = TypeVar("_T")
_P = ParamSpec("_P")

# For the length of one ``snapshot_from_mapping`` call (None outside one): parsed values by
# parser and the text of their raw value, and the first parsed value equal to each. See
# ``_by_content``.
_Memo = tuple[dict[tuple[str, str], Any], dict[Any, Any]]
_PARSED: ContextVar[_Memo | None] = ContextVar("_PARSED", default=None)


@contextmanager
def _content_memo(memo: _Memo | None = None) -> Iterator[None]:
    token = _PARSED.set(memo if memo is not None else ({}, {}))
    try:
        yield
    finally:
        _PARSED.reset(token)


class ContentMemo:
    """``_by_content``'s memo kept across parses (``workload_from_mapping``).

    For a reader that parses the entries of one fleet at different times: equal parts of
    workloads parsed in different reads are then still one object, as in one
    ``snapshot_from_mapping`` call (placement finds profiles by the identity of those parts).
    Bounded: past ``limit`` distinct raw values it starts afresh (a fleet's workloads repeat a
    few rules, so a reset costs a few misses, never a wrong answer).
    """

    def __init__(self, limit: int = 50_000) -> None:
        self.limit = limit
        self.memo: _Memo = ({}, {})

    @contextmanager
    def active(self) -> Iterator[None]:
        """Parsers wrapped by ``_by_content`` use this memo inside the block."""
        if len(self.memo[0]) > self.limit:
            self.memo = ({}, {})
        with _content_memo(self.memo):
            yield


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


def _cluster_name(raw: object, where: str) -> str:
    """A Cluster API Cluster or MachineDeployment name, or a reference to a cluster.

    References are held to the same rule as the names they point at: ``Dev_AP 2!`` in a
    ``clusterNames`` list says what is wrong with it, not just that no cluster has that name.
    """
    problem = capi_name_error(raw)
    if problem:
        raise SnapshotError(f"{where}: {problem}")
    return cast(str, raw)


def _workload_name(raw: object, where: str) -> str:
    """A FleetWorkload name: a DNS-1123 subdomain, as for every custom resource."""
    problem = dns1123_subdomain_error(raw)
    if problem:
        raise SnapshotError(f"{where}: {problem}")
    return cast(str, raw)


def _namespace(raw: object, where: str) -> str:
    """A namespace name: a DNS-1123 label."""
    problem = dns1123_label_error(raw)
    if problem:
        raise SnapshotError(f"{where}: {problem}")
    return cast(str, raw)


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


def _check_fields(data: Mapping[str, Any], allowed: set[str] | frozenset[str], where: str) -> None:
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
    name = _cluster_name(_required(data, "name", where), f"{where}.name")
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
                _cluster_name(_required(md, "name", here), f"{here}.name"),
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
    _check_fields(data, _REACHABLE_FIELDS, where)
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
        if (
            not isinstance(version, str)
            or not version
            or len(version) > MAX_VERSION_LENGTH
            or version != version.strip()  # as a Node reports it: never padded
        ):
            raise SnapshotError(f"{where}.kubeletVersions: invalid version {quote(version)}")
        kubelets.append((version, _int(count, f"{where}.kubeletVersions.{version}", 1)))
    if sum(n for _, n in kubelets) > nodes:
        raise SnapshotError(f"{where}.kubeletVersions: counts more than the {nodes} Node(s)")
    partial = data.get("observationPartial")
    return WorkloadClusterStatus(
        True,
        "",
        tuple(versions),
        nodes,
        ready,
        tuple(kubelets),
        api_usage=()
        if data.get("apiUsage") is None
        else usages_from_list(data["apiUsage"], f"{where}.apiUsage", SnapshotError),
        disruption_blockers=()
        if data.get("disruptionBlockers") is None
        else blockers_from_list(
            data["disruptionBlockers"], f"{where}.disruptionBlockers", SnapshotError
        ),
        observation_partial=""
        if partial is None
        else observed_text(partial, f"{where}.observationPartial", SnapshotError),
    )


# What a reachable workload cluster may say: what it serves and runs, then what it was seen
# doing (``observed_load`` reads the last three).
_REACHABLE_FIELDS = frozenset(
    {
        "reachable",
        "apiVersions",
        "nodes",
        "readyNodes",
        "kubeletVersions",
        "apiUsage",
        "disruptionBlockers",
        "observationPartial",
    }
)


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
        _cluster_name(n, f"{where}.clusterNames[{i}]")
        for i, n in enumerate(_list(data.get("clusterNames"), f"{where}.clusterNames"))
    )
    exclude = tuple(
        _cluster_name(n, f"{where}.exclude[{i}]")
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
                cluster=_cluster_name(w["cluster"], f"{here}.cluster") if "cluster" in w else None,
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
        to_cluster=_cluster_name(data["cluster"], f"{where}.cluster")
        if "cluster" in data
        else None,
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
        return tuple(_cluster_name(c, f"{where}[{i}]") for i, c in enumerate(items)), None
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
        names.append(_cluster_name(_required(item, "name", here), f"{here}.name"))
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
        name=_workload_name(_required(data, "name", where), f"{where}.name"),
        namespace=_namespace(namespace, f"{where}.namespace"),
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
    clusters = clusters_snapshot(
        data.get("availableVersions"),
        tuple(
            _cluster(c, f"clusters[{i}]")
            for i, c in enumerate(_list(_required(data, "clusters", "snapshot"), "clusters"))
        ),
    )
    versions = clusters.available_versions
    known = {c.name for c in clusters.clusters}
    with _content_memo():
        workloads = tuple(
            _workload(w, f"workloads[{i}]")
            for i, w in enumerate(_list(data.get("workloads"), "workloads"))
        )
    _check_workloads(workloads, known)
    links: list[NetworkLink] = []
    for i, l_raw in enumerate(_list(data.get("network"), "network")):
        here = f"network[{i}]"
        link = _mapping(l_raw, here)
        _check_fields(link, {"from", "to", "rttMs"}, here)
        source = _cluster_name(_required(link, "from", here), f"{here}.from")
        target = _cluster_name(_required(link, "to", here), f"{here}.to")
        for end in (source, target):
            if end not in known:
                raise SnapshotError(f"{here}: unknown cluster {quote(end)}")
        if source == target:
            # A cluster's latency to itself is not a link: placement would read it as a
            # measured round trip and rank the cluster against itself.
            raise SnapshotError(f"{here}: from and to are the same cluster {quote(source)}")
        links.append(
            NetworkLink(source, target, _number(_required(link, "rttMs", here), f"{here}.rttMs"))
        )
    return FleetSnapshot(versions, clusters.clusters, workloads, tuple(links))


def clusters_snapshot(available_versions: object, clusters: tuple[Cluster, ...]) -> FleetSnapshot:
    """A snapshot of ``clusters`` (each validated, as ``cluster_from_mapping`` does) alone.

    The rules between them, as ``snapshot_from_mapping`` checks them: available versions parse
    and are unique, cluster names are unique. For a reader that keeps parsed clusters across
    reads (the worker's inventory); ``with_workloads`` then adds the workloads.
    """
    versions = tuple(
        _version(v, f"availableVersions[{i}]")
        for i, v in enumerate(_list(available_versions, "availableVersions"))
    )
    if len(set(versions)) != len(versions):
        raise SnapshotError("availableVersions: duplicate versions")
    names = [c.name for c in clusters]
    if len(set(names)) != len(names):
        raise SnapshotError(f"clusters: duplicate cluster name(s) {_duplicates(names)}")
    return FleetSnapshot(versions, clusters)


def workload_from_mapping(raw: object, where: str, memo: ContentMemo | None = None) -> Workload:
    """One ``workloads[]`` entry validated alone, as ``snapshot_from_mapping`` validates each.

    For a reader that keeps parsed workloads and parses only the entries that changed (the
    worker's inventory over its watch-fed cache); ``with_workloads`` then checks the rules
    between entries. ``memo`` shares equal parts with the entries parsed before it.
    """
    if memo is None:
        return _workload(raw, where)
    with memo.active():
        return _workload(raw, where)


def with_workloads(
    snapshot: FleetSnapshot, workloads: tuple[Workload, ...], *, checked: bool = False
) -> FleetSnapshot:
    """``snapshot`` with ``workloads``, checked as ``snapshot_from_mapping`` checks its own.

    Keys unique, every cluster a placement names in the snapshot; SnapshotError otherwise.
    ``checked``: the caller has checked both already (``check_cluster_refs`` on each workload
    against these very clusters, and unique keys), so a pass over every workload is saved.
    """
    if not checked:
        _check_workloads(workloads, {c.name for c in snapshot.clusters})
    return FleetSnapshot(
        snapshot.available_versions, snapshot.clusters, workloads, snapshot.network
    )


def _check_workloads(workloads: Sequence[Workload], known: set[str]) -> None:
    """The rules between workloads and the clusters: unique keys, named clusters known."""
    keys = [w.key for w in workloads]
    if len(set(keys)) != len(keys):
        raise SnapshotError(f"workloads: duplicate workload(s) {_duplicates(keys)}")
    for i, workload in enumerate(workloads):
        check_cluster_refs(workload, known, f"workloads[{i}]")


def check_cluster_refs(workload: Workload, known: AbstractSet[str], where: str) -> None:
    """Every cluster ``workload``'s placement names is in ``known``; SnapshotError otherwise."""
    _check_cluster_refs(workload.placement, known, f"{where} ({workload.key}).placement")


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


def _check_cluster_refs(policy: PlacementPolicy, known: AbstractSet[str], where: str) -> None:
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
