"""Management-cluster objects -> FleetSnapshot: the pure half of the live inventory.

``orchestrator.kube.inventory`` makes the LIST calls and probes workload clusters; everything it
then decides - which version a cluster declares, which clusters are in the fleet, which are left
out and why, which versions are available - is decided here, over plain dicts, so it is tested
without a server and the CLI and the worker read a fleet the same way.

Rules (docs/api.md "Live inventory"):

* **Clusters** being deleted are not part of the fleet. A cluster whose control plane object
  does not exist yet is *pending* (being created); one whose objects are malformed, or whose
  control plane is not a KubeadmControlPlane, is *skipped*. Both come back by name with the
  reason, never dropped silently. So does a cluster whose entry breaks a snapshot rule
  (``fleet_snapshot``): one bad cluster never fails the whole fleet's read.
* **Declared versions**: a managed topology declares its control plane in
  ``Cluster.spec.topology.version`` and its pools follow it unless deferred
  (``capi.pool_declared``); other clusters declare ``KubeadmControlPlane.spec.version`` and
  ``MachineDeployment.spec.template.spec.version``.
* **Labels** are the Cluster's, without CAPI's own (``cluster.x-k8s.io/``,
  ``topology.cluster.x-k8s.io/``), so selectors see what operators set.
* **Taints** are the ``calibrator.dev/taints`` annotation (docs/design.md "The upgrading taint").
* **availableVersions** are the ``kubernetesVersions`` of the ClusterClasses that the fleet's
  managed topologies use; a version that does not parse is ignored (one foreign typo must not
  hide the fleet).
* **Workloads** are the FleetWorkloads; a FleetWorkload's last decision (``status.clusters``)
  is its current placement with replicas per cluster, and current clusters outside the fleet
  are dropped (a deleted cluster runs nothing).

Each part of a cluster entry has its own small function, so a new snapshot field is one more
function and one more line in ``cluster_entry``.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from orchestrator.domain.documents import quote
from orchestrator.domain.errors import InputError
from orchestrator.domain.location import cluster_location
from orchestrator.domain.observed import merge_usage
from orchestrator.domain.observed_record import ObservedRecordError, record_of
from orchestrator.domain.snapshot import (
    API_VERSION,
    KIND,
    Cluster,
    FleetSnapshot,
    Workload,
    WorkloadClusterStatus,
)
from orchestrator.domain.snapshot_load import (
    ContentMemo,
    check_cluster_refs,
    cluster_from_mapping,
    clusters_snapshot,
    snapshot_from_mapping,
    with_workloads,
    workload_from_mapping,
)
from orchestrator.domain.taints import TAINTS_ANNOTATION, decode_taints
from orchestrator.domain.versions import KubeVersion
from orchestrator.kube import capi, fleetapi

CAPI_LABEL_PREFIXES = ("cluster.x-k8s.io/", "topology.cluster.x-k8s.io/")
REASON_LIMIT = 200
# What a malformed object raises while it is read: a snapshot rule it breaks (InputError), or,
# for objects a schema-less server would store, a wrong type where CAPI's schema has a mapping
# (AttributeError, TypeError), a missing key (KeyError) or a bad value (ValueError). Each is one
# cluster's problem, never the fleet's.
MALFORMED = (InputError, TypeError, ValueError, AttributeError, KeyError)
Key = tuple[str, str]  # (namespace, name)


class InventoryError(Exception):
    """The objects cannot form one FleetSnapshot (the message names the object to fix)."""


@dataclass(frozen=True)
class FleetObjects:
    """What one LIST of each kind returned."""

    classes: Sequence[Mapping[str, Any]] = ()
    clusters: Sequence[Mapping[str, Any]] = ()
    control_planes: Sequence[Mapping[str, Any]] = ()
    machine_deployments: Sequence[Mapping[str, Any]] = ()
    fleet_workloads: Sequence[Mapping[str, Any]] = ()


@dataclass(frozen=True)
class MappedCluster:
    """One cluster of the fleet: where it lives and its snapshot entry."""

    name: str
    namespace: str
    entry: dict[str, Any]


@dataclass(frozen=True)
class FleetMap:
    """The clusters of the fleet (by name), and those left out with the reason."""

    clusters: tuple[MappedCluster, ...] = ()
    available_versions: tuple[str, ...] = ()
    skipped: Mapping[str, str] = field(default_factory=dict)
    """Malformed or unsupported: name -> reason."""
    pending: Mapping[str, str] = field(default_factory=dict)
    """Not provisioned far enough to be calibrated (no control plane object yet): name -> reason."""


def short(text: str, limit: int = REASON_LIMIT) -> str:
    """One line of at most ``limit`` characters."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def key(obj: Mapping[str, Any]) -> Key:
    """(namespace, name) of an object."""
    meta = capi.meta(obj)
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


def checked_version(version: object, what: str) -> str:
    """``version`` if it parses; InputError naming ``what`` otherwise."""
    if not isinstance(version, str) or not version:
        raise InputError(f"{what} declares no Kubernetes version")
    try:
        KubeVersion.parse(version)
    except InputError as err:
        raise InputError(f"{what}: {err}") from None
    return version


def checked_replicas(replicas: object, what: str) -> int:
    """``replicas`` if it is an integer (the snapshot rules bound it); InputError otherwise."""
    if isinstance(replicas, bool) or not isinstance(replicas, int):
        raise InputError(f"{what}: replicas is not an integer: {quote(replicas)}")
    return replicas


# ------------------------------------------------------------------------------------ clusters


def cluster_labels(cluster: Mapping[str, Any]) -> dict[str, str]:
    """The Cluster's labels without CAPI's own."""
    labels = capi.meta(cluster).get("labels") or {}
    return {k: str(v) for k, v in labels.items() if not k.startswith(CAPI_LABEL_PREFIXES)}


def control_plane_entry(cluster: Mapping[str, Any], kcp: Mapping[str, Any]) -> dict[str, Any]:
    """``controlPlane``: the declared version (topology.version or KCP) and KCP's replicas."""
    topo = capi.topology(cluster)
    spec = kcp.get("spec") or {}
    version = topo["version"] if topo else spec.get("version")
    return {
        "version": checked_version(version, "the control plane"),
        "replicas": checked_replicas(spec.get("replicas", 1), "the control plane"),
    }


def pool_entries(
    cluster: Mapping[str, Any], mds: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """``machineDeployments`` by name: the version each pool declares and its replicas."""
    pools = []
    for md in sorted(mds, key=lambda o: str(capi.meta(o).get("name"))):
        name = str(capi.meta(md)["name"])
        version = checked_version(capi.pool_declared(cluster, md), f"MachineDeployment {name}")
        replicas = checked_replicas(
            (md.get("spec") or {}).get("replicas", 1), f"MachineDeployment {name}"
        )
        pools.append({"name": name, "version": version, "replicas": replicas})
    return pools


def taint_entries(cluster: Mapping[str, Any]) -> list[dict[str, str]]:
    """``taints`` from the ``calibrator.dev/taints`` annotation."""
    namespace, name = key(cluster)
    text = capi.annotations_of(cluster).get(TAINTS_ANNOTATION)
    return [t.to_json() for t in decode_taints(text, f"{namespace}/{name}")]


def cluster_entry(
    cluster: Mapping[str, Any], kcp: Mapping[str, Any], mds: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """One ``clusters[]`` entry; InputError/TypeError/ValueError name what is malformed."""
    entry: dict[str, Any] = {
        "name": key(cluster)[1],
        "labels": cluster_labels(cluster),
        "controlPlane": control_plane_entry(cluster, kcp),
        "machineDeployments": pool_entries(cluster, mds),
        "taints": taint_entries(cluster),
    }
    if not capi.topology(cluster):
        entry["topology"] = False
    entry.update(location_fields(cluster, entry["labels"]))
    return entry


def location_fields(cluster: Mapping[str, Any], labels: Mapping[str, str]) -> dict[str, Any]:
    """Karmada-style provider/region/zones from labels, infrastructure kind and failure domains.

    docs/decisions.md "Cluster fields" gives the precedence; the snapshot parser validates the
    values again, and a malformed one (InputError) leaves the cluster out with its reason.
    """
    location = cluster_location(
        labels,
        infrastructure_kind=capi.infrastructure_kind(cluster),
        failure_domains=capi.failure_domain_names(cluster),
    )
    out: dict[str, Any] = {}
    if location.provider is not None:
        out["provider"] = location.provider
    if location.region is not None:
        out["region"] = location.region
    if location.zones:
        out["zones"] = list(location.zones)
    return out


def pools_by_cluster(mds: Sequence[Mapping[str, Any]]) -> dict[Key, list[Mapping[str, Any]]]:
    """MachineDeployments by the (namespace, name) of the cluster they belong to."""
    out: dict[Key, list[Mapping[str, Any]]] = {}
    for md in mds:
        owner = (md.get("spec") or {}).get("clusterName") or (
            capi.meta(md).get("labels") or {}
        ).get(capi.CLUSTER_NAME_LABEL)
        out.setdefault((key(md)[0], str(owner)), []).append(md)
    return out


def _control_plane(
    cluster: Mapping[str, Any], kcps: Mapping[Key, Mapping[str, Any]]
) -> tuple[Mapping[str, Any] | None, str, str]:
    """(the KubeadmControlPlane, or None with "skipped"/"pending" and the reason)."""
    ref = (cluster.get("spec") or {}).get("controlPlaneRef") or {}
    if not ref.get("name"):
        return None, "pending", "no controlPlaneRef yet"
    kind = ref.get("kind") or capi.KUBEADM_CONTROL_PLANE[1]
    if kind != capi.KUBEADM_CONTROL_PLANE[1]:
        return None, "skipped", f"control plane kind {kind} is not supported (KubeadmControlPlane)"
    kcp = kcps.get((key(cluster)[0], str(ref["name"])))
    if kcp is None:
        return None, "pending", f"KubeadmControlPlane {ref['name']} does not exist yet"
    return kcp, "", ""


def available_versions(
    classes: Sequence[Mapping[str, Any]], clusters: Sequence[Mapping[str, Any]]
) -> tuple[str, ...]:
    """``kubernetesVersions`` of the ClusterClasses the managed topologies use, parseable, sorted."""
    used: set[Key] = set()
    for c in clusters:
        try:
            if topo := capi.topology(c):
                used.add((key(c)[0], str((topo.get("classRef") or {}).get("name"))))
        except MALFORMED:  # map_clusters skips this cluster with the reason
            continue
    versions: set[str] = set()
    for cc in classes:
        spec = cc.get("spec")
        listed = spec.get("kubernetesVersions") if isinstance(spec, Mapping) else None
        if key(cc) in used and isinstance(listed, list):
            versions.update(str(v) for v in listed)
    parseable = []
    for version in versions:
        try:
            KubeVersion.parse(version)
        except InputError:
            continue
        parseable.append(version)
    return tuple(sorted(parseable, key=KubeVersion.parse))


def _reason(err: Exception) -> str:
    """The skip reason: our own errors say what to fix; Python's get the type for context."""
    if isinstance(err, InputError):
        return str(err)
    return f"malformed object ({type(err).__name__}: {err})"


def map_clusters(objects: FleetObjects, parsed: ParsedFleet | None = None) -> FleetMap:
    """The fleet's clusters in name order, and every cluster left out with the reason.

    With ``parsed`` an entry whose Cluster, KubeadmControlPlane and MachineDeployments are the
    versions it was built from is kept from the last read (``ParsedFleet.entry``).
    """
    live = [c for c in objects.clusters if not capi.meta(c).get("deletionTimestamp")]
    kcps = {key(k): k for k in objects.control_planes}
    pools = pools_by_cluster(objects.machine_deployments)
    mapped: list[MappedCluster] = []
    seen: dict[str, str] = {}
    skipped: dict[str, str] = {}
    pending: dict[str, str] = {}
    for cluster in sorted(live, key=lambda o: key(o)[::-1]):
        namespace, name = key(cluster)
        if name in seen:
            raise InventoryError(
                f"cluster name {name!r} is used in namespaces {seen[name]} and {namespace}: a "
                "fleet needs unique cluster names (read one namespace)"
            )
        seen[name] = namespace
        try:
            kcp, left_out, reason = _control_plane(cluster, kcps)
            if kcp is None:
                (skipped if left_out == "skipped" else pending)[name] = reason
                continue
            mds = pools.get((namespace, name), [])
            entry = (
                cluster_entry(cluster, kcp, mds)
                if parsed is None
                else parsed.entry(cluster, kcp, mds)
            )
        except MALFORMED as err:
            # A malformed object is one cluster's problem, not the fleet's: skip it, say why.
            skipped[name] = short(_reason(err))
            continue
        mapped.append(MappedCluster(name, namespace, entry))
    if parsed is not None:
        parsed.keep_entries({(c.namespace, c.name) for c in mapped})
    return FleetMap(tuple(mapped), available_versions(objects.classes, live), skipped, pending)


# ------------------------------------------------------------------------------------ workloads


def workload_entries(
    fleet_workloads: Sequence[Mapping[str, Any]], clusters: set[str]
) -> list[dict[str, Any]]:
    """``workloads[]`` from FleetWorkloads; current placements keep only fleet clusters.

    The last decision's replica counts come with it (``fleetapi.current_on_inventory``): stable
    re-placement scales from them, and a dropped cluster's replicas are the ones it re-homes.
    """
    return [
        fleetapi.current_on_inventory(fleetapi.workload_entry(obj), clusters)
        for obj in fleet_workloads
    ]


class ParsedFleet:
    """Parses of the fleet's objects, kept by resourceVersion across reads of one source.

    The one stateful part of this module, and only a memo of ``cluster_entry``, the snapshot
    parser and ``workload_entries``. The worker's inventory rebuilt and re-validated every
    cluster and every FleetWorkload on every read from its cache: at 100 clusters x 1,000
    FleetWorkloads the workloads were a third of its busy CPU, and at 300 x 3,000 the whole
    read was the largest item left (docs/benchmarks.md), although between two reads only the
    objects written meanwhile change.

    * A cluster entry depends on its Cluster, KubeadmControlPlane and MachineDeployments: it is
      reused while all of them are the versions it was built from, and its parsed ``Cluster``
      with it.
    * A workload depends on its object and on which clusters are in the fleet
      (``current_on_inventory``, and the clusters its placement may name): it is reused while
      both are the ones it was parsed from (another set of cluster names starts afresh).

    An object without a resourceVersion is never reused. Memory: one entry per cluster and one
    Workload per FleetWorkload of the last read (gone ones are dropped each read) and the
    bounded ``ContentMemo``. Thread-safe: the backend's fleet reads share one.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # (namespace, name) -> (the objects' versions, the entry, its parse once made)
        self._entries: dict[Key, tuple[frozenset[str], dict[str, Any], Cluster | None]] = {}
        self._clusters: frozenset[str] = frozenset()
        self._parsed: dict[Key, tuple[str, Workload]] = {}
        self._content = ContentMemo()

    def __len__(self) -> int:
        """How many parsed workloads are kept (those of the last read)."""
        return len(self._parsed)

    def entry(
        self,
        cluster: Mapping[str, Any],
        kcp: Mapping[str, Any],
        mds: Sequence[Mapping[str, Any]],
    ) -> dict[str, Any]:
        """``cluster_entry`` of these objects, the kept one while none of them changed."""
        objs = (cluster, kcp, *mds)
        each = [(o.get("kind"), _version_of(o)) for o in objs]
        versions = frozenset(f"{kind}/{version}" for kind, version in each)
        k = key(cluster)
        with self._lock:
            found = self._entries.get(k)
        if found is not None and found[0] == versions and all(v for _, v in each):
            return found[1]
        entry = cluster_entry(cluster, kcp, mds)  # raises on a malformed object: not kept
        with self._lock:
            self._entries[k] = (versions, entry, None)
        return entry

    def keep_entries(self, keys: set[Key]) -> None:
        """Drop the entries of clusters that are no longer in the fleet."""
        with self._lock:
            for k in [k for k in self._entries if k not in keys]:
                del self._entries[k]

    def clusters_snapshot(self, fleet: FleetMap) -> FleetSnapshot:
        """``fleet``'s clusters parsed, each entry once; InputError as the full parse raises."""
        parsed: list[Cluster] = []
        for c in fleet.clusters:
            k = (c.namespace, c.name)
            with self._lock:
                found = self._entries.get(k)
            if found is not None and found[1] is c.entry and found[2] is not None:
                parsed.append(found[2])
                continue
            cluster = cluster_from_mapping(c.entry, f"Cluster {c.namespace}/{c.name}")
            if found is not None and found[1] is c.entry:
                with self._lock:
                    self._entries[k] = (found[0], found[1], cluster)
            parsed.append(cluster)
        return clusters_snapshot(list(fleet.available_versions), tuple(parsed))

    def workloads(
        self, fleet_workloads: Sequence[Mapping[str, Any]], clusters: set[str]
    ) -> tuple[Workload, ...] | None:
        """The workloads in the objects' order, checked against ``clusters``; None on a defect.

        Each is checked when parsed: its keys are unique and every cluster its placement names
        is in ``clusters`` (``with_workloads(checked=True)`` then saves the pass). None sends
        the caller to the whole strict parse, whose error names the FleetWorkload. A failed
        parse is not kept: the object is parsed again until it changes or parses.
        """
        with self._lock:
            names = frozenset(clusters)
            if names != self._clusters:
                self._clusters, self._parsed = names, {}
            kept: dict[Key, tuple[str, Workload]] = {}
            for i, obj in enumerate(fleet_workloads):
                meta = capi.meta(obj)  # once: this loop runs over every FleetWorkload each read
                k = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
                version = str(meta.get("resourceVersion") or "")
                found = self._parsed.get(k)
                if found is None or not version or found[0] != version:
                    entry = fleetapi.current_on_inventory(fleetapi.workload_entry(obj), clusters)
                    where = f"workloads[{i}]"
                    try:
                        workload = workload_from_mapping(entry, where, self._content)
                        check_cluster_refs(workload, names, where)
                    except InputError:
                        return None
                    found = (version, workload)
                kept[k] = found
            if len(kept) != len(fleet_workloads):
                return None  # one FleetWorkload twice: the whole parse names it
            self._parsed = kept
            return tuple(w for _, w in kept.values())


def _version_of(obj: Mapping[str, Any]) -> str:
    return str(capi.meta(obj).get("resourceVersion") or "")


_WORKLOAD_PATH = re.compile(r"^workloads\[(\d+)\](?: \([^)]*\))?")


def name_workload(message: str, workloads: Sequence[Mapping[str, Any]]) -> str | None:
    """Snapshot errors say ``workloads[3].placement...``; name the FleetWorkload instead."""
    match = _WORKLOAD_PATH.match(message)
    if not match or int(match.group(1)) >= len(workloads):
        return None
    w = workloads[int(match.group(1))]
    rest = message[match.end() :]
    where = f"FleetWorkload {w.get('namespace')}/{w.get('name')}"
    return f"{where}: spec{rest}" if rest.startswith((".", "[")) else f"{where}{rest}"


# ------------------------------------------------------------------------------------ snapshot


def with_records(
    observed: Mapping[str, WorkloadClusterStatus],
    clusters: Sequence[Mapping[str, Any]],
    now: datetime,
) -> dict[str, WorkloadClusterStatus]:
    """Each probed cluster's fresh usage folded into the record its Cluster object keeps.

    The worker writes the record before each control-plane step (``usage_gate``); folding it in
    here is what keeps requests counted by an apiserver that a rollout has since replaced in
    ``check``'s answer after the step. Nothing is written back: reading the fleet changes
    nothing. An unreadable record makes that cluster's observation partial, with the error.
    """
    out = dict(observed)
    for obj in clusters:
        meta = obj.get("metadata") or {}
        name = str(meta.get("name") or "")
        status = out.get(name)
        if status is None or not status.reachable:
            continue
        where = f"Cluster {meta.get('namespace')}/{name}"
        try:
            recorded = record_of(meta.get("annotations"), where)
        except ObservedRecordError as err:
            partial = "; ".join(p for p in (status.observation_partial, str(err)) if p)
            out[name] = replace(status, observation_partial=short(partial))
            continue
        if recorded:
            out[name] = replace(status, api_usage=merge_usage(recorded, status.api_usage, now))
    return out


def snapshot_document(
    fleet: FleetMap,
    workloads: Sequence[dict[str, Any]],
    observed: Mapping[str, WorkloadClusterStatus] | None = None,
) -> dict[str, Any]:
    """The FleetSnapshot file form; ``observed`` adds each probed cluster's ``workloadCluster``."""
    clusters = []
    for c in fleet.clusters:
        entry = dict(c.entry)
        status = (observed or {}).get(c.name)
        if status is not None:
            entry["workloadCluster"] = status.to_json()
        clusters.append(entry)
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "availableVersions": list(fleet.available_versions),
        "clusters": clusters,
        "workloads": list(workloads),
    }


def without_invalid(fleet: FleetMap) -> FleetMap:
    """``fleet`` without the clusters whose entries break a snapshot rule, each skipped by name.

    The rules are the snapshot parser's own (replicas from 1 to 1,000,000, label and zone
    syntax, ...), applied to one entry at a time so one bad cluster names itself.
    """
    kept: list[MappedCluster] = []
    skipped = dict(fleet.skipped)
    for c in fleet.clusters:
        try:
            cluster_from_mapping(c.entry, f"Cluster {c.namespace}/{c.name}")
        except InputError as err:
            skipped[c.name] = short(str(err))
            continue
        kept.append(c)
    return replace(fleet, clusters=tuple(kept), skipped=skipped)


def fleet_snapshot(
    fleet: FleetMap,
    fleet_workloads: Sequence[Mapping[str, Any]],
    observed: Mapping[str, WorkloadClusterStatus] | None = None,
    parsed: ParsedFleet | None = None,
) -> tuple[FleetSnapshot, FleetMap]:
    """The validated snapshot of ``fleet`` and its workloads, and the fleet it was built from.

    A cluster entry that breaks a snapshot rule leaves out that cluster (skipped, with the
    reason), never the whole fleet. The entries are checked one by one only when the whole
    snapshot fails on a cluster: the common, valid fleet is parsed once (at 10,000 clusters the
    per-entry pass costs about half a second). A bad FleetWorkload still fails the read, named:
    planning without it could upgrade a cluster under a workload whose APIs go away.

    With ``parsed`` (a reader that reads the same objects again: the worker's cache) only the
    clusters and FleetWorkloads changed since the last read are parsed; any defect takes the
    whole strict parse, so every error is the one a full read gives.
    """

    def build(f: FleetMap) -> FleetSnapshot:
        names = {c.name for c in f.clusters}
        if parsed is not None:
            kept = reused(f, names, parsed)
            if kept is not None:
                return kept
        workloads = workload_entries(fleet_workloads, names)
        return build_snapshot(snapshot_document(f, workloads, observed))

    def reused(f: FleetMap, names: set[str], parsed: ParsedFleet) -> FleetSnapshot | None:
        """The snapshot from the kept clusters and workloads; None on any defect."""
        try:
            clusters = (
                parsed.clusters_snapshot(f)
                if observed is None
                else snapshot_from_mapping(snapshot_document(f, [], observed))
            )
            workloads = parsed.workloads(fleet_workloads, names)
            return None if workloads is None else with_workloads(clusters, workloads, checked=True)
        except InputError:
            return None

    try:
        return build(fleet), fleet
    except InventoryError as err:
        if not str(err).startswith("clusters["):
            raise
    checked = without_invalid(fleet)
    return build(checked), checked


def build_snapshot(document: Mapping[str, Any]) -> FleetSnapshot:
    """Validate ``document`` with the snapshot rules; a bad FleetWorkload is named as such."""
    try:
        return snapshot_from_mapping(document)
    except InputError as err:
        named = name_workload(str(err), document.get("workloads") or [])
        raise InventoryError(named or str(err)) from None
